"""vLLM 0.33.0's V1 runner's rejection sampler as a device: ``vllm`` (compiled Triton kernels on a CUDA GPU) and
``vllm-interpret`` (the same kernels in Triton's CPU interpreter). vLLM 0.33.0 runs Model Runner V2 by default,
whose verifier is another code path (``vllm/v1/worker/gpu/spec_decode/``): the ``vllm-v2`` devices
(``vllm_v2_device``). This one is what the V1 runner (``vllm/v1/sample/``) runs, where V2 is not used.

**vLLM's code** (loaded by ``vllm_loader`` from the pinned wheel, never copied here):
``RejectionSampler.forward`` end to end — target rows cast to float32, its
``apply_logits_processors`` (SPEC §12 along the drafts: ``_combine_outputs_with_spec_tokens``
gives draft row j the output plus drafts 0..j−1; ``apply_all_penalties`` — repetition on
prompt ∪ that history, frequency and presence on the history —, the allowed-ids mask,
``apply_bad_words_with_drafts``, ``MinTokensLogitsProcessor.apply_with_spec_decode``), its
``apply_sampling_constraints`` (temperature expanded per token by its
``expand_kernel``, then ``apply_top_k_top_p``: the Triton top-k/top-p kernels
of ``topk_topp_triton.py``), ``rejection_sample`` (float32 softmax, the greedy,
recovered-token and acceptance Triton kernels), and for the bonus token
``Sampler.apply_logits_processors`` (allowed ids, ``apply_bad_words`` and the penalties on the
output plus every draft, ``MinTokensLogitsProcessor.apply``), ``apply_top_k_top_p``,
``random_sample`` and ``sample_with_exponential_noise``. One substitution, on a CUDA
host only: vLLM's ``apply_repetition_penalties`` calls its compiled kernel
(``vllm/_C.abi3.so``, not loaded), which the loader's stand-in routes to vLLM's own
``apply_repetition_penalties_torch`` (its branch for CPU tensors; ``_vllm_standins``).

**SPEC §12 served** (``SERVED``): exactly what vLLM applies with speculative decoding —
``allowed_token_ids``, ``bad_words``, ``min_tokens`` (+ ``stop_token_ids``), repetition,
frequency and presence penalties. ``min_p`` and ``logit_bias`` are refused by vLLM with a
speculative config (``SamplingParams._validate_spec_decode``) and a grammar's mask
(``token_mask``) is applied by vLLM's model runner, not its sampler: undeclared, so
``UnsupportedCall``. Order profiles: ``canonical`` and ``vllm`` (on these parameters they give
the same rows; vLLM's draft rows run penalties before the bans, which commute with them).

**What the adapter supplies:**

* *the layout change*: SPEC's flattened batch is vLLM's own (``[num_tokens +
  batch, V]`` target rows, request i's bonus row after its drafts); the adapter
  builds ``SpecDecodeMetadata`` (inclusive ``cu_num_draft_tokens`` int32,
  ``target_logits_indices``, ``bonus_logits_indices``) and ``SamplingMetadata``
  as ``InputBatch`` does: temperature float32 with greedy requests (T < 1e-5,
  SamplingParams' ``_SAMPLING_EPS``) stored as 0; top-k ``V`` when off and top-p
  1 when off or greedy, each tensor None when no request uses it; and §12's
  fields (``sampler_fields``: penalties float32, prompt ids padded with V, the
  committed output and ``spec_token_ids`` per request, the allowed-ids mask
  True where banned, bad words by request, a ``MinTokensLogitsProcessor`` told
  of each request by a ``BatchUpdate``).
  It reads back ``output_token_ids`` (int32, −1 padded: SPEC §7's layout).
* *the bonus token, drawn the way vLLM's ``Sampler.sample`` draws it*
  (``_BonusSampler``): float32 logits; argmax for greedy rows (T < 1e-5);
  temperature with greedy rows divided by 1; ``TopKTopPSampler.forward_native``
  (vLLM's ``apply_top_k_top_p``, float32 softmax, ``random_sample``). vLLM on
  a CUDA host with FlashInfer installed would sample a top-k/top-p bonus row
  through FlashInfer instead (``flashinfer_sample``, "statistically equivalent"
  in vLLM's words), and on a CPU host through its compiled
  ``fused_gumbel_argmax``: neither is this path.
* *the randomness hook*: with injected noise (SPEC §5.1) the engine's own
  draws are replaced for the duration of the call — its module function
  ``generate_uniform_probs`` returns the given uniforms (float64, as vLLM draws
  them), and ``torch.Tensor.exponential_`` fills the ``[batch, V]`` noise tensors
  (the recovered-token ``q`` and the bonus sampler's ``q``, float32 as vLLM
  allocates them) with the given exponentials: one vector per request, shared
  by the recovered and bonus draws as §5.1 says. Without noise (``rng =
  "seeded"``), every random request gets its own ``torch.Generator`` seeded by
  a hash of (seed, position) — vLLM's per-request generators, which it draws
  from in its own order (bonus, uniforms, recovered).
* *input rules*: SPEC §6 by specsim's shared preamble (``devices.validate``);
  vLLM itself asserts only shapes. A row every ban leaves empty (§12.4) is
  ``InvalidInput``, checked on vLLM's processed rows (``refuse_empty_rows``).

**Placeholders (SPEC §4):** vLLM reads every ``-1`` draft's row (its recovered token is drawn from
``max(t − d, 0)`` whatever the id): SPEC's *withdrawn draft*, which is what vLLM's own ``-1`` drafts
are (grammar-invalid drafts under structured output). So ``withdrawn_drafts`` is declared and the
batch goes to vLLM as it is; ``VerifyBatch.withdrawn`` changes nothing there. A *padding* ``-1``
has no counterpart in vLLM: its row is read too (the waiver ``placeholder-row-read``), and the
adapter does not zero it, so that the table shows vLLM as it is.

Declared honestly: float32 and 16-bit logits (vLLM computes in float32, so
float64 logits are not served: a float64 declaration would be held to 1e-9);
K ≤ 128 (``MAX_SPEC_LEN``); no Philox (its noise is torch's generators).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading

import numpy as np

from devices.protocol import Capabilities, Noise, VerifyBatch, VerifyOutput

MAX_SPEC_LEN = 128
"""vLLM's ``MAX_SPEC_LEN``: the largest K it verifies."""
SAMPLING_EPS = 1e-5
"""vLLM's ``_SAMPLING_EPS``: a temperature below it makes a request greedy (``SamplingType.GREEDY``)."""

