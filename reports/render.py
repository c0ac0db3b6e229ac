"""Build the report from its inputs and write ``report.html``, ``report.md`` and ``report.json``.

``build`` gathers tables, figures and notes (what is missing, said plainly);
the writers in ``reports.html`` and ``reports.markdown`` only lay them out.

Example::

    from reports import render_directory
    render_directory(["runs/torch"], "runs/torch")   # {'files': [...report.html, ...], 'notes': [...]}
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile

from reports import plots, tables
from reports.inputs import Inputs, load_inputs
from reports.tables import Table

REPORT_SCHEMA_VERSION = 1


def _provenance_table(conformance) -> Table | None:
    if not conformance:
        return None
    provs = [tables.provenance(doc) for _, doc in conformance]
    keys = [k for k in provs[0]] + [k for p in provs[1:] for k in p if k not in provs[0]]
    header = ["what was run"] + [p["device"] for p in provs]
    return Table("What was run", header, [[k] + [p.get(k, "") for p in provs] for k in keys])


def _gaps(inputs: Inputs, figures: list, plots_ok: bool, why_no_plots: str) -> list[str]:
    notes = list(inputs.notes)
    if inputs.empty:
        notes.append("no inputs found: expected conformance.json, mutants.json or simulation JSON")
    if not plots_ok:
        notes.append(why_no_plots)
    keys = {f.key for f in figures}
    has_stat = any(c.get("p_value") is not None for _, d in inputs.conformance for c in tables.checks_of(d))
    if inputs.conformance and not has_stat:
        notes.append("no statistical check in the conformance input (no p-values): the p-value plot is absent "
                     "(the statistical layer did not run or is not in this checkout)")
    if plots_ok and has_stat and "dist-tokens" not in keys:
        notes.append("no statistical check carries observed counts and the exact law in `extra` (keys `observed` "
                     "and `expected_probs`): the per-position frequency plot is absent")
    if plots_ok and has_stat and "dist-num_accepted" not in keys:
        notes.append("no number-accepted check carries observed counts and the exact law in `extra`: "
                     "the number-accepted plot is absent")
    for _, doc in inputs.conformance:
        run = doc.get("run") or {}
        if run and not run.get("complete", True):
            stopped = run.get("interrupted") if isinstance(run.get("interrupted"), dict) else {}
            how = (f"stopped by {stopped.get('signal')}" + (f" in {stopped['group']}" if stopped.get("group") else "")
                   + "; ") if stopped else ""
            notes.append(f"{tables.device_label(doc)}: the run is INCOMPLETE ({how}pending groups: "
                         f"{', '.join(run.get('pending_groups') or []) or '?'}); continue it with --resume")
    if not inputs.simulations:
        notes.append("no simulation JSON (`specsim simulate --json`): acceptance tables absent")
    elif not any(tables.sweep_points(s) for _, s in inputs.simulations):
        notes.append("no temperature sweep in the simulation input: the AL-by-temperature table is absent")
    return notes


def build(inputs: Inputs, *, with_plots: bool = True) -> dict:
    """Everything the writers lay out: headline, provenance, sections, figures, notes."""
    plots_ok, why = plots.available() if with_plots else (False, "plots not requested")
    figures = plots.all_figures(inputs) if plots_ok else []
    sections = []
    if inputs.conformance:
        items: list = [tables.summary_table(inputs.conformance)]
        if len(inputs.conformance) > 1:
            items.append(tables.matrix_table(inputs.conformance))
        for _, doc in inputs.conformance:
            items += [tables.problem_table(doc), tables.waived_table(doc), tables.stale_waivers_table(doc),
                      tables.layer_table(doc), tables.statistical_table(doc)]
        for _, doc in inputs.conformance:
            t = tables.all_checks_table(doc)
            if t:
                items.append(("details", f"{t.title} ({len(t.rows)})", t))
        sections.append(("Conformance", [i for i in items if i is not None]))
    if inputs.mutants:
        sections.append(("Mutants", [tables.mutants_table(inputs.mutants)]))
    if inputs.simulations:
        items = [("code", b) for b in (tables.counts_block(s, d) for s, d in inputs.simulations) if b]
        items += [t for t in (tables.per_position_table(inputs.simulations),
                              tables.temperature_table(inputs.simulations)) if t]
        sections.append(("Simulation", items))
    verdicts = [f"{tables.device_label(d)}: {tables.verdict_shown(d)}" for _, d in inputs.conformance]
    killed = [r.get("killed") for _, recs in inputs.mutants for r in recs]
    headline = "; ".join(verdicts + ([f"mutants killed {sum(k is True for k in killed)}/{len(killed)}"] if killed else [])
                         + ([f"{len(inputs.simulations)} simulation run(s)"] if inputs.simulations else []))
    return {
        "title": "specsim report — " + (", ".join(tables.device_label(d) for _, d in inputs.conformance) or "no device"),
        "headline": headline or "no conformance, mutant or simulation input",
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "banner": [t for t in (tables.scope_table(d) for _, d in inputs.conformance) if t is not None],
        "provenance": _provenance_table(inputs.conformance),
        "sections": sections, "figures": figures, "notes": _gaps(inputs, figures, plots_ok, why),
        "inputs": inputs,
    }


def _table_json(t: Table) -> dict:
    return {"title": t.title, "header": t.header, "rows": t.rows, "note": t.note}


def to_json(report: dict) -> dict:
    """``report.json``: the inputs combined, plus the tables as shown and the list of figures."""
    inputs: Inputs = report["inputs"]
    flat = [item[2] if isinstance(item, tuple) and item[0] == "details" else item
            for _, items in report["sections"] for item in items]
    return {
        "kind": "specsim.report", "schema_version": REPORT_SCHEMA_VERSION, "generated": report["generated"],
        "headline": report["headline"], "sources": inputs.sources(), "notes": report["notes"],
        "conformance": [{"source": s, "document": d} for s, d in inputs.conformance],
        "mutants": [{"source": s, "records": r} for s, r in inputs.mutants],
        "simulations": [{"source": s, "document": d} for s, d in inputs.simulations],
        "tables": [_table_json(t) for t in flat if isinstance(t, Table)],
        "figures": [{"key": f.key, "title": f.title, "caption": f.caption} for f in report["figures"]],
    }


def _write_text_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.splitext(path)[1])
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is for sharing, like any file we write
    os.replace(tmp, path)


def write(report: dict, out_dir: str) -> list[str]:
    """Write the three files; returns their paths."""
    from reports import html, markdown
    paths = [os.path.join(out_dir, n) for n in ("report.html", "report.md", "report.json")]
    _write_text_atomic(paths[0], html.render(report))
    _write_text_atomic(paths[1], markdown.render(report))
    _write_text_atomic(paths[2], json.dumps(to_json(report), indent=1, default=str) + "\n")
    return paths


def render_directory(paths: list[str], out_dir: str, *, with_plots: bool = True) -> dict:
    """Read the inputs under ``paths``, write the report into ``out_dir``: ``{"files": [...], "notes": [...]}``."""
    report = build(load_inputs(paths), with_plots=with_plots)
    return {"files": write(report, out_dir), "notes": report["notes"], "figures": len(report["figures"])}
