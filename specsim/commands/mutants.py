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


def _table(rows) -> str:
    head = ("mutant", "modelled bug", "killed", "first killing check", "evidence")
    rows = [head] + rows
    w = [min(max(len(str(r[i])) for r in rows), cap) for i, cap in zip(range(4), (26, 60, 8, 48))]
    return "\n".join(f"{str(a)[:w[0]]:<{w[0]}}  {str(b)[:w[1]]:<{w[1]}}  {str(c):<{w[2]}}  {str(d)[:w[3]]:<{w[3]}}  {e}"
                     for a, b, c, d, e in rows)


def run(args) -> int:
    from devices.registry import EMULATED, is_field, load, survey
    from specsim.conformance.runner import Context, write_json_atomic
    from specsim.mutants.runner import judge_correct, judge_mutant
    from specsim.mutants.zoo import MUTANTS, make_mutants

    base = load(args.base)
    ctx = Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick)
    mutants = make_mutants(base)
    if args.only:
        unknown = set(args.only.split(",")) - set(MUTANTS)
        if unknown:
            print(f"specsim mutants: --only: unknown {sorted(unknown)}; known: {sorted(MUTANTS)}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in args.only.split(",")]
    verdicts, rows = [], []
    for m in mutants:
        v = judge_mutant(m, ctx)
        verdicts.append(v)
        rows.append((v.name, v.bug, "yes" if v.killed else "NO", v.killer.name if v.killer else "-", v.evidence()))
        print(f"  {v.name}: {'killed by ' + v.killer.name if v.killed else 'SURVIVED'} ({v.seconds:.1f}s)",
              file=sys.stderr, flush=True)
    black = []
    if args.black_box:
        for m in mutants:
            v = judge_mutant(m, ctx, black_box=True)
            black.append(v)
            rows.append((v.name + " [black box]", v.bug, "yes" if v.killed else "NO",
                         v.killer.name if v.killer else "-", v.evidence()))
            print(f"  {v.name} [black box]: {'killed by ' + v.killer.name if v.killed else 'SURVIVED'} "
                  f"({v.seconds:.1f}s)", file=sys.stderr, flush=True)
    correct = []
    if not args.skip_correct:
        for a in survey():
            if a.device is None or a.entry.name in EMULATED or is_field(a):
                continue   # field adapters run other projects' samplers: their verdicts are docs/field.md's
            v = judge_correct(a.entry.name, a.device, ctx)
            correct.append(v)
            print(f"  {a.entry.name}: {'FAILED ' + v.killer.name if v.killed else 'passes'} ({v.seconds:.1f}s)",
                  file=sys.stderr, flush=True)
    print(_table(rows))
    for v in correct:
        c = v.counts
        print(f"correct device {v.name}: {'FAIL (' + v.killer.name + ': ' + v.evidence() + ')' if v.killed else 'pass'}"
              f"  [{c['pass']} pass, {c['fail']} fail, {c['not_supported']} not supported, {c['error']} error]")
    survivors = [v.name for v in verdicts if not v.killed]
    broken = [v.name for v in correct if v.killed]
    print(f"\n{len(verdicts) - len(survivors)}/{len(verdicts)} mutants killed"
          + (f"; survivors: {', '.join(survivors)}" if survivors else "")
          + (f"; black box: {sum(v.killed for v in black)}/{len(black)} killed" if black else "")
          + f"; {len(correct) - len(broken)}/{len(correct)} correct devices pass")
    if args.out:
        from reference import SPEC_VERSION
        doc = {"spec_version": SPEC_VERSION, "seed": ctx.seed, "alpha_family": ctx.alpha_family, "quick": ctx.quick, "base": args.base,
               "mutants": [v.to_json() for v in verdicts], "black_box": [v.to_json() for v in black],
               "correct_devices": [{**v.to_json(), "counts": v.counts} for v in correct]}
        path = os.path.join(args.out, "mutants.json")
        write_json_atomic(path, doc)
        print(f"wrote {path}")
    return 0 if not survivors and not broken else 1