_PATCH_LOCK = threading.Lock()


def generator_seed(seed: int, position: int) -> int:
    """The 64-bit seed of a request's ``torch.Generator`` for the round at ``position``.

    >>> generator_seed(1, 0) != generator_seed(1, 1) != generator_seed(2, 0)
    True
    """
    digest = hashlib.blake2b(f"{int(seed)}:{int(position)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & ((1 << 63) - 1)


def _tensor(a: np.ndarray, device: str):
    """``a`` as a tensor on ``device`` that owns its memory: vLLM's samplers work in place on the logits they are
    given (``Sampler.apply_temperature`` and the rejection sampler's temperature divide with ``div_``), which is
    theirs inside vLLM; on the CPU a tensor sharing the caller's array would hand that write back to the caller's
    inputs (SPEC §1: inputs are read-only)."""
    import torch
    a = np.ascontiguousarray(a)
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).to(device, copy=True)
    return torch.tensor(a, device=device)


class _BonusSampler:
    """``vllm.v1.sample.sampler.Sampler.forward`` for the bonus rows, without logprobs: its
    ``apply_logits_processors`` (vLLM's method: allowed ids, bad words over the output and every draft,
    min_tokens, penalties), then ``Sampler.sample`` on the ``forward_native`` path; every numeric step is
    vLLM's function (``tks``: its ``topk_topp_sampler`` module; ``sampler_class``: its ``Sampler``).
    ``apply_logits_processors`` uses only ``Sampler``'s static methods, so it is called on the class: a
    ``Sampler()`` would pick a top-k/top-p back end by platform, which this path replaces."""

    logprobs_mode = "raw_logprobs"
    use_fp64_gumbel = False

    def __init__(self, tks, sampler_output, sampler_class=None):
        self.tks, self.sampler_output, self.sampler_class = tks, sampler_output, sampler_class

    def __call__(self, logits, sampling_metadata, predict_bonus_token=False, logprobs_mode_override=None):
        import torch
        sm = sampling_metadata
        logits = logits.to(torch.float32)
        if self.sampler_class is not None:
            logits = self.sampler_class.apply_logits_processors(self.sampler_class, logits, sm, predict_bonus_token)
            refuse_empty_rows(logits, bonus_row_positions(sm))
        greedy = None if sm.all_random else logits.argmax(dim=-1).view(-1)
        if sm.all_greedy:
            sampled = greedy
        else:
            temperature = sm.temperature if sm.all_random else torch.where(sm.temperature < SAMPLING_EPS, 1.0,
                                                                            sm.temperature)
            logits = logits.div_(temperature.unsqueeze(dim=1))
            logits = self.tks.apply_top_k_top_p(logits, sm.top_k, sm.top_p)
            probs = logits.softmax(dim=-1, dtype=torch.float32)
            drawn = self.tks.random_sample(probs, sm.generators, self.use_fp64_gumbel)
            sampled = drawn if greedy is None else torch.where(sm.temperature < SAMPLING_EPS, greedy, drawn)
        return self.sampler_output(sampled_token_ids=sampled.to(torch.int32).unsqueeze(-1), logprobs_tensors=None)


