"""vLLM 0.33.0 (V1 model runner's ``RejectionSampler``): with a uniform draw of exactly 0, the rejection
sampler accepts a draft token whose target probability is 0 (masked to -inf, or removed by top-k/top-p)
and emits it. Probability: 2^-53 (about 1.1e-16) per draft.

The random-sampling kernel accepts when ``target_prob / draft_prob >= uniform_prob``
(vllm/v1/sample/rejection_sampler.py, ``rejection_random_sample_kernel``). Lossless rejection sampling
accepts with probability ``min(1, t/d)``, i.e. when ``u < t/d`` for u uniform on [0, 1): at ``u = 0``
the inclusive test accepts a token with ``t = 0``, which the target can never produce. ``torch.rand``
in float64 returns exactly 0 with probability 2^-53 per draft (the draw has been float64 since PR
#23803). The synthetic-acceptance branch of the same kernel already compares strictly
(``uniform_prob < rate``), and so does Model Runner V2's verifier; the fix is the one-line
``uniform_prob < target_prob / draft_prob``.

This script forces the draw to 0 (it replaces ``generate_uniform_probs``) to show the outcome.

Run (``pip install vllm==0.33.0``; a CUDA GPU, or Triton's interpreter with ``TRITON_INTERPRET=1``)::

    python vllm_zero_coin_accepts_masked_token.py

Exit status: 0 token 2 (target probability 0) rejected, the emitted token one of 0, 1, 3 (the lossless
answer); 1 the bug is present (vLLM 0.33.0 prints ``got: emitted [2, 0]``); 3 a dependency (vllm, torch)
is missing.
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
    # One request, one draft: token 2, drawn from a uniform draft distribution over V = 4.
    draft_token_ids = torch.tensor([2], dtype=torch.int32, device=device)
    draft_probs = torch.full((1, 4), 0.25, dtype=torch.float32, device=device)
    # The target row with token 2 masked (a bad word, or outside top-k): target probability exactly 0.
    target_logits = torch.tensor([[0.0, 0.0, float("-inf"), 0.0]], dtype=torch.float32, device=device)
    bonus = torch.tensor([[0]], dtype=torch.int32, device=device)
    # The uniform draw that hits 0 (probability 2^-53 per draft in vLLM's float64 torch.rand).
    rs.generate_uniform_probs = lambda num_tokens, *a, **k: torch.zeros(num_tokens, dtype=torch.float64,
                                                                          device=device)
    out = rs.rejection_sample(draft_token_ids, [1], 1, torch.tensor([1], dtype=torch.int32, device=device),
                              draft_probs, target_logits, bonus, metadata)
    emitted = [int(t) for t in out[0].tolist() if t != -1]
    print("expected: draft 2 (target probability 0) rejected; emitted [r] with r in {0, 1, 3}")
    print(f"got: emitted {emitted}")
    if emitted[0] == 2:
        print("BUG: token 2 has target probability 0 and was accepted (u = 0, inclusive comparison)")
        return 1
    print("ok: the masked draft was rejected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
