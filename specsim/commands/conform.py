"""``specsim conform``: run every conformance layer against a device.

Each group of checks runs in its own subprocess with a time limit, so a device
that crashes, aborts or hangs costs one group (recorded as ``error``), never
the run or its report. ``--out DIR`` writes ``conformance.json`` after every
group (atomically), then ``report.html``, ``report.md`` and ``report.json``.
``--waivers FILE`` applies a vendor's known failures
(``specsim.conformance.verdict.conform_waivers``). SIGINT and SIGTERM stop the running
group's processes and leave a run that ``--resume`` continues.
"""

from __future__ import annotations

import argparse
import os
import sys

from specsim.conformance.run.runner import GROUPS

HELP = ("run the conformance layers against a device; exit 0 iff the verdict (SPEC §10) is PASS or "
        "PASS-WITH-WAIVERS")

EXIT_CODES = {"pass": 0, "pass-with-waivers": 0, "fail": 1, "partial": 4, "quick": 5, "incomplete": 6}
"""The exit status of each verdict; 2 (bad usage), 3 (device not loaded), 130/143 (stopped) besides."""

EPILOG = """\
exit status:
  0    verdict PASS: the core profile (SPEC §10) is declared and checked, every group of the suite
       ran at full size at the suite seed and α, and every check passed (or is not_supported by a
       declared absence outside the core); or PASS-WITH-WAIVERS: the same, but for failing checks
       that --waivers covers, none of them carrying the core's evidence, a crash or a timeout
  1    verdict FAIL, --quick or not: a check failed or errored (a crash, hang or exception in a
       group counts as error; so does a refusal, UnsupportedCall, of a call inside the device's
       declaration), the core profile is not declared, a check the core needs was not_supported,
       or a waived check carries the core's evidence (capabilities of the core, L1-injected,
       L1-keyed, L3-statistical's chain cases): a waiver cannot make a device conform to the core
  2    bad usage: unknown or empty --groups, --alpha outside (0, 1), --resume without --out,
       --resume of a different run (another device, seed, --alpha, --quick, group list, waiver
       file, or code: the device's, specsim's, the SPEC version, installed packages), or an
       invalid --waivers file
  3    the device could not be loaded (see `specsim devices SPEC`)
  4    verdict PARTIAL: nothing failed, but the run was narrower than the suite (a --groups subset,
       another --seed, an --alpha below the suite's, a check cut below its full volume by its time
       budget); the verdict lists each narrowing
  5    verdict QUICK: a --quick run in which nothing failed (--quick sizes test the harness: never
       a verdict, never PASS)
  6    verdict INCOMPLETE: the run did not finish
  130  stopped by SIGINT (Ctrl-C)
  143  stopped by SIGTERM (a CI time limit, `timeout`, a cancelled job)
       Either way the running group's processes (its whole process group) are ended,
       conformance.json records the run as incomplete (verdict INCOMPLETE, passed false, the
       group in run.interrupted); continue with the same command plus --resume. A run killed
       outright (SIGKILL, out of memory) leaves conformance.json as it was after its last group:
       INCOMPLETE too.
  --exit-zero-on partial,quick makes those verdicts exit 0 (for a CI job that runs a subset on
  purpose); conformance.json's "passed" stays false for them.

waivers (--waivers FILE, the format of `pytest --specsim-waivers`; TOML or JSON):
  [[waiver]]
  check  = "conformance:L1/edge/top-p-cut-ties"   # a check name, or a narrow pattern (vendor guide §5)
  reason = "top-p keeps one of the tokens tied at the cut; fixed in driver 2.4"
  link   = "https://tracker.acme.example/SPEC-123"
  devices = ["acme-npu"]                          # optional
  A waived check keeps its status (fail or error) and shows as "waived" with its reason and
  link in the table, conformance.json (the check's "waiver") and the reports. Entries that
  waived nothing (stale: no such check in this run, or it did not fail) are listed after the
  table and in conformance.json's "waivers".

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
    p.add_argument("--groups", default=None, metavar="G1,G2",
                   help=f"comma-separated group names (default: all of {', '.join(GROUPS)})")
    p.add_argument("--quick", action="store_true",
                   help="small sizes, for testing the harness: never a verdict (status QUICK, exit 0, if "
                        "nothing failed; FAIL, exit 1, otherwise)")
    p.add_argument("--group-timeout", type=float, default=None, metavar="SECONDS",
                   help="time limit of each group's subprocess; past it the group is recorded as error "
                        "(default: each group's own, 600 s to 3600 s; conformance.json's run.group_timeout_s "
                        "lists them)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run N groups side by side, each in its own process (default 1); they share the "
                        "host's cores and accelerators, and the verdict is the same document")
    p.add_argument("--call-bytes", default=None, metavar="SIZE",
                   help="the bytes one call's arrays may hold (40GiB, 512MiB; default SPECSIM_CALL_BYTES, else "
                        "1GiB): L1-offsets crosses 2^31 and 2^32 elements only where its call fits (GPU vendors: "
                        "--call-bytes 40GiB)")
    p.add_argument("--resume", action="store_true",
                   help="continue the interrupted run in --out DIR: finished groups are not run again "
                        "(same device, seed, alpha, --quick, groups, --call-bytes and --waivers file required)")
    p.add_argument("--waivers", default=None, metavar="FILE",
                   help="the vendor's known failures (TOML or JSON; see below): each waived check is shown as "
                        "waived with its reason and link, and the verdict says so")
    p.add_argument("--in-process", action="store_true",
                   help="run the groups in this process (no isolation, no time limit); for debugging a device")
    p.add_argument("--no-report", action="store_true", help="with --out, write conformance.json only")
    p.add_argument("--exit-zero-on", default="", metavar="STATUS[,STATUS]",
                   help="verdicts, of partial and quick, that exit 0 instead of their own code (see exit status)")
    p.add_argument("--table", action="store_true",
                   help="print every check's row (default: the verdict, its scope and the failing checks in full; "
                        "every row is in the reports)")


def _status_cell(r) -> str:
    """``waived (fail)`` for a waived check: waived, and what it found."""
    return f"waived ({r.status})" if r.waiver else r.status


def conform_table(results) -> str:
    rows = [("check", "layer", "status", "detail")]
    for r in results:
        detail = (r.detail.splitlines() or [""])[0][:70]
        if r.waiver:
            detail = f"{r.waiver['reason'][:50]} [{r.waiver['link']}] | {detail}"
        rows.append((r.name, r.layer, _status_cell(r), detail))
    w = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}" for a, b, c, d in rows)


def verdict_line(verdict: dict, run: dict | None = None) -> str:
    """``verdict: PASS against SPEC 1.0``, or the status and each reason on a line of its own (SPEC §10);
    a ``--quick`` run's says it is no verdict; a run continued with ``--resume`` (``run``, the document's) says so
    on the verdict's own line, never as a plain status."""
    head = f"verdict: {verdict['status'].upper()} against SPEC {verdict.get('judged_against') or verdict['spec_version']}"
    if verdict["status"] == "quick":
        head += " (a --quick run: not a verdict)"
    from reports.tables import resumed_text
    resumed = resumed_text({"run": run or {}})
    if resumed:
        head += f" ({resumed})"
    return "\n".join([head] + [f"  - {r}" for r in verdict["reasons"]] + _version_lines(verdict))


