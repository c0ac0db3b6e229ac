"""vLLM 0.33.0's Model Runner V2 verifier as a device: ``vllm-v2`` (compiled Triton kernels on a CUDA GPU) and
``vllm-v2-interpret`` (the same kernels in Triton's CPU interpreter).

vLLM 0.33.0 runs Model Runner V2 by default (``vllm/v1/worker/gpu/``); its
drafts are verified by ``vllm.v1.worker.gpu.spec_decode.rejection_sampler.
RejectionSampler``, not by the V1 runner's ``vllm/v1/sample/rejection_sampler.py``
that the ``vllm`` device runs.

**vLLM's code** (loaded by ``vllm_v2_loader`` from the pinned wheel, never copied here):
the runner's own objects, built as ``GPUModelRunner`` builds them — ``RequestState``
(``vllm/v1/worker/gpu/states.py``: each request's prompt and output tokens), the V2
``Sampler`` with its states (``SamplingStates``; the logits processors ``LogitBiasState`` —
allowed ids and min_tokens —, ``PenaltiesState``, ``BadWordsState``), each request added by
``Sampler.add_request`` and flushed by ``apply_staged_writes`` — and
``RejectionSampler._verify_in_chunks``, the part of ``RejectionSampler.__call__`` after it
has gathered the drafts from the input ids: ``Sampler.apply_sampling_params`` (the
processors along the drafts, temperature, min_p, vLLM's top-k/top-p) and
``rejection_sample`` (the Triton kernels: ``log t > log u + log q`` with ``u =
tl.rand(seed, pos)``, the recovered or bonus token by a Gumbel race whose noise is a hash
of ``(seed, pos, token)``). A step without any draft goes to ``Sampler.sample`` (the
runner's ``self.sampler(...)`` path: ``gumbel_sample``).

**SPEC §12 served** (``SERVED``): what vLLM serves with speculative decoding, as for the V1
runner: ``SamplingParams._validate_spec_decode`` refuses ``min_p`` and ``logit_bias`` with a
speculative config, and a grammar's mask is applied by the runner
(``StructuredOutputsWorker``), outside the verifier. The V2 processors act at every
logits row: penalties count the output plus the drafts before the row, bad words match
against them, and min_tokens bans stop tokens while ``pos + 1 < prompt_len + min_tokens``,
``pos`` the row's position — the bonus row included. Order profiles ``canonical`` and
``vllm`` (on these parameters they give the same rows).

**What the adapter supplies:**

* *the layout change*: SPEC's flattened rows are V2's logits rows (request i's K_i draft
  rows, then its bonus row); the adapter builds what ``InputBatch`` holds for them —
  ``cu_num_logits`` (int32), ``idx_mapping`` (request → its ``RequestState`` slot, int64),
  ``expanded_idx_mapping``, ``expanded_local_pos`` (int32), each row's input token
  (``draft_sampled``: the last committed token, then the drafts, int32) and position
  (``pos = prompt_len + output_len − 1 + j``, int64, the row's input token's position) — and
  a ``SamplingParams`` per request with the fields ``Sampler.add_request`` reads
  (``sampling_params``). It reads back ``sampled [batch, K + 1]`` and ``num_sampled`` and
  writes SPEC §7's layout (−1 padded).
* *the draft distribution*: V2 takes the drafter's cached logits ``[batch, K, V]``
  (pre-temperature; its kernels divide by T and softmax). The adapter hands it
  ``T · log(draft_probs)`` in float32, whose softmax at T is ``draft_probs`` (exactly up to
  float32 rounding); point proposals are V2's default ``draft_sample_method="greedy"``
  (no draft logits: one-hot drafts).
* *the randomness hook* (``rng="seeded"``): V2 keys its noise by the request's seed and the
  row's position. SPEC's round key ``(seed, position)`` becomes the request's
  ``SamplingParams.seed`` (``vllm_device.generator_seed``, a 63-bit hash), because V2's
  own positions are the request's token positions, which its min_tokens reads, and SPEC's
  ``positions`` and output lengths are independent inputs. Every request carries a seed,
  as ``seed=`` in vLLM does: no draw from numpy's or torch's global generators.
* *input rules*: SPEC §6 by specsim's shared preamble (``devices.validate``); a row every
  ban leaves empty (§12.4) is ``InvalidInput``, checked on V2's processed rows. V2's own
  per-request limits (``logit_bias.py``: at most 1024 allowed ids, 128 stop tokens;
  ``envs``: 128 bad words of 1024 tokens in all) are ``UnsupportedCall`` naming the limit.

Not modeled (frontend, not the verifier, and the same for both runners):
``SamplingParams.__post_init__`` raises a temperature in (0, 0.01) to 0.01.

Declared honestly: float32 and 16-bit logits (V2 computes in float32); K ≤ ``MAX_K``;
no injected noise (the coin and the race are drawn inside the kernels) and no Philox
streams of SPEC §5.2 (V2's keys are its own).
"""

