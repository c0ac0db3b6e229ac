"""``specsim calibrate``: are the statistical checks' p-values uniform for a correct device?"""

from __future__ import annotations

import sys

HELP = "rerun the statistical layer of a correct device over N fresh suite seeds and KS-test its p-values for uniformity"


def add_arguments(p):
    p.add_argument("--device", default="torch", help="a correct device (default: torch)")
    p.add_argument("--seeds", type=int, default=5, help="number of fresh suite seeds (default 5)")
    p.add_argument("--first-seed", type=int, default=1_000_000, help="first suite seed (default 1000000)")
    p.add_argument("--quick", action="store_true", help="small L3 sizes (faster, same calibration question)")
    p.add_argument("--cases", default=None, help="comma-separated case ids (default: all)")


def run(args) -> int:
    import numpy as np
    from scipy import stats as st

    from devices.registry import load
    from specsim.conformance.runner import Context
    from specsim.conformance.statistical import statistical_group

    device = load(args.device)
    cases = args.cases.split(",") if args.cases else None
    p_values, fails, smallest = [], 0, []
    for s in range(args.first_seed, args.first_seed + args.seeds):
        results = statistical_group(device, Context(seed=s, quick=args.quick), cases=cases)
        # asymptotic CR tests with >= 2 cells; a one-cell test (p = 1 by construction) and the DKWM bound
        # (conservative by design) are not meant to be uniform
        ps = [r.p_value for r in results if r.p_value is not None and r.extra.get("df", 0) >= 1
              and "Cressie" in r.extra.get("test", "")]
        fails += sum(r.status == "fail" for r in results)
        smallest.append(min(ps))
        p_values += ps
        print(f"  seed {s}: {len(ps)} p-values, min {min(ps):.3g}, "
              f"{sum(r.status == 'fail' for r in results)} fail", file=sys.stderr, flush=True)
    p = np.array(p_values)
    ks = st.kstest(p, "uniform")
    below = {a: float(np.mean(p <= a)) for a in (0.01, 0.05, 0.1, 0.5)}
    print(f"calibration of {device.name}: {len(p)} p-values over {args.seeds} suite seeds"
          f"{' (quick sizes)' if args.quick else ''}")
    print(f"  KS against U(0,1): D = {ks.statistic:.4f}, p = {ks.pvalue:.3g}")
    print("  fraction p <= a: " + ", ".join(f"a={a}: {v:.3f}" for a, v in below.items()))
    print(f"  failing checks: {fails} (expected under the budget: <= {args.seeds} x alpha_family)")
    print(f"  smallest p per seed: {', '.join(f'{x:.2g}' for x in smallest)}")
    return 0 if fails == 0 else 1
