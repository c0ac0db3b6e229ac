"""Minimal stand-ins for what vLLM's sampler modules import, so that those
modules — taken byte for byte out of the vLLM wheel by ``vllm_loader`` — run
without the rest of vLLM (GBs of CUDA packages).

Every stand-in is one of three kinds, and nothing else:

* **plumbing** that changes no sampling decision: a logger, the platform
  query (``current_platform``: CUDA when the kernels are compiled for a GPU,
  CPU under Triton's interpreter), ``HAS_TRITON = True`` (as on a CUDA host:
  the interpreter runs the same Triton kernels the GPU runs), the SM count,
  ``next_power_of_2``, a no-op ``gpu_sync_allowed``, ``PIN_MEMORY = False`` (host
  buffers unpinned), ``SamplerOutput``, and ``vllm.SamplingParams`` as a name only
  (the loaded members use it in annotations; the adapter hands the min-tokens
  processor an object with the three fields it reads);
* **vLLM's own fallback for a compiled op**: on a CUDA host vLLM's
  ``apply_repetition_penalties`` calls its compiled kernel
  (``torch.ops._C.apply_repetition_penalties_``, in ``vllm/_C.abi3.so``, which the
  loader does not take); here that call goes to vLLM's ``apply_repetition_penalties_torch``,
  the branch vLLM itself takes for CPU or non-contiguous logits;
* **the kernel launcher** ``triton_kernel_dispatcher_with_warmup``: vLLM's
  dispatch functions return ``(grid, launch kwargs)`` and the decorator binds
  the dispatch function's arguments to the kernel's parameters by name
  (``x`` → ``x``, ``x_ptr``, ``X`` or ``X_PTR``; ``X_STRIDE_0`` from the
  bound tensor's stride) and launches ``kernel[grid]``. That binding rule is
  re-stated here (``_bind``); JIT warm-up is not (``register_warmup`` is a
  no-op: warm-up only pre-compiles);
* **absent features**, which raise ``StandInError`` naming what is missing
  when called: FLy and synthetic verification, logprobs, the aiter/XPU/
  FlashInfer sampler back ends. The adapter never asks for them, so a call reaching one is a
  bug in the adapter, reported as such — never silently wrong.

``build_v2`` adds what the Model Runner V2 verifier's members import (``vllm_v2_loader``),
of the same kinds: plumbing (``vllm.envs`` values at their defaults in vLLM 0.33.0's
``envs.py``, ``MAX_LOGPROB_TOKEN_IDS`` at ``sampling_params.py``'s 128, annotation-only
names, ``tldevice`` as ``vllm.triton_utils`` binds it — under the interpreter, which has no
libdevice, its ``log1p`` as NumPy's: ``InterpreterLibdevice``); vLLM's own fallback for host
buffers without pinned memory (``is_uva_available()`` false, so ``buffer_utils`` takes
its ``NonUvaBuffer``: the same values, copied instead of mapped); and absent features
(watermarking — a Triton stand-in whose ``tl.static_assert`` fails the compilation of a
kernel that takes that branch —, trace replay, NaN counting, the runner's post-step
bookkeeping ``get_num_sampled_and_rejected``, UVA views of ``vllm._C``).
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import logging
import os
import sys
import types
from dataclasses import dataclass
from typing import Any


class StandInError(RuntimeError):
    """vLLM reached a feature the loader does not supply; the message names it."""


def _absent(what: str):
    def missing(*args, **kwargs):
        raise StandInError(f"vllm_loader stand-in: {what} is not part of the loaded sampler modules")
    missing.__name__ = what.replace(" ", "_")
    return missing


class _Logger(logging.LoggerAdapter):
    """vLLM's logger adds ``*_once`` methods; once per message is enough here."""

    def __init__(self, name: str):
        super().__init__(logging.getLogger(name), {})
        self._seen: set = set()

    def _once(self, level, msg, *args, **kwargs):
        kwargs.pop("scope", None)
        if (level, msg) not in self._seen:
            self._seen.add((level, msg))
            self.log(level, msg, *args, **kwargs)

    def info_once(self, msg, *args, **kwargs):
        self._once(logging.INFO, msg, *args, **kwargs)

    def warning_once(self, msg, *args, **kwargs):
        self._once(logging.WARNING, msg, *args, **kwargs)

    def debug_once(self, msg, *args, **kwargs):
        self._once(logging.DEBUG, msg, *args, **kwargs)


