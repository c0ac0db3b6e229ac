"""vLLM 0.33.0 (V1 model runner's ``RejectionSampler``): a speculative step advances the global torch
generator although every request in the batch carries its own seeded generator.

``generate_uniform_probs`` fills the whole batch's uniforms with ``torch.rand`` from the global generator
and ``sample_recovered_tokens`` the whole ``[batch, V]`` exponential noise with ``q.exponential_()``,
then both overwrite the seeded requests' entries from their own generators
(vllm/v1/sample/rejection_sampler.py). vLLM's non-speculative sampler does not do this:
``random_sample`` (vllm/v1/sample/ops/topk_topp_sampler.py) skips the global fill when every request has
a generator (``if len(generators) != probs.shape[0]``). So with speculative decoding each step consumes
the global stream that unseeded requests draw from, also when no request of the step reads it: an
unseeded request's tokens then depend on how many seeded-only speculative steps ran before it. The seeded
requests' own tokens are unaffected. Fix: fill from the global generator only the requests without one
(or skip the fill when every drafted request has one, as ``random_sample`` does).

Run (a CUDA GPU and ``pip install vllm==0.33.0``; nothing else)::

    python vllm_global_rng_consumed_with_every_request_seeded.py

Expected: the global generator's state unchanged by both calls (exit 0). vLLM 0.33.0 prints
``rejection_sample: global generator advanced`` and exits 1; ``random_sample`` leaves it unchanged.
"""

from __future__ import annotations

import sys

import torch


def global_state(device: str) -> torch.Tensor:
    return torch.cuda.get_rng_state() if device == "cuda" else torch.get_rng_state()


def main() -> int:
    import vllm
    from vllm.v1.sample import rejection_sampler as rs
    from vllm.v1.sample.metadata import LogitsProcessors, SamplingMetadata
    from vllm.v1.sample.ops.topk_topp_sampler import random_sample
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
        print("BUG: the rejection sampler consumed the global stream with every request seeded")
        return 1
    print("ok: the global generator is untouched")
    return 0


if __name__ == "__main__":
    sys.exit(main())
