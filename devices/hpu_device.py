"""The ``hpu`` device: SPEC §2–§5 in the static-shape style of Gaudi graphs.

Gaudi compiles one graph per input shape, so vllm-gaudi (seed 000) lays a
speculative decode out as ``[padded_batch, K + 1]``: the batch is rounded up
to a **bucket** and every request gets the same number of draft slots. This
device does the same on any torch backend:

* the host pads the ragged batch (SPEC §1) into the bucket
  ``[padded_batch, k_pad + 1]`` (``pad_batch``); padded rows have K = 0,
  padded slots are masked, never compared;
* ``verify_static`` runs the whole step with **no data-dependent shape and
  no host sync**: every filter is computed for every row and selected with
  ``torch.where`` (mask-and-select), the first rejection is a masked
  ``amin``, the output row is written by comparisons with ``arange``. It
  runs under ``torch.compile(fullgraph=True, dynamic=False)``, one graph per
  (bucket, point-or-full) — ``tests/platforms/test_hpu.py`` counts them;
* the keyed Philox noise (SPEC §5.2) is drawn inside the graph, in the same
  static shapes.

vllm-gaudi's sampler is greedy-only with K = 1, and counts padded slots as
mismatches (docs/bugs.md #27, #28): a request with fewer drafts
than the batch maximum lost its bonus token. Here a slot is a mismatch only
if it is *valid* (``j < K_i``), so such a request keeps its bonus and its
exact ``num_accepted``; random sampling and any K ≤ ``k_pad`` are supported.

Every rule (§2 target rows, the coin, the residual, the race, the argmax,
the first rejection, the output row) is ``devices.torch_sampling``'s, on
``[padded_batch, slots, V]`` shapes. Precision is its policy: target rows in
the input dtype, top-p sums, coins and race scores in float64, as the
``torch`` device (a Gaudi would run the race in fp32; SPEC §9's margin covers
that).

``prepare_decode_inputs`` is the HPU-style input preparation (combine each
request's last token with its drafts, pad, positions, slot mapping); its
numpy statement is ``reference/hpu_layout.py``.

>>> import numpy as np
>>> from devices.protocol import VerifyBatch, Noise
>>> batch = VerifyBatch(num_draft_tokens=np.array([2, 1]), draft_token_ids=np.array([1, 0, 1]),
...     draft_probs=None, target_logits=np.log(np.array([[.1, .9], [.5, .5], [.2, .8], [.1, .9], [.3, .7]])),
...     temperature=np.ones(2), top_k=np.zeros(2, np.int64), top_p=np.ones(2))
>>> out = make_device().verify(batch, Noise(np.array([0.3, 0.6, 0.1]), np.ones((2, 2))))
>>> out.output_token_ids.tolist(), out.num_accepted.tolist()  # request 1: 1 draft < max 2, keeps its bonus
([[1, 1, -1], [1, 1, -1]], [1, 1])
"""

from __future__ import annotations

import numpy as np
import torch

from devices import torch_philox
from devices import torch_sampling as ts
from devices.validate import check_call
from devices.protocol import PLACEHOLDER_TOKEN_ID, Capabilities, Noise, UnsupportedCall, VerifyBatch, VerifyOutput

BATCH_BUCKETS = tuple(2**i for i in range(17))
"""Padded batch sizes 1, 2, 4, …, 65536: a batch of n runs in the smallest bucket ≥ n."""

K_BUCKETS = (1, 2, 4, 8, 16)
"""Padded draft slots per request; ``K_BUCKETS=(16,)`` is vllm-gaudi's one fixed K."""

PADDING_SLOT_ID = -1
"""Slot mapping of a padded or out-of-range position: nothing is written to the KV cache."""


def bucket(n: int, buckets: tuple[int, ...], what: str) -> int:
    """The smallest bucket ≥ ``n``; ``UnsupportedCall`` past the largest.

    >>> bucket(3, BATCH_BUCKETS, "batch"), bucket(0, K_BUCKETS, "K")
    (4, 1)
    """
    for b in buckets:
        if n <= b:
            return b
    raise UnsupportedCall(f"{what} <= {buckets[-1]} (largest bucket)", n)


# --- host side: pad the ragged batch into the bucket ----------------------------

