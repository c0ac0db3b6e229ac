"""``specsim campaign``: the statistical layer (or the sign-off profile) as shards, on any executor.

The shards of every case are pure functions of (suite seed, case, index) and
merge by exact addition, so the verdict is the one ``specsim conform`` gives
for the same seed, whether the shards ran here, in local processes or on a
Ray cluster. ``--out DIR`` keeps each finished shard; ``--resume`` continues
an interrupted campaign without redoing them.
"""

from __future__ import annotations

import os
import sys

HELP = "run the L3 statistical layer (or the sign-off profile) as shards: in-process, local processes or Ray"

EPILOG = """\
profiles:
  suite    the L3 cases of `specsim conform` (the default)
  signoff  worst-case TV <= 0.02 per position at V = 128256 and 151936 (specsim.campaign.tasks.SIGNOFF_CASES)

files written with --out DIR:
  DIR/conformance.json            the L3 results and how the campaign ran ("run")
  DIR/report.html, report.md      the report (its provenance says where and how the shards ran)
  DIR/shards/campaign.json        the campaign's key (what --resume checks) and, when complete, its run
  DIR/shards/<seed>/<case>/<i>.json one finished shard (integer counts)

exit status: 0 every check passed; 1 a check failed; 2 bad usage or a --resume of another campaign;
3 the device could not be loaded; 4 the estimate after the first shards exceeded --max-hours
"""


def add_executor_arguments(p) -> None:
    """``--executor``, ``--workers``, ``--ray-address``, ``--gpu``/``--cpu``: shared with ``specsim calibrate``."""
    from specsim.campaign.executors import EXECUTORS
    p.add_argument("--executor", default="inprocess", choices=EXECUTORS,
                   help="where shards run (default inprocess)")
    p.add_argument("--workers", type=int, default=None,
                   help="processes / local Ray CPUs (default: cores, or one per GPU with --gpu)")
    p.add_argument("--ray-address", default=None, help="a running Ray cluster (default: ray.init() here)")
    p.add_argument("--gpu", dest="gpu", action="store_true", default=None,
                   help="one GPU per worker (default for torch-cuda and triton)")
    p.add_argument("--cpu", dest="gpu", action="store_false", help="one core per worker")


def executor_from(args, device_spec: str):
    from specsim.campaign.executors import make_executor
    gpu = args.gpu if args.gpu is not None else device_spec in ("torch-cuda", "triton")
    return make_executor(args.executor, args.workers, args.ray_address, gpu)


def add_arguments(p):
    import argparse
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--device", default="torch", help="registered name or 'module:attr' (default: torch)")
    p.add_argument("--profile", default="suite", choices=("suite", "signoff"))
    p.add_argument("--seed", type=int, default=0, help="suite seed (default 0)")
    p.add_argument("--alpha", type=float, default=1e-3, help="family false-fail budget")
    p.add_argument("--quick", action="store_true", help="small sizes; for testing the harness, not for a verdict")
    p.add_argument("--cases", default=None, help="comma-separated case ids (default: all of the profile)")
    p.add_argument("--out", default=None, help="directory for conformance.json and the shards")
    p.add_argument("--resume", action="store_true", help="continue the campaign in --out DIR")
    p.add_argument("--no-report", action="store_true", help="with --out, write conformance.json only")
    p.add_argument("--shard-trials", type=int, default=None,
                   help="trials per shard (default specsim.conformance.stats.shards.SHARD_TRIALS); part of the draw")
    p.add_argument("--max-hours", type=float, default=None,
                   help="stop after the first shards if the estimate for the rest exceeds this")
    add_executor_arguments(p)


def run(args) -> int:
    from devices.registry import load
    from specsim.campaign.run import OverBudget, run_campaign
    from specsim.campaign.store import ResumeMismatch
    from specsim.commands.conform import conform_table
    from specsim.conformance.run.runner import Context
    from specsim.conformance.run.document import document
    from specsim.conformance.run.files import write_json_atomic

    if args.resume and not args.out:
        print("specsim campaign: --resume needs --out DIR", file=sys.stderr)
        return 2
    device = load(args.device)
    executor = executor_from(args, args.device)
    cases = args.cases.split(",") if args.cases else None
    try:
        out = run_campaign(args.device, [args.seed], executor, profile=args.profile, alpha_family=args.alpha,
                           quick=args.quick, cases=cases, out_dir=args.out, resume=args.resume,
                           max_hours=args.max_hours, shard_trials=args.shard_trials)
    except ResumeMismatch as e:
        print(f"specsim campaign: {e}", file=sys.stderr)
        return 2
    except OverBudget as e:
        print(f"specsim campaign: {e}", file=sys.stderr)
        return 4
    results = out.results[args.seed]
    from specsim.campaign.tasks import statistical_plan_for
    doc = document(args.device, device, Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick), results,
                   ["L3-statistical"],
                   plan=statistical_plan_for(args.device, args.profile, args.alpha, args.quick, args.seed))
    doc["run"] = {**out.run, "complete": True, "command": list(sys.argv), "finished_groups": ["L3-statistical"]}
    print(conform_table(results))
    s, r = doc["summary"], out.run
    print(f"\n{device.name}: {s['pass']} pass, {s['fail']} fail, {s['not_supported']} not supported, {s['error']} error")
    print(f"campaign: {r['shards']} shards ({r['shards_resumed']} resumed), {r['trials']} trials, "
          f"{r['wall_seconds']}s wall, {r['worker_seconds']}s in workers, executor {r['executor']}")
    print("projection from these shard times (LPT schedule; not measured): "
          + ", ".join(f"{n} worker(s) {t}s" for n, t in r["projection_wall_seconds"].items()))
    if args.out:
        path = os.path.join(args.out, "conformance.json")
        write_json_atomic(path, doc)
        print(f"wrote {path}")
        if not args.no_report:
            from specsim.commands.conform import write_reports
            write_reports(args.out)
    return 0 if doc["passed"] else 1
