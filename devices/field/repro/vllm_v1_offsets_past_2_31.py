"""vLLM 0.33.0 (V1 model runner's rejection sampler): the row offsets of ``draft_probs`` and ``target_probs``
are formed in 32-bit integers, so once a batch's draft rows hold 2^31 elements the kernels read the wrong
memory: a request past that point is verified against another row (wrong tokens), or the step faults.

``rejection_random_sample_kernel`` loads ``draft_probs_ptr + (start_idx + pos) * vocab_size + draft_token_id``
and ``target_probs_ptr + (start_idx + pos) * vocab_size + draft_token_id``; ``sample_recovered_tokens_kernel``
loads ``token_idx * vocab_size + vocab_offset`` (vllm/v1/sample/rejection_sampler.py). ``start_idx`` comes
from the int32 ``cu_num_draft_tokens``, ``pos`` and ``token_idx`` are int32, ``vocab_size`` a 32-bit kernel
argument: the product wraps past 2^31 - 1. At V = 128256 the wrap begins inside row 16743, the last draft
row of request 2092 in a batch with 8 drafts each; every row after it is wholly past.

This script builds the smallest such batch: 2097 requests of 8 drafts at V = 128256, temperature 1, every
row's mass on one token, so the lossless answer is known exactly. Requests 0-2091 (before the boundary) put
their mass on token 0 and draft 0; requests 2092-2096 put it on tokens spread over the vocabulary and draft
exactly those tokens, so every draft has acceptance probability min(1, 1/1) = 1 and lossless rejection
sampling emits the 8 drafts and the bonus token, whatever the random draws. It calls V1's own
``rejection_sample`` and compares every request with that answer.

Memory: about 22 GiB free on the GPU (float16 target logits 4 GiB, the float32 target probabilities V1
computes 8 GiB, float32 ``draft_probs`` 8 GiB, the per-request exponentials and their reciprocals 2 GiB);
the host needs little (the tensors are built on the GPU). Time: seconds once the kernels are compiled.

Run (``pip install vllm==0.33.0``; a CUDA GPU)::

    python vllm_v1_offsets_past_2_31.py

Exit status: 0 every request emits the lossless answer; 1 the bug is present (a request past the boundary
differs, or the step faults); 3 a dependency is missing (vllm, torch, a CUDA GPU, or the GPU memory above):
nothing was checked; 4 the run broke before giving an answer (an unexpected error, or the requests before
the boundary differ while those past it agree).
"""

from __future__ import annotations

import sys
import traceback

try:
    import torch
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)

BOUNDARY = 2**31
"""Elements of the draft rows past which a 32-bit signed offset wraps."""
VOCAB = 128_256
"""Llama 3's vocabulary: not a divisor of 2^31, so one row straddles the boundary."""
K = 8
"""Drafts per request."""
FOLLOW = 4
"""Requests after the one whose rows straddle the boundary."""
BONUS = 7
"""Every request's bonus token."""
FAULTS = ("illegal memory access", "Triton Error", "CUDA error", "misaligned address", "out of bounds")
"""What a kernel reading outside its tensors raises (at launch or at the next synchronisation)."""


def layout() -> tuple[int, int, int]:
    """``(first_past, batch, num_tokens)``: the request holding the row that straddles the boundary, the batch
    size and its draft rows."""
    straddling_row = BOUNDARY // VOCAB
    first_past = straddling_row // K
    batch = first_past + 1 + FOLLOW
    return first_past, batch, batch * K