def pad_batch(batch: VerifyBatch, padded_batch: int, k_pad: int) -> dict[str, np.ndarray]:
    """The ragged batch (SPEC §1) → static arrays of the bucket (numpy, host side).

    Returns ``draft_ids [Bp, Kp]`` (padding ``-1``), ``draft_probs [Bp, Kp, V]``
    or None, ``target_logits [Bp, Kp + 1, V]`` (padding 0: finite, never read
    as a decision), ``num_draft_tokens [Bp]`` (0 for padded rows),
    ``temperature``/``top_k``/``top_p`` ``[Bp]`` (padded rows: 1, 0, 1).
    """
    batch_size, vocab_size = batch.batch_size, batch.vocab_size
    k = batch.num_draft_tokens.astype(np.int64)
    cu = np.concatenate([[0], np.cumsum(k)])
    j = np.arange(k_pad + 1)[None, :]
    i = np.arange(batch_size)[:, None]
    valid_target = j <= k[:, None]                               # [B, Kp + 1]: drafts and the bonus row
    target_row = np.where(valid_target, cu[:-1, None] + i + j, 0)
    logits = np.zeros((padded_batch, k_pad + 1, vocab_size), batch.target_logits.dtype)
    logits[:batch_size] = np.where(valid_target[..., None], batch.target_logits[target_row], 0)
    valid_draft = j[:, :k_pad] < k[:, None]                       # [B, Kp]
    draft_row = np.where(valid_draft, cu[:-1, None] + j[:, :k_pad], 0)
    ids = np.full((padded_batch, k_pad), PLACEHOLDER_TOKEN_ID, np.int64)
    if len(batch.draft_token_ids):
        ids[:batch_size] = np.where(valid_draft, batch.draft_token_ids[draft_row], PLACEHOLDER_TOKEN_ID)
    probs = None
    if batch.draft_probs is not None:
        probs = np.zeros((padded_batch, k_pad, vocab_size), batch.draft_probs.dtype)
        if len(batch.draft_probs):
            probs[:batch_size] = np.where(valid_draft[..., None], batch.draft_probs[draft_row], 0)
    num_draft = np.zeros(padded_batch, np.int64)
    num_draft[:batch_size] = k
    temperature, top_k, top_p = np.ones(padded_batch), np.zeros(padded_batch, np.int64), np.ones(padded_batch)
    temperature[:batch_size], top_k[:batch_size], top_p[:batch_size] = batch.temperature, batch.top_k, batch.top_p
    return dict(draft_ids=ids, draft_probs=probs, target_logits=logits, num_draft_tokens=num_draft,
                temperature=temperature, top_k=top_k, top_p=top_p)


# --- the static graph -----------------------------------------------------------

