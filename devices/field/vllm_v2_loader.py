"""vLLM 0.33.0's Model Runner V2 verifier without vLLM: its modules out of the pinned wheel.

vLLM 0.33.0 runs Model Runner V2 (``vllm/v1/worker/gpu/``) unless a feature it
lacks is asked for. Its speculative verification is
``vllm.v1.worker.gpu.spec_decode.rejection_sampler.RejectionSampler``: the
runner calls it with the step's logits, its ``InputBatch`` and the drafter's
cached logits; ``_verify`` runs ``Sampler.apply_sampling_params`` (the
sampler's logits processors — allowed ids, logit bias and min_tokens, then
penalties, then bad words —, temperature, min_p, vLLM's top-k/top-p) and then
``rejection_sample`` (``rejection_sampler_utils.py``: Triton kernels for the
per-block statistics, the acceptance test ``log t > log u + log q``, the
recovered and bonus tokens by a Gumbel race). Its randomness is keyed, not
drawn from generators: the coin is ``tl.rand(seed, pos)`` and the race's noise
a murmur3 hash of ``(seed, pos, token)`` (``sample/gumbel.py``), ``seed`` the
request's and ``pos`` the logits row's token position.

Loaded the way ``vllm_loader`` loads the V1 runner's sampler: the members of
``vllm_loader.V2_PINNED`` (with the V1 members it shares: vLLM's top-k/top-p,
``torch_utils``' and ``math_utils``' helpers) from the same cache, each checked
against its pin and the wheel's ``RECORD`` on every load, executed over the
stand-ins of ``_vllm_standins.build_v2``; afterwards no ``vllm`` name is left
in ``sys.modules``. No vLLM code is in this repository.
"""

from __future__ import annotations

import threading
import types
from dataclasses import dataclass

from devices.field.vllm_loader import PARTS, VLLM_VERSION

V2_MODULES = [
    "vllm/utils/torch_utils.py",
    "vllm/utils/math_utils.py",
    "vllm/v1/sample/ops/topk_topp_triton.py",
    "vllm/v1/sample/ops/topk_topp_sampler.py",
    "vllm/v1/worker/gpu/buffer_utils.py",
    "vllm/v1/worker/gpu/states.py",
    "vllm/v1/worker/gpu/sample/gumbel.py",
    "vllm/v1/worker/gpu/sample/min_p.py",
    "vllm/v1/worker/gpu/sample/states.py",
    "vllm/v1/worker/gpu/sample/logits_processor/interface.py",
    "vllm/v1/worker/gpu/sample/logit_bias.py",
    "vllm/v1/worker/gpu/sample/penalties.py",
    "vllm/v1/worker/gpu/sample/bad_words.py",
    "vllm/v1/worker/gpu/sample/logprob.py",
    "vllm/v1/worker/gpu/sample/output.py",
    "vllm/v1/worker/gpu/sample/thinking_budget.py",
    "vllm/v1/worker/gpu/sample/sampler.py",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py",
]
"""The members executed for the V2 verifier, in dependency order."""

V2_PARTS: dict[str, tuple[str, ...]] = {
    "vllm/utils/torch_utils.py": PARTS["vllm/utils/torch_utils.py"],
    "vllm/utils/math_utils.py": ("cdiv",),
}
"""Members of which only these definitions run (as ``vllm_loader.PARTS``): ``async_tensor_h2d`` and its
neighbours, and ``cdiv`` (the penalties' packed prompt mask is ``cdiv(V, 32)`` words)."""


@dataclass(frozen=True)
class VllmV2:
    """The V2 verifier's modules, loaded. ``mode``: ``"cuda"`` or ``"cpu"`` (Triton's interpreter)."""

    version: str
    source: str
    mode: str
    rejection_sampler: types.ModuleType         # vllm.v1.worker.gpu.spec_decode.rejection_sampler
    rejection_sampler_utils: types.ModuleType   # ... .rejection_sampler_utils (rejection_sample)
    sampler: types.ModuleType                   # vllm.v1.worker.gpu.sample.sampler (Sampler)
    sample_states: types.ModuleType             # vllm.v1.worker.gpu.sample.states (NO_LOGPROBS)
    request_states: types.ModuleType            # vllm.v1.worker.gpu.states (RequestState)
    gumbel: types.ModuleType                    # vllm.v1.worker.gpu.sample.gumbel


_LOCK = threading.Lock()
_LOADED: dict[str, VllmV2] = {}


def load_v2_verifier(interpret: bool | None = None) -> VllmV2:
    """vLLM 0.33.0's Model Runner V2 verifier, compiled for the GPU (``interpret=False``) or under Triton's
    CPU interpreter (``interpret=True``); None: the interpreter unless CUDA is available. Cached per mode.

    Raises ``devices.field.vllm_loader.VllmLoadError`` (fetch, hash, Triton mode) with what to do.
    """
    import torch

    from devices.field import _vllm_standins as standins
    from devices.field.vllm_loader import _execute_members, enter_triton_mode, fetch
    if interpret is None:
        interpret = not torch.cuda.is_available()
    mode = "cpu" if interpret else "cuda"
    with _LOCK:
        if mode in _LOADED:
            return _LOADED[mode]
        enter_triton_mode("vllm-v2", interpret)
        cache = fetch()
        modules = _execute_members(cache, mode, members=V2_MODULES, parts=V2_PARTS, build=standins.build_v2)
        gpu = "vllm.v1.worker.gpu."
        loaded = VllmV2(
            version=VLLM_VERSION, source=f"vLLM {VLLM_VERSION} wheel members, sha256-pinned, cache {cache}",
            mode=mode, rejection_sampler=modules[gpu + "spec_decode.rejection_sampler"],
            rejection_sampler_utils=modules[gpu + "spec_decode.rejection_sampler_utils"],
            sampler=modules[gpu + "sample.sampler"], sample_states=modules[gpu + "sample.states"],
            request_states=modules[gpu + "states"], gumbel=modules[gpu + "sample.gumbel"])
        _LOADED[mode] = loaded
        return loaded
