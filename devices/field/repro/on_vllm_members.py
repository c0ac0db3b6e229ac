"""Run one of the vLLM reproductions beside this file where vLLM is not installed: on vLLM 0.33.0's own
sampler modules, taken byte for byte out of the pinned wheel (``devices.field.vllm_loader``).

The reproductions are written against an installed vLLM (``import vllm``, ``from vllm.v1.sample ...``)
and import nothing of specsim. This runner puts the loader's members and stand-ins in ``sys.modules``
under their ``vllm.*`` names for the script's run, so the same file runs unchanged: on a GPU with the
compiled kernels, elsewhere in Triton's CPU interpreter. With vLLM 0.33.0 installed it runs the script
as it is. The exit status is the script's (1: the deviation is present)::

    python -m devices.field.repro.on_vllm_members devices/field/repro/vllm_zero_coin_accepts_masked_token.py
"""

from __future__ import annotations

import runpy
import sys
import traceback

MISSING_DEPENDENCY = 3
RUN_FAILED = 4


def run(script: str, args: list[str]) -> None:
    """Run ``script`` as ``__main__`` with ``args``; raises the script's ``SystemExit``."""
    import torch

    from devices import triton_mode
    from devices.field import _vllm_standins as standins
    from devices.field import vllm_loader
    sys.argv = [script, *args]
    if vllm_loader._installed_vllm():
        runpy.run_path(script, run_name="__main__")
        return
    interpret = not torch.cuda.is_available()
    triton_mode.enter(interpret, "vllm reproduction")
    if interpret:
        vllm_loader.interpreter_scalars_as_compiled()
    modules = vllm_loader.member_modules("cpu" if interpret else "cuda")
    modules["vllm"].__version__ = vllm_loader.VLLM_VERSION
    add_draft_sampler(modules, interpret)
    print(f"(vllm not installed: {vllm_loader.WHEEL_FILENAME}'s members, sha256-pinned, "
          f"{'Triton interpreter' if interpret else 'compiled kernels'})", flush=True)
    with standins.installed(modules):
        runpy.run_path(script, run_name="__main__")


def add_draft_sampler(modules: dict, interpret: bool) -> None:
    """``vllm.v1.spec_decode.llm_base_proposer`` holding only ``compute_probs_and_sample_next_token``, out of the
    pinned member (``devices.field.vllm_drafter``); left out when the member cannot be fetched, so a script that
    imports it exits 3 (a missing dependency), never 1."""
    import types

    from devices.field import vllm_drafter, vllm_loader
    try:
        sample, _ = vllm_drafter.load_draft_sampler(interpret=interpret)
    except vllm_loader.VllmLoadError as e:
        print(f"(vllm's drafter member unavailable: {e})", flush=True)
        return
    name = "vllm.v1.spec_decode.llm_base_proposer"
    module = types.ModuleType(name)
    module.compute_probs_and_sample_next_token = sample
    modules[name] = module


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m devices.field.repro.on_vllm_members SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    try:
        run(argv[0], argv[1:])
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except ImportError as e:   # Triton or torch absent: nothing was checked, never the bug's exit 1
        print(f"missing dependency: {e}", file=sys.stderr)
        return MISSING_DEPENDENCY
    except Exception:          # the run broke before giving an answer: neither the bug nor its absence
        traceback.print_exc()
        return RUN_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
