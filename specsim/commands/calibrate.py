"""``specsim calibrate``: are the statistical checks' p-values uniform for a correct device?

``--groups G1,G2`` calibrates whole conformance groups instead of L3's cases
(``specsim.campaign.groups``): each (group, suite seed, mode) is a shard, the
device as declared and behind ``BlackBox``; a correct device's exact false
fail fails the run, statistical ones are held to the family budget's binomial
bound, and each statistical case's detectable TV is reported.

The calibration is a campaign (``specsim.campaign``): every (suite seed, case,
shard) is one shard, so ``--executor processes --workers 16`` or ``--executor
ray`` spread hundreds of seeds over cores or machines, with the same result as
in this process. ``--out DIR`` keeps finished shards (``--resume``) and writes
``calibration.json``; ``--record FILE`` writes what the docs show of the run as a record of measured
figures (``specsim.figures.records``: the command, the CPU, the versions).
"""

from __future__ import annotations

import os
import sys

from specsim.campaign.calibration import summary
from specsim.figures.records import cpu_record
from specsim.conformance.run.runner import GROUPS

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
    p.add_argument("--groups", default=None, metavar="G1,G2",
                   help=f"comma-separated conformance groups (any of {', '.join(GROUPS)}): calibrate "
                        "them whole, each (group, seed, mode) a shard, instead of L3's cases")
    p.add_argument("--modes", default=None,
                   help="with --groups: comma-separated 'declared' (the device as it declares itself) and "
                        "'black-box' (no injected noise, a seeded RNG) (default both)")
    p.add_argument("--false-fail-level", type=float, default=None,
                   help="with --groups: fail when the seeds with a statistical false fail are this improbable "
                        "under the family budget (binomial; default 1e-3)")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="also write the run's tables as a record of measured figures (docs/results/NAME.json: "
                        "command, CPU, versions, date), which the docs render")
    add_executor_arguments(p)


def _fmt(x, spec: str = ".3g") -> str:
    return "—" if x is None else format(x, spec)


def _span(values, spec: str = ".3g") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    low, high = _fmt(min(values), spec), _fmt(max(values), spec)
    return low if low == high else f"{low}–{high}"


def _ks_rows(ks_by_mode: dict) -> list[list[str]]:
    return [[mode, str(k["p_values"]), f"{k['ks_statistic']:.4f}", f"{k['ks_p_value']:.3g}",
             *(f"{k['fraction_below'][a]:.3f}" for a in ("0.01", "0.05", "0.5"))] for mode, k in ks_by_mode.items()]


KS_COLUMNS = ["mode", "p-values", "KS D", "KS p", "P(p ≤ 0.01)", "P(p ≤ 0.05)", "P(p ≤ 0.5)"]


def groups_record(s: dict, args=None) -> dict:
    """The record of a ``--groups`` run: ``groups`` (a row per group and mode: its statistical checks, their
    α, n, detectable TV and the seeds they false-failed at), ``ks`` (per mode) and the false fails' counts."""
    by = {}
    for c in s["statistical_cases"]:
        by.setdefault((c["group"], c["mode"]), []).append(c)
    rows = [[group, mode, str(len(cs)), _span((c["alpha"] for c in cs), ".2g"),
             _span((c["n_min"] for c in cs), "d"),
             _span([c["detectable_tv_min"] for c in cs] + [c["detectable_tv_max"] for c in cs]),
             f"{len({f['seed'] for f in s['false_fails'] if f['group'] == group and f['mode'] == mode})} "
             f"of {s['seeds']} seeds"]
            for (group, mode), cs in sorted(by.items())]
    from specsim.campaign.groups import verdict_line
    record = cpu_record(args)
    record["tables"] = {
        "groups": {"columns": ["group", "mode", "statistical checks", "α each", "n", "detectable TV", "false fails"],
                   "rows": rows, "note": verdict_line(s) + "."},
        "ks": {"columns": KS_COLUMNS, "rows": _ks_rows(s["ks"])}}
    record["values"] = {"seeds": str(s["seeds"]), "first-seed": str(s["first_seed"]), "last-seed": str(s["last_seed"]),
                        "exact-false-fails": str(s["exact_false_fails"]),
                        "statistical-false-fails": str(s["statistical_false_fails"]),
                        "wall-seconds": str(s["run"]["wall_seconds"]), "worker-seconds": str(s["run"]["worker_seconds"])}
    return record