from __future__ import annotations

import types

import numpy as np

from devices.field.vllm_device import SERVED, _tensor, generator_seed, loadable
from devices.protocol import Capabilities, InvalidInput, Noise, UnsupportedCall, VerifyBatch, VerifyOutput

MAX_K = 128
"""The largest K declared: the V1 runner's ``MAX_SPEC_LEN``, so that both runners are held to the same sizes
(V2's kernels loop over the drafts and set no bound of their own)."""

MAX_NUM_ALLOWED_TOKEN_IDS = 1024
MAX_NUM_STOP_TOKEN_IDS = 128
MAX_NUM_BAD_WORDS = 128
MAX_BAD_WORDS_TOTAL_TOKENS = 1024
"""V2's per-request limits (``vllm/v1/worker/gpu/sample/logit_bias.py``; ``VLLM_MAX_NUM_BAD_WORDS``,
``VLLM_MAX_BAD_WORDS_TOTAL_TOKENS`` at their defaults): ``Sampler.add_request`` raises ``ValueError``
past them, which the adapter reports as ``UnsupportedCall``."""


def _ids(lists, i: int) -> list[int]:
    """Request i's ids of a per-request list field (None, or a None entry: empty)."""
    return [] if lists is None or lists[i] is None else [int(t) for t in np.asarray(lists[i]).reshape(-1)]


def _per_request(values, i: int, neutral: float) -> float:
    return neutral if values is None else float(values[i])


def sampling_params(batch: VerifyBatch, i: int) -> types.SimpleNamespace:
    """Request i's ``SamplingParams`` as ``Sampler.add_request`` reads it (after its ``__post_init__``: a
    greedy request has top-k off, top-p 1, min_p 0), its seed the round key's hash."""
    sampler = batch.sampler
    greedy = float(batch.temperature[i]) == 0.0
    given = sampler is not None
    min_tokens = int(sampler.min_tokens[i]) if given and sampler.min_tokens is not None else 0
    words = sampler.bad_words[i] if given and sampler.bad_words is not None else None
    allowed = _ids(sampler.allowed_token_ids, i) if given and sampler.allowed_token_ids is not None \
        and sampler.allowed_token_ids[i] is not None else None
    return types.SimpleNamespace(
        temperature=float(batch.temperature[i]), top_k=0 if greedy else int(batch.top_k[i]),
        top_p=1.0 if greedy else float(batch.top_p[i]), min_p=0.0,
        seed=generator_seed(int(batch.seeds[i]), int(batch.positions[i])), logprobs=None, logprob_token_ids=None,
        thinking_token_budget=None, structured_outputs=None, logit_bias=None, allowed_token_ids=allowed,
        min_tokens=min_tokens, all_stop_token_ids=set(_ids(sampler.stop_token_ids, i)) if given else set(),
        repetition_penalty=_per_request(sampler.repetition_penalty if given else None, i, 1.0),
        frequency_penalty=_per_request(sampler.frequency_penalty if given else None, i, 0.0),
        presence_penalty=_per_request(sampler.presence_penalty if given else None, i, 0.0),
        bad_words_token_ids=[[int(t) for t in w] for w in words] if words is not None and len(words) else None)


