"""vLLM 0.33.0 (V1 model runner's ``RejectionSampler``): when a rejected draft leaves an empty residual
(``max(target_probs - draft_probs, 0)`` zero everywhere), the recovered token is token 0, whatever the
target distribution holds: a token of target probability 0 is emitted.

``sample_recovered_tokens_kernel`` (vllm/v1/sample/rejection_sampler.py) starts from ``recovered_id = 0``
and keeps a tile's argmax only when its maximum beats the running one, which starts at ``-inf``: over an
all-zero residual the first tile's maximum, 0, wins, with its first index. Lossless rejection sampling
never reaches an empty residual in exact arithmetic (``target_probs <= draft_probs`` everywhere means the
two are equal and the draft is accepted); in float32 it does, when the draft row covers the target row:
here the target's filters leave one token (top-k = 1: its row is one-hot after the caller's
``apply_sampling_constraints``) and the drafter's float32 softmax rounds that token to exactly 1.0 while
it still gave the drafted token a probability of 9.4e-14. The draft is rejected (target probability 0);
the residual ``max(t - d, 0)`` is 0 everywhere; the only token the target allows is 2; vLLM emits 0.

Run (``pip install vllm==0.33.0``; a CUDA GPU, or Triton's interpreter with ``TRITON_INTERPRET=1``)::

    python vllm_empty_residual_emits_token_zero.py

Exit status: 0 the recovered token is 2 (the lossless answer: the only token of positive target
probability); 1 the bug is present (vLLM 0.33.0 prints ``got: emitted [0]``); 3 a dependency (vllm,
torch) is missing.
"""

from __future__ import annotations

import sys

try:
    import torch
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)


def main() -> int:
    try:
        import vllm
        from vllm.v1.sample import rejection_sampler as rs
        from vllm.v1.sample.metadata import LogitsProcessors, SamplingMetadata
    except ImportError as missing:
        print(f"missing dependency: {missing}")
        return 3
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"vllm {vllm.__version__}, device {device}")
    zeros = torch.zeros(1, dtype=torch.float32, device=device)
    metadata = SamplingMetadata(
        temperature=torch.ones(1, dtype=torch.float32, device=device), all_greedy=False, all_random=True,
        top_p=None, top_k=None, generators={}, max_num_logprobs=None, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=zeros, presence_penalties=zeros, repetition_penalties=zeros + 1, output_token_ids=[[]],
        allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors())
    # The drafter's row over V = 4: float32 softmax of [-30, -30, 0, -30] = [9.4e-14, 9.4e-14, 1.0, 9.4e-14];
    # it drew token 3 (probability 9.4e-14).
    draft_probs = torch.tensor([[-30.0, -30.0, 0.0, -30.0]], device=device).softmax(dim=-1, dtype=torch.float32)
    draft_token_ids = torch.tensor([3], dtype=torch.int32, device=device)
    # The target row after top-k = 1 (its logits were [0, 0, 5, 0]): token 2 alone, probability 1.
    target_logits = torch.tensor([[float("-inf"), float("-inf"), 5.0, float("-inf")]], device=device)
    bonus = torch.tensor([[0]], dtype=torch.int32, device=device)
    print(f"draft_probs[2] == 1.0: {bool(draft_probs[0, 2] == 1.0)}; residual max(t - d, 0): "
          f"{torch.clamp(target_logits.softmax(dim=-1) - draft_probs, min=0).tolist()[0]}")
    out = rs.rejection_sample(draft_token_ids, [1], 1, torch.tensor([1], dtype=torch.int32, device=device),
                              draft_probs, target_logits, bonus, metadata)
    emitted = [int(t) for t in out[0].tolist() if t != -1]
    print("expected: draft 3 (target probability 0) rejected; recovered token 2, the only token the target allows")
    print(f"got: emitted {emitted}")
    if emitted != [2]:
        print(f"BUG: emitted {emitted}: the residual is empty and the recovered token is not drawn from the target "
              "(token 0 has target probability 0)")
        return 1
    print("ok: the empty residual fell back to the target distribution")
    return 0


if __name__ == "__main__":
    sys.exit(main())