def l3_record(s: dict, run: dict, args=None) -> dict:
    """The record of an L3 calibration: ``ks`` (the pooled Cressie–Read p-values against U(0,1)) and the
    failing checks."""
    record = cpu_record(args)
    record["tables"] = {"ks": {
        "columns": ["suite seeds", *KS_COLUMNS[1:], "failing checks", "shards", "wall s"],
        "rows": [[str(s["seeds"]), *_ks_rows({"": s})[0][1:], f"{s['failing_checks']} in {s['seeds_with_a_failure']} seeds",
                  str(run["shards"]), str(run["wall_seconds"])]]}}
    record["values"] = {"seeds": str(s["seeds"]), "p-values": str(s["p_values"]),
                        "ks-statistic": f"{s['ks_statistic']:.4f}", "ks-p": f"{s['ks_p_value']:.3g}",
                        "failing-checks": str(s["failing_checks"]), "wall-seconds": str(run["wall_seconds"])}
    return record


def _group_usage(args) -> str | None:
    from specsim.campaign.groups import MODES
    from specsim.conformance.run.runner import GROUPS
    if args.groups is None:
        extra = [f for f, v in (("--modes", args.modes), ("--false-fail-level", args.false_fail_level))
                 if v is not None]
        return f"{', '.join(extra)} go with --groups" if extra else None
    unknown = set(args.groups.split(",")) - set(GROUPS)
    if unknown:
        return f"--groups: unknown {sorted(unknown)}; known: {list(GROUPS)}"
    modes = (args.modes or ",".join(MODES)).split(",")
    if set(modes) - set(MODES) or not modes:
        return f"--modes: must be among {', '.join(MODES)}, got {args.modes!r}"
    if args.cases or args.resume:
        return "--cases and --resume are L3's campaign's (without --groups)"
    if args.seeds < 1:
        return f"--seeds: must be >= 1, got {args.seeds}"
    if args.false_fail_level is not None and not 0 < args.false_fail_level < 1:
        return f"--false-fail-level: must be in (0, 1), got {args.false_fail_level}"
    return None


def run_groups(args) -> int:
    """``--groups``: exit 1 on an exact false fail (or an error), or statistical false fails beyond the bound."""
    from specsim.campaign import groups as cg
    from specsim.commands.campaign import executor_from
    from specsim.conformance.run.files import write_json_atomic
    groups = args.groups.split(",")
    modes = (args.modes or ",".join(cg.MODES)).split(",")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    level = cg.FALSE_FAIL_LEVEL if args.false_fail_level is None else args.false_fail_level
    s = cg.calibrate_groups(args.device, groups, seeds, modes, executor_from(args, args.device),
                            alpha_family=args.alpha, quick=args.quick, level=level, progress=True)
    text = cg.markdown(s, groups, args.device)
    print(text)
    r = s["run"]
    print(f"  run: {r['shards']} shards, {r['wall_seconds']}s wall, {r['worker_seconds']}s in workers, "
          f"executor {r['executor']} ({r.get('workers', '?')} workers)")
    if s["false_fails"]:
        print(f"specsim calibrate: {len(s['false_fails'])} FALSE FAILS of a correct device (listed above)",
              file=sys.stderr)
    if args.out:
        from reference import SPEC_VERSION
        command = ["specsim", *getattr(args, "argv", sys.argv[1:])]
        path = os.path.join(args.out, "calibration.json")
        write_json_atomic(path, {"spec_version": SPEC_VERSION, "device": args.device, "groups": groups,
                                 "first_seed": args.first_seed, "quick": args.quick, "alpha_family": args.alpha,
                                 "command": command, "summary": s})
        with open(os.path.join(args.out, "calibration.md"), "w") as f:
            f.write(f"`{' '.join(command)}`\n\n{text}\n")
        print(f"wrote {path}, {os.path.join(args.out, 'calibration.md')}")
    if args.record:
        from specsim.figures import records
        records.write(groups_record(s, args), args.record)
        print(f"wrote {args.record}")
    return 1 if s["exact_false_fails"] or s["exceeds_bound"] else 0


def run(args) -> int:
    from devices.registry import load
    from specsim.campaign.run import run_campaign
    from specsim.campaign.store import ResumeMismatch
    from specsim.commands.campaign import executor_from
    from specsim.conformance.run.files import write_json_atomic

    wrong = _group_usage(args)
    if wrong:
        print(f"specsim calibrate: {wrong}", file=sys.stderr)
        return 2
    if args.groups is not None:
        load(args.device)  # a device that cannot be loaded is exit 3 here, not in every shard
        return run_groups(args)
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
    if args.record:
        from specsim.figures import records
        records.write(l3_record(s, r, args), args.record)
        print(f"wrote {args.record}")
    return 0 if s["failing_checks"] == 0 else 1
