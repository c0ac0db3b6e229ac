"""``specsim report``: turn conformance, mutant and simulation JSON into report.html, report.md, report.json."""

from __future__ import annotations

import os
import sys

HELP = "render report.html (with plots), report.md (PR tables) and report.json from the JSON of earlier runs"


def add_arguments(p):
    p.add_argument("--in", dest="inputs", action="append", required=True, metavar="DIR",
                   help="a directory (searched two levels deep) or a JSON file: conformance.json, mutants.json, "
                        "`specsim simulate --json` output; repeat for a device × check matrix over several runs")
    p.add_argument("--out", default=None, metavar="DIR", help="where to write (default: the first --in directory)")
    p.add_argument("--no-plots", action="store_true", help="leave the figures out (faster; no matplotlib needed)")


def run(args) -> int:
    from reports import load_inputs
    from reports.render import build, write

    missing = [p for p in args.inputs if not os.path.exists(p)]
    if missing:
        print(f"specsim report: --in: {', '.join(missing)} does not exist", file=sys.stderr)
        return 2
    out = args.out or (args.inputs[0] if os.path.isdir(args.inputs[0]) else os.path.dirname(args.inputs[0]) or ".")
    inputs = load_inputs(args.inputs)
    if inputs.empty:
        print(f"specsim report: no conformance, mutants or simulation JSON under {', '.join(args.inputs)}",
              file=sys.stderr)
        for note in inputs.notes:
            print(f"  {note}", file=sys.stderr)
        return 2
    report = build(inputs, with_plots=not args.no_plots)
    for note in report["notes"]:
        print(f"note: {note}", file=sys.stderr)
    for path in write(report, out):
        print(f"wrote {path}")
    print(report["headline"])
    return 0
