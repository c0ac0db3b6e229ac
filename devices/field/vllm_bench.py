"""vLLM's rejection sampler as a step for ``specsim bench`` (same run, same inputs as the Triton rows).

``make_step()`` returns ``(call, label)``: ``call(x)`` runs vLLM 0.33.0's
``RejectionSampler.forward`` (its Triton kernels, compiled; the bonus row
through ``Sampler.sample``'s native path, see ``vllm_device``) on one input
dict of ``specsim.bench.workloads.make_inputs`` — keys ``num_draft_tokens``
``[batch]``, ``draft_token_ids`` ``[num_tokens]``, ``draft_probs``
``[num_tokens, V]`` or None, ``target_logits`` ``[num_tokens + batch, V]``,
``temperature`` ``[batch]``, ``max_k``, ``mode``; all CUDA tensors — the way
vLLM's model runner calls it: the metadata (``SpecDecodeMetadata``,
``SamplingMetadata``) is built once per input set, as the runner builds it in
its input preparation, outside the sampler; requests are unseeded (no
per-request generators: vLLM then draws from the global CUDA generator, its
fast path). The time is the sampler's, with the bonus sample included.

**What the ``vllm`` row includes** (``RejectionSampler.forward``, what vLLM runs
per speculative step): the bonus rows gathered (``logits[bonus_logits_indices]``)
and sampled (float32 cast, temperature, softmax, an exponential ``[batch, V]``,
argmax); the target rows gathered and cast to float32 and *cloned* (kept raw for
logprobs, its default ``raw_logprobs`` mode); ``apply_sampling_constraints``
(temperature expanded per token and divided in); then ``rejection_sample``
(float64 uniforms, a float32 softmax of every target row, an exponential
``[batch, V]`` and the recovered-token kernel, the acceptance kernel). About
six passes over ``[batch·(K+1), V]`` float32 against the project step's one.

``make_rejection_sample_step()`` times ``rejection_sample`` alone: the target rows already gathered,
processed and float32, the bonus tokens already drawn — not a step an engine
can run by itself, but the kernels' share of it.

On a machine without network the loader reads its pre-fetched members from
``SPECSIM_VLLM_CACHE`` (``python -m devices.field.vllm_loader fetch --cache DIR``
on a machine with network, then copy DIR over; see ``vllm_loader``).
"""

from __future__ import annotations


def _load(device: str):
    import torch

    from devices.field.vllm_loader import load_rejection_sampler
    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("vllm bench step: needs a CUDA GPU")
    return load_rejection_sampler(interpret=device == "cpu")


def make_step(device: str = "cuda", top_k: int = 0, top_p: float = 1.0, sampler=None):
    """``(call, label)``; raises the loader's error where vLLM's sampler cannot be had. ``device="cpu"``: the
    same call under Triton's interpreter (for a test of the glue, not for timing). ``top_k``, ``top_p``: every
    request's (0, 1: off), applied by vLLM's own ``apply_sampling_constraints``. ``sampler``: ``x →
    SamplerParams`` (SPEC §12) or None; vLLM gets the parameters it serves with speculative decoding
    (``vllm_device.served_only``: no token mask, bias or min_p), its metadata built once per input set
    (``sampler_fields``, as ``InputBatch`` keeps it), its processors run inside the timed call."""
    from devices.field.vllm_device import (rejection_sampler, sampler_fields, sampling_metadata, served_only,
                                           spec_decode_metadata)
    from devices.field.vllm_loader import VLLM_VERSION
    params_of = sampler              # the name is the API's; below, ``sampler`` is vLLM's RejectionSampler
    vllm = _load(device)
    sampler = rejection_sampler(vllm)
    prepared: dict[int, tuple] = {}   # id(x) -> (spec, metadata, x): built once per input set

    def prepare(x):
        temperature = x["temperature"].cpu().numpy()
        batch, vocab = len(temperature), int(x["target_logits"].shape[-1])
        spec = spec_decode_metadata(vllm, x["num_draft_tokens"], x["draft_token_ids"], device)
        fields = {} if params_of is None else sampler_fields(
            vllm, served_only(params_of(x)), x["num_draft_tokens"].cpu().numpy(), x["draft_token_ids"].cpu().numpy(),
            vocab, device)
        meta = sampling_metadata(vllm, temperature, [top_k] * batch, [top_p] * batch, vocab, {}, device, **fields)
        return spec, meta, x

    def call(x):
        if id(x) not in prepared:
            prepared[id(x)] = prepare(x)
        spec, meta, _ = prepared[id(x)]
        return sampler(spec, x["draft_probs"], x["target_logits"], meta).sampled_token_ids

    return call, (f"vllm {VLLM_VERSION} RejectionSampler (kernels from the pinned wheel)"
                  + ("" if params_of is None else "; §12: penalties, bad words, allowed ids, min_tokens"))


def make_rejection_sample_step(device: str = "cuda"):
    """``(call, label)``: vLLM's ``rejection_sample`` function alone (see the module docstring)."""
    import torch

    from devices.field.vllm_device import rejection_sampler, sampling_metadata, spec_decode_metadata
    from devices.field.vllm_loader import VLLM_VERSION
    vllm = _load(device)
    rs, sampler = vllm.rejection_sampler, rejection_sampler(vllm)
    prepared: dict[int, tuple] = {}   # id(x) -> (spec, metadata, target_logits, bonus_token_ids, x)

    def prepare(x):
        temperature = x["temperature"].cpu().numpy()
        batch, vocab = len(temperature), int(x["target_logits"].shape[-1])
        spec = spec_decode_metadata(vllm, x["num_draft_tokens"], x["draft_token_ids"], device)
        meta = sampling_metadata(vllm, temperature, [0] * batch, [1.0] * batch, vocab, {}, device)
        bonus = sampler.sampler(logits=x["target_logits"][spec.bonus_logits_indices],
                                sampling_metadata=meta).sampled_token_ids
        target = rs.apply_sampling_constraints(x["target_logits"][spec.target_logits_indices].to(torch.float32),
                                               spec.cu_num_draft_tokens, meta)
        return spec, meta, target, bonus, x

    def call(x):
        if id(x) not in prepared:
            prepared[id(x)] = prepare(x)
        spec, meta, target, bonus, _ = prepared[id(x)]
        return rs.rejection_sample(spec.draft_token_ids, spec.num_draft_tokens, spec.max_spec_len,
                                   spec.cu_num_draft_tokens, x["draft_probs"], target, bonus, meta)

    return call, f"vllm {VLLM_VERSION} rejection_sample alone (target rows processed, bonus drawn, outside)"
