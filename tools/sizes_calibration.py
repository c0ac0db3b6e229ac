"""False fails of the exact size checks: ``L1-sizes`` and ``L2-sizes`` at full sizes on a correct
device over N fresh suite seeds. Every check not passing is a false fail (the checks have no α:
only float rounding beyond SPEC §9's waivers can fail a correct device).

    python tools/sizes_calibration.py [DEVICE] [N]      # default: torch 30

Prints one summary line, then each check that did not pass (seed, name, status, detail).
"""

from __future__ import annotations

import sys
import time

from devices.registry import load
from specsim.conformance.runner import Context, run_group

FIRST_SEED = 1_000_000  # the fresh seeds specsim calibrate starts at


def main(device_name: str = "torch", seeds: int = 30) -> int:
    device = load(device_name)
    fails, checks, start = [], 0, time.time()
    for seed in range(FIRST_SEED, FIRST_SEED + seeds):
        for group in ("L1-sizes", "L2-sizes"):
            for result in run_group(group, device, Context(seed=seed)):
                checks += 1
                if result.status != "pass":
                    fails.append((seed, result.name, result.status, result.detail[:200]))
    print(f"{device.name}: {seeds} suite seeds from {FIRST_SEED}, {checks} checks, {len(fails)} not passing, "
          f"{time.time() - start:.0f} s")
    for fail in fails:
        print(*fail)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(*(sys.argv[1:2] or ["torch"]), *map(int, sys.argv[2:3])))
