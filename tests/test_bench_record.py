"""The benchmarks' records: what ``specsim bench --record`` and ``python -m specsim.bench.trees --record`` write
is the table they print, with the hardware and versions, in the form the docs render (CPU: a fake timing
result for the GPU step, the tree benchmark on the torch CPU device)."""

from __future__ import annotations

import argparse
import json
import sys

import pytest

from specsim.bench import step
from specsim.figures import records


def fake_result(kernels: bool = True) -> step.BenchResult:
    """Two shapes' rows as ``measure`` leaves them, vLLM's ratio filled in for the first."""
    def row(device, batch, ms, vs=None):
        r = dict(device=device, batch=batch, K=4, V=128256, mode="draft", dtype="float32", median_ms=ms,
                 alg_floor_mb=919.0, alg_floor_ms=0.306, pct_alg_floor=100 * 0.306 / ms,
                 pct_all_rows_floor=100 * 0.394 / ms)
        if vs is not None:
            r["vs_vllm"] = vs
        return r
    rows = [row("triton graph", 256, 0.331, 0.105), row("vllm", 256, 3.155, 1.0), row("triton §12", 256, 0.5, 0.16),
            row("triton graph", 512, 0.6)]
    found = [dict(device="triton", batch=256, K=4, V=128256, mode="draft",
                  seconds={"stats_kernel": 2.2e-4, "step_kernel": 1.08e-4, "other": 0.0})] if kernels else []
    return step.BenchResult(hardware="NVIDIA H100 80GB HBM3", versions={"torch": "2.11.0", "triton": "3.6.0",
                                                                         "cuda": "13.0", "driver": "580.1"},
                            gpu="NVIDIA H100 80GB HBM3, 132 SMs, L2 50 MiB", copy_bw=3.0e12,
                            config="KernelConfig(block=2048)", vllm="vllm 0.33.0 RejectionSampler",
                            rows=rows, kernels=found)


def test_the_record_holds_exactly_the_printed_tables():
    result = fake_result()
    rec = step.record(result, "specsim bench --breakdown --record docs/results/bench-h100.json")
    printed = step.table_lines(step.HEADER, [step.cells(r) for r in result.rows])
    steps = rec["tables"]["steps"]
    assert steps["columns"] == list(step.HEADER)
    assert step.table_lines(tuple(steps["columns"]), [tuple(r) for r in steps["rows"]]) == printed
    assert steps["rows"][0] == ["triton graph", "256", "4", "128256", "draft", "float32", "0.331", "919", "0.306",
                                "92%", "119%", "0.10x"]
    assert rec["tables"]["kernels"]["rows"] == [["triton", "256", "4", "128256", "draft",
                                                 "stats 0.220, step 0.108, other 0.000"]]
    assert "3000 GB/s" in steps["note"] and "132 SMs" in steps["note"]
    assert rec["hardware"] == "NVIDIA H100 80GB HBM3" and rec["versions"]["driver"] == "580.1"
    assert "kernels" not in step.record(fake_result(kernels=False), "specsim bench")["tables"]


def test_headline_values_are_the_first_shapes_rows_as_printed():
    values = step.record(fake_result(), "specsim bench")["values"]
    assert values["copy-gb-s"] == "3000"
    assert values["triton-graph-draft-ms"] == "0.331" and values["triton-graph-draft-pct-alg-floor"] == "92%"
    assert values["triton-graph-draft-vs-vllm"] == "0.10x" and values["triton-s12-draft-ms"] == "0.500"
    assert len([k for k in values if k.endswith("-ms")]) == 3   # the second shape's row is not a headline


def test_a_written_record_renders_in_the_docs(tmp_path):
    records.write(step.record(fake_result(), "specsim bench --record x.json"), tmp_path / "bench-h100.json")
    rec = records.load("bench-h100", tmp_path)
    text = records.render_table(rec, "steps")
    assert "| triton graph | 256 | 4 | 128256 | draft | float32 | 0.331 |" in text
    assert "Measured with `specsim bench --record x.json` on NVIDIA H100 80GB HBM3" in text
    assert records.value(rec, "triton-graph-draft-ms") == "0.331"


def test_the_command_writes_the_record_it_was_asked_for(tmp_path, monkeypatch):
    """``specsim bench --record FILE``: the command line, the measured result's tables, the file (CUDA and
    the measurement faked: the wiring, not a timing)."""
    torch = pytest.importorskip("torch")
    from specsim.commands import bench

    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "results" / "bench-h100.json"
    argv = ["bench", "--modes", "draft", "--record", str(out)]
    args = parser.parse_args(argv[1:])
    asked = {}

    def measure(torch, opts):
        asked["opts"] = opts
        return fake_result()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(step, "measure", measure)
    monkeypatch.setattr(sys, "argv", ["specsim", *argv])
    assert bench.run(args) == 0
    assert asked["opts"].modes == ["draft"] and asked["opts"].batch == [256]
    rec = json.loads(out.read_text())
    assert rec["command"] == f"specsim bench --modes draft --record {out}"
    assert rec["tables"]["steps"]["rows"][0][0] == "triton graph"


def test_the_commands_defaults_are_the_benchmarks_options():
    from specsim.commands import bench
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args([])
    from dataclasses import fields
    assert step.Options(**{f.name: getattr(args, f.name) for f in fields(step.Options)}) == step.Options()


def test_the_tree_benchmark_records_its_printed_tables(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from specsim.bench import trees
    out = tmp_path / "tree-bench.json"
    argv = ["--device", "torch", "--batch", "2", "--vocab", "50", "--depth", "2", "--branch", "2", "--width", "1",
            "--warmup", "0", "--repeat", "1", "--record", str(out)]
    monkeypatch.setattr(sys, "argv", ["trees.py", *argv])
    trees.main(argv)
    printed = capsys.readouterr().out
    rec = records.load("tree-bench", tmp_path)
    assert rec["command"].startswith("python -m specsim.bench.trees --device torch")
    table = rec["tables"]["torch"]
    assert table["columns"] == list(trees.E2E_COLUMNS) and len(table["rows"]) == 1
    assert trees.markdown_row(table["rows"][0]) in printed.splitlines()
    assert records.render_table(rec, "torch").startswith(trees.markdown_header(trees.E2E_COLUMNS))
    assert rec["hardware"] and rec["versions"]["torch"]
