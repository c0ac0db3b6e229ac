"""Hashes of the sm_90 PTX of the Triton step's kernels in a checkout, compiled without a GPU.

A change that adds a constexpr-guarded feature to ``devices/triton_kernels.py`` (``SAMPLER``,
``CUT``) claims the step without it compiles to the same code. This checks the claim on any
machine with the triton wheel: ``triton.compile`` of ``stats_kernel`` and ``step_kernel`` (every form and
path of the plain step with and without programmatic dependent launch, the cut's and the fused §12 launch:
``launches``) for
``GPUTarget("cuda", 90, 32)``, the PTX less its debug and line-table lines (which move with the
source), hashed. Run it in two checkouts and compare:

    python tools/triton_ptx.py                 # this checkout
    python tools/triton_ptx.py /path/to/other  # another (its devices/triton_kernels.py)
    python tools/triton_ptx.py --show "step_kernel draft keyed PDL"   # one launch's PTX
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys

DEBUG = re.compile(r"\s*(\.loc|\.file|//|\$L__|\.section|\.b8|\.b32)|.*debug")
POINTERS = dict(cu_ptr="*i64", draft_ids_ptr="*i64", draft_probs_ptr="*fp32", logits_ptr="*fp32", temp_ptr="*fp64",
                seeds_ptr="*i64", positions_ptr="*i64", uniforms_ptr="*fp32", exponentials_ptr="*fp32",
                stat_max_ptr="*fp32", stat_sum_ptr="*fp32", stat_arg_ptr="*i32", counter_ptr="*i32",
                best_w_ptr="*fp32", best_w_id_ptr="*i32", best_t_ptr="*fp32", best_t_id_ptr="*i32",
                out_ptr="*i64", num_accepted_ptr="*i64", V="i32", OUT_WIDTH="i32", STAT_NCHUNK="i32", CHUNK="i32",
                RACE_NCHUNK="i32", NCHUNK="i32")
SAMPLER_POINTERS = dict(live_ptr="*i32", bias_ptr="*fp32", edit_start_ptr="*i64", edit_tok_ptr="*i32",
                        edit_z_ptr="*fp32", draft_edit_ptr="*i64", bias_max_ptr="*fp32", W="i32")
CONSTANTS = dict(TILES=32, BLOCK=2048, FP64=False, HAS_DRAFT=True, KEYED=True, BLOCK_K=8, BLOCK_C=4, BLOCK_R=256,
                 BOUND=True, EBLOCK=64, SAMPLER=False, HAS_BIAS=False, W=1, CUT=False)
"""The launches' constexprs (the anchor, 256 × 4 × 128256); an argument not named here is None."""


def launches() -> dict:
    """``{label: (kernel name, pointer types, constexpr values)}`` of the launches compared: the statistics pass
    in each form ``triton_device.stats_form`` picks (32-bit tiles, 16-bit rows, lane-wise, float64; with and
    without a cut; the plain 32-bit one with programmatic dependent launch, either trigger), and the step with and
    without draft probabilities, keyed or injected, with and without a cut and §12 (the plain ones with and without
    programmatic dependent launch)."""
    out = {}
    sixteen = dict(POINTERS, logits_ptr="*bf16")
    wide = dict(POINTERS, logits_ptr="*fp64", stat_max_ptr="*fp64", stat_sum_ptr="*fp64")
    for label, pointers, form in (("32-bit", POINTERS, dict(SUB=4)), ("16-bit rows", sixteen, dict(SUB=8, ROWS=True)),
                                  ("lane-wise", POINTERS, dict(SUB=1)), ("float64", wide, dict(SUB=4, FP64=True))):
        for cut in (False, True):
            out[f"stats_kernel {label}{' CUT' if cut else ''}"] = (
                "stats_kernel", dict(pointers, cut_ptr=pointers["stat_max_ptr"]) if cut else pointers,
                {**CONSTANTS, "CUT": cut, "ROWS": False, **form})
    for early in (False, True):  # the plain step on sm_90: programmatic dependent launch
        out[f"stats_kernel 32-bit PDL{' early' if early else ''}"] = (
            "stats_kernel", POINTERS, {**CONSTANTS, "CUT": False, "ROWS": False, "SUB": 4, "PDL": True,
                                       "PDL_EARLY": early})
    race = dict(CONSTANTS, TILES=1, BLOCK=512)
    for draft in (True, False):
        for keyed in (True, False):
            for cut in (False, True):
                for sampler in (False, True):
                    pointers = {**POINTERS, **(SAMPLER_POINTERS if sampler else {}),
                                **({"cut_ptr": "*fp32"} if cut else {})}
                    constants = dict(race, HAS_DRAFT=draft, KEYED=keyed, CUT=cut, SAMPLER=sampler, HAS_BIAS=sampler)
                    if sampler:
                        del constants["W"]
                    label = " ".join(["draft" if draft else "point", "keyed" if keyed else "injected"]
                                     + ["CUT"] * cut + ["SAMPLER"] * sampler)
                    out[f"step_kernel {label}"] = ("step_kernel", pointers, constants)
                    if not (cut or sampler):
                        out[f"step_kernel {label} PDL"] = ("step_kernel", pointers, dict(constants, PDL=True))
    return out


def ptx_hash(kernel, pointers: dict, constants: dict) -> str:
    """The first 16 hex digits of the sha256 of ``kernel``'s sm_90 PTX without debug lines."""
    return hashlib.sha256(ptx_text(kernel, pointers, constants).encode()).hexdigest()[:16]


def ptx_text(kernel, pointers: dict, constants: dict) -> str:
    """``kernel``'s sm_90 PTX for ``pointers``' types and ``constants``, without its debug lines."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    signature, constexprs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in pointers:
            signature[name] = pointers[name]
        else:
            signature[name] = "constexpr"
            constexprs[(i,)] = constants.get(name)
    compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                              target=GPUTarget("cuda", 90, 32))
    return "\n".join(line for line in compiled.asm["ptx"].splitlines() if not DEBUG.match(line))


def main(argv=None) -> int:
    """``[CHECKOUT]``: every launch's hash; ``--show LABEL [CHECKOUT]``: that launch's PTX."""
    argv = sys.argv[1:] if argv is None else argv
    show = None
    if argv[:1] == ["--show"]:
        show, argv = argv[1], argv[2:]
    root = os.path.abspath(argv[0] if argv else os.getcwd())
    os.environ["TRITON_INTERPRET"] = "0"
    spec = importlib.util.spec_from_file_location("triton_kernels_ptx", os.path.join(root, "devices/triton_kernels.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    every = launches()
    if show is not None:
        if show not in every:
            print(f"--show: {show!r} is no launch; the launches are: {', '.join(every)}", file=sys.stderr)
            return 2
        name, pointers, constants = every[show]
        print(ptx_text(getattr(module, name), pointers, constants))
        return 0
    for label, (name, pointers, constants) in every.items():
        print(f"{label:36s} {ptx_hash(getattr(module, name), pointers, constants)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