def check_v2_limits(params: types.SimpleNamespace, i: int) -> None:
    """``UnsupportedCall`` for request ``i`` past one of V2's per-request limits (``MAX_NUM_*``)."""
    words = params.bad_words_token_ids or []
    over = [(f"allowed_token_ids: at most {MAX_NUM_ALLOWED_TOKEN_IDS} per request (V2's logit_bias.py)",
             len(params.allowed_token_ids or ()) > MAX_NUM_ALLOWED_TOKEN_IDS),
            (f"stop_token_ids: at most {MAX_NUM_STOP_TOKEN_IDS} per request with min_tokens (V2's logit_bias.py)",
             params.min_tokens > 0 and len(params.all_stop_token_ids) > MAX_NUM_STOP_TOKEN_IDS),
            (f"bad_words: at most {MAX_NUM_BAD_WORDS} words of {MAX_BAD_WORDS_TOTAL_TOKENS} tokens in all per "
             "request (VLLM_MAX_NUM_BAD_WORDS, VLLM_MAX_BAD_WORDS_TOTAL_TOKENS)",
             len(words) > MAX_NUM_BAD_WORDS or sum(map(len, words)) > MAX_BAD_WORDS_TOTAL_TOKENS)]
    for requirement, exceeded in over:
        if exceeded:
            raise UnsupportedCall(requirement, f"request {i}")


class Layout:
    """V2's logits rows for a SPEC batch: request i owns rows ``cu[i] .. cu[i] + K_i`` (the last its bonus
    row), is in ``RequestState`` slot ``slots[i]``, and its sequence before the step is ``prompt + output``.

    >>> import numpy as np
    >>> Layout.rows(np.array([2, 0, 1]))   # (cu_num_logits, local position of each row)
    ([0, 3, 4, 6], [0, 1, 2, 0, 0, 1])
    """

    def __init__(self, batch: VerifyBatch):
        self.batch = batch
        self.k = np.asarray(batch.num_draft_tokens, np.int64)
        cu, local = self.rows(self.k)
        self.cu_num_logits, self.local_pos = np.asarray(cu, np.int32), np.asarray(local, np.int32)
        self.request_of_row = np.repeat(np.arange(batch.batch_size), self.k + 1)
        sampler = batch.sampler
        self.prompts = [_ids(None if sampler is None else sampler.prompt_token_ids, i) for i in range(batch.batch_size)]
        self.outputs = [_ids(None if sampler is None else sampler.output_token_ids, i) for i in range(batch.batch_size)]
        self.lengths = np.array([len(p) + len(o) for p, o in zip(self.prompts, self.outputs)], np.int64)

    @staticmethod
    def rows(k) -> tuple[list[int], list[int]]:
        k = [int(x) for x in k]
        return [0] + np.cumsum([x + 1 for x in k]).tolist(), [j for x in k for j in range(x + 1)]

    def positions(self) -> np.ndarray:
        """``[num_logits]`` int64: each row's input-token position, ``prompt_len + output_len − 1 + j``."""
        return self.lengths[self.request_of_row] - 1 + self.local_pos.astype(np.int64)

    def input_ids(self) -> np.ndarray:
        """``[num_logits]`` int32: each request's last committed token (−1 when it has none; no kernel reads it),
        then its drafts: the rows' input tokens, as ``gather_draft_sampled`` reads them from the input ids."""
        drafts = np.asarray(self.batch.draft_token_ids, np.int64)
        cu = np.concatenate([[0], np.cumsum(self.k)])
        out = []
        for i in range(self.batch.batch_size):
            committed = self.prompts[i] + self.outputs[i]
            out += [committed[-1] if committed else -1] + drafts[cu[i]: cu[i + 1]].tolist()
        return np.asarray(out, np.int32)

    def row_position(self, row: int) -> tuple[int, int, int]:
        """SPEC's (row, request, position j) of V2's logits row ``row`` (the layouts coincide)."""
        return row, int(self.request_of_row[row]), int(self.local_pos[row])


def refuse_empty_rows(logits, layout: Layout) -> None:
    """SPEC §12.4: a processed row every ban left empty is ``InvalidInput`` (V2 would race over a row of −inf)."""
    import torch
    empty = torch.isneginf(logits).all(dim=1).cpu().numpy()
    if empty.any():
        r, i, j = layout.row_position(int(np.flatnonzero(empty)[0]))
        raise InvalidInput(f"token_mask: row {r} (request {i}, position {j}) allows no token after every ban")


