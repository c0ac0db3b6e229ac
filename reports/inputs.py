"""Find and read a report's inputs: conformance, mutant and simulation JSON.

Reports are built only from these JSON files (never from live objects), so an
archived run can be re-rendered later. Every file is read defensively: a
file that is not JSON, or of no known kind, becomes a note in the report,
not an exception.

Kinds, recognised by content (not by name):

- *conformance*: a dict with ``checks`` (list) and ``schema_version`` — what
  ``specsim conform`` writes;
- *mutants*: a list of dicts with ``name`` and ``killed``, or a dict with such
  a list under ``mutants`` — what ``specsim mutants`` writes;
- *simulation*: a dict with any of ``acc_counts``, ``mean_acceptance_length``,
  or a temperature sweep (``sweep``/``temperature_sweep``/``rows``) — what
  ``specsim simulate --json`` writes.

Example::

    inputs = load_inputs(["runs/torch", "runs/triton/conformance.json"])
    [src for src, _ in inputs.conformance]   # ['runs/torch/conformance.json', ...]
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

SKIP_KINDS = {"specsim.conformance.group", "specsim.report"}
"""Files we write ourselves that are not inputs (per-group partials, our own report.json)."""

SWEEP_KEYS = ("temperature_sweep", "sweep", "rows")


@dataclass
class Inputs:
    conformance: list[tuple[str, dict]] = field(default_factory=list)
    mutants: list[tuple[str, list[dict]]] = field(default_factory=list)
    simulations: list[tuple[str, dict]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.conformance or self.mutants or self.simulations)

    def sources(self) -> list[str]:
        return [s for s, _ in self.conformance] + [s for s, _ in self.mutants] + [s for s, _ in self.simulations]


def _json_files(path: str, depth: int = 2) -> list[str]:
    """``path`` itself, or the ``*.json`` files under it (``depth`` levels; ``groups/`` partials skipped)."""
    if os.path.isfile(path):
        return [path]
    out = []
    for root, dirs, files in os.walk(path):
        level = os.path.relpath(root, path).count(os.sep) + (root != path)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "groups" and level < depth)
        out.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".json") and not f.startswith("."))
    return out


def mutant_records(doc) -> list[dict] | None:
    """The per-mutant records of a mutants document, or None if ``doc`` is not one."""
    records = doc.get("mutants") if isinstance(doc, dict) else doc
    if isinstance(records, dict):  # {"name": {...}} form
        records = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "value": v} for k, v in records.items()]
    if isinstance(doc, dict) and isinstance(records, list) and isinstance(doc.get("black_box"), list):
        # `specsim mutants` also judges each mutant as a black box (no injected noise): same table, marked
        records = records + [dict(r, name=f"{r.get('name', '?')} [black box]") for r in doc["black_box"]
                             if isinstance(r, dict)]
    if isinstance(records, list) and records and all(isinstance(r, dict) for r in records) \
            and any("killed" in r for r in records):
        return records
    return None


def is_conformance(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("checks"), list) and "schema_version" in doc


def is_simulation(doc) -> bool:
    return isinstance(doc, dict) and (
        "acc_counts" in doc or "mean_acceptance_length" in doc or any(k in doc for k in SWEEP_KEYS)
        or isinstance(doc.get("simulations"), list))


def load_inputs(paths: list[str]) -> Inputs:
    """Read every input under ``paths`` (directories or files)."""
    inputs = Inputs()
    seen = set()
    for path in paths:
        if not os.path.exists(path):
            inputs.notes.append(f"input {path}: does not exist")
            continue
        for file in _json_files(path):
            real = os.path.realpath(file)
            if real in seen:
                continue
            seen.add(real)
            _classify(file, inputs)
    return inputs


def _classify(file: str, inputs: Inputs) -> None:
    try:
        with open(file, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        inputs.notes.append(f"input {file}: not readable JSON ({type(e).__name__}: {e})")
        return
    if isinstance(doc, dict) and doc.get("kind") in SKIP_KINDS:
        return
    if is_conformance(doc):
        inputs.conformance.append((file, doc))
    elif (records := mutant_records(doc)) is not None:
        inputs.mutants.append((file, records))
    elif isinstance(doc, dict) and isinstance(doc.get("simulations"), list):
        for i, sim in enumerate(doc["simulations"]):
            if isinstance(sim, dict):
                inputs.simulations.append((f"{file}#{i}", sim))
    elif is_simulation(doc):
        inputs.simulations.append((file, doc))
    else:
        inputs.notes.append(f"input {file}: not a conformance, mutants or simulation document; ignored")