@contextlib.contextmanager
def injected_noise(rejection_sampler_module, uniforms, exponentials):
    """Replace vLLM's uniform and exponential draws by the given ``uniforms [num_tokens]`` float64 and
    ``exponentials [batch, V]`` for the block (one call). A draw of any other shape raises: a change in
    how vLLM consumes noise must fail loudly, not silently use fresh randomness."""
    import torch
    original_uniforms = rejection_sampler_module.generate_uniform_probs
    original_exponential = torch.Tensor.exponential_

    def given_uniforms(num_tokens, num_draft_tokens, generators, device):
        if num_tokens != uniforms.shape[0] or generators:
            raise RuntimeError(f"vllm adapter: vLLM asked for {num_tokens} uniforms (generators {sorted(generators)}); "
                               f"{uniforms.shape[0]} were injected")
        return uniforms.to(device)

    def given_exponentials(self, *args, **kwargs):
        if tuple(self.shape) != tuple(exponentials.shape) or kwargs.get("generator") is not None:
            raise RuntimeError(f"vllm adapter: vLLM drew exponentials of shape {tuple(self.shape)}; the injected "
                               f"noise is {tuple(exponentials.shape)}")
        return self.copy_(exponentials.to(device=self.device, dtype=self.dtype))

    with _PATCH_LOCK:
        rejection_sampler_module.generate_uniform_probs = given_uniforms
        torch.Tensor.exponential_ = given_exponentials
        try:
            yield
        finally:
            torch.Tensor.exponential_ = original_exponential
            rejection_sampler_module.generate_uniform_probs = original_uniforms


def refuse_empty_rows(logits, positions) -> None:
    """SPEC §12.4: a row every ban leaves empty is ``InvalidInput`` (vLLM itself would sample from a row of
    ``-inf``). ``logits [n, V]`` after vLLM's processors; ``positions``: each row's (SPEC row, request, j).

    >>> import torch
    >>> refuse_empty_rows(torch.tensor([[0.0, float("-inf")]]), [(0, 0, 0)])
    >>> refuse_empty_rows(torch.full((1, 2), float("-inf")), [(3, 1, 0)])
    Traceback (most recent call last):
    ...
    devices.protocol.InvalidInput: token_mask: row 3 (request 1, position 0) allows no token after every ban
    """
    import torch

    from devices.protocol import InvalidInput
    empty = torch.isneginf(logits).all(dim=1).cpu().numpy()
    if empty.any():
        r, i, j = positions[int(np.flatnonzero(empty)[0])]
        raise InvalidInput(f"token_mask: row {r} (request {i}, position {j}) allows no token after every ban")


