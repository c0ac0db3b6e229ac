"""vLLM 0.33.0 (V1 model runner's drafters, ``draft_sample_method="probabilistic"``): a seeded request's draft
tokens are drawn from torch's global generator, not from the request's own generator, so the same request with
the same ``SamplingParams.seed`` gets different drafts, hence different accepted tokens and a different output,
depending on what else the global generator was used for.

``compute_probs_and_sample_next_token`` (``vllm/v1/spec_decode/llm_base_proposer.py``, under
``# TODO(woosuk): Consider seeds.``) fills its exponential race noise with ``q.exponential_()``;
``sampling_metadata.generators`` (the request's ``torch.Generator``, which the target's sampler and the rejection
sampler use) is never read there. This script drafts 64 tokens for one request seeded 1234 over a uniform row of 8
tokens, twice, after ``torch.manual_seed(0)`` and after ``torch.manual_seed(1)``, and, as a control, draws from
vLLM's own non-speculative ``random_sample`` with that request's generator the same way.

Run (``pip install vllm==0.33.0``; CPU is enough)::

    python vllm_probabilistic_drafts_ignore_request_seed.py

Exit status: 0 the drafts are the same both times (the seed honoured); 1 they differ (vLLM 0.33.0 prints
``got: drafts differ at`` and how many of 64); 3 a dependency (vllm, torch) is missing.
"""

from __future__ import annotations

import sys

try:
    import torch
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)

STEPS, VOCAB, SEED = 64, 8, 1234


def metadata(SamplingMetadata, LogitsProcessors):
    """One random request at temperature 1 with its own generator, as the runner builds it for seed=SEED."""
    zeros = torch.zeros(1, dtype=torch.float32)
    return SamplingMetadata(
        temperature=torch.ones(1, dtype=torch.float32), all_greedy=False, all_random=True, top_p=None, top_k=None,
        generators={0: torch.Generator().manual_seed(SEED)}, max_num_logprobs=None, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=zeros, presence_penalties=zeros, repetition_penalties=zeros + 1,
        output_token_ids=[[]], allowed_token_ids_mask=None, bad_words_token_ids={}, logitsprocs=LogitsProcessors())


def drafts(sample, make_metadata, global_seed: int) -> list[int]:
    torch.manual_seed(global_seed)
    md = make_metadata()
    return [int(sample(torch.zeros(1, VOCAB), md)[0][0]) for _ in range(STEPS)]


def main() -> int:
    try:
        import vllm
        from vllm.v1.sample.metadata import LogitsProcessors, SamplingMetadata
        from vllm.v1.sample.ops.topk_topp_sampler import random_sample
        from vllm.v1.spec_decode.llm_base_proposer import compute_probs_and_sample_next_token
    except ImportError as missing:
        print(f"missing dependency: {missing}")
        return 3
    print(f"vllm {vllm.__version__}, torch {torch.__version__}")
    make = lambda: metadata(SamplingMetadata, LogitsProcessors)  # noqa: E731
    first, second = (drafts(compute_probs_and_sample_next_token, make, g) for g in (0, 1))

    def target_draws(global_seed: int) -> list[int]:
        torch.manual_seed(global_seed)
        generators = {0: torch.Generator().manual_seed(SEED)}
        return [int(random_sample(torch.full((1, VOCAB), 1 / VOCAB), generators)[0]) for _ in range(STEPS)]

    control = target_draws(0) == target_draws(1)
    print(f"expected: request seed {SEED} both times, so the same {STEPS} drafts whatever the global generator holds")
    print(f"control: vLLM's random_sample with the request's generator: "
          f"{'the same draws' if control else 'different draws'} after torch.manual_seed(0) and (1)")
    differ = [i for i, (a, b) in enumerate(zip(first, second)) if a != b]
    if differ:
        print(f"got: drafts differ at {len(differ)} of {STEPS} steps; first 8 after torch.manual_seed(0): "
              f"{first[:8]}, after torch.manual_seed(1): {second[:8]}")
        return 1
    print("ok: the drafts follow the request's seed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