class CpuArchEnum(enum.Enum):
    X86 = enum.auto()
    ARM = enum.auto()
    POWERPC = enum.auto()
    RISCV = enum.auto()
    OTHER = enum.auto()


class _Platform:
    """``current_platform`` for one loading mode: ``"cuda"`` (compiled kernels) or ``"cpu"`` (interpreter)."""

    def __init__(self, kind: str):
        self.kind = kind

    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    def is_cuda_alike(self) -> bool:
        return self.kind == "cuda"

    def is_cpu(self) -> bool:
        return self.kind == "cpu"

    def is_rocm(self) -> bool:
        return False

    def is_xpu(self) -> bool:
        return False

    @property
    def device_type(self) -> str:
        return "cuda" if self.kind == "cuda" else "cpu"

    def get_cpu_architecture(self) -> CpuArchEnum:
        return CpuArchEnum.X86

    def num_compute_units(self, device_id: int | None = 0) -> int:
        if self.kind == "cuda":
            import torch
            return int(torch.cuda.get_device_properties(device_id or 0).multi_processor_count)
        return max(1, os.cpu_count() or 1)


def _bind(kernel_args: tuple[str, ...], inputs: dict[str, Any], launch: dict[str, Any]) -> dict[str, Any]:
    """vLLM's launch binding: each dispatch input goes to the kernel parameter spelled
    ``x``, ``x_ptr``, ``X`` or ``X_PTR`` (unless the dispatch set it), and a parameter
    ``X_STRIDE_N`` / ``x_stride_N`` not set otherwise gets the bound tensor's stride N.

    >>> class T:
    ...     def stride(self, dim): return 7
    >>> t = T()
    >>> sorted(_bind(("LOGITS", "LOGITS_STRIDE_0", "out_ptr", "N"), {"logits": t, "out": 1, "n": 3, "num_sm": 9},
    ...              {"N": 4}).items(), key=str)
    [('LOGITS', <...T object at ...>), ('LOGITS_STRIDE_0', 7), ('N', 4), ('out_ptr', 1)]
    """
    out = dict(launch)
    names = set(kernel_args)
    for name, value in inputs.items():
        for candidate in (name, f"{name}_ptr", name.upper(), f"{name}_ptr".upper()):
            if candidate in names:
                if candidate not in launch:
                    out[candidate] = value
                break
    for target in kernel_args:
        if target in out:
            continue
        base, sep, dim = target.rpartition("_stride")
        if not sep:
            base, sep, dim = target.rpartition("_STRIDE")
        dim = dim.removeprefix("_")
        if sep and (not dim or dim.isdigit()):
            source = base if base in out else (f"{base}_PTR" if sep == "_STRIDE" else f"{base}_ptr")
            if source in out:
                out[target] = out[source].stride(int(dim or 0))
    return out


class _Dispatcher:
    """``@triton_kernel_dispatcher_with_warmup(kernel=..., warmup_inputs=...)`` without the warm-up."""

    def __init__(self, kernel, dispatch):
        self.kernel, self.dispatch = kernel, dispatch
        self.signature = inspect.signature(dispatch)
        self.kernel_args = tuple(kernel.arg_names)
        self.__wrapped__ = dispatch
        self.__name__ = getattr(dispatch, "__name__", "dispatch")

    def register_warmup(self, *args, **kwargs) -> None:
        """Warm-up pre-compiles kernel variants; kernels compile on first use instead."""

    def __call__(self, *args, **kwargs):
        spec = self.dispatch(*args, **kwargs)
        grid, launch = spec[0], dict(spec[1])
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        self.kernel[grid](**_bind(self.kernel_args, dict(bound.arguments), launch))
        return spec[2] if len(spec) == 3 else None

    def __getitem__(self, grid):
        return self.kernel[grid]