def _row_positions(num_draft_tokens) -> tuple[list, list]:
    """SPEC §1's (row, request, position) of every draft row and of every bonus row."""
    drafts, bonus, r = [], [], 0
    for i, k in enumerate(int(x) for x in num_draft_tokens):
        drafts += [(r + j, i, j) for j in range(k)]
        bonus.append((r + k, i, k))
        r += k + 1
    return drafts, bonus


def bonus_row_positions(sampling_metadata) -> list:
    """The bonus rows' SPEC positions, from the drafts the metadata carries (``spec_token_ids``)."""
    spec = sampling_metadata.spec_token_ids
    return _row_positions([0] * len(sampling_metadata.output_token_ids) if spec is None
                          else [len(s) for s in spec])[1]


def rejection_sampler(vllm):
    """vLLM's ``RejectionSampler`` over the bonus sampler ``Sampler.forward`` would be (``vllm``: the loader's
    ``VllmSampler``); its ``apply_logits_processors`` (vLLM's) is followed by the §12.4 empty-row check."""
    rs = vllm.rejection_sampler

    class RejectionSampler(rs.RejectionSampler):
        def apply_logits_processors(self, logits, sampling_metadata, metadata):
            logits = super().apply_logits_processors(logits, sampling_metadata, metadata)
            refuse_empty_rows(logits, _row_positions(metadata.num_draft_tokens)[0])
            return logits

    sampler_class = None if vllm.sampler is None else vllm.sampler.Sampler
    return RejectionSampler(_BonusSampler(vllm.topk_topp_sampler, rs.SamplerOutput, sampler_class))


def spec_decode_metadata(vllm, num_draft_tokens, draft_token_ids, device: str):
    """vLLM's ``SpecDecodeMetadata`` for a ragged batch: ``num_draft_tokens [batch]`` and
    ``draft_token_ids [num_tokens]`` (numpy or torch); request i's target rows cu[i]+i+j, its bonus row
    cu[i]+i+K_i (cu: the exclusive cumsum of K).

    >>> import numpy as np; k = np.array([2, 0, 1]); cu = np.concatenate([[0], np.cumsum(k)])
    >>> (cu[:-1] + np.arange(3) + k).tolist()   # the bonus rows vLLM's layout puts after each request's drafts
    [2, 3, 5]
    """
    import torch
    k = np.asarray(num_draft_tokens.cpu() if hasattr(num_draft_tokens, "cpu") else num_draft_tokens, np.int64)
    cu = np.concatenate([[0], np.cumsum(k)])
    rows = [np.arange(cu[i] + i, cu[i] + i + k[i]) for i in range(len(k))]
    on = lambda a: torch.as_tensor(np.asarray(a, np.int32), device=device)  # noqa: E731
    drafts = (draft_token_ids.to(device=device, dtype=torch.int32) if isinstance(draft_token_ids, torch.Tensor)
              else on(draft_token_ids))
    return vllm.spec_decode_metadata.SpecDecodeMetadata(
        draft_token_ids=drafts, num_draft_tokens=[int(x) for x in k],
        cu_num_draft_tokens=on(np.cumsum(k)), cu_num_sampled_tokens=on(np.cumsum(k + 1)),
        target_logits_indices=on(np.concatenate(rows) if rows else []),
        bonus_logits_indices=on(cu[:-1] + np.arange(len(k)) + k),
        logits_indices=on(np.arange(int(cu[-1]) + len(k))))


SERVED = ("allowed_token_ids", "bad_words", "min_tokens", "repetition_penalty", "frequency_penalty",
          "presence_penalty")
