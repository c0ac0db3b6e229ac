"""``specsim calibrate``: are the statistical checks' p-values uniform for a correct device?

The calibration is a campaign (``specsim.campaign``): every (suite seed, case,
shard) is one shard, so ``--executor processes --workers 16`` or ``--executor
ray`` spread hundreds of seeds over cores or machines, with the same result as
in this process. ``--out DIR`` keeps finished shards (``--resume``) and writes
``calibration.json``.
"""

from __future__ import annotations

import os
import sys

HELP = "rerun the statistical layer of a correct device over N fresh suite seeds and KS-test its p-values for uniformity"


def add_arguments(p):
    from specsim.commands.campaign import add_executor_arguments
    p.add_argument("--device", default="torch", help="a correct device (default: torch)")
    p.add_argument("--seeds", type=int, default=5, help="number of fresh suite seeds (default 5)")
    p.add_argument("--first-seed", type=int, default=1_000_000, help="first suite seed (default 1000000)")
    p.add_argument("--quick", action="store_true", help="small L3 sizes (faster, same calibration question)")
    p.add_argument("--cases", default=None, help="comma-separated case ids (default: all)")
    p.add_argument("--alpha", type=float, default=1e-3, help="family false-fail budget (default 1e-3)")
    p.add_argument("--out", default=None, help="directory for calibration.json and the shards")
    p.add_argument("--resume", action="store_true", help="continue the calibration campaign in --out DIR")
    add_executor_arguments(p)


def calibrated_p_values(results) -> list[float]:
    """The p-values that should be U(0,1) under the null: asymptotic CR tests with >= 2 cells.

    A one-cell test (p = 1 by construction) and the DKWM bound (conservative
    by design) are not meant to be uniform.
    """
    return [r.p_value for r in results if r.p_value is not None and r.extra.get("df", 0) >= 1
            and "Cressie" in r.extra.get("test", "")]


def summary(results_by_seed: dict, alpha_family: float) -> dict:
    """KS of the pooled p-values against U(0,1), the fractions below 0.01..0.5, failing checks per seed."""
    import numpy as np
    from scipy import stats as st
    p = np.array([x for rs in results_by_seed.values() for x in calibrated_p_values(rs)])
    ks = st.kstest(p, "uniform")
    fails = {s: sum(r.status == "fail" for r in rs) for s, rs in results_by_seed.items()}
    return {"seeds": len(results_by_seed), "p_values": int(p.size), "ks_statistic": float(ks.statistic),
            "ks_p_value": float(ks.pvalue), "fraction_below": {str(a): float(np.mean(p <= a)) for a in (0.01, 0.05, 0.1, 0.5)},
            "failing_checks": int(sum(fails.values())), "seeds_with_a_failure": int(sum(f > 0 for f in fails.values())),
            "expected_seeds_with_a_failure_at_most": len(results_by_seed) * alpha_family,
            "smallest_p_per_seed": {str(s): float(min(calibrated_p_values(rs), default=1.0))
                                    for s, rs in results_by_seed.items()}}


def run(args) -> int:
    from devices.registry import load
    from specsim.campaign.run import run_campaign
    from specsim.campaign.store import ResumeMismatch
    from specsim.commands.campaign import executor_from
    from specsim.conformance.runner import write_json_atomic

    device = load(args.device)
    cases = args.cases.split(",") if args.cases else None
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    try:
        out = run_campaign(args.device, seeds, executor_from(args, args.device), alpha_family=args.alpha,
                           quick=args.quick, cases=cases, out_dir=args.out, resume=args.resume)
    except ResumeMismatch as e:
        print(f"specsim calibrate: {e}", file=sys.stderr)
        return 2
    s = summary(out.results, args.alpha)
    print(f"calibration of {device.name}: {s['p_values']} p-values over {s['seeds']} suite seeds"
          f"{' (quick sizes)' if args.quick else ''}")
    print(f"  KS against U(0,1): D = {s['ks_statistic']:.4f}, p = {s['ks_p_value']:.3g}")
    print("  fraction p <= a: " + ", ".join(f"a={a}: {v:.3f}" for a, v in s["fraction_below"].items()))
    print(f"  failing checks: {s['failing_checks']} in {s['seeds_with_a_failure']} seeds "
          f"(expected under the budget: <= {s['expected_seeds_with_a_failure_at_most']:.3g} seeds)")
    r = out.run
    print(f"  campaign: {r['shards']} shards, {r['trials']} trials, {r['wall_seconds']}s wall, "
          f"{r['worker_seconds']}s in workers, executor {r['executor']} ({r.get('workers', '?')} workers)")
    if args.out:
        path = os.path.join(args.out, "calibration.json")
        from reference import SPEC_VERSION
        write_json_atomic(path, {"spec_version": SPEC_VERSION, "device": args.device, "first_seed": args.first_seed, "quick": args.quick,
                                 "alpha_family": args.alpha, "cases": cases, "command": list(sys.argv),
                                 "summary": s, "run": r})
        print(f"wrote {path}")
    return 0 if s["failing_checks"] == 0 else 1
