"""The SPEC §12 mutants against their named L1-sampler checks over suite seeds, with injected noise and in
black box, beside the correct torch device's whole L1-sampler group (both ways) at the same seeds.

    python tools/sampler_seed_table.py [--seeds 0-19] [--quick] [--only ID,ID] [--json FILE] [--record FILE]

A mutant's cell is ``K`` when its named check (``killed_by`` in ``specsim.mutants.zoo.SAMPLER``: an edge,
run in each order profile it holds in, or ``L1-sampler/precision``) fails at that seed, ``S`` when it passes,
``-`` where the class has no black-box form (a precision defect is seen token for token only under
injected noise). The correct device's cell is ``pass`` when every check of ``sampler_group`` passes. The
edges' coins and the seeded runs' seeds both derive from the suite seed (``case_seed``), as in
``specsim conform --groups L1-sampler --seed N``, so a cell replays with that command.

``--record FILE`` writes two tables as a record of measured figures (``specsim.figures.records``), which
docs/statistics.md renders: ``mutants`` (each mutant's named check and the seeds it killed at, both ways)
and ``precision`` (``L1-sampler/precision`` per device: decisions a run, decisions beyond the tolerance
per run, runs failing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from devices.torch_device import make_cpu_device
from specsim.conformance.stats.plan import run_plan
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.sampler.group import edge_check, edge_law_check, sampler_group
from specsim.conformance.checks.sampler.precision import SAMPLER_QUICK_REQUESTS, SAMPLER_REQUESTS, sampler_precision_check
from specsim.conformance.core.black_box import BlackBox
from specsim.mutants.zoo import SAMPLER
from specsim.testing.sampler_edges import SAMPLER_EDGES

EDGE_PREFIX, PRECISION = "L1-sampler/edge/", "L1-sampler/precision"


FIGURES: dict = {}
"""``(seed, label) → the precision check's extra`` (decisions, beyond, tv_bound, device seconds) of each run."""


def named_check(device, killed_by: str, ctx: Context, black_box: bool, label: str = "") -> str:
    """``"K"`` (the named check fails or errors), ``"S"`` (it passes) or ``"-"`` (no black-box form)."""
    if killed_by.startswith(PRECISION):
        if black_box:
            return "-"
        size = SAMPLER_QUICK_REQUESTS if ctx.quick else SAMPLER_REQUESTS
        result = sampler_precision_check(device, seed=ctx.seed, requests=size)
        FIGURES[(ctx.seed, label)] = result.extra
        return "K" if result.status != "pass" else "S"
    edge_name, _, only_order = killed_by.removeprefix(EDGE_PREFIX).partition("/")
    edge = next(e for e in SAMPLER_EDGES if e.name == edge_name)
    dtype = "float64" if "float64" in device.capabilities.dtypes else device.capabilities.dtypes[0]
    plan = run_plan(device.capabilities, ctx) if black_box else None
    for order in edge.orders:
        if only_order and order != only_order:
            continue
        name = f"{EDGE_PREFIX}{edge.name}/{order}"
        result = (edge_law_check(device, edge, order, dtype, name, ctx, plan) if black_box
                  else edge_check(device, edge, order, dtype, name, ctx))
        if result.status in ("fail", "error"):
            return "K"
    return "S"