"""The SPEC §12 parameters vLLM 0.33.0 applies at every speculative position: its
``SamplingParams._validate_spec_decode`` refuses ``min_p`` and ``logit_bias`` with a speculative config,
and a grammar's mask (``token_mask``) is applied by its model runner, outside the sampler."""


def served_only(sampler):
    """``sampler`` (``SamplerParams``) with the parameters vLLM does not serve with spec decode turned off
    (``token_mask``, ``logit_bias``, ``min_p`` → None): what a vLLM deployment runs for the same request,
    e.g. for ``specsim bench``'s ``vllm §12`` row. Not for conformance (there an undeclared parameter is
    ``UnsupportedCall``, never dropped)."""
    import dataclasses
    return dataclasses.replace(sampler, **{name: None for name in ("token_mask", "logit_bias", "min_p")})


def _ids(lists, i: int) -> list[int]:
    """Request i's ids of a per-request list field (None, or a None entry: empty)."""
    return [] if lists is None or lists[i] is None else [int(t) for t in np.asarray(lists[i]).reshape(-1)]


def _per_request(values, batch_size: int, neutral: float) -> np.ndarray:
    return np.full(batch_size, neutral) if values is None else np.asarray(values, np.float64)


def sampler_fields(vllm, sampler, num_draft_tokens, draft_token_ids, vocab_size: int, device: str) -> dict:
    """``SamplingMetadata``'s SPEC §12 fields from ``SamplerParams`` as vLLM's ``InputBatch`` fills them:
    penalties float32 ``[batch]`` with ``no_penalties`` when every request is neutral; ``prompt_token_ids
    [batch, max prompt]`` int64 padded with V (only with penalties); ``output_token_ids`` the committed
    output per request and ``spec_token_ids`` this step's drafts per request (vLLM's ``_combine_outputs_
    with_spec_tokens`` builds each row's history from them); ``allowed_token_ids_mask [batch, V]`` bool,
    True where a token is *banned*; ``bad_words_token_ids`` {request: words}; min_tokens as vLLM's
    ``MinTokensLogitsProcessor``, told of each request by a ``BatchUpdate`` (its ``SamplingParams`` as
    the three fields the processor reads: ``min_tokens``, ``all_stop_token_ids``, ``structured_outputs``).

    ``sampler``: ``SamplerParams`` (None: the plain step); ``num_draft_tokens [batch]``,
    ``draft_token_ids [num_tokens]``.
    """
    import types as _types

    import torch
    batch_size = len(num_draft_tokens)
    cu = np.concatenate([[0], np.cumsum(np.asarray(num_draft_tokens, np.int64))])
    drafts = np.asarray(draft_token_ids, np.int64)
    spec = [[int(t) for t in drafts[cu[i]: cu[i + 1]]] for i in range(batch_size)]
    if sampler is None or not sampler.given():
        return {"spec_token_ids": spec}
    outputs = [_ids(sampler.output_token_ids, i) for i in range(batch_size)]
    rep = _per_request(sampler.repetition_penalty, batch_size, 1.0)
    freq = _per_request(sampler.frequency_penalty, batch_size, 0.0)
    pres = _per_request(sampler.presence_penalty, batch_size, 0.0)
    no_penalties = bool((rep == 1).all() and (freq == 0).all() and (pres == 0).all())
    prompt = None
    if not no_penalties:
        prompts = [_ids(sampler.prompt_token_ids, i) for i in range(batch_size)]
        prompt = np.full((batch_size, max(map(len, prompts), default=0)), vocab_size, np.int64)
        for i, ids in enumerate(prompts):
            prompt[i, : len(ids)] = ids
        prompt = torch.as_tensor(prompt, device=device)
    allowed = None
    if sampler.allowed_token_ids is not None and any(a is not None for a in sampler.allowed_token_ids):
        banned = np.zeros((batch_size, vocab_size), dtype=bool)
        for i, ids in enumerate(sampler.allowed_token_ids):
            if ids is not None:
                banned[i] = True
                banned[i, np.asarray(ids, np.int64)] = False
        allowed = torch.as_tensor(banned, device=device)
    bad_words = {i: [[int(t) for t in w] for w in words] for i, words in enumerate(sampler.bad_words or ())
                 if words is not None and len(words)}
    processors = []
    if sampler.min_tokens is not None:
        proc = vllm.logits_processors.MinTokensLogitsProcessor(None, torch.device(device), False)
        added = [(i, _types.SimpleNamespace(min_tokens=int(sampler.min_tokens[i]), structured_outputs=None,
                                            all_stop_token_ids=set(_ids(sampler.stop_token_ids, i))),
                  _ids(sampler.prompt_token_ids, i), outputs[i]) for i in range(batch_size)]
        proc.update_state(vllm.batch_update(batch_size=batch_size, removed=[], added=added, moved=[]))
        processors.append(proc)
    f32 = lambda a: torch.as_tensor(a, dtype=torch.float32, device=device)  # noqa: E731
    return dict(no_penalties=no_penalties, prompt_token_ids=prompt, frequency_penalties=f32(freq),
                presence_penalties=f32(pres), repetition_penalties=f32(rep), output_token_ids=outputs,
                spec_token_ids=spec, allowed_token_ids_mask=allowed, bad_words_token_ids=bad_words,
                logitsprocs=vllm.sample_metadata.LogitsProcessors(processors))


