"""Compile every Triton kernel vLLM 0.33.0's Model Runner V2 verifier launches, for sm_90, without a GPU.

The ``vllm-v2`` device runs V2's kernels compiled on a CUDA GPU; on a machine without one this checks that
they compile as the adapter launches them — the stand-ins included (``_vllm_standins.build_v2``: the
watermark kernel's stand-in must not fire in a kernel that does not take that branch; ``tldevice`` is
Triton's libdevice). The verifier is driven as the device drives it, on host tensors, with every launch
intercepted: ``triton.compile`` gets the launch's own argument types and constexprs for
``GPUTarget("cuda", 90, 32)``, and nothing runs (the outputs stay unwritten). A batch with every served
mode — greedy and sampled rows, top-k, top-p, draft probabilities and point proposals, every SPEC §12
parameter served — and a step without drafts (``Sampler.sample``). Prints each kernel compiled::

    python tools/vllm_v2_ptx.py

Needs a process in Triton's compiled mode (``TRITON_INTERPRET`` unset) and vLLM's pinned members
(``python -m devices.field.vllm_loader fetch``).
"""

from __future__ import annotations

import os
import sys
import time
import types

import numpy as np

TARGET = ("cuda", 90, 32)
SMS = 132
"""The H100's SM count, for the launch grids that read it (vLLM's top-k/top-p)."""


def _standins(platform: str):
    """``build_v2``'s stand-ins with host buffers (nothing is launched) and an H100's SM count."""
    from devices.field import _vllm_standins as standins
    modules = standins.build_v2(platform)
    current = modules["vllm.platforms"].current_platform
    current.__class__ = type("HostPlatform", (type(current),), {"device_type": "cpu",
                                                                 "num_compute_units": lambda self, d=0: SMS})
    modules["vllm.utils.platform_utils"].num_compute_units = lambda device_id=0: SMS
    return modules


def _signature(kernel, args: tuple, kwargs: dict) -> tuple[dict, dict]:
    """``triton.compile``'s signature and constexprs for one launch of ``kernel``."""
    import torch
    codes = {torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16",
             torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "u8",
             torch.bool: "i1"}
    bound = dict(zip(kernel.arg_names, args)) | {k: v for k, v in kwargs.items() if k in kernel.arg_names}
    signature, constexprs = {}, {}
    for i, (name, param) in enumerate(zip(kernel.arg_names, kernel.params)):
        value = bound.get(name, param.default)
        if param.is_constexpr or value is None:
            signature[name], constexprs[(i,)] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = "*" + codes[value.dtype]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -2**31 <= value < 2**31 else "i64"
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"{kernel.__name__}: argument {name} of type {type(value).__name__}")
    return signature, constexprs


def compile_launches() -> dict[str, float]:
    """Drive the verifier on host tensors; each distinct launch compiled once. Returns kernel → seconds."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction
    done: dict[tuple, float] = {}

    def compile_instead(self, *args, grid, warmup, **kwargs):
        signature, constexprs = _signature(self, args, kwargs)
        key = (self.__name__, tuple(sorted(signature.items())), repr(sorted(constexprs.items())))
        if key not in done:
            start = time.time()
            triton.compile(ASTSource(fn=self, signature=signature, constexprs=constexprs), target=GPUTarget(*TARGET))
            done[key] = time.time() - start
            print(f"compiled {self.__name__} ({done[key]:.1f} s)", flush=True)
    JITFunction.run = compile_instead

    import torch

    from devices.field import vllm_v2_device as v2dev
    from devices.field.vllm_loader import _execute_members, fetch
    from devices.field.vllm_v2_loader import V2_MODULES, V2_PARTS
    from devices.protocol import SamplerParams, VerifyBatch
    gpu = "vllm.v1.worker.gpu."
    modules = _execute_members(fetch(), "cuda", members=V2_MODULES, parts=V2_PARTS, build=_standins)
    v2 = types.SimpleNamespace(request_states=modules[gpu + "states"], sampler=modules[gpu + "sample.sampler"],
                               rejection_sampler=modules[gpu + "spec_decode.rejection_sampler"],
                               sample_states=modules[gpu + "sample.states"])
    rng = np.random.default_rng(0)
    k, V = np.array([2, 1, 3]), 64
    n = int(k.sum())
    each = lambda x: (x,) * 3  # noqa: E731
    batch = VerifyBatch(k, rng.integers(0, V, n), rng.dirichlet(np.ones(V), n).astype(np.float32),
                        rng.normal(size=(n + 3, V)).astype(np.float32), np.array([0.0, 0.7, 1.3]), np.array([0, 5, 0]),
                        np.array([1.0, 1.0, 0.8]), np.array([1, 2, 3], np.uint64), np.array([4, 5, 6]),
                        SamplerParams(prompt_token_ids=each(np.array([1, 2])), output_token_ids=each(np.array([3])),
                                      bad_words=each((np.array([3, 4]),)), allowed_token_ids=(None, np.arange(40), None),
                                      min_tokens=np.array([3, 0, 2]), stop_token_ids=each(np.array([7])),
                                      repetition_penalty=np.array([1.2, 1.0, 1.0]),
                                      frequency_penalty=np.array([0.1, 0.0, 0.0]),
                                      presence_penalty=np.array([0.0, 0.2, 0.0])))
    for b in (batch, VerifyBatch(**{**batch.__dict__, "draft_probs": None})):
        layout = v2dev.Layout(b)
        runner = v2dev._Runner(v2, b, layout, "cpu")
        inputs = runner.input_batch(layout, "cpu")
        logits, pos = torch.as_tensor(b.target_logits), torch.as_tensor(layout.positions())
        ids = torch.as_tensor(layout.input_ids())
        runner.rejection_sampler._verify_in_chunks(
            logits, inputs, v2dev.draft_logits(b, layout, runner.slots, "cpu"), ids, pos,
            v2.rejection_sampler.get_max_chunk_logits(V), v2.sample_states.NO_LOGPROBS, ids)
        runner.sampler.sample(logits, inputs.expanded_idx_mapping, inputs.idx_mapping, inputs.idx_mapping_np, pos,
                              ids, inputs.expanded_local_pos, inputs.seq_lens_cpu_upper_bound.numpy())
    return {key[0]: seconds for key, seconds in done.items()}


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("vllm_v2_ptx: TRITON_INTERPRET=1 is set; compiling needs Triton's compiled mode", file=sys.stderr)
        return 2
    kernels = compile_launches()
    print(f"{len(kernels)} kernels compiled for sm_{TARGET[1]}: {', '.join(sorted(kernels))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
