"""``specsim field --out DIR``: the field table (docs/field.md) from the field adapters that load where it runs.

Every device registered from ``devices/field/`` (``specsim devices`` lists
them) is loaded; each that loads runs the conformance groups (each in a
subprocess, as ``specsim conform`` runs them), its failures are sorted into the
known deviations of the waiver files beside the adapters, and the deviations
with a confirming experiment are re-checked. Those that do not load are listed
with why (package missing, no GPU, wheel too large).

Example (CPU: vLLM's kernels in Triton's interpreter, at the quick sizes)::

    specsim field --out /tmp/field --quick --devices vllm-interpret

then, with a CUDA machine's run copied back, the merged table::

    specsim field --out docs-run --merge gpu/field.json cpu/field.json --render-only

writes ``DIR/field.json`` and ``DIR/field.md``, and ``DIR/upstream/``: one report per confirmed
deviation judged a loss of losslessness or an RNG-contract break, written for the engine's tracker
(``specsim.field.upstream``; its reproduction is run unless ``--no-repro-run``).
docs/field.md shows the stored merged table, ``docs/field-results/field.json``, in a block that
``python -m specsim.field.table --write docs/field.md`` renders.

A field drafter (``specsim.engine.proposers.checked.FIELD``: transformers' candidate generators) gets one row,
its ``specsim proposer`` checks, with ``--proposers`` (run here; with no ``--devices``, no device runs), or from a
recorded ``specsim proposer NAME --json FILE`` with ``--proposer-results NAME=FILE``::

    specsim field --out /tmp/p --merge docs/field-results/field.json --proposers transformers-gemma4-assistant

One engine across its releases (``--releases``, with ``--devices`` of one engine or ``--engine``)::

    specsim field --out /tmp/rel --releases 5.23.0,5.24.0 --devices transformers --quick --groups L1-edges

installs each release beside the environment (``specsim.field.releases``: pip with the user's configuration, cached
under ``~/.cache/specsim/field/releases/``), runs ``specsim field`` with that release first on ``PYTHONPATH``, and
renders one table: a column a release, a row a group or a failing check.

Exit status: 1 when a failing check is new or covered only by a waiver judged on another release, 0 when
every failing check is waived on the release it ran on; 2 for bad usage.
"""

from __future__ import annotations

from specsim.conformance.run.runner import GROUPS

HELP = "run the field's real samplers (devices/field/) and write the field table (field.json, field.md)"


def add_arguments(p):
    p.add_argument("--out", required=True, help="directory for field.json, field.md and each device's run")
    p.add_argument("--devices", nargs="+", default=None, help="field devices to run (default: every one registered)")
    p.add_argument("--groups", default=None, metavar="G1,G2",
                   help=f"comma-separated conformance groups (default: all of {', '.join(GROUPS)})")
    p.add_argument("--quick", action="store_true", help="the groups' quick sizes")
    p.add_argument("--group-timeout", type=float, default=None, metavar="SECONDS",
                   help="each group's time limit (default: specsim conform's); past it the group is an error")
    p.add_argument("--where", default=None, help="the machine, in words, for the table (default: platform)")
    p.add_argument("--merge", nargs="*", default=[], metavar="FIELD_JSON",
                   help="fold these earlier field.json runs (other machines) into the table")
    p.add_argument("--render-only", action="store_true", help="run nothing: merge and render")
    p.add_argument("--rewaive", action="store_true",
                   help="sort the merged runs' failing checks again by this checkout's waiver files")
    p.add_argument("--extra", nargs=2, action="append", default=[], metavar=("TITLE", "MARKDOWN_FILE"),
                   help="append a section (title, markdown file) to the table")
    p.add_argument("--no-repro-run", action="store_true",
                   help="write the upstream reports (DIR/upstream/) without running their reproductions")
    p.add_argument("--releases", default=None, metavar="A,B,...",
                   help="run one engine's releases side by side (with --devices of one engine, or --engine): each "
                        "installed by pip into a cached directory (SPECSIM_RELEASE_CACHE, default "
                        "~/.cache/specsim/field/releases) and put first on PYTHONPATH for its run")
    p.add_argument("--engine", default=None, help="with --releases: the engine (its devices run; e.g. transformers)")
    p.add_argument("--proposers", nargs="+", default=[], metavar="NAME",
                   help="field proposers to run through specsim proposer (10000 calls a case; --quick 3000), a row "
                        "each; without --devices no device runs")
    p.add_argument("--proposer-results", nargs="+", default=[], metavar="NAME=FILE",
                   help="fold recorded `specsim proposer NAME --json FILE` results in, a row each")


def _machine() -> str:
    import platform
    try:
        import torch
        if torch.cuda.is_available():
            return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    except ImportError:
        pass
    return f"CPU ({platform.machine()}), no GPU"


