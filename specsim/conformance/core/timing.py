"""``python -m <a group's module>``: a few check functions run on one device, each timed (wall and CPU).

The cost figures a group's docstring and docs/statistics.md state come from these commands.
"""

from __future__ import annotations

import argparse
import time


def timed_main(prog: str, description: str, parts: dict, argv=None) -> int:
    """Parse ``[--device torch] [--quick] [--threads 1]``, run each of ``parts`` (name → ``f(device, ctx)``
    returning results), print every result that did not pass, then a line per part: checks, passes, wall, CPU."""
    import torch

    from devices.registry import load
    from specsim.conformance.core.context import Context
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--device", default="torch")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device, ctx = load(args.device), Context(quick=args.quick)
    for name, run in parts.items():
        start, cpu = time.perf_counter(), time.process_time()
        results = run(device, ctx)
        took, used = time.perf_counter() - start, time.process_time() - cpu
        for r in results:
            if r.status != "pass":
                print(f"  {r.status:13} {r.name}: {r.detail[:300]}")
        print(f"{name}: {len(results)} checks, {sum(r.status == 'pass' for r in results)} pass, "
              f"{took:.1f} s wall, {used:.1f} s CPU")
    return 0