def _version_lines(verdict: dict) -> list[str]:
    """The verdict's version note and the checks new since the declared version, apart from its reasons."""
    lines = [f"  note: {verdict['spec_version_note']}"] if verdict.get("spec_version_note") else []
    newer = verdict.get("newer_checks") or {}
    if newer.get("count"):
        failing = newer.get("failing") or []
        lines.append(f"  new since SPEC {verdict['judged_against']} (not counted): {newer['count']} check(s)"
                     + (f", {len(failing)} failing: {', '.join(failing[:5])}" if failing else ""))
    return lines


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
        stopped = run.get("interrupted") or {}
        how = f"stopped by {stopped.get('signal')} in {stopped.get('group')}; " if stopped else ""
        print(f"specsim conform: {out_dir} holds an interrupted run ({how}pending: "
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


def _load_waivers(path: str | None):
    """The validated waiver file, or None without --waivers; ``WaiverError`` names the entry at fault."""
    if path is None:
        return None
    from specsim.conformance.verdict.conform_waivers import load_file
    return load_file(path)


def _stopped(e: KeyboardInterrupt, args) -> int:
    """Say where the run stopped and how to continue it; the exit status is 128 + the signal's number."""
    from specsim.conformance.run.isolation import Interrupted
    signum = e.signum if isinstance(e, Interrupted) else 2
    name = e.name if isinstance(e, Interrupted) else "SIGINT"
    ended = "" if args.in_process else "; the running group's processes were ended"
    where = f"; continue with: specsim {' '.join(sys.argv[1:])} --resume" if args.out and not args.in_process else ""
    print(f"\nspecsim conform: stopped by {name}{ended}{where}", file=sys.stderr)
    return 128 + signum


def run(args) -> int:
    from specsim.conformance.run.isolation import stop_on_signals

    with stop_on_signals():
        try:
            return _run(args)
        except KeyboardInterrupt as e:
            return _stopped(e, args)


def _run(args) -> int:
    from devices.registry import load
    from specsim.conformance.core.results import CheckResult
    from specsim.conformance.run.runner import Context, chosen_groups, run_conformance
    from specsim.conformance.run.document import document
    from specsim.conformance.run.files import write_json_atomic
    from specsim.conformance.verdict.conform_waivers import WaiverError, summary_lines
    from specsim.conformance.core.context import InvalidSize

    if args.resume and not args.out:
        return _usage("--resume needs --out DIR (the directory of the run to continue)")
    jobs = getattr(args, "jobs", 1)
    if jobs < 1:
        return _usage(f"--jobs: must be >= 1 (groups run side by side), got {jobs}")
    if jobs > 1 and args.in_process:
        return _usage("--jobs: groups run side by side only in their own processes; drop --in-process")
    if args.resume and args.in_process:
        return _usage("--resume works with the isolated runner only; drop --in-process")
    if args.group_timeout is not None and args.group_timeout <= 0:
        return _usage(f"--group-timeout: must be > 0 seconds, got {args.group_timeout}")
    if not 0 < args.alpha < 1:
        return _usage(f"--alpha: the false-fail budget must be in (0, 1), got {args.alpha:g}")
    if args.groups is not None and not [g for g in args.groups.split(",") if g.strip()]:
        return _usage("--groups: names no group (leave it out to run every group)")
    zero_on = [s.strip() for s in (getattr(args, "exit_zero_on", "") or "").split(",") if s.strip()]
    if [s for s in zero_on if s not in ("partial", "quick")]:
        return _usage(f"--exit-zero-on: each must be 'partial' or 'quick', got {args.exit_zero_on!r}")
    try:
        call_bytes = apply_call_bytes(getattr(args, "call_bytes", None))
    except InvalidSize as e:
        return _usage(str(e))
    try:
        waivers = _load_waivers(args.waivers)
    except WaiverError as e:
        return _usage(str(e))
    device = load(args.device)
    try:
        chosen = chosen_groups(args.groups)
    except ValueError as e:
        return _usage(str(e))
    names = list(chosen)
    ctx = Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick, call_bytes=call_bytes)

    if args.in_process:
        from specsim.conformance.core.scope import of_run
        scopes: dict = {}
        results = run_conformance(device, ctx, names, scopes)
        record = None
        if waivers is not None:
            from specsim.conformance.verdict.conform_waivers import apply
            results, record = apply(results, waivers, device_spec=args.device,
                                    device_name=getattr(device, "name", None), engine=getattr(device, "engine", None))
        doc = document(args.device, device, ctx, results, names, scope=of_run(scopes))
        if record is not None:
            doc["waivers"] = record
        doc["run"] = {"isolation": "in-process", "complete": True, "command": list(sys.argv),
                      "finished_groups": names}
        if args.out:
            write_json_atomic(os.path.join(args.out, "conformance.json"), doc)
    else:
        from specsim.conformance.run.isolation import ResumeMismatch, run_isolated
        from specsim.conformance.run.progress import Progress

        if args.out and not args.resume:
            _warn_if_incomplete(args.out)
        progress = Progress(total=len(names))
        try:
            doc = run_isolated(args.device, device, ctx, chosen, out_dir=args.out,
                               timeout_s=args.group_timeout, resume=args.resume, progress=progress,
                               waivers=waivers, jobs=jobs)
        except ResumeMismatch as e:
            return _usage(str(e))
        results = [CheckResult.from_json(d) for d in doc["checks"]]

    print(conform_table(results) if getattr(args, "table", False) else _failing(results))
    s = doc["summary"]
    waived = sum(r.waiver is not None for r in results)
    print(f"\n{device.name}: {s['pass']} pass, {s['fail']} fail, {s['not_supported']} not supported, {s['error']} error"
          + (f" ({waived} of the fail/error waived)" if waived else ""))
    if doc.get("waivers"):
        print("\n".join(summary_lines(doc["waivers"])))
    print(verdict_line(doc["verdict"], doc.get("run")))
    print("\n".join(scope_lines(doc)[1:]))
    if args.out:
        print(f"wrote {os.path.join(args.out, 'conformance.json')}")
        if not args.no_report:
            write_reports(args.out)
    status = doc["verdict"]["status"]
    return 0 if status in zero_on else EXIT_CODES.get(status, 1)