def _why_not(error: str) -> str:
    """The loader's own message out of the registry's error text.

    >>> _why_not("device spec 'x': calling m:f failed: ImportError: no wheel here")
    'no wheel here'
    >>> _why_not("device spec 'x': calling m:f failed: ImportError('no') [ImportError: no wheel here]")
    'no wheel here'
    """
    import re
    m = re.search(r"\[\w+: (.*)\]$", error, re.S) or re.search(r": calling \S+ failed: \w+: (.*)$", error, re.S)
    return m.group(1) if m else error


def _run_device(name, device, groups, quick, out_dir, where, timeout_s=None):
    import json
    import os

    from specsim.field import table as field
    from specsim.conformance.run.isolation import group_path, run_isolated
    from specsim.conformance.core.spec_versions import judged_version
    from specsim.conformance.run.runner import Context, available_groups
    ctx = Context(seed=0, quick=quick)
    run_dir = os.path.join(out_dir, name)
    print(f"field: {name}: {len(groups)} group(s){' (quick)' if quick else ''}", flush=True)
    run_isolated(name, device, ctx, groups, out_dir=run_dir, timeout_s=timeout_s)
    by_group = {}
    for g in groups:
        with open(group_path(run_dir, g)) as f:
            by_group[g] = json.load(f)["results"]
    waivers = field.field_waivers(name)
    engine = getattr(device, "engine", name)
    findings = field.classify(name, by_group, waivers, engine)
    field.confirm(findings, device, quick)
    command = f"specsim field --out DIR --devices {name}" + (" --quick" if quick else "") + (
        f" --groups {','.join(groups)}" if set(groups) != set(available_groups()) else "")
    return field.device_entry(name, by_group, None, engine, quick, where, command, findings, waivers,
                              judged_version(device.capabilities))


def _release_run(release: str, engine, args, names: list[str], where: str) -> dict:
    """One release's column: installed (or reused), ``specsim field`` run with it first on the path, read back."""
    import json
    import os
    import subprocess
    import sys

    from specsim.field import releases
    from specsim.conformance.run.isolation import group_path
    run = {"release": release, "quick": args.quick, "groups": names, "install": None, "error": None, "entries": [],
           "by_group": {}}
    try:
        installed = releases.install(engine.distribution, release, log=lambda line: print(line, flush=True))
    except releases.ReleaseError as e:
        run["error"] = f"not installed: {e}"
        print(f"field: {engine.distribution} {release}: {run['error']}")
        return run
    run["install"] = {"path": installed.path, "pins": list(installed.pins), "reused": installed.reused}
    out = os.path.join(args.out, "releases", f"{engine.distribution}-{release}")
    cmd = [sys.executable, "-m", "specsim.cli", "field", "--out", out, "--devices", *engine.devices,
           "--groups", ",".join(names), "--where", where] + (["--quick"] if args.quick else []) + (
           ["--group-timeout", str(args.group_timeout)] if args.group_timeout else [])
    print(f"field: {engine.distribution} {release}: {' '.join(cmd[1:])}  (PYTHONPATH first: {installed.path})",
          flush=True)
    done = subprocess.run(cmd, env=releases.environ_with(installed.path), stdin=subprocess.DEVNULL)
    try:
        with open(os.path.join(out, "field.json")) as f:
            entries = json.load(f)["devices"]
    except (OSError, ValueError, KeyError) as e:
        run["error"] = f"its specsim field run (exit {done.returncode}) wrote no table: {e}"
        return run
    for e in entries:
        if e["available"] and e.get("release") != release:
            run["error"] = (f"the run imported {e['engine']}, not {engine.distribution} {release} "
                            f"(was {installed.path} first on the path?)")
            return run
        if e["available"]:
            run["by_group"][e["device"]] = {}
            for g in e["groups"]:
                with open(group_path(os.path.join(out, e["device"]), g)) as f:
                    run["by_group"][e["device"]][g] = {c["name"]: c["status"] for c in json.load(f)["results"]}
    run["entries"] = entries
    return run


def _releases_block(args, names: list[str], where: str) -> dict:
    """``--releases``: every release's run, as ``field.json``'s ``releases`` entry."""
    from specsim.conformance.run.runner import available_groups
    from specsim.field import releases, table as field
    name, engine = releases.engine_of(args.devices, args.engine)
    wanted = [releases.check_release(r) for r in args.releases.split(",") if r.strip()]
    if not wanted:
        raise ValueError("--releases: no release given (e.g. --releases 5.23.0,5.24.0)")
    runs = [_release_run(r, engine, args, names, where) for r in dict.fromkeys(wanted)]
    failing = field.failing_checks(runs)
    for run in runs:
        by_group = run.pop("by_group")
        run["statuses"] = {d: {c: st for g in by_group.get(d, {}).values() for c, st in g.items() if c in checks}
                           for d, checks in failing.items()}
    command = (f"specsim field --out DIR --releases {','.join(dict.fromkeys(wanted))} "
               f"--devices {' '.join(engine.devices)}" + (" --quick" if args.quick else "")
               + (f" --groups {','.join(names)}" if set(names) != set(available_groups()) else ""))
    return field.release_runs_block(name, engine.distribution, list(engine.devices), runs, where=where,
                                    quick=args.quick, groups=names, command=command)


