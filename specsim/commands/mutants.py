"""``specsim mutants``: run the conformance suite against the mutant zoo and the correct devices."""

from __future__ import annotations

import os
import sys

HELP = "run the conformance suite against every mutant (each must be killed) and every correct built-in device (each must pass)"


def add_arguments(p):
    p.add_argument("--out", default=None, help="directory for mutants.json")
    p.add_argument("--base", default="torch", help="the correct device the mutants wrap (default: torch)")
    p.add_argument("--seed", type=int, default=0, help="suite seed (default 0)")
    p.add_argument("--alpha", type=float, default=1e-3, help="family false-fail budget of the statistical layer")
    p.add_argument("--quick", action="store_true", help="small L3 sizes (tests of the harness, not a verdict)")
    p.add_argument("--black-box", action="store_true",
                   help="also hide each mutant's injected noise and Philox replay, so only L2/L3/input rules can kill it")
    p.add_argument("--only", default=None, help="comma-separated mutant ids (default: all)")
    p.add_argument("--skip-correct", action="store_true", help="do not run the correct built-in devices")
    from specsim.commands.campaign import add_executor_arguments
    add_executor_arguments(p)   # each mutant (and correct device) is one shard


def _table(rows) -> str:
    head = ("mutant", "modelled bug", "killed", "first killing check", "evidence")
    rows = [head] + rows
    w = [min(max(len(str(r[i])) for r in rows), cap) for i, cap in zip(range(4), (26, 60, 8, 48))]
    return "\n".join(f"{str(a)[:w[0]]:<{w[0]}}  {str(b)[:w[1]]:<{w[1]}}  {str(c):<{w[2]}}  {str(d)[:w[3]]:<{w[3]}}  {e}"
                     for a, b, c, d, e in rows)


def _line(r: dict) -> str:
    killer = (r["killer"] or {}).get("name", "-")
    return f"{'killed by ' + killer if r['killed'] else 'SURVIVED'} ({r['seconds']:.1f}s)"


def run(args) -> int:
    from devices.registry import EMULATED, is_field, load, survey
    from specsim.commands.campaign import executor_from
    from specsim.conformance.runner import write_json_atomic
    from specsim.mutants.runner import Job, run_job
    from specsim.mutants.zoo import MUTANTS, mutant_ids

    base = load(args.base)
    ids = mutant_ids(base)
    if args.only:
        unknown = set(args.only.split(",")) - set(MUTANTS)
        if unknown:
            print(f"specsim mutants: --only: unknown {sorted(unknown)}; known: {sorted(MUTANTS)}", file=sys.stderr)
            return 2
        ids = [i for i in ids if i in args.only.split(",")]
    job = dict(base=args.base, seed=args.seed, alpha_family=args.alpha, quick=args.quick)
    jobs = [Job("mutant", i, black_box=False, **job) for i in ids]
    jobs += [Job("mutant", i, black_box=True, **job) for i in ids] if args.black_box else []
    if not args.skip_correct:
        # field adapters run other projects' samplers: their verdicts are docs/field.md's
        jobs += [Job("correct", a.entry.name, black_box=False, **job) for a in survey()
                 if a.device is not None and a.entry.name not in EMULATED and not is_field(a)]
    executor = executor_from(args, args.base)
    done = {}
    # Each judgement is a pure function of its job, so where and in which order they finish
    # changes nothing; the table and mutants.json list them in the jobs' order.
    for j, r in executor.map(run_job, jobs):
        done[j.key] = r
        print(f"  {r['name']}{' [black box]' if j.black_box else ''}: "
              + (_line(r) if j.kind == "mutant" else
                 f"{'FAILED ' + r['killer']['name'] if r['killed'] else 'passes'} ({r['seconds']:.1f}s)"),
              file=sys.stderr, flush=True)
    results = [(j, done[j.key]) for j in jobs]
    verdicts = [r for j, r in results if j.kind == "mutant" and not j.black_box]
    black = [r for j, r in results if j.black_box]
    correct = [r for j, r in results if j.kind == "correct"]
    rows = [(r["name"] + (" [black box]" if j.black_box else ""), r["bug"], "yes" if r["killed"] else "NO",
             (r["killer"] or {}).get("name", "-"), r["evidence"]) for j, r in results if j.kind == "mutant"]
    print(_table(rows))
    for r in correct:
        c = r["counts"]
        print(f"correct device {r['name']}: {'FAIL (' + r['killer']['name'] + ': ' + r['evidence'] + ')' if r['killed'] else 'pass'}"
              f"  [{c['pass']} pass, {c['fail']} fail, {c['not_supported']} not supported, {c['error']} error]")
    survivors = [r["name"] for r in verdicts if not r["killed"]]
    broken = [r["name"] for r in correct if r["killed"]]
    print(f"\n{len(verdicts) - len(survivors)}/{len(verdicts)} mutants killed"
          + (f"; survivors: {', '.join(survivors)}" if survivors else "")
          + (f"; black box: {sum(r['killed'] for r in black)}/{len(black)} killed" if black else "")
          + f"; {len(correct) - len(broken)}/{len(correct)} correct devices pass")
    if args.out:
        from reference import SPEC_VERSION
        strip = lambda r: {k: v for k, v in r.items() if k not in ("counts", "where")}
        doc = {"spec_version": SPEC_VERSION, "seed": args.seed, "alpha_family": args.alpha, "quick": args.quick,
               "base": args.base, "run": executor.describe(),
               "mutants": [strip(r) for r in verdicts], "black_box": [strip(r) for r in black],
               "correct_devices": [{**strip(r), "counts": r["counts"]} for r in correct]}
        path = os.path.join(args.out, "mutants.json")
        write_json_atomic(path, doc)
        print(f"wrote {path}")
    return 0 if not survivors and not broken else 1