def sampling_metadata(vllm, temperature, top_k, top_p, vocab_size: int, generators: dict, device: str,
                      **fields):
    """vLLM's ``SamplingMetadata`` as ``InputBatch._make_sampling_metadata`` builds it from per-request
    ``temperature``, ``top_k``, ``top_p`` ``[batch]`` (SPEC's conventions: 0 = greedy / off, 1 = off);
    ``fields``: SPEC §12's (``sampler_fields``), replacing the neutral ones."""
    import torch
    temperature = np.asarray(temperature, np.float64)
    greedy = temperature < SAMPLING_EPS
    top_k = np.asarray(top_k, np.int64)
    top_k = np.where(~greedy & (top_k > 0) & (top_k < vocab_size), top_k, vocab_size)
    top_p = np.where(greedy, 1.0, np.asarray(top_p, np.float64))
    zeros = torch.zeros(len(temperature), dtype=torch.float32, device=device)
    neutral = dict(
        no_penalties=True, prompt_token_ids=None, frequency_penalties=zeros, presence_penalties=zeros,
        repetition_penalties=zeros + 1, output_token_ids=[[] for _ in temperature], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=vllm.sample_metadata.LogitsProcessors())
    return vllm.sample_metadata.SamplingMetadata(
        temperature=None if greedy.all() else torch.as_tensor(np.where(greedy, 0.0, temperature), dtype=torch.float32,
                                                               device=device),
        all_greedy=bool(greedy.all()), all_random=bool((~greedy).all()),
        top_p=None if (top_p >= 1).all() else torch.as_tensor(top_p, dtype=torch.float32, device=device),
        top_k=None if (top_k >= vocab_size).all() else torch.as_tensor(top_k, dtype=torch.int32, device=device),
        generators=generators, max_num_logprobs=None, **{**neutral, **fields})


