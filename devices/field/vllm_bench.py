"""vLLM's rejection sampler as a step for ``specsim bench`` (same run, same inputs as the Triton rows).

``make_step()`` returns ``(call, label)``: ``call(x)`` runs vLLM 0.33.0's
``RejectionSampler.forward`` (its Triton kernels, compiled; the bonus row
through ``Sampler.sample``'s native path, see ``vllm_device``) on one input
dict of ``specsim.commands.bench.make_inputs`` — keys ``num_draft_tokens``
``[batch]``, ``draft_token_ids`` ``[num_tokens]``, ``draft_probs``
``[num_tokens, V]`` or None, ``target_logits`` ``[num_tokens + batch, V]``,
``temperature`` ``[batch]``, ``max_k``, ``mode``; all CUDA tensors — the way
vLLM's model runner calls it: the metadata (``SpecDecodeMetadata``,
``SamplingMetadata``) is built once per input set, as the runner builds it in
its input preparation, outside the sampler; requests are unseeded (no
per-request generators: vLLM then draws from the global CUDA generator, its
fast path). The time is the sampler's, with the bonus sample included.

On the GPU box (no network) the loader reads its pre-fetched members from
``SPECSIM_VLLM_CACHE`` (``python -m devices.field.vllm_loader fetch --cache DIR``
here, then carry DIR; see ``vllm_loader``).
"""

from __future__ import annotations


def make_step():
    """``(call, label)``; raises the loader's error where vLLM's sampler cannot be had."""
    import torch

    from devices.field.vllm_device import rejection_sampler, sampling_metadata, spec_decode_metadata
    from devices.field.vllm_loader import VLLM_VERSION, load_rejection_sampler
    if not torch.cuda.is_available():
        raise RuntimeError("vllm bench step: needs a CUDA GPU")
    vllm = load_rejection_sampler(interpret=False)
    sampler = rejection_sampler(vllm)
    prepared: dict[int, tuple] = {}   # id(x) -> (spec, metadata, x): built once per input set

    def prepare(x):
        temperature = x["temperature"].cpu().numpy()
        batch, vocab = len(temperature), int(x["target_logits"].shape[-1])
        spec = spec_decode_metadata(vllm, x["num_draft_tokens"], x["draft_token_ids"], "cuda")
        meta = sampling_metadata(vllm, temperature, [0] * batch, [1.0] * batch, vocab, {}, "cuda")
        return spec, meta, x

    def call(x):
        if id(x) not in prepared:
            prepared[id(x)] = prepare(x)
        spec, meta, _ = prepared[id(x)]
        return sampler(spec, x["draft_probs"], x["target_logits"], meta).sampled_token_ids

    return call, f"vllm {VLLM_VERSION} RejectionSampler (kernels from the pinned wheel)"
