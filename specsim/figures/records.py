"""Measured figures: what a command printed on some hardware, kept as a record and rendered into the docs.

A record is one JSON file under ``docs/results/`` written by the command that measured it (``specsim bench
--record``, ``specsim mutants --record`` …)::

    {"command": "specsim bench --sampler all --record docs/results/bench.json",
     "hardware": "NVIDIA H100 80GB HBM3", "versions": {"torch": "2.11.0+cu130", "triton": "3.6.0"},
     "date": "2026-11-26",
     "tables": {"sampler": {"columns": ["what", "ms"], "rows": [["plain", "0.331"]], "note": "…"}},
     "values": {"plain-ms": "0.331"}}

A doc shows a table of a record between markers, re-rendered from the record by ``python -m
specsim.figures.numbers --write`` and checked by ``--check``::

    <!-- specsim:table bench/sampler -->
    …rendered…
    <!-- /specsim:table -->

and a single measured value inline as ``<!-- specsim:results:bench/plain-ms -->0.331<!-- /specsim -->``.
The rendered table always names the command, the hardware and the versions under it.

    >>> rec = {"command": "specsim x", "hardware": "CPU", "versions": {"numpy": "2.1"}, "date": "2026-01-01",
    ...        "tables": {"t": {"columns": ["a", "b"], "rows": [["1", "2"]]}}, "values": {"v": "7"}}
    >>> print(render_table(rec, "t"))
    | a | b |
    |---|---|
    | 1 | 2 |
    <BLANKLINE>
    Measured with `specsim x` on CPU (numpy 2.1), 2026-01-01.
    >>> value(rec, "v")
    '7'
"""

from __future__ import annotations

import json
import os
import platform
import sys
from datetime import date
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
REQUIRED = ("command", "hardware", "versions", "date")


class RecordError(ValueError):
    """A record is missing, malformed, or lacks the table or value a doc asks for."""


def load(name: str, results: Path = RESULTS) -> dict:
    """``docs/results/NAME.json``, checked to carry what every measured figure must: command, hardware,
    versions and date."""
    path = results / f"{name}.json"
    if not path.exists():
        raise RecordError(f"record {name!r}: {path} does not exist")
    doc = json.loads(path.read_text())
    missing = [k for k in REQUIRED if not doc.get(k)]
    if missing:
        raise RecordError(f"record {name!r}: missing {', '.join(missing)}")
    return doc


def caption(record: dict) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in record["versions"].items())
    return f"Measured with `{record['command']}` on {record['hardware']} ({versions}), {record['date']}."


def render_table(record: dict, table: str) -> str:
    """The table as Markdown, its note (if any) and the caption naming command, hardware and versions."""
    t = (record.get("tables") or {}).get(table)
    if t is None:
        raise RecordError(f"record has no table {table!r} (has {sorted(record.get('tables') or {})})")
    lines = ["| " + " | ".join(map(str, t["columns"])) + " |", "|" + "---|" * len(t["columns"])]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in t["rows"]]
    note = f"\n{t['note']}" if t.get("note") else ""
    return "\n".join(lines) + note + "\n\n" + caption(record)


def value(record: dict, key: str) -> str:
    values = record.get("values") or {}
    if key not in values:
        raise RecordError(f"record has no value {key!r} (has {sorted(values)})")
    return str(values[key])


def new_record(command: str, hardware: str, versions: dict[str, str]) -> dict:
    """The head of a record a command writes; it adds ``tables`` and ``values``."""
    return {"command": command, "hardware": hardware,
            "versions": {"python": platform.python_version(), **versions}, "date": date.today().isoformat(),
            "tables": {}, "values": {}}


def write(record: dict, path: str | Path) -> None:
    missing = [k for k in REQUIRED if not record.get(k)]
    if missing:
        raise RecordError(f"record for {path}: missing {', '.join(missing)}")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def command_line(prog: str = "specsim") -> str:
    """The command as typed, for a record's ``command``."""
    return " ".join([prog, *sys.argv[1:]])


def cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU a run measured on: ``/proc/cpuinfo``'s first ``model name`` (else ``platform.processor()``)
    and the cores this process may use.

    >>> cpu_name("processor : 0\\nmodel name : Example CPU @ 2.0GHz\\n").startswith("Example CPU @ 2.0GHz, ")
    True
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.split(":", 1)[0].strip() == "model name"), "") or platform.processor() or "unknown CPU"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {cores} cores"


def cpu_record(args=None) -> dict:
    """The head of a record of a CPU run of this command (``records.new_record``): the command line as
    typed (``args.argv`` where a caller passed one), the CPU, and the versions of torch and numpy (python
    is added by ``new_record``)."""
    import numpy
    import torch
    argv = getattr(args, "argv", None)
    command = " ".join(["specsim", *argv]) if argv is not None else command_line()
    return new_record(command, cpu_name(),
                              {"torch": torch.__version__, "numpy": numpy.__version__})
