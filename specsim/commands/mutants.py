"""``specsim mutants``: run the conformance suite against the mutant zoo and the correct devices, and every
mutant family (``specsim.mutants.families``: the proposer mutants, judged by ``specsim.conformance.proposer.proposers``)
against its check and its correct subjects.

``--seeds A-B`` (or ``--seeds N --first-seed S``) judges every mutant at every suite seed instead, by the
groups that can kill it, and writes the seed × mutant table (``specsim.mutants.seedtable``); ``--record FILE`` also writes its summary
(a row per mutant and mode: seeds killed, by which checks) as a record of measured figures
(``specsim.figures.records``) that the docs render."""

from __future__ import annotations

import os
import sys

HELP = "run the conformance suite against every mutant (each must be killed) and every correct built-in device (each must pass)"


def add_arguments(p):
    p.add_argument("--out", default=None, help="directory for mutants.json")
    p.add_argument("--base", default="torch", help="the correct device the mutants wrap (default: torch)")
    p.add_argument("--seed", type=int, default=None, help="suite seed (default 0)")
    p.add_argument("--seeds", default=None,
                   help="A-B (inclusive) or a count N from --first-seed: judge every mutant at every one of these "
                        "suite seeds and write the seed x mutant table (seedtable.json, seedtable.md with --out)")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="with --seeds: also write the table's summary as a record of measured figures "
                        "(docs/results/NAME.json: command, CPU, versions, date), which the docs render")
    p.add_argument("--first-seed", type=int, default=None, help="with --seeds N: the first suite seed (default 0)")
    p.add_argument("--kinds", default=None,
                   help="comma-separated zoo kinds of the device mutants to run (specsim.mutants.seedtable.ZOO_KINDS: "
                        "inside, tree, kernel, kernel-gpu, sampler, wrapper; default all); other families are left "
                        "out unless "
                        "--families names them")
    p.add_argument("--hunt", default=None, choices=("named", "all"),
                   help="with --seeds: 'named' (default) judges a mutant by the group of its killed_by check (in "
                        "black box, that group's stand-ins), 'all' by every group")
    p.add_argument("--alpha", type=float, default=1e-3, help="false-fail budget of all the run's statistical tests together")
    p.add_argument("--quick", action="store_true", help="small L3 sizes (tests of the harness, not a verdict)")
    p.add_argument("--black-box", action="store_true",
                   help="also hide each mutant's injected noise and Philox replay, so only L2/L3/input rules can kill it")
    p.add_argument("--call-bytes", default=None, metavar="SIZE",
                   help="the bytes one call may hold (as specsim conform --call-bytes; default SPECSIM_CALL_BYTES, "
                        "else 1GiB): L1-offsets' mutants need 6GiB and more")
    p.add_argument("--only", default=None, help="comma-separated mutant ids of any family (default: all)")
    p.add_argument("--families", default=None,
                   help="comma-separated families to run: 'device' (the zoo) and those of specsim.mutants.families "
                        "(default: all); a family none of whose mutants --only names is left out whole")
    p.add_argument("--skip-correct", action="store_true", help="do not run the correct built-in devices or subjects")
    from specsim.commands.campaign import add_executor_arguments
    add_executor_arguments(p)   # each mutant (and correct device) is one shard


def _table(rows) -> str:
    head = ("mutant", "modelled bug", "killed", "first killing check", "evidence")
    rows = [head] + rows
    w = [min(max(len(str(r[i])) for r in rows), cap) for i, cap in zip(range(4), (36, 60, 8, 48))]
    return "\n".join(f"{str(a)[:w[0]]:<{w[0]}}  {str(b)[:w[1]]:<{w[1]}}  {str(c):<{w[2]}}  {str(d)[:w[3]]:<{w[3]}}  {e}"
                     for a, b, c, d, e in rows)


def _line(r: dict) -> str:
    killer = (r["killer"] or {}).get("name", "-")
    return f"{'killed by ' + killer if r['killed'] else 'SURVIVED'} ({r['seconds']:.1f}s)"


def _selected(args, device_ids: list[str]) -> dict[str, list[str]] | str:
    """Each taking-part family's mutant ids, in order (the device zoo first); a string: the usage error."""
    from specsim.mutants.families import DEVICE, FAMILIES
    from specsim.mutants.zoo import MUTANTS
    every = {DEVICE: device_ids, **{f.id: f.mutant_ids() for f in FAMILIES.values()}}
    chosen = list(every)
    if args.families:
        chosen = args.families.split(",")
        unknown = set(chosen) - set(every)
        if unknown:
            return f"--families: unknown {sorted(unknown)}; known: {list(every)}"
    if args.only:
        only = args.only.split(",")
        known = set(MUTANTS).union(*(every[f] for f in every if f != DEVICE))
        unknown = set(only) - known
        if unknown:
            return f"--only: unknown {sorted(unknown)}; known: {sorted(known)}"
        every = {f: [i for i in ids if i in only] for f, ids in every.items()}
    return {f: every[f] for f in every if f in chosen and (every[f] or not args.only)}