def keyed_noise_static(seeds: torch.Tensor, positions: torch.Tensor, k_pad: int,
                       vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SPEC §5.2 noise in the bucket's shapes: ``uniforms [Bp, Kp]``, ``exponentials [Bp, V]`` (float64).

    ``seeds [Bp]`` int64 (uint64 bits), ``positions [Bp]`` int64. Slot ``j``
    of row ``i`` is word ``j`` of ``S(seed_i, L_i, ACCEPT, 0)`` — the word the
    ragged layout gives draft ``j``; padded slots draw words nobody reads.
    """
    keys = torch_philox.seed_keys(seeds)
    padded_batch = seeds.shape[0]
    j = torch.arange(k_pad, device=seeds.device).expand(padded_batch, k_pad).reshape(-1)
    flat_keys = keys.unsqueeze(1).expand(padded_batch, k_pad, 2).reshape(-1, 2)
    flat_pos = positions.unsqueeze(1).expand(padded_batch, k_pad).reshape(-1)
    words = torch_philox.stream_words(flat_keys, flat_pos, torch_philox.ACCEPT, 0, j)
    uniforms = torch_philox.uniform(words).reshape(padded_batch, k_pad)
    exponentials = torch_philox.exponential(
        torch_philox.block_words(keys, positions, torch_philox.RECOVER, 0, vocab_size))
    return uniforms, exponentials


def verify_static(draft_ids: torch.Tensor, draft_probs: torch.Tensor | None, target_logits: torch.Tensor,
                  num_draft_tokens: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
                  top_p: torch.Tensor, uniforms: torch.Tensor, exponentials: torch.Tensor,
                  use_filters: bool = True):
    """One step in the bucket's static shapes; no host sync, no data-dependent shape.

    - ``draft_ids [Bp, Kp]`` int64 (padding -1); ``draft_probs [Bp, Kp, V]`` or None (point);
    - ``target_logits [Bp, Kp + 1, V]``; ``num_draft_tokens [Bp]`` int64 (padded rows 0);
    - ``temperature``/``top_k``/``top_p`` ``[Bp]``; ``uniforms [Bp, Kp]`` and
      ``exponentials [Bp, V]`` float64.

    Returns ``(output_token_ids [Bp, Kp + 1] int64, num_accepted [Bp] int64)``.
    """
    padded_batch, k_pad = draft_ids.shape
    vocab_size = target_logits.shape[-1]
    greedy = temperature == 0
    rows = ts.SamplingRows(ts.safe_temperature(temperature), top_k, top_p)

    # §2 for every row of the bucket (drafts and bonus): [Bp, Kp + 1, V], per-row parameters broadcast.
    slot_rows = ts.SamplingRows(*(None if field is None else field.unsqueeze(1).expand(padded_batch, k_pad + 1)
                                  for field in rows))
    probs = ts.target_probs(target_logits, slot_rows, use_top_k=use_filters, use_top_p=use_filters)

    # §3/§4 acceptance of every slot; only valid slots can reject (the vllm-gaudi fix).
    sampled_accept = ts.accepts(draft_ids, draft_probs, probs[:, :k_pad], uniforms)
    greedy_accept = draft_ids == ts.greedy_argmax(target_logits[:, :k_pad])
    accept = torch.where(greedy.unsqueeze(1), greedy_accept, sampled_accept)
    num_accepted = ts.first_rejection(accept, num_draft_tokens)                # [Bp], in [0, K_i]

    # §3 emission: the one row at num_accepted (first rejection or bonus), gathered, never sliced.
    row_index = num_accepted.view(padded_batch, 1, 1).expand(padded_batch, 1, vocab_size)
    emit_probs = probs.gather(1, row_index).squeeze(1)                         # [Bp, V]
    emit_logits = target_logits.gather(1, row_index).squeeze(1)
    draft_slot = num_accepted.clamp(max=k_pad - 1).unsqueeze(1)                # [Bp, 1]
    emit_draft = draft_ids.gather(1, draft_slot).squeeze(1)                    # [Bp]
    subtract = (num_accepted < num_draft_tokens) & (emit_draft != PLACEHOLDER_TOKEN_ID)
    emit_draft_probs = None
    if draft_probs is not None:
        slot_index = draft_slot.unsqueeze(2).expand(padded_batch, 1, vocab_size)
        emit_draft_probs = draft_probs.gather(1, slot_index).squeeze(1)
    weights = ts.residual_weights(emit_probs, emit_draft_probs, emit_draft, subtract)
    token = torch.where(greedy, ts.greedy_argmax(emit_logits), ts.race(weights, exponentials))

    # §7 layout: accepted drafts, the token, then -1 — by comparison with arange, no scatter.
    padded_ids = torch.cat([draft_ids, torch.full_like(draft_ids[:, :1], PLACEHOLDER_TOKEN_ID)], dim=1)
    return ts.emitted_rows(padded_ids, num_accepted, token), num_accepted


def verify_static_keyed(draft_ids, draft_probs, target_logits, num_draft_tokens, temperature, top_k, top_p,
                        seeds, positions, use_filters: bool = True):
    """``verify_static`` with the keyed noise drawn inside the same graph (``seeds``/``positions`` ``[Bp]``)."""
    uniforms, exponentials = keyed_noise_static(seeds, positions, draft_ids.shape[1], target_logits.shape[-1])
    return verify_static(draft_ids, draft_probs, target_logits, num_draft_tokens, temperature, top_k, top_p,
                         uniforms, exponentials, use_filters)


# --- HPU-style input preparation (seed 000's prepare_decodes_input) --------------

def prepare_decode_inputs(last_token_ids: torch.Tensor, draft_token_ids: torch.Tensor,
                          num_draft_tokens: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor,
                          *, block_size: int, max_model_len: int, padded_batch: int, k_pad: int):
    """Combine each decode's last token with its drafts in ``[padded_batch, k_pad + 1]``.

    - ``last_token_ids [B]``: the newest token of each request, not yet in the KV;
    - ``draft_token_ids [num_tokens]``: flat ragged drafts (SPEC §1 order);
    - ``num_draft_tokens [B]``; ``seq_lens [B]``: tokens in the sequence,
      the last one included, so the last token sits at position ``seq_len − 1``;
    - ``block_table [B, max_blocks]`` int64.

    Returns ``input_ids``, ``positions``, ``slot_mapping`` ``[Bp, Kp + 1]``
    (padding: token 0, position 0, slot ``PADDING_SLOT_ID``; a position
    ``≥ max_model_len`` also gets ``PADDING_SLOT_ID``) and ``logits_indices
    [num_tokens + B]``: the flat index of target row ``cu[i] + i + j``.
    Static shapes except ``logits_indices``, which the host sizes.
    """
    batch = last_token_ids.shape[0]
    device = last_token_ids.device
    cu = torch.cumsum(num_draft_tokens, 0) - num_draft_tokens                   # [B] exclusive
    cols = torch.arange(k_pad + 1, device=device).unsqueeze(0)                  # [1, Kp + 1]
    valid = cols <= num_draft_tokens.unsqueeze(1)                               # [B, Kp + 1]
    # Draft j - 1 lives at flat index cu + j - 1; column 0 (the last token) must not read index cu - 1.
    flat = (cu.unsqueeze(1) + cols - 1).clamp(min=0, max=max(draft_token_ids.shape[0] - 1, 0))
    drafts = draft_token_ids[flat] if draft_token_ids.shape[0] else torch.zeros_like(flat)
    tokens = torch.where(cols == 0, last_token_ids.unsqueeze(1), drafts)
    pos = seq_lens.unsqueeze(1) - 1 + cols
    in_range = valid & (pos < max_model_len)
    safe_pos = torch.where(in_range, pos, torch.zeros_like(pos))
    block = block_table.gather(1, (safe_pos // block_size).clamp(max=block_table.shape[1] - 1))
    slots = torch.where(in_range, block * block_size + safe_pos % block_size, torch.full_like(pos, PADDING_SLOT_ID))
    input_ids = torch.zeros((padded_batch, k_pad + 1), dtype=torch.int64, device=device)
    positions = torch.zeros_like(input_ids)
    slot_mapping = torch.full_like(input_ids, PADDING_SLOT_ID)
    input_ids[:batch] = torch.where(valid, tokens, torch.zeros_like(tokens))
    positions[:batch] = torch.where(valid, pos, torch.zeros_like(pos))
    slot_mapping[:batch] = slots
    rows = torch.arange(batch, device=device).unsqueeze(1) * (k_pad + 1) + cols
    logits_indices = rows.expand(batch, k_pad + 1)[valid.expand(batch, k_pad + 1)]
    return input_ids, positions, slot_mapping, logits_indices


# --- the protocol device ----------------------------------------------------------

class HpuDevice:
    """Static-shape verification; numpy in, numpy out (``devices.protocol``).

    - ``batch_buckets``/``k_buckets``: padded shapes (see ``BATCH_BUCKETS``);
    - ``compile``: run the step under ``torch.compile(fullgraph=True, dynamic=False)``;
    - ``backend``: the compile backend (``"eager"`` traces without codegen;
      ``"inductor"`` generates code; ``"hpu_backend"`` on a Gaudi);
    - ``device``: the torch device (``"cpu"``, ``"cuda"``, ``"hpu"``).
    """

    def __init__(self, device: str = "cpu", *, batch_buckets: tuple[int, ...] = BATCH_BUCKETS,
                 k_buckets: tuple[int, ...] = K_BUCKETS, compile: bool = False, backend: str = "inductor",
                 name: str = "hpu"):
        self.device = torch.device(device)
        self.batch_buckets, self.k_buckets = tuple(batch_buckets), tuple(k_buckets)
        self.name = name
        self.capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=262_144,
                                         max_k=self.k_buckets[-1], dtypes=("float32", "float64"))
        self._injected, self._keyed = verify_static, verify_static_keyed
        # torch_philox picks its multiply by a one-off device probe (a host sync): run it
        # here, eagerly, so the compiled graph finds it cached and never breaks on it.
        torch_philox.stream_words(torch.zeros(1, 2, dtype=torch.int64, device=self.device),
                                  torch.zeros(1, dtype=torch.int64, device=self.device), 1, 0,
                                  torch.zeros(1, dtype=torch.int64, device=self.device))
        if compile:
            options = dict(fullgraph=True, dynamic=False, backend=backend)
            self._injected = torch.compile(verify_static, **options)
            self._keyed = torch.compile(verify_static_keyed, **options)
        self.shapes_seen: set[tuple] = set()   # (padded_batch, k_pad, V, dtype, point) — one graph each

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        check_call(batch, noise, self.capabilities)
        largest = self.batch_buckets[-1]
        if batch.batch_size > largest:      # several launches of the largest graph, as a Gaudi runner would
            return self._chunked(batch, noise, largest)
        padded_batch = bucket(batch.batch_size, self.batch_buckets, "batch")
        k_pad = bucket(batch.max_k, self.k_buckets, "max_k")
        host = pad_batch(batch, padded_batch, k_pad)
        t = self._tensor
        args = (t(host["draft_ids"]), None if host["draft_probs"] is None else t(host["draft_probs"]),
                t(host["target_logits"]), t(host["num_draft_tokens"]), t(host["temperature"], torch.float64),
                t(host["top_k"]), t(host["top_p"], torch.float64))
        # Host-known (numpy), so a graph choice, not a device branch: does any sampled row filter?
        use_filters = bool((ts.uses_top_k(batch.temperature, batch.top_k, batch.vocab_size)
                            | ts.uses_top_p(batch.temperature, batch.top_p)).any())
        self.shapes_seen.add((padded_batch, k_pad, batch.vocab_size, batch.target_logits.dtype.name,
                              batch.draft_probs is None, noise is None, use_filters))
        if noise is not None:
            uniforms = np.zeros((padded_batch, k_pad))
            exponentials = np.ones((padded_batch, batch.vocab_size))
            k = batch.num_draft_tokens
            uniforms[:batch.batch_size][np.arange(k_pad)[None, :] < k[:, None]] = noise.uniforms
            exponentials[:batch.batch_size] = noise.exponentials
            output, num_accepted = self._injected(*args, t(uniforms, torch.float64), t(exponentials, torch.float64),
                                                  use_filters)
        else:
            seeds = torch.zeros(padded_batch, dtype=torch.int64)
            seeds[:batch.batch_size] = torch_philox.seeds_to_int64(batch.seeds)
            positions = np.zeros(padded_batch, np.int64)
            positions[:batch.batch_size] = batch.positions
            output, num_accepted = self._keyed(*args, seeds.to(self.device), t(positions), use_filters)
        width = ts.output_width(batch.max_k)
        return VerifyOutput(output[:batch.batch_size, :width].cpu().numpy().copy(),
                            num_accepted[:batch.batch_size].cpu().numpy().copy())

    def _chunked(self, batch: VerifyBatch, noise: Noise | None, size: int) -> VerifyOutput:
        """Verify requests ``[c, c + size)`` at a time; keyed noise depends on (seed, position) only,
        and injected noise is sliced with its requests, so the result equals one big launch."""
        cu = batch.request_offsets()
        width = ts.output_width(batch.max_k)
        output = np.full((batch.batch_size, width), PLACEHOLDER_TOKEN_ID, np.int64)
        num_accepted = np.zeros(batch.batch_size, np.int64)
        for start in range(0, batch.batch_size, size):
            stop = min(start + size, batch.batch_size)
            drafts = slice(int(cu[start]), int(cu[stop]))
            targets = slice(int(cu[start]) + start, int(cu[stop]) + stop)
            per_request = lambda a: None if a is None else a[start:stop]  # noqa: E731
            part = VerifyBatch(batch.num_draft_tokens[start:stop], batch.draft_token_ids[drafts],
                               None if batch.draft_probs is None else batch.draft_probs[drafts],
                               batch.target_logits[targets], batch.temperature[start:stop], batch.top_k[start:stop],
                               batch.top_p[start:stop], per_request(batch.seeds), per_request(batch.positions))
            part_noise = None if noise is None else Noise(noise.uniforms[drafts], noise.exponentials[start:stop])
            got = self.verify(part, part_noise)
            output[start:stop, :got.output_token_ids.shape[1]] = got.output_token_ids
            num_accepted[start:stop] = got.num_accepted
        return VerifyOutput(output, num_accepted)

    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.tensor(np.asarray(array), dtype=dtype, device=self.device)


def make_device() -> HpuDevice:
    """The ``hpu`` device: eager static-shape torch on the CPU (``HpuDevice(compile=True)`` for graphs)."""
    return HpuDevice("cpu")


__all__ = ["HpuDevice", "make_device", "verify_static", "verify_static_keyed", "keyed_noise_static", "pad_batch", "prepare_decode_inputs", "bucket", "BATCH_BUCKETS", "K_BUCKETS",
           "PADDING_SLOT_ID"]
