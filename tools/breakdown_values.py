"""The values BENCHMARKS.md quotes from a breakdown record (``specsim bench --breakdown --record FILE``) that
the record's own figures give: each kernel's device time of the draft rows, the statistics pass's share of the
read stream over the target rows' bytes, the step kernel's over the rest of the plain step's floor, and the
time the 90%-of-the-read-stream goal leaves the step kernel; from a 16-bit record (``--dtype bfloat16``), its
statistics pass's draft and greedy times and shares of the read stream. Written into the record's ``values``, each with
how it was derived under ``derived``; nothing is measured here.

    python tools/breakdown_values.py docs/results/bench-h200-breakdown.json
    python tools/breakdown_values.py docs/results/bench-h200-bfloat16.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specsim.bench.workloads import floor_bytes  # noqa: E402
from specsim.figures import records  # noqa: E402

ANCHOR = dict(batch=256, k=4, vocab=128256)
COPIED = {"stats-draft-ms": ("triton", "stats"), "step-draft-ms": ("triton", "step"),
          "fused-stats-draft-ms": ("triton §12", "fused_stats"), "s12-step-draft-ms": ("triton §12", "step"),
          "lane-top-draft-ms": ("triton filters", "lane_top"), "filters-step-draft-ms": ("triton filters", "step")}
GOAL_SHARE = 0.9
DERIVED = {
    "stats-rows-mb": "every target row once: batch x (K + 1) x V x 4 bytes at the anchor",
    "stats-pct-read-stream": "stats-rows-mb over read-stream-gb-s, over stats-draft-ms (the kernels table's stats time)",
    "step-bytes-mb": "the plain step's alg floor (workloads.floor_bytes: one more target row and one draft row a "
                     "request) less stats-rows-mb",
    "step-pct-read-stream": "step-bytes-mb over read-stream-gb-s, over step-draft-ms (the kernels table's step time)",
    ", ".join(COPIED): "the kernels table's draft rows, copied",
    "goal-step-ms": "the plain step's alg floor at 90% of read-stream-gb-s: the time the goal allows the step",
    "goal-race-ms": "goal-step-ms less stats-draft-ms: the time the goal leaves the step kernel",
}


DERIVED_16 = {
    "stats-rows-mb": "every target row once: batch x (K + 1) x V x 2 bytes at the anchor",
    "stats-pct-read-stream, stats-greedy-pct-read-stream": "stats-rows-mb over this run's read-stream-gb-s, over "
                                                           "stats-draft-ms (stats-greedy-ms)",
    "stats-draft-ms, stats-greedy-ms": "the kernels table's draft and greedy rows, copied",
}
"""A 16-bit record's (``--dtype bfloat16``): its statistics pass alone, draft and greedy."""


def logits_dtype(record: dict) -> str:
    """The dtype of the steps table's first row (every row of a breakdown record has the run's one dtype)."""
    table = record["tables"]["steps"]
    return table["rows"][0][table["columns"].index("dtype")]


def kernel_ms(record: dict, device: str, kernel: str, mode: str = "draft") -> float:
    """A kernel's device ms in the kernels table's ``mode`` row of ``device`` at the anchor."""
    for row in record["tables"]["kernels"]["rows"]:
        if row[0] == device and row[1:5] == [str(ANCHOR["batch"]), str(ANCHOR["k"]), str(ANCHOR["vocab"]), mode]:
            times = dict(part.rsplit(" ", 1) for part in row[5].split(", "))
            return float(times[kernel])
    raise SystemExit(f"breakdown_values: no {mode} row of {device!r} at the anchor in the kernels table")


def derive_16(record: dict) -> dict:
    """The values of ``DERIVED_16`` from a 16-bit ``record``'s kernels table and read stream."""
    read_bw = float(record["values"]["read-stream-gb-s"]) * 1e9
    rows = ANCHOR["batch"] * (ANCHOR["k"] + 1) * ANCHOR["vocab"] * 2
    draft, greedy = kernel_ms(record, "triton", "stats"), kernel_ms(record, "triton", "stats", "greedy")
    return {"stats-draft-ms": f"{draft:.3f}", "stats-greedy-ms": f"{greedy:.3f}", "stats-rows-mb": f"{rows / 1e6:.0f}",
            "stats-pct-read-stream": f"{100 * rows / read_bw * 1e3 / draft:.0f}%",
            "stats-greedy-pct-read-stream": f"{100 * rows / read_bw * 1e3 / greedy:.0f}%"}


def derive(record: dict) -> dict:
    """The values of ``DERIVED`` from ``record``'s kernels table and read stream."""
    read_bw = float(record["values"]["read-stream-gb-s"]) * 1e9
    rows = ANCHOR["batch"] * (ANCHOR["k"] + 1) * ANCHOR["vocab"] * 4
    alg, _ = floor_bytes(ANCHOR["batch"], ANCHOR["k"], ANCHOR["vocab"], 4, 4, "draft")
    ms = {name: kernel_ms(record, *where) for name, where in COPIED.items()}
    goal_step = alg / (GOAL_SHARE * read_bw) * 1e3
    values = {name: f"{t:.3f}" for name, t in ms.items()}
    values.update({
        "stats-rows-mb": f"{rows / 1e6:.0f}",
        "stats-pct-read-stream": f"{100 * rows / read_bw * 1e3 / ms['stats-draft-ms']:.0f}%",
        "step-bytes-mb": f"{(alg - rows) / 1e6:.0f}",
        "step-pct-read-stream": f"{100 * (alg - rows) / read_bw * 1e3 / ms['step-draft-ms']:.0f}%",
        "goal-step-ms": f"{goal_step:.3f}",
        "goal-race-ms": f"{goal_step - ms['stats-draft-ms']:.3f}",
    })
    return values


def main(path: str) -> None:
    record = json.loads(Path(path).read_text())
    sixteen = logits_dtype(record) in ("bfloat16", "float16")
    record["values"].update(derive_16(record) if sixteen else derive(record))
    record["derived"] = DERIVED_16 if sixteen else DERIVED
    records.write(record, path)


if __name__ == "__main__":
    main(sys.argv[1])