def mutant_kinds(args, families: dict[str, list[str]]) -> dict[str, list[str]] | str:
    """``families`` with the device zoo cut to ``--kinds`` (other families kept only if ``--families`` names
    them); a string: the usage error."""
    from specsim.mutants.families import DEVICE
    from specsim.mutants.seedtable import ZOO_KINDS, zoo_kind
    if not args.kinds:
        return families
    kinds = args.kinds.split(",")
    unknown = set(kinds) - set(ZOO_KINDS)
    if unknown:
        return f"--kinds: unknown {sorted(unknown)}; known: {list(ZOO_KINDS)}"
    named = set(args.families.split(",")) if args.families else set()
    return {f: ([i for i in ids if zoo_kind(i) in kinds] if f == DEVICE else ids)
            for f, ids in families.items() if f == DEVICE or f in named}


def run_seed_table(args, families: dict[str, list[str]]) -> int:
    """``--seeds``: every (mutant, seed) judgement as a shard; the table; exit 1 on a survivor, a false
    fail of a correct device or a judgement that crashed."""
    import time
    from specsim.commands.campaign import executor_from
    from specsim.conformance.run.files import write_json_atomic
    from specsim.mutants import seedtable as st
    try:
        if args.first_seed is not None and "-" in args.seeds:
            raise ValueError(f"--first-seed goes with --seeds N, not with a range ({args.seeds!r})")
        seeds = st.parse_seeds(args.seeds, args.first_seed or 0)
    except ValueError as e:
        print(f"specsim mutants: {e}", file=sys.stderr)
        return 2
    jobs = st.plan(args.base, families, seeds, black_box=args.black_box, alpha_family=args.alpha,
                   quick=args.quick, hunt=args.hunt or "named", correct=not args.skip_correct)
    if not any(j.kind == "mutant" for j in jobs):
        print("specsim mutants: --seeds: no mutant selected (see --only, --kinds, --families)", file=sys.stderr)
        return 2
    executor = executor_from(args, args.base)
    start = time.perf_counter()
    results = {}
    for j, r in executor.map(st.run_seed_job, jobs):
        results[j] = r
        st.progress(j, r)
    from reference import SPEC_VERSION
    command = ["specsim", *getattr(args, "argv", sys.argv[1:])]
    doc = {"spec_version": SPEC_VERSION, "command": command, "base": args.base,
           "alpha_family": args.alpha, "quick": args.quick, "black_box": args.black_box,
           "hunt": args.hunt or "named", "kinds": args.kinds.split(",") if args.kinds else None,
           **st.table(jobs, results, seeds), "run": {**executor.describe(), "jobs": len(jobs),
                                                    "wall_seconds": round(time.perf_counter() - start, 1)}}
    text = st.markdown(doc)
    print(text)
    print("\n" + st.verdict_line(doc))
    if args.out:
        json_path, md_path = os.path.join(args.out, "seedtable.json"), os.path.join(args.out, "seedtable.md")
        write_json_atomic(json_path, doc)
        with open(md_path, "w") as f:
            f.write(f"`{' '.join(doc['command'])}` ({'quick sizes' if args.quick else 'full sizes'}, "
                    f"alpha_family {args.alpha:g}, base {args.base})\n\n{text}\n\n{st.verdict_line(doc)}\n")
        print(f"wrote {json_path}, {md_path}")
    if args.record:
        from specsim.figures.records import cpu_record
        from specsim.figures import records
        record = cpu_record(args)
        record["tables"], record["values"] = st.record_tables(doc)
        records.write(record, args.record)
        print(f"wrote {args.record}")
    return 1 if doc["survivors"] or doc["false_fails"] or doc["crashed"] else 0