def apply_call_bytes(text: str | None) -> int:
    """``--call-bytes`` as bytes (None: ``SPECSIM_CALL_BYTES``, else 1 GiB), set in this process's environment so
    that every process of the run (each isolated group) holds its calls to it. ``InvalidSize`` on a bad size."""
    from specsim.conformance.core.context import CALL_BYTES_ENV, call_bytes_from_env, parse_bytes
    if text is None:
        return call_bytes_from_env()
    value = parse_bytes(text)
    os.environ[CALL_BYTES_ENV] = str(value)
    return value


def _failing(results) -> str:
    """The failing and errored checks, each with its whole detail (the reports have every row)."""
    bad = [r for r in results if r.status in ("fail", "error")]
    if not bad:
        return f"{len(results)} checks, none failed (every row: --table, or the reports)"
    out = [f"{len(bad)} failing check(s) of {len(results)} (every row: --table, or the reports):"]
    for r in bad:
        newer = r.extra.get("newer_than_declared")
        out.append(f"\n{_status_cell(r)}  {r.name}" + (f"  (new in SPEC {r.extra.get('since')}, after the version the "
                                                        "device declares: shown, not counted)" if newer else ""))
        if r.waiver:
            out.append(f"  waived: {r.waiver['reason']} [{r.waiver['link']}]")
        out += [f"  {line}" for line in (r.detail or "").splitlines()]
        if r.extra.get("replay"):
            out.append(f"  replay: {r.extra['replay']} [--npz case.npz]")
    return "\n".join(out)


def scope_lines(doc: dict) -> list[str]:
    """The verdict's scope as the reports open with it: what the device declared, the largest call checked
    per noise mode, volume, seed and α, what did not run."""
    from reports.tables import scope_rows
    rows = [r for r in scope_rows(doc) if r[0] not in ("verdict", "why")]
    width = max((len(a) for a, _ in rows), default=0)
    return ["", "scope:"] + [f"  {a:<{width}}  {b}" for a, b in rows]