def draft_logits(batch: VerifyBatch, layout: Layout, slots: np.ndarray, device: str):
    """The drafter's cached logits ``[batch, max(K, 1), V]`` float32, indexed as V2 indexes them, by request
    slot (``slots[i]``: request i's ``RequestState`` slot): ``T_i · log(draft_probs)`` at request i's step j
    (softmax at T gives the row back); ``log(draft_probs)`` for a greedy request (V2 never reads them); None
    for point proposals."""
    import torch
    if batch.draft_probs is None:
        return None
    rows = np.asarray(batch.draft_probs, np.float64)
    out = np.zeros((batch.batch_size, max(batch.max_k, 1), batch.vocab_size), np.float64)
    cu = np.concatenate([[0], np.cumsum(layout.k)])
    with np.errstate(divide="ignore"):
        logs = np.log(rows)
    for i in range(batch.batch_size):
        t = float(batch.temperature[i])
        out[slots[i], : layout.k[i]] = logs[cu[i]: cu[i + 1]] * (t if t > 0 else 1.0)
    return torch.as_tensor(out.astype(np.float32), device=device)


class _Runner:
    """The V2 runner's request state, sampler and verifier for one batch, each request added and flushed as
    ``GPUModelRunner`` adds them (``req_states`` first: the penalties count its tokens)."""

    def __init__(self, v2, batch: VerifyBatch, layout: Layout, device: str):
        import torch
        B, V = batch.batch_size, batch.vocab_size
        steps = max(batch.max_k, 1)
        torch_device = torch.device(device)
        self.req_states = v2.request_states.RequestState(
            max_num_reqs=B, max_model_len=int(layout.lengths.max(initial=0)) + steps + 1,
            max_num_batched_tokens=int(layout.cu_num_logits[-1]), num_speculative_steps=steps, vocab_size=V,
            device=torch_device)
        self.sampler = _checked_sampler(v2, layout)(
            vllm_config=types.SimpleNamespace(reasoning_config=None), max_num_reqs=B, vocab_size=V,
            device=torch_device, req_states=self.req_states, num_speculative_tokens=steps + 1)
        params = [sampling_params(batch, i) for i in range(B)]
        for i, p in enumerate(params):
            check_v2_limits(p, i)
        self.slots = np.zeros(B, np.int64)
        for i, p in enumerate(params):
            committed = layout.prompts[i] + layout.outputs[i]
            self.req_states.add_request(f"request-{i}", len(layout.prompts[i]), committed,
                                        max(len(committed) - 1, 0), int(layout.k[i]) + 1)
            self.slots[i] = self.req_states.req_id_to_index[f"request-{i}"]
        self.req_states.apply_staged_writes()
        for i, p in enumerate(params):
            self.sampler.add_request(int(self.slots[i]), p)
        self.sampler.apply_staged_writes()
        spec = types.SimpleNamespace(num_speculative_tokens=steps, enable_adaptive_verification=False,
                                     rejection_sample_method="standard", synthetic_acceptance_rates=None,
                                     fly_window_size=None, fly_entropy_threshold=0.3, fly_entropy_top_k=3)
        self.rejection_sampler = v2.rejection_sampler.RejectionSampler(self.sampler, spec, torch_device)

    def input_batch(self, layout: Layout, device: str) -> types.SimpleNamespace:
        """The fields of ``InputBatch`` that ``_verify_in_chunks`` and ``Sampler.sample`` read."""
        import torch
        idx_mapping_np = self.slots.astype(np.intp)
        expanded = self.slots[layout.request_of_row]
        on = lambda a, dtype: torch.as_tensor(a, dtype=dtype, device=device)  # noqa: E731
        seq_lens = layout.lengths + layout.k
        return types.SimpleNamespace(
            num_reqs=len(self.slots), idx_mapping=on(self.slots, torch.int64), idx_mapping_np=idx_mapping_np,
            expanded_idx_mapping=on(expanded, torch.int64), expanded_local_pos=on(layout.local_pos, torch.int32),
            cu_num_logits=on(layout.cu_num_logits, torch.int32), cu_num_logits_np=layout.cu_num_logits,
            seq_lens_cpu_upper_bound=torch.as_tensor(seq_lens.astype(np.int32)))


def _checked_sampler(v2, layout: Layout) -> type:
    """V2's ``Sampler`` whose ``apply_sampling_params`` (vLLM's) is followed by the §12.4 empty-row check."""
    class Sampler(v2.sampler.Sampler):
        def apply_sampling_params(self, logits, *args, **kwargs):
            processed = super().apply_sampling_params(logits, *args, **kwargs)
            refuse_empty_rows(processed, layout)
            return processed
    return Sampler