def run(args) -> int:
    from devices.registry import EMULATED, is_field, load, survey
    from specsim.commands.campaign import executor_from
    from specsim.conformance.run.runner import Context
    from specsim.conformance.run.files import write_json_atomic
    from specsim.mutants.families import DEVICE, FAMILIES
    from specsim.mutants.runner import Job, run_job
    from specsim.mutants.zoo import mutant_ids

    from specsim.commands.conform import apply_call_bytes
    from specsim.conformance.core.context import InvalidSize
    try:
        apply_call_bytes(getattr(args, "call_bytes", None))   # each shard's process reads it from the environment
    except InvalidSize as e:
        print(f"specsim mutants: {e}", file=sys.stderr)
        return 2
    base = load(args.base)
    families = _selected(args, mutant_ids(base))
    if not isinstance(families, str):
        families = mutant_kinds(args, families)
    if isinstance(families, str):
        print(f"specsim mutants: {families}", file=sys.stderr)
        return 2
    if args.seeds is not None:
        if args.seed is not None:
            print("specsim mutants: --seed and --seeds: give one (--seeds A-B judges every seed of the range)",
                  file=sys.stderr)
            return 2
        return run_seed_table(args, families)
    if args.hunt is not None or args.first_seed is not None or args.record is not None:
        print("specsim mutants: --hunt, --first-seed and --record apply to --seeds only", file=sys.stderr)
        return 2
    args.seed = 0 if args.seed is None else args.seed
    job = dict(base=args.base, seed=args.seed, alpha_family=args.alpha, quick=args.quick)
    jobs = []
    if DEVICE in families:
        ids = families[DEVICE]
        jobs += [Job("mutant", i, black_box=False, **job) for i in ids]
        jobs += [Job("mutant", i, black_box=True, **job) for i in ids] if args.black_box else []
        if not args.skip_correct:
            # field adapters run other projects' samplers: their verdicts are docs/field.md's
            jobs += [Job("correct", a.entry.name, black_box=False, **job) for a in survey()
                     if a.device is not None and a.entry.name not in EMULATED and not is_field(a)]
    for fid, ids in families.items():
        if fid == DEVICE:
            continue
        jobs += [Job("mutant", i, black_box=False, family=fid, **job) for i in ids]
        jobs += ([] if args.skip_correct else
                 [Job("correct", c, black_box=False, family=fid, **job) for c in FAMILIES[fid].correct_ids()])
    subject = {DEVICE: "device", **{f.id: f.subject for f in FAMILIES.values()}}
    executor = executor_from(args, args.base)
    done = {}
    # Each judgement is a pure function of its job, so where and in which order they finish
    # changes nothing; the table and mutants.json list them in the jobs' order.
    for j, r in executor.map(run_job, jobs):
        done[j.key] = r
        tag = (" [black box]" if j.black_box else "") + ("" if j.family == DEVICE else f" [{j.family}]")
        print(f"  {r['name']}{tag}: "
              + (_line(r) if j.kind == "mutant" else
                 f"{'FAILED ' + r['killer']['name'] if r['killed'] else 'passes'} ({r['seconds']:.1f}s)"),
              file=sys.stderr, flush=True)
    results = [(j, done[j.key]) for j in jobs]
    verdicts = [r for j, r in results if j.kind == "mutant" and not j.black_box]
    black = [r for j, r in results if j.black_box]
    correct = [(j, r) for j, r in results if j.kind == "correct"]
    rows = [(r["name"] + (" [black box]" if j.black_box else "") + ("" if j.family == DEVICE else f" [{j.family}]"),
             r["bug"], "yes" if r["killed"] else "NO", (r["killer"] or {}).get("name", "-"), r["evidence"])
            for j, r in results if j.kind == "mutant"]
    print(_table(rows))
    for j, r in correct:
        c = r["counts"]
        print(f"correct {subject[j.family]} {r['name']}: "
              f"{'FAIL (' + r['killer']['name'] + ': ' + r['evidence'] + ')' if r['killed'] else 'pass'}"
              f"  [{c['pass']} pass, {c['fail']} fail, {c['not_supported']} not supported, {c['error']} error]")
    designs = {fid: FAMILIES[fid].design(Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick))
               for fid in families if fid != DEVICE}
    for fid, said in designs.items():
        print(f"family {fid}: {said}")
    survivors = [r["name"] for r in verdicts if not r["killed"]]
    broken = [r["name"] for _, r in correct if r["killed"]]
    by_subject = {}
    for j, r in correct:
        by_subject.setdefault(subject[j.family], []).append(r)
    print(f"\n{len(verdicts) - len(survivors)}/{len(verdicts)} mutants killed"
          + (f"; survivors: {', '.join(survivors)}" if survivors else "")
          + (f"; black box: {sum(r['killed'] for r in black)}/{len(black)} killed" if black else "")
          + "".join(f"; {sum(not r['killed'] for r in rs)}/{len(rs)} correct {word}s pass"
                    for word, rs in by_subject.items()))
    if args.out:
        from reference import SPEC_VERSION
        strip = lambda r: {k: v for k, v in r.items() if k not in ("counts", "where")}
        doc = {"spec_version": SPEC_VERSION, "seed": args.seed, "alpha_family": args.alpha, "quick": args.quick,
               "base": args.base, "run": executor.describe(), "families": designs,
               "mutants": [strip(r) for r in verdicts], "black_box": [strip(r) for r in black],
               "correct_devices": [{**strip(r), "counts": r["counts"]} for j, r in correct if j.family == DEVICE],
               "correct_subjects": [{**strip(r), "counts": r["counts"]} for j, r in correct if j.family != DEVICE]}
        path = os.path.join(args.out, "mutants.json")
        write_json_atomic(path, doc)
        print(f"wrote {path}")
    return 0 if not survivors and not broken else 1
