"""``specsim conform``: run every conformance layer against a device.

Each group of checks runs in its own subprocess with a time limit, so a device
that crashes, aborts or hangs costs one group (recorded as ``error``), never
the run or its report. ``--out DIR`` writes ``conformance.json`` after every
group (atomically), then ``report.html``, ``report.md`` and ``report.json``.
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "run the conformance layers against a device; exit 0 iff the verdict (SPEC §10) is PASS or PARTIAL"

EPILOG = """\
exit status:
  0    verdict PASS: the core profile (SPEC §10) is declared and checked, and every check passed
       (or is not_supported by a declared absence outside the core); or PARTIAL: a --groups
       subset without the core's evidence, in which nothing failed
  1    verdict FAIL: a check failed or errored (a crash, hang or exception in a group counts as
       error), the core profile is not declared, or a check the core needs was not_supported
  2    bad usage: unknown group, --resume without --out, or --resume of a different run
  3    the device could not be loaded (see `specsim devices`)
  130  interrupted (Ctrl-C); continue with the same command plus --resume

files written with --out DIR:
  DIR/conformance.json     every check's result; rewritten after each group
  DIR/groups/<group>.json  one file per finished group (what --resume reads)
  DIR/report.html          self-contained report with plots (needs matplotlib for the plots)
  DIR/report.md            tables to paste into a pull request
  DIR/report.json          the report's data (inputs combined)
"""


def add_arguments(p):
    p.epilog = EPILOG
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("--device", default="torch", help="registered name or 'module:attr' (default: torch)")
    p.add_argument("--out", default=None, help="directory for conformance.json and the reports")
    p.add_argument("--seed", type=int, default=0, help="suite seed; case seeds derive from it (default 0)")
    p.add_argument("--alpha", type=float, default=1e-3,
                   help="false-fail budget of all the run's statistical tests together (split over them: "
                        "conformance.json's statistical_plan)")
    p.add_argument("--groups", default=None, help="comma-separated group names (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes; for testing the harness, not for a verdict")
    p.add_argument("--group-timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit of each group's subprocess; past it the group is recorded as error "
                        "(default: 600, and 3600 for L3-statistical)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --out DIR: finished groups are not run again "
                        "(same device, seed, alpha, --quick and groups required)")
    p.add_argument("--in-process", action="store_true",
                   help="run the groups in this process (no isolation, no time limit); for debugging a device")
    p.add_argument("--no-report", action="store_true", help="with --out, write conformance.json only")


def _table(results) -> str:
    rows = [("check", "layer", "status", "detail")]
    for r in results:
        rows.append((r.name, r.layer, r.status, (r.detail.splitlines() or [""])[0][:70]))
    w = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}" for a, b, c, d in rows)


def verdict_line(verdict: dict) -> str:
    """``verdict: PASS (SPEC 1.0)``, or the status and each reason on a line of its own (SPEC §10)."""
    head = f"verdict: {verdict['status'].upper()} against SPEC {verdict['spec_version']}"
    return "\n".join([head] + [f"  - {r}" for r in verdict["reasons"]])


def _usage(message: str) -> int:
    print(f"specsim conform: {message}", file=sys.stderr)
    return 2


def _warn_if_incomplete(out_dir: str) -> None:
    """Starting over in a directory that holds an interrupted run is allowed, but say so."""
    import json
    try:
        with open(os.path.join(out_dir, "conformance.json")) as f:
            run = json.load(f).get("run") or {}
    except (OSError, ValueError, AttributeError):
        return
    if run.get("complete") is False:
        print(f"specsim conform: {out_dir} holds an interrupted run (pending: "
              f"{', '.join(run.get('pending_groups') or [])}); starting over. Use --resume to continue it instead.",
              file=sys.stderr)


def write_reports(out_dir: str) -> None:
    """Render report.html/md/json next to conformance.json; a reporting problem is said, not fatal."""
    try:
        from reports import render_directory
        written = render_directory([out_dir], out_dir)
    except Exception as e:  # the verdict stands without the pretty report; say what broke
        import traceback
        print(f"specsim conform: writing the reports failed: {type(e).__name__}: {e}\n"
              f"{traceback.format_exc(limit=6)}", file=sys.stderr)
        return
    for note in written.get("notes", []):
        print(f"specsim conform: {note}", file=sys.stderr)
    for path in written.get("files", []):
        print(f"wrote {path}")


def run(args) -> int:
    from devices.registry import load
    from specsim.conformance.results import CheckResult
    from specsim.conformance.runner import Context, available_groups, document, run_conformance, write_json_atomic

    if args.resume and not args.out:
        return _usage("--resume needs --out DIR (the directory of the run to continue)")
    if args.resume and args.in_process:
        return _usage("--resume works with the isolated runner only; drop --in-process")
    if args.group_timeout is not None and args.group_timeout <= 0:
        return _usage(f"--group-timeout: must be > 0 seconds, got {args.group_timeout}")
    device = load(args.device)
    known = available_groups()
    names = [g for g in args.groups.split(",") if g] if args.groups else list(known)
    unknown = [g for g in names if g not in known]
    if unknown:
        return _usage(f"--groups: unknown {unknown}; known: {sorted(known)}")
    ctx = Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick)

    if args.in_process:
        results = run_conformance(device, ctx, names)
        doc = document(args.device, device, ctx, results, names)
        doc["run"] = {"isolation": "in-process", "complete": True, "command": list(sys.argv),
                      "finished_groups": names}
        if args.out:
            write_json_atomic(os.path.join(args.out, "conformance.json"), doc)
    else:
        from specsim.conformance.isolation import ResumeMismatch, run_isolated
        from specsim.conformance.progress import Progress

        if args.out and not args.resume:
            _warn_if_incomplete(args.out)
        progress = Progress(total=len(names))
        try:
            doc = run_isolated(args.device, device, ctx, {g: known[g] for g in names}, out_dir=args.out,
                               timeout_s=args.group_timeout, resume=args.resume, progress=progress)
        except ResumeMismatch as e:
            return _usage(str(e))
        except KeyboardInterrupt:
            where = f"; continue with: specsim {' '.join(sys.argv[1:])} --resume" if args.out else ""
            print(f"\nspecsim conform: interrupted{where}", file=sys.stderr)
            return 130
        results = [CheckResult.from_json(d) for d in doc["checks"]]

    print(_table(results))
    s = doc["summary"]
    print(f"\n{device.name}: {s['pass']} pass, {s['fail']} fail, {s['not_supported']} not supported, {s['error']} error")
    print(verdict_line(doc["verdict"]))
    if args.out:
        print(f"wrote {os.path.join(args.out, 'conformance.json')}")
        if not args.no_report:
            write_reports(args.out)
    return 0 if doc["passed"] else 1
