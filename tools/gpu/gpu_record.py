"""The head of a record (``specsim.figures.records``) for a figure measured on a CUDA GPU by a script of
``tools/gpu/``: the command as typed, the GPU's name, and the torch, Triton, CUDA and driver versions."""

from __future__ import annotations

import subprocess
import sys


def driver_version() -> str:
    """The NVIDIA driver's version as ``nvidia-smi`` reports it; ``"unknown"`` where it cannot be asked."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.splitlines()[0].strip() if out.strip() else "unknown"


def gpu_record(script: str) -> dict:
    """A new record naming ``python SCRIPT ARGS`` as its command and this process's GPU and versions."""
    import torch
    import triton

    from specsim.figures import records
    versions = {"torch": torch.__version__, "triton": triton.__version__, "CUDA": str(torch.version.cuda),
                "driver": driver_version()}
    return records.new_record(" ".join(["python", script, *sys.argv[1:]]), torch.cuda.get_device_name(0), versions)