class VllmV2Device:
    """See the module docstring. ``device``: ``"cuda"`` or ``"cpu"`` (Triton interpreter)."""

    capabilities = Capabilities(injected_noise=False, rng="seeded", max_vocab_size=2**31 - 1, max_k=MAX_K,
                                greedy=True, draft_probs=True, point_proposals=True, top_k=True, top_p=True,
                                dtypes=("float32", "float16", "bfloat16"), sampler=SERVED,
                                sampler_orders=("canonical", "vllm"))

    def __init__(self, device: str):
        from devices.field.vllm_loader import VLLM_VERSION
        self.device = device
        self.interpret = device == "cpu"
        self.name = "vllm-v2-interpret" if self.interpret else "vllm-v2"
        self.engine = f"vllm {VLLM_VERSION} (Model Runner V2)"
        self._v2 = None

    @property
    def v2(self):
        """The V2 verifier's modules, loaded on first use (that decides this process's Triton mode)."""
        if self._v2 is None:
            from devices.field.vllm_v2_loader import load_v2_verifier
            self._v2 = load_v2_verifier(interpret=self.interpret)
        return self._v2

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        import torch

        from devices.validate import check_call
        check_call(batch, noise, self.capabilities)
        v2 = self.v2
        layout = Layout(batch)
        runner = _Runner(v2, batch, layout, self.device)
        inputs = runner.input_batch(layout, self.device)
        logits = _tensor(batch.target_logits, self.device)
        pos = torch.as_tensor(layout.positions(), dtype=torch.int64, device=self.device)
        input_ids = torch.as_tensor(layout.input_ids(), dtype=torch.int32, device=self.device)
        if batch.max_k == 0:
            # No drafts in the step: the runner samples with its plain Sampler, never entering the verifier.
            sampled, _ = runner.sampler.sample(logits, inputs.expanded_idx_mapping, inputs.idx_mapping,
                                               inputs.idx_mapping_np, pos, input_ids, inputs.expanded_local_pos,
                                               inputs.seq_lens_cpu_upper_bound.numpy())
            ids = sampled.view(-1, 1).to(torch.int64).cpu().numpy()
            return VerifyOutput(ids, np.zeros(batch.batch_size, np.int64))
        rs = runner.rejection_sampler
        sampled, num_sampled, _, _ = rs._verify_in_chunks(
            logits, inputs, draft_logits(batch, layout, runner.slots, self.device), input_ids, pos,
            v2.rejection_sampler.get_max_chunk_logits(batch.vocab_size), v2.sample_states.NO_LOGPROBS, input_ids)
        return _spec_layout(sampled.cpu().numpy(), num_sampled.cpu().numpy(), batch.max_k)


def _spec_layout(sampled: np.ndarray, num_sampled: np.ndarray, max_k: int) -> VerifyOutput:
    """SPEC §7 from V2's ``sampled [batch, steps + 1]`` (the first ``num_sampled[i]`` entries valid).

    >>> _spec_layout(np.array([[4, 9, 9], [5, 6, 7]]), np.array([1, 3]), 2).output_token_ids.tolist()
    [[4, -1, -1], [5, 6, 7]]
    """
    n = np.asarray(num_sampled, np.int64)
    ids = np.full((len(n), max_k + 1), -1, np.int64)
    for i, count in enumerate(n):
        ids[i, :count] = sampled[i, :count]
    return VerifyOutput(ids, n - 1)


def make_device() -> VllmV2Device:
    """vLLM's Model Runner V2 verifier, its kernels compiled for a CUDA GPU."""
    loadable("vllm-v2", interpret=False)
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("vllm-v2: no CUDA GPU here; the same kernels run in Triton's CPU interpreter as the "
                           "device 'vllm-v2-interpret' (slow, small sizes)")
    return VllmV2Device("cuda")


def make_interpreter_device() -> VllmV2Device:
    """vLLM's Model Runner V2 verifier, its kernels in Triton's CPU interpreter (any machine; slow)."""
    loadable("vllm-v2-interpret", interpret=True)
    return VllmV2Device("cpu")