class VllmDevice:
    """See the module docstring. ``device``: ``"cuda"`` or ``"cpu"`` (Triton interpreter)."""

    capabilities = Capabilities(injected_noise=True, rng="seeded", max_vocab_size=2**31 - 1, max_k=MAX_SPEC_LEN,
                                greedy=True, draft_probs=True, point_proposals=True, top_k=True, top_p=True,
                                dtypes=("float32", "float16", "bfloat16"), sampler=SERVED,
                                sampler_orders=("canonical", "vllm"), withdrawn_drafts=True)

    def __init__(self, device: str):
        from devices.field.vllm_loader import VLLM_VERSION
        self.device = device
        self.interpret = device == "cpu"
        self.name = "vllm-interpret" if self.interpret else "vllm"
        self.engine = f"vllm {VLLM_VERSION} (V1 runner)"
        self._vllm = None

    @property
    def vllm(self):
        """vLLM's modules, loaded on first use (that decides this process's Triton mode)."""
        if self._vllm is None:
            from devices.field.vllm_loader import load_rejection_sampler
            self._vllm = load_rejection_sampler(interpret=self.interpret)
        return self._vllm

    # -- the layout change ------------------------------------------------------
    def spec_decode_metadata(self, batch: VerifyBatch):
        return spec_decode_metadata(self.vllm, batch.num_draft_tokens, batch.draft_token_ids, self.device)

    def sampling_metadata(self, batch: VerifyBatch, generators: dict):
        fields = sampler_fields(self.vllm, batch.sampler, batch.num_draft_tokens, batch.draft_token_ids,
                                batch.vocab_size, self.device)
        return sampling_metadata(self.vllm, batch.temperature, batch.top_k, batch.top_p, batch.vocab_size,
                                 generators, self.device, **fields)

    def generators(self, batch: VerifyBatch) -> dict:
        """The randomness hook without injected noise: a ``torch.Generator`` per random request."""
        import torch
        out = {}
        for i, (t, seed, position) in enumerate(zip(batch.temperature, batch.seeds, batch.positions)):
            if t >= SAMPLING_EPS:
                out[i] = torch.Generator(device=self.device).manual_seed(generator_seed(seed, position))
        return out

    # -- the call ------------------------------------------------------------------
    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        import torch

        from devices.validate import check_call
        check_call(batch, noise, self.capabilities)
        vllm = self.vllm
        rs = vllm.rejection_sampler
        sampler = rejection_sampler(vllm)
        logits = _tensor(batch.target_logits, self.device)
        draft_probs = None if batch.draft_probs is None else _tensor(batch.draft_probs, self.device)
        metadata = self.sampling_metadata(batch, {} if noise is not None else self.generators(batch))
        if batch.max_k == 0:
            # No drafts at all: vLLM's model runner builds no spec-decode metadata and samples with its plain
            # Sampler (here the same bonus path), never entering the rejection sampler.
            run = lambda: sampler.sampler(logits=logits, sampling_metadata=metadata).sampled_token_ids  # noqa: E731
        else:
            spec = self.spec_decode_metadata(batch)
            run = lambda: sampler(spec, draft_probs, logits, metadata).sampled_token_ids  # noqa: E731
        if noise is None:
            out = run()
        else:
            uniforms = torch.as_tensor(np.asarray(noise.uniforms, np.float64), device=self.device)
            exponentials = torch.as_tensor(np.asarray(noise.exponentials, np.float64), device=self.device)
            with injected_noise(rs, uniforms, exponentials):
                out = run()
        ids = out.to(torch.int64).cpu().numpy()
        num_accepted = (ids != -1).sum(axis=1) - 1
        return VerifyOutput(ids, num_accepted.astype(np.int64))


def loadable(name: str, interpret: bool) -> None:
    """Raise, saying why, unless adapter ``name`` can load here: torch and Triton installed, Triton in the
    mode it asks (compiled or interpreted), vLLM's pinned members fetched and verified."""
    import importlib.util

    from devices.triton_mode import conflict
    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"{name}: needs {' and '.join(missing)} installed (pip install 'specsim[triton]')")
    why = conflict(interpret, name)
    if why:
        raise RuntimeError(why)
    from devices.field.vllm_loader import fetch
    fetch()   # the members are here and verified, or the reason why not


def make_device() -> VllmDevice:
    """vLLM's V1 runner's kernels compiled for a CUDA GPU."""
    loadable("vllm", interpret=False)
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("vllm: no CUDA GPU here; the same kernels run in Triton's CPU interpreter as the "
                           "device 'vllm-interpret' (slow, small sizes)")
    return VllmDevice("cuda")


def make_interpreter_device() -> VllmDevice:
    """vLLM's V1 runner's kernels in Triton's CPU interpreter (any machine; slow)."""
    loadable("vllm-interpret", interpret=True)
    return VllmDevice("cpu")
