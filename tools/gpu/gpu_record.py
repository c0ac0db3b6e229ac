"""The head of a record (``specsim.figures.records``) for a figure measured on a CUDA GPU by a script of
``tools/gpu/``: the command as typed, and the GPU and versions as ``specsim bench`` names them."""

from __future__ import annotations

import sys


def gpu_record(script: str) -> dict:
    """A new record naming ``python SCRIPT ARGS`` as its command and this process's GPU and versions."""
    import torch

    from specsim.bench.harness import environment
    from specsim.figures import records
    hardware, versions = environment(torch)
    return records.new_record(" ".join(["python", script, *sys.argv[1:]]), hardware, versions)
