"""What several tests share, made once per test process: a quick run of a conformance group against the torch
device (or its black-box twin), and a zoo mutant of the torch device.

Several tests read the same quick results (the recorded check names, every group's names mapping back to it, the
L1-sampler group's black-box edges): each reads them through ``quick_group``, so a test process runs a group once
however many of its tests ask. ``zoo_mutant`` builds a mutant's edited modules once.
"""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def quick_group(group: str, black_box: bool = False) -> tuple:
    """``run_group(group, torch, Context(quick=True))``'s results (``black_box``: through ``BlackBox``), read-only."""
    from devices.registry import load
    from specsim.conformance.core.black_box import BlackBox
    from specsim.conformance.run.runner import Context, run_group
    device = BlackBox(load("torch")) if black_box else load("torch")
    return tuple(run_group(group, device, Context(quick=True)))


@functools.lru_cache(maxsize=None)
def zoo_mutant(mutant_id: str):
    """``specsim.mutants.zoo``'s mutant ``mutant_id`` of the torch device."""
    from devices.registry import load
    from specsim.mutants.zoo import make_mutant
    return make_mutant(load("torch"), mutant_id)