def triton_kernel_dispatcher_with_warmup(*, warmup_inputs, kernel=None):
    if kernel is None:
        raise StandInError("vllm_loader stand-in: a dispatcher without a kernel= is not supported")
    return lambda dispatch: _Dispatcher(kernel, dispatch)


class _Placeholder:
    """Warm-up descriptions (``WarmupChoices``, ``TritonWarmupTensor``…): built, never used."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


@dataclass
class SamplerOutput:
    sampled_token_ids: Any
    logprobs_tensors: Any = None


def _module(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name, f"specsim stand-in for {name} (devices/field/_vllm_standins.py)")
    module.__dict__.update(attrs)
    module.__path__ = []   # any stand-in may be a package parent
    return module


def _envs() -> types.ModuleType:
    module = _module("vllm.envs", is_set=lambda name: False)

    def __getattr__(name):
        raise StandInError(f"vllm_loader stand-in: vllm.envs.{name} is read only by code paths the adapter "
                           "does not take (FlashInfer/XPU sampler selection)")
    module.__getattr__ = __getattr__
    return module


def build(platform: str) -> dict[str, types.ModuleType]:
    """Every stand-in module, by name, for ``platform`` ``"cuda"`` or ``"cpu"``."""
    import triton
    import triton.language as tl
    current = _Platform(platform)
    modules = [
        _module("vllm", SamplingParams=_Placeholder),
        _module("vllm.config"),
        _module("vllm.config.model", PROCESSED_LOGPROBS_MODES=("processed_logits", "processed_logprobs"),
                LogprobsMode=str),
        _envs(),
        _module("vllm._aiter_ops", rocm_aiter_ops=types.SimpleNamespace(is_enabled=lambda: False)),
        _module("vllm.logger", init_logger=_Logger),
        _module("vllm.platforms", current_platform=current, CpuArchEnum=CpuArchEnum),
        _module("vllm.platforms.interface", DeviceCapability=_Placeholder),
        _module("vllm.model_executor"),
        _module("vllm.model_executor.warmup"),
        _module("vllm.model_executor.warmup.jit_warmup", WarmupChoices=_Placeholder, WarmupIntRange=_Placeholder,
                _when=lambda *a, **k: None),
        _module("vllm.model_executor.warmup.jit_warmup_triton_helper", DispatchSpec=tuple,
                TritonWarmupTensor=_Placeholder, triton_kernel_dispatcher_with_warmup=triton_kernel_dispatcher_with_warmup),
        _module("vllm.triton_utils", HAS_TRITON=True, triton=triton, tl=tl),
        _module("vllm.utils"),
        _module("vllm.utils.torch_utils", PIN_MEMORY=False),   # + vLLM's own definitions (vllm_loader.PARTS)
        _custom_ops(platform),
        _module("vllm.model_executor.layers"),
        _module("vllm.utils.gpu_sync_debug", gpu_sync_allowed=contextlib.nullcontext),
        _module("vllm.utils.math_utils", next_power_of_2=lambda n: 1 if n <= 1 else 1 << (int(n) - 1).bit_length()),
        _module("vllm.utils.platform_utils", num_compute_units=current.num_compute_units),
        _module("vllm.v1"),
        _module("vllm.v1.outputs", SamplerOutput=SamplerOutput, LogprobsLists=_absent("LogprobsLists"),
                LogprobsTensors=_absent("LogprobsTensors")),
        _module("vllm.v1.sample"),
        _module("vllm.v1.sample.ops"),
        _module("vllm.v1.sample.ops.logprobs", batched_count_greater_than=_absent("logprobs")),
        _module("vllm.v1.sample.logits_processor"),   # LogitsProcessors: re-exported from its state member
        _module("vllm.v1.sample.thinking_budget_state", ThinkingBudgetStateHolder=_Placeholder),
        _module("vllm.v1.spec_decode"),
        _module("vllm.v1.spec_decode.fly", apply_fly_greedy_acceptance_kernel=_absent("FLy verification"),
                apply_fly_random_acceptance_kernel=_absent("FLy verification"),
                compute_fly_entropy=_absent("FLy verification")),
        _module("vllm.v1.spec_decode.utils", unconditional_to_conditional_rates=_absent("synthetic verification")),
    ]
    return {m.__name__: m for m in modules}


def _custom_ops(platform: str) -> types.ModuleType:
    """``vllm._custom_ops``: vLLM's repetition-penalty functions are executed into it (``vllm_loader.PARTS``);
    the compiled CUDA kernel's call goes to vLLM's own torch fallback (see the module docstring)."""
    module = _module("vllm._custom_ops")

    def apply_repetition_penalties_cuda(logits, prompt_mask, output_mask, repetition_penalties):
        module.apply_repetition_penalties_torch(logits, prompt_mask, output_mask, repetition_penalties)
    module.apply_repetition_penalties_cuda = apply_repetition_penalties_cuda
    return module


V2_ENVS = {"VLLM_COMPUTE_NANS_IN_LOGITS": False, "VLLM_MAX_NUM_BAD_WORDS": 128,
           "VLLM_MAX_BAD_WORDS_TOTAL_TOKENS": 1024, "VLLM_USE_FLASHINFER_SAMPLER": False}
"""``vllm.envs`` as the V2 runner's sampler reads it: the first three at their defaults (vLLM 0.33.0
``envs.py``, lines 115, 116 and 259). ``VLLM_USE_FLASHINFER_SAMPLER`` off: it only decides whether
``Sampler.sample`` may hand a step without drafts to FlashInfer's fused sampler, which vLLM does only when
no request carries an explicit seed (``fused_sampler_eligible``); every request the adapter builds carries
one, so the value changes no path taken, and no FlashInfer import is attempted."""


def _absent_class(what: str) -> type:
    class Absent:
        def __init__(self, *args, **kwargs):
            raise StandInError(f"vllm_loader stand-in: {what} is not part of the loaded modules")
    Absent.__name__ = what.replace(" ", "_")
    return Absent


def _watermark_argmax_stand_in():
    """``philox_gumbel_block_argmax`` (``vllm/v1/worker/gpu/sample/watermark.py``): referenced by
    ``_resample_kernel`` under ``if WATERMARK:`` (a ``tl.constexpr``), so Triton needs a JIT function by that
    name to compile the kernel; one that takes the branch fails to compile, naming watermarking."""
    import triton
    import triton.language as tl

    @triton.jit
    def philox_gumbel_block_argmax(residual_logits, mask, block_idx, contexts_ptr, key_0, key_1, CONTEXT_WIDTH,
                                   BLOCK_SIZE):
        tl.static_assert(False, "vllm_loader stand-in: watermarking is not part of the loaded verifier modules")
        return residual_logits, block_idx
    return philox_gumbel_block_argmax


class InterpreterLibdevice:
    """``tldevice`` (``triton.language.extra.libdevice``) under Triton's CPU interpreter, which has none: in
    Triton 3.6 its functions are stubs the compiler maps to the backend's library (CUDA's libdevice) and the
    interpreter leaves returning None. The one function the loaded kernels call, ``log1p``, is NumPy's
    ``log1p`` on the tensor's values, in their dtype (float32: within a few ulp of libdevice's ``__nv_log1pf``).
    Compiled kernels get the real module."""

    @staticmethod
    def log1p(x):
        import numpy as np
        from triton import language as tl
        from triton.runtime import interpreter
        data = x.handle.data
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log1p(data).astype(data.dtype, copy=False)
        return tl.core.tensor(interpreter.TensorHandle(out, x.handle.dtype), x.type)


def build_v2(platform: str) -> dict[str, types.ModuleType]:
    """``build(platform)`` plus what the Model Runner V2 verifier imports (see the module docstring)."""
    import triton.language.extra.libdevice as tldevice
    modules = build(platform)
    envs = modules["vllm.envs"]
    envs.__dict__.update(V2_ENVS)
    modules["vllm.triton_utils"].tldevice = tldevice if platform == "cuda" else InterpreterLibdevice()
    modules["vllm.config"].VllmConfig = _Placeholder
    modules["vllm.config"].SpeculativeConfig = _Placeholder
    modules["vllm.utils.platform_utils"].is_uva_available = lambda: False
    modules["vllm.utils.torch_utils"].get_accelerator_view_from_cpu_tensor = _absent("UVA views of vllm._C")
    modules["vllm.v1.outputs"].SamplingMaskLists = _absent("SamplingMaskLists")
    added = [
        _module("vllm.sampling_params", SamplingParams=_Placeholder, MAX_LOGPROB_TOKEN_IDS=128),
        _module("vllm.v1.watermarking"),
        _module("vllm.v1.watermarking.gpu_sampler", GPUWatermarkSampler=_absent_class("GPUWatermarkSampler")),
        _module("vllm.v1.worker"),
        _module("vllm.v1.worker.gpu"),
        _module("vllm.v1.worker.gpu.metrics"),
        _module("vllm.v1.worker.gpu.metrics.logits", get_num_nans=_absent("NaN counting")),
        _module("vllm.v1.worker.gpu.input_batch", InputBatch=_Placeholder,
                get_num_sampled_and_rejected=_absent("the runner's post-step bookkeeping")),
        _module("vllm.v1.worker.gpu.sample"),
        _module("vllm.v1.worker.gpu.sample.logits_processor"),   # re-exports from its interface member
        _module("vllm.v1.worker.gpu.sample.trace_replay", TraceReplayState=_absent_class("trace replay")),
        _module("vllm.v1.worker.gpu.sample.watermark", philox_gumbel_block_argmax=_watermark_argmax_stand_in()),
        _module("vllm.v1.worker.gpu.spec_decode"),
    ]
    modules.update({m.__name__: m for m in added})
    return modules


REEXPORTS = {"vllm.v1.sample.logits_processor.state": ("vllm.v1.sample.logits_processor", ("LogitsProcessors",)),
             "vllm.v1.worker.gpu.sample.logits_processor.interface": (
                 "vllm.v1.worker.gpu.sample.logits_processor",
                 ("LogitsContext", "LogitsProcessor", "LogitsProcRequestState"))}
"""Names a package's ``__init__`` re-exports from a member (the package itself is a stand-in)."""


def reexport(modules: dict[str, types.ModuleType], member: str) -> None:
    """After ``member`` executed: give its package the names its real ``__init__`` re-exports."""
    if member in REEXPORTS:
        package, names = REEXPORTS[member]
        for n in names:
            setattr(modules[package], n, getattr(modules[member], n))


def link_parents(modules: dict[str, types.ModuleType]) -> None:
    """``vllm.v1.sample`` as attribute ``sample`` of ``vllm.v1``, and so on (what ``import a.b`` sets)."""
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent in modules:
            setattr(modules[parent], child, module)


@contextlib.contextmanager
def installed(modules: dict[str, types.ModuleType]):
    """Put ``modules`` in ``sys.modules`` for the block (the wheel's members import from them), then
    restore whatever ``vllm*`` entries were there before: the stand-ins never outlive the loading."""
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for k in saved:
        del sys.modules[k]
    sys.modules.update(modules)
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
            del sys.modules[k]
        sys.modules.update(saved)
