"""vLLM 0.33.0 (V1 model runner's ``RejectionSampler``): a speculative step draws from the global torch
generator although every request in the batch carries its own seeded generator. A performance note, not
a correctness bug: no request's tokens depend on those draws, and unseeded requests promise no
reproducibility.

``generate_uniform_probs`` fills the whole batch's uniforms with ``torch.rand`` (float64, 8 bytes per
draft token) from the global generator and ``sample_recovered_tokens`` the whole ``[batch, V]``
exponential noise with ``q.exponential_()`` (float32, 4 bytes per vocabulary entry and request: about
32.8 MB per step at 64 requests and V = 128256), then both overwrite the seeded requests' entries from
their own generators. vLLM's non-speculative ``random_sample`` skips the global fill when every request
has a generator (``if len(generators) != probs.shape[0]``).

Run (``pip install vllm==0.33.0``; a CUDA GPU, or Triton's interpreter with ``TRITON_INTERPRET=1``)::

    python vllm_global_rng_consumed_with_every_request_seeded.py

Exit status: 0 the global generator unchanged by both calls; 1 ``rejection_sample`` advanced it (vLLM
0.33.0 prints ``rejection_sample: global generator advanced``); 3 a dependency (vllm, torch) is missing.
"""

from __future__ import annotations

import sys

try:
    import torch
except ImportError as missing:   # exit 3, never 1: a missing dependency is not the bug
    print(f"missing dependency: {missing}")
    sys.exit(3)


def global_state(device: str) -> torch.Tensor:
    return torch.cuda.get_rng_state() if device == "cuda" else torch.get_rng_state()


def main() -> int:
    try:
        import vllm
        from vllm.v1.sample import rejection_sampler as rs
        from vllm.v1.sample.metadata import LogitsProcessors, SamplingMetadata
        from vllm.v1.sample.ops.topk_topp_sampler import random_sample
    except ImportError as missing:
        print(f"missing dependency: {missing}")
        return 3
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"vllm {vllm.__version__}, device {device}")
    generators = {0: torch.Generator(device=device).manual_seed(1234)}   # the batch's one request, seeded
    zeros = torch.zeros(1, dtype=torch.float32, device=device)
    metadata = SamplingMetadata(
        temperature=torch.ones(1, dtype=torch.float32, device=device), all_greedy=False, all_random=True,
        top_p=None, top_k=None, generators=generators, max_num_logprobs=None, no_penalties=True,
        prompt_token_ids=None, frequency_penalties=zeros, presence_penalties=zeros,
        repetition_penalties=zeros + 1, output_token_ids=[[]], allowed_token_ids_mask=None,
        bad_words_token_ids={}, logitsprocs=LogitsProcessors())
    probs = torch.full((1, 4), 0.25, dtype=torch.float32, device=device)

    before = global_state(device)
    random_sample(probs.clone(), generators)                          # vLLM's non-speculative sampler
    plain_advanced = not torch.equal(before, global_state(device))
    before = global_state(device)
    rs.rejection_sample(torch.tensor([2], dtype=torch.int32, device=device), [1], 1,
                        torch.tensor([1], dtype=torch.int32, device=device), probs.clone(),
                        torch.zeros(1, 4, dtype=torch.float32, device=device),
                        torch.tensor([[0]], dtype=torch.int32, device=device), metadata)
    spec_advanced = not torch.equal(before, global_state(device))

    print("expected: every request seeded, so neither call draws from the global generator")
    for name, advanced in (("random_sample", plain_advanced), ("rejection_sample", spec_advanced)):
        print(f"got: {name}: global generator {'advanced' if advanced else 'unchanged'}")
    if spec_advanced:
        print("observed: the rejection sampler drew from the global generator with every request seeded "
              "(work whose result is overwritten)")
        return 1
    print("ok: the global generator is untouched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
