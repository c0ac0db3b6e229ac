"""False fails of the exact size checks: ``L1-sizes`` and ``L2-sizes`` at full sizes on correct devices
over N fresh suite seeds. Every check not passing is a false fail (the checks have no α: only float
rounding beyond SPEC §9's near-tie allowances can fail a correct device).

    python tools/sizes_calibration.py [DEVICE[,DEVICE...]] [N] [--record FILE]   # default: torch 30

Prints one summary line per device, then each check that did not pass (seed, name, status, detail).
``--record FILE`` writes the summary as a record of measured figures (``specsim.figures.records``:
table ``devices``: device, suite seeds, checks, not passing), which docs/statistics.md renders.
"""

from __future__ import annotations

import argparse
import sys
import time

from devices.registry import load
from specsim.conformance.run.runner import Context, run_group

FIRST_SEED = 1_000_000  # the fresh seeds specsim calibrate starts at


def calibrate(device_name: str, seeds: int) -> tuple[list, int, float]:
    """(checks not passing as (seed, name, status, detail), checks run, seconds) of one device."""
    device = load(device_name)
    fails, checks, start = [], 0, time.time()
    for seed in range(FIRST_SEED, FIRST_SEED + seeds):
        for group in ("L1-sizes", "L2-sizes"):
            for result in run_group(group, device, Context(seed=seed)):
                checks += 1
                if result.status != "pass":
                    fails.append((seed, result.name, result.status, result.detail[:200]))
    return fails, checks, time.time() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("devices", nargs="?", default="torch", help="comma-separated devices (default: torch)")
    p.add_argument("seeds", nargs="?", type=int, default=30, help="fresh suite seeds from 1000000 (default 30)")
    p.add_argument("--record", default=None, metavar="FILE", help="write the summary as a record of measured figures")
    args = p.parse_args(argv)
    rows, failed = [], False
    for name in args.devices.split(","):
        fails, checks, seconds = calibrate(name, args.seeds)
        failed |= bool(fails)
        print(f"{name}: {args.seeds} suite seeds from {FIRST_SEED}, {checks} checks, {len(fails)} not passing, "
              f"{seconds:.0f} s")
        for fail in fails:
            print(*fail)
        rows.append([f"`{name}`", f"{FIRST_SEED}–{FIRST_SEED + args.seeds - 1}", str(checks), str(len(fails))])
    if args.record:
        from specsim.figures.records import cpu_record
        from specsim.figures import records
        record = cpu_record()
        record["command"] = " ".join(["python tools/sizes_calibration.py", *sys.argv[1:]])
        record["tables"] = {"devices": {"columns": ["device", "suite seeds", "checks", "not passing"], "rows": rows}}
        records.write(record, args.record)
        print(f"wrote {args.record}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