def judged_tokens(first_past: int, batch: int) -> list[list[int]]:
    """The target token (and draft) of each position of the requests from ``first_past`` on: never 0, spread
    over the top quarter of the vocabulary (the straddling row's ids past the boundary included)."""
    return [[VOCAB - 1 - (7919 * (r * K + pos)) % (VOCAB // 4) for pos in range(K)]
            for r in range(batch - first_past)]


def bytes_needed(batch: int, num_tokens: int) -> int:
    """GPU bytes of the call: float16 logits, float32 target probabilities and draft_probs, float32
    exponentials and reciprocals ``[batch, VOCAB]``."""
    return num_tokens * VOCAB * (2 + 4 + 4) + 2 * batch * VOCAB * 4


def sampling_metadata(batch: int, device: str):
    from vllm.v1.sample.metadata import LogitsProcessors, SamplingMetadata
    zeros = torch.zeros(batch, dtype=torch.float32, device=device)
    return SamplingMetadata(
        temperature=torch.ones(batch, dtype=torch.float32, device=device), all_greedy=False, all_random=True,
        top_p=None, top_k=None, generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=zeros, presence_penalties=zeros, repetition_penalties=zeros + 1,
        output_token_ids=[[] for _ in range(batch)], allowed_token_ids_mask=None, bad_words_token_ids={},
        logitsprocs=LogitsProcessors())


def build(first_past: int, batch: int, num_tokens: int, device: str):
    """``(draft_token_ids, draft_probs, target_logits)``: every row one-hot (logit 0 on its token, -inf
    elsewhere; ``draft_probs`` 1 on the draft), token 0 before ``first_past``, the judged tokens after."""
    ids = torch.zeros(num_tokens, dtype=torch.int64, device=device)
    judged = torch.tensor(judged_tokens(first_past, batch), dtype=torch.int64, device=device).flatten()
    ids[first_past * K:] = judged
    rows = torch.arange(num_tokens, device=device)
    target_logits = torch.full((num_tokens, VOCAB), float("-inf"), dtype=torch.float16, device=device)
    target_logits[rows, ids] = 0.0
    draft_probs = torch.zeros((num_tokens, VOCAB), dtype=torch.float32, device=device)
    draft_probs[rows, ids] = 1.0
    return ids.to(torch.int32), draft_probs, target_logits


def expected_rows(first_past: int, batch: int) -> list[list[int]]:
    """The lossless answer: every draft accepted (probability 1), then the bonus token."""
    before = [[0] * K + [BONUS]] * first_past
    return before + [tokens + [BONUS] for tokens in judged_tokens(first_past, batch)]


def run_step(first_past: int, batch: int, num_tokens: int, device: str = "cuda") -> list[list[int]]:
    """V1's ``rejection_sample`` on the batch; its output rows, placeholders (-1) dropped."""
    from vllm.v1.sample.rejection_sampler import rejection_sample
    draft_token_ids, draft_probs, target_logits = build(first_past, batch, num_tokens, device)
    cu_num_draft_tokens = torch.arange(K, num_tokens + 1, K, dtype=torch.int32, device=device)
    bonus = torch.full((batch, 1), BONUS, dtype=torch.int32, device=device)
    out = rejection_sample(draft_token_ids, [K] * batch, K, cu_num_draft_tokens, draft_probs, target_logits,
                           bonus, sampling_metadata(batch, device))
    if device == "cuda":
        torch.cuda.synchronize()
    return [[t for t in row if t != -1] for row in out.cpu().tolist()]


def main() -> int:
    try:
        import vllm
        from vllm.v1.sample import rejection_sampler  # noqa: F401  (the module under test must import)
    except ImportError as missing:
        print(f"missing dependency: {missing}")
        return 3
    if not torch.cuda.is_available():
        print("missing dependency: a CUDA GPU (the kernels' 32-bit offsets wrap in compiled code; the batch "
              "holds 2^31-element tensors)")
        return 3
    first_past, batch, num_tokens = layout()
    need = bytes_needed(batch, num_tokens)
    free, _ = torch.cuda.mem_get_info()
    print(f"vllm {vllm.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    if free < need:
        print(f"missing dependency: {need / 2**30:.1f} GiB of free GPU memory (free: {free / 2**30:.1f} GiB)")
        return 3
    print(f"batch: {batch} requests of {K} drafts at V = {VOCAB} ({num_tokens} draft rows, "
          f"{num_tokens * VOCAB} elements); the draft rows cross 2^31 elements in request {first_past}")
    expected = expected_rows(first_past, batch)
    print(f"expected: requests {first_past}-{batch - 1} emit their 8 drafts and the bonus token, e.g. request "
          f"{first_past}: {expected[first_past]}")
    try:
        got = run_step(first_past, batch, num_tokens)
    except torch.cuda.OutOfMemoryError as e:
        print(f"missing dependency: GPU memory ({e})")
        return 3
    except RuntimeError as e:
        if not any(f in str(e) for f in FAULTS):
            raise
        print(f"got: the step faulted: {type(e).__name__}: {str(e).splitlines()[0]}")
        print("BUG: the rows past 2^31 elements are addressed with wrapped 32-bit offsets")
        return 1
    past = [r for r in range(first_past, batch) if got[r] != expected[r]]
    before = [r for r in range(first_past) if got[r] != expected[r]]
    for r in range(first_past, batch):
        print(f"got: request {r}: {got[r]}" + ("" if r not in past else "   <- differs"))
    print(f"requests before the boundary differing: {len(before)} of {first_past}")
    if past:
        print(f"BUG: {len(past)} of {batch - first_past} requests past 2^31 elements differ from the lossless answer")
        return 1
    if before:
        print("neither: the requests before the boundary differ, those past it agree")
        return 4
    print("ok: every request emits the lossless answer")
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception:   # neither the bug nor its absence: never exit 1
        traceback.print_exc()
        status = 4
    sys.exit(status)
