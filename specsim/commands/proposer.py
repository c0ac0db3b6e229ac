"""``specsim proposer NAME``: are a drafter's drafts drawn from the ``draft_probs`` it reports? (``specsim.conformance.proposer.proposers``)

NAME is a registered proposer (``specsim.engine.proposers.checked.PROPOSERS``),
``mutant:ID`` (``specsim.mutants.proposers``) or ``module:attr`` (a proposer,
or a function of no arguments returning one; it declares ``has_probs``,
``greedy`` and ``sampling``).

exit status:
  0  every check passed (or is not_supported: a point proposer has no q)
  1  a check failed (the table says which, with the case, call and seed)
  2  the proposer could not be loaded, or the plan cannot reach --max-tv

Example::

    specsim proposer draft_model
    specsim proposer mutant:q-before-processors --samples 16000 --json out.json
"""

from __future__ import annotations

HELP = ("check a proposer: drafts distributed as the draft_probs it reports, greedy = argmax draft_probs, "
        "draft_probs as declared; exit 0/1/2")


def add_arguments(p):
    p.add_argument("proposer", nargs="?", help="registered name, mutant:ID, or module:attr")
    p.add_argument("--samples", type=int, default=None, help="calls per case (default 10000; --quick 3000)")
    p.add_argument("--k", type=int, default=3, help="drafts asked for per call (default 3)")
    p.add_argument("--seed", type=int, default=0, help="suite seed (request seeds derive from it and the case)")
    p.add_argument("--alpha-family", type=float, default=None, help="false-fail rate of the whole check (default 1e-3)")
    p.add_argument("--max-tv", type=float, default=None,
                   help="exit 2 before sampling if a case's position-0 test cannot detect this TV")
    p.add_argument("--cases", nargs="+", default=None, help="run only these cases (T1, T0.7, T0.9-k3, T1.1-p0.8, greedy)")
    p.add_argument("--quick", action="store_true", help="3000 calls per case")
    p.add_argument("--json", default=None, metavar="FILE", help="write the result as JSON")
    p.add_argument("--list", action="store_true", help="list the registered proposers and mutants, then exit")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="calibration: run suite seeds SEED..SEED+N-1 and test the law checks' p-values for "
                        "uniformity (KS); exit 1 if a check fails or KS p < 1e-3")


def calibrate(proposer, seeds: range, **kw) -> dict:
    """The statistical checks' p-values over ``seeds`` (a correct proposer: uniform) and every failing check.

    >>> from specsim.engine.proposers.checked import load
    >>> doc = calibrate(load("draft_model"), range(3), samples=300)
    >>> doc["p_values"], doc["failed"]
    (18, [])
    """
    from scipy import stats

    from specsim.conformance.proposer.proposers import check
    p_values, failed = [], []
    for seed in seeds:
        result = check(proposer, suite_seed=seed, **kw)
        p_values += [c["p_value"] for c in result["checks"] if c["check"].startswith("law/") and "p_value" in c]
        failed += [f"seed {seed}: {c['case']} {c['check']}" for c in result["checks"] if c["status"] == "fail"]
    ks = stats.kstest(p_values, "uniform") if p_values else None
    tail = {f"P(p <= {t:g})": float(sum(p <= t for p in p_values) / max(1, len(p_values))) for t in (0.01, 0.05, 0.1, 0.5)}
    return {"seeds": len(seeds), "p_values": len(p_values), "ks_statistic": ks.statistic if ks else None,
            "ks_p": ks.pvalue if ks else None, **tail, "failed": failed}


def run(args) -> int:
    import collections
    import json
    import sys
    import time

    from specsim.engine.proposers.checked import FIELD, PROPOSERS, load
    from specsim.mutants.proposers import MUTANTS
    from specsim.mutants.proposers import make as make_mutant
    from specsim.conformance.proposer.proposers import ALPHA_FAMILY, DesignError, check

    if args.list:
        width = max(map(len, {**PROPOSERS, **FIELD})) + 1
        for name, target in sorted({**PROPOSERS, **FIELD}.items()):
            print(f"{name:<{width}} {target}")
        for mid, m in sorted(MUTANTS.items()):
            print(f"mutant:{mid:<17} {m.source.bug} ({m.source.models}; killed by {m.killed_by}, case {m.case})")
        return 0
    if not args.proposer:
        print("specsim proposer: name a proposer (--list shows the registered ones)", file=sys.stderr)
        return 2
    try:
        proposer = (make_mutant(args.proposer.removeprefix("mutant:")) if args.proposer.startswith("mutant:")
                    else load(args.proposer))
    except Exception as e:  # noqa: BLE001 - any load failure is exit 2, said
        print(f"specsim proposer: cannot load {args.proposer!r}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    samples = args.samples or (3000 if args.quick else 10_000)
    if args.seeds:
        doc = calibrate(proposer, range(args.seed, args.seed + args.seeds), samples=samples, k=args.k,
                        alpha_family=args.alpha_family or ALPHA_FAMILY, only=tuple(args.cases) if args.cases else None)
        print(f"proposer {getattr(proposer, 'name', args.proposer)}: {doc['seeds']} suite seeds from {args.seed}, "
              f"{samples} calls a case: {doc['p_values']} law p-values, KS D = {doc['ks_statistic']:.4f}, "
              f"p = {doc['ks_p']:.3g}; " + ", ".join(f"{k} = {v:.3f}" for k, v in doc.items() if k.startswith("P(")))
        by_check = collections.Counter(f.split(": ", 1)[1] for f in doc["failed"])
        seeds_failing = len({f.split(":", 1)[0] for f in doc["failed"]})
        print(f"seeds with a failing check: {seeds_failing} of {doc['seeds']}")
        print(f"failing checks: {len(doc['failed'])}" + "".join(f"\n  {n} of {doc['seeds']} seeds: {c}"
                                                                for c, n in sorted(by_check.items())))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
        return 1 if doc["failed"] or doc["ks_p"] < 1e-3 else 0
    start = time.perf_counter()
    try:
        result = check(proposer, samples=samples, k=args.k, suite_seed=args.seed,
                       alpha_family=args.alpha_family or ALPHA_FAMILY, max_tv=args.max_tv,
                       only=tuple(args.cases) if args.cases else None)
    except (DesignError, ValueError) as e:
        print(f"specsim proposer: {e}", file=sys.stderr)
        return 2
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["engine"] = getattr(proposer, "engine", None)     # a field proposer's "<engine> <release>"
    called = sys.argv[2:] if sys.argv[1:2] == ["proposer"] else [args.proposer]
    result["command"] = "specsim proposer " + " ".join(called)
    d = result["declaration"]
    print(f"proposer {result['proposer']}: has_probs={d['has_probs']} greedy={d['greedy']} "
          f"sampling={list(d['sampling'])}; {samples} calls a case, k={args.k}, seed {args.seed}; "
          f"alpha_family {result['alpha_family']:g} ({result['alpha_per_check']:.2g} a check, run at "
          f"{result['nominal_alpha']:.2g})")
    width = max(len(f"{c['case']} {c['check']}") for c in result["checks"])
    for c in result["checks"]:
        print(f"  {c['status']:<13} {(str(c['case']) + ' ' + c['check']):<{width}}  {c['detail']}")
    print(f"verdict: {result['verdict'].upper()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=str)
    return 1 if result["verdict"] == "fail" else 0