def seeds_of(text: str) -> list[int]:
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-19")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default="", help="comma-separated mutant ids (default: the whole SAMPLER list)")
    parser.add_argument("--no-correct", action="store_true", help="skip the correct device's group")
    parser.add_argument("--json", default="")
    parser.add_argument("--record", default="", metavar="FILE",
                        help="write the mutants' and the precision check's tables as a record of measured figures")
    args = parser.parse_args(argv)
    mutants = [m for m in SAMPLER if not args.only or m.id in args.only.split(",")]
    built = {m.id: m.make() for m in mutants}
    rows, start = [], time.time()
    for seed in seeds_of(args.seeds):
        ctx = Context(seed=seed, quick=args.quick)
        row = {"seed": seed}
        if not args.no_correct:
            for label, device in (("torch", make_cpu_device()), ("torch (black box)", BlackBox(make_cpu_device()))):
                results = sampler_group(device, ctx)
                bad = [r.name for r in results if r.status in ("fail", "error")]
                row[label] = "pass" if not bad else "FAIL " + ", ".join(bad)
                FIGURES[(seed, label)] = next((r.extra for r in results if r.name == PRECISION), None)
        for m in mutants:
            row[m.id] = named_check(built[m.id], m.killed_by, ctx, False, m.id) + \
                named_check(BlackBox(built[m.id]), m.killed_by, ctx, True)
        rows.append(row)
        print(json.dumps(row), flush=True)
    columns = [c for c in rows[0] if c != "seed"]
    print(f"\n{len(rows)} seeds, {'quick' if args.quick else 'full'} sizes, {time.time() - start:.0f} s; "
          "cell: injected-noise then black box (K killed, S survived, - no black-box form)\n")
    print("| seed | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for row in rows:
        print(f"| {row['seed']} | " + " | ".join(str(row[c]) for c in columns) + " |")
    for label in sorted({label for _, label in FIGURES}):
        runs = [FIGURES[key] for key in sorted(FIGURES) if key[1] == label and FIGURES[key]]
        if runs:
            print(f"{PRECISION} on {label}: beyond the tolerance per run {[r['beyond'] for r in runs]}, decisions "
                  f"{sum(r['decisions'] for r in runs)}, largest TV bound {max(r['tv_bound'] for r in runs):.2g}, "
                  f"device seconds per run {min(r['device_seconds'] for r in runs)}–{max(r['device_seconds'] for r in runs)}")
    survivors = [(row["seed"], m.id) for row in rows for m in mutants if "S" in row[m.id]]
    correct_fails = [(row["seed"], c) for row in rows for c in ("torch", "torch (black box)")
                     if c in row and row[c] != "pass"]
    print(f"\nsurvivals: {survivors or 'none'}; correct-device failures: {correct_fails or 'none'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "precision": {f"{seed}/{label}": extra for (seed, label), extra in FIGURES.items()}},
                      f, indent=1)
    if args.record:
        write_record(args.record, rows, mutants)
    return 1 if survivors or correct_fails else 0


def _count(cells: list[str]) -> str:
    if all(c == "-" for c in cells):
        return "—"
    return f"{sum(c == 'K' for c in cells)}/{len(cells)}"


def _span(values) -> str:
    return f"{min(values)}–{max(values)}" if min(values) != max(values) else str(min(values))


def write_record(path: str, rows: list[dict], mutants) -> None:
    """The record ``--record`` writes: ``mutants`` and ``precision`` (see the module's docstring)."""
    from specsim.figures.records import cpu_record
    from specsim.figures import records
    record = cpu_record()
    record["command"] = " ".join(["python tools/sampler_seed_table.py", *sys.argv[1:]])
    correct = [label for label in ("torch", "torch (black box)") if label in rows[0]]
    mutant_rows = [[f"`{m.id}`", f"`{m.killed_by.removeprefix('L1-sampler/')}`",
                    _count([row[m.id][0] for row in rows]), _count([row[m.id][1] for row in rows])]
                   for m in mutants]
    mutant_rows += [[f"correct {label}", "every check of L1-sampler", f"passes {sum(row[label] == 'pass' for row in rows)}/"
                     f"{len(rows)}", ""] for label in correct]
    precision = []
    for label in sorted({label for _, label in FIGURES}):
        runs = [FIGURES[key] for key in sorted(FIGURES) if key[1] == label and FIGURES[key]]
        if runs:
            precision.append([f"`{label}`", _span([r["decisions"] for r in runs]), _span([r["beyond"] for r in runs]),
                              f"{sum(r['beyond'] > 0 for r in runs)} of {len(runs)}"])
    record["tables"] = {
        "mutants": {"columns": ["mutant", "named check", "killed, injected noise", "killed, black box"],
                    "rows": mutant_rows, "note": "— : no black-box form (a precision defect is seen only under "
                                                 "injected noise)."},
        "precision": {"columns": ["device", "decisions a run", "beyond the tolerance, per run", "runs with any"],
                      "rows": precision}}
    records.write(record, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