def _proposer_run(name: str, quick: bool, where: str) -> dict:
    """One field proposer through ``specsim proposer``'s checks, as a row of the table."""
    from specsim.conformance.proposer.proposers import check
    from specsim.engine.proposers.checked import FIELD, load
    from specsim.field import table as field
    if name not in FIELD:
        raise ValueError(f"--proposers: {name!r} is not a field proposer ({', '.join(sorted(FIELD))})")
    print(f"field: proposer {name}{' (quick)' if quick else ''}", flush=True)
    proposer = load(name)
    result = check(proposer, samples=3000 if quick else 10_000)
    command = f"specsim field --out DIR --proposers {name}" + (" --quick" if quick else "")
    return field.proposer_entry(name, result, getattr(proposer, "engine", name), where, command, quick)


def _recorded_proposer(spec: str, where: str) -> dict:
    """A row from a recorded ``specsim proposer NAME --json FILE`` (``spec``: ``NAME=FILE``)."""
    import json

    from specsim.field import table as field
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise ValueError(f"--proposer-results: {spec!r} is not NAME=FILE")
    with open(path) as f:
        result = json.load(f)
    if not result.get("engine"):
        raise ValueError(f"--proposer-results: {path} names no engine (written by a `specsim proposer` whose proposer "
                         "declares none)")
    return field.proposer_entry(name, result, result["engine"], result.get("where") or where,
                                result.get("command") or f"specsim proposer {name}", result["samples"] < 10_000)


def _write_upstream_reports(doc: dict, out_dir: str, run_repros: bool) -> None:
    import os

    from specsim.field import upstream as field_reports
    written = field_reports.write_reports(doc, out_dir, run_repros=run_repros)
    folder = os.path.join(out_dir, "upstream")
    print(f"wrote {folder}: {len(written)} upstream report(s)" + (f" ({', '.join(written)})" if written else ""))


def run(args) -> int:
    import json
    import os

    from devices.registry import is_field, survey
    from specsim.field import table as field
    from specsim.conformance.run.runner import chosen_groups
    from specsim.conformance.run.files import write_json_atomic

    docs = []
    for path in args.merge:
        with open(path) as f:
            docs.append(json.load(f))
    if getattr(args, "engine", None) and not getattr(args, "releases", None):
        print("specsim field: --engine goes with --releases (to run a device on the installed release: --devices)")
        return 2
    if not args.render_only:
        try:
            chosen = chosen_groups(args.groups)
        except ValueError as e:
            print(f"specsim field: {e}")
            return 2
        names = list(chosen)
    if not args.render_only and getattr(args, "releases", None):
        try:
            block = _releases_block(args, names, args.where or _machine())
        except ValueError as e:
            print(f"specsim field: {e}")
            return 2
        docs.append({"devices": [], "releases": [block]})
    elif not args.render_only:
        where = args.where or _machine()
        entries = []
        try:
            entries += [_recorded_proposer(spec, where) for spec in getattr(args, "proposer_results", [])]
            entries += [_proposer_run(name, args.quick, where) for name in getattr(args, "proposers", [])]
        except (OSError, ValueError) as e:
            print(f"specsim field: {e}")
            return 2
        only_proposers = (getattr(args, "proposers", []) or getattr(args, "proposer_results", [])) and not args.devices
        for a in survey():
            if only_proposers or not is_field(a) or (args.devices and a.entry.name not in args.devices):
                continue
            if a.device is None:
                why = _why_not(a.error)
                entries.append(field.device_entry(a.entry.name, None, why, "", args.quick, where, "", [], []))
                print(f"field: {a.entry.name}: not available: {why}")
                continue
            entries.append(_run_device(a.entry.name, a.device, chosen, args.quick, args.out,
                                       where, args.group_timeout))
        docs.append({"devices": entries})
    doc = field.merge(docs)
    if getattr(args, "rewaive", False):
        field.rewaive(doc)
    for title, path in args.extra:
        with open(path) as f:
            doc["extras"][title] = f.read()
    os.makedirs(args.out, exist_ok=True)
    write_json_atomic(os.path.join(args.out, "field.json"), doc)
    with open(os.path.join(args.out, "field.md"), "w") as f:
        f.write(field.render(doc))
    _write_upstream_reports(doc, args.out, run_repros=not getattr(args, "no_repro_run", False))
    entries = doc["devices"] + [e for b in doc.get("releases", []) for r in b["runs"] for e in r.get("entries", [])]
    findings = [f for e in entries for f in e["findings"]]
    new = [f for f in findings if field.standing(f) == field.NEW]
    elsewhere = [f for f in findings if field.standing(f) == field.JUDGED_ELSEWHERE]
    print(f"wrote {os.path.join(args.out, 'field.md')}: {len(doc['devices'])} implementation(s)"
          + (f", {sum(len(b['runs']) for b in doc.get('releases', []))} release run(s)" if doc.get("releases") else "")
          + f", {len(findings)} failing check(s), {len(new)} new, {len(elsewhere)} judged on another release")
    return 1 if new or elsewhere else 0
