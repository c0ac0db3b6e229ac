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
    def row(device, batch, ms, vs=None, floor_mb=919.0):
        r = dict(device=device, batch=batch, K=4, V=128256, mode="draft", dtype="float32", median_ms=ms,
                 alg_floor_mb=919.0, alg_floor_ms=0.306, pct_alg_floor=100 * 0.306 / ms,
                 pct_all_rows_floor=100 * 0.394 / ms, floor_mb=floor_mb, pct_floor=100 * floor_mb / 3e3 / ms,
                 gb_s=floor_mb / ms)   # MB per ms: GB/s
        if vs is not None:
            r["vs_vllm"] = vs
        r["vs_plain"] = ms / (0.331 if batch == 256 else 0.6)
        return r
    rows = [row("triton graph", 256, 0.331, 0.105), row("vllm", 256, 3.155, 1.0),
            row("triton §12", 256, 0.5, 0.16, floor_mb=1075.0), row("triton graph", 512, 0.6)]
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
                                "92%", "119%", "0.10x", "919", "93%", "2776", "1.00x", "-"]
    assert steps["rows"][2][-5:-1] == ["1075", "72%", "2150", "1.51x"]
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
    assert values["triton-s12-draft-vs-plain"] == "1.51x" and values["triton-s12-draft-pct-its-floor"] == "72%"
    assert len([k for k in values if k.endswith("-ms")]) == 3   # the second shape's row is not a headline


def test_headline_values_leave_out_another_dtype_of_the_same_shape():
    """A ``--goals`` run also times bfloat16 logits at the anchor's shape: its rows are not the headline's
    (they once overwrote the float32 anchor's values)."""
    result = fake_result()
    result.rows.append(dict(result.rows[0], dtype="bfloat16", median_ms=0.237))
    values = step.record(result, "specsim bench")["values"]
    assert values["triton-graph-draft-ms"] == "0.331"


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
    assert rec["tables"]["goals"]["rows"][0][:6] == ["§12, no filters", "triton §12",
                                                     "B=256 K=4 V=128256 draft float32", "72%",
                                                     "≥ 90% of its floor", "not met"]


def test_a_host_load_spins_while_the_block_runs_and_is_named_in_the_note(capsys):
    """``--host-load N``: N processes busy inside the block, gone after it; the tables' note says so;
    a negative count is refused, naming the option."""
    from specsim.bench import harness
    from specsim.commands import bench
    with harness.host_load(2) as spinning:
        assert len(spinning) == 2 and all(p.poll() is None for p in spinning)
    assert all(p.poll() is not None for p in spinning)
    with pytest.raises(ValueError, match="processes must be >= 0"):
        with harness.host_load(-1):
            pass
    result = fake_result()
    assert "host loaded" not in step.note(result)
    result.host_load = step.host_load_text(3)
    assert step.note(result).endswith(f"host loaded by 3 spinning processes on its {harness.cpu_count()} CPUs "
                                      "while the rows were timed.")
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(["--host-load", "-2"])) == 2
    assert "--host-load must be 0 or more processes, got -2" in capsys.readouterr().out


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


# --- each row's own floor, the ratios, the goals -----------------------------------------

SHAPE = (2, 1, 64, 4, 4, "draft")   # batch 2, K 1, V 64, float32 logits and draft probabilities


def test_the_plain_floor_of_each_mode_by_hand():
    from specsim.bench import workloads
    # 4 target rows of 64 float32 (1024 B); per random request one more target row (2·256) and, with
    # draft probabilities, one draft row (2·256)
    assert workloads.row_floor_bytes("triton graph", SHAPE) == 1024 + 512 + 512
    assert workloads.row_floor_bytes("triton eager", SHAPE[:5] + ("point",)) == 1024 + 512
    assert workloads.row_floor_bytes("vllm", SHAPE[:5] + ("greedy",)) == 1024
    assert workloads.row_floor_bytes("torch", (2, 1, 64, 2, 4, "draft")) == 512 + 256 + 512   # bfloat16 logits


def test_a_filter_rows_floor_adds_its_per_request_parameters():
    import numpy as np

    from specsim.bench import workloads
    filters = dict(top_k=np.full(2, 50), top_p=np.full(2, 0.9))   # int64 and float64 [2]: 32 B
    for label in ("triton filters", "triton filters eager", "vllm filters", "vllm v2 filters", "flashinfer filters"):
        assert workloads.row_floor_bytes(label, SHAPE, filters) == 2048 + 32, label


@pytest.mark.needs_extra("triton")
def test_the_s12_rows_floors_add_their_own_inputs_as_passed():
    """The fused row is handed bit-packed masks, the unfused one int8 masks: the same parameters, their
    own bytes (counted by hand from the shapes and dtypes the builders document)."""
    torch = pytest.importorskip("torch")
    import numpy as np

    from devices.triton_sampler import fused_inputs, row_edits, sampler_inputs
    from specsim.bench import workloads
    B, K, V = 2, 1, 64
    drafts = np.array([3, 7])
    params = workloads.sampler_params(B, K, V, drafts, seed=0, prompt=8, output=4)
    k = np.full(B, K)
    fused = fused_inputs(params, k, drafts, V, "cpu", torch.float32)
    E = fused.num_edits
    # token bits [4, 2] int32, allowed bits [2, 2] int32, bias [2, 64] float32, 3 penalties [2] float64,
    # edit_start [5] int64, edit_token and edit_code [E] int32, draft_edit [2] int64, bias_max [2] float32,
    # row_request [4] int32
    by_hand = 32 + 16 + 512 + 48 + 40 + 8 * E + 16 + 8 + 16
    # each request's emitting row reads its token-bits row, allowed row and bias row again: 2·(8 + 8 + 256)
    emit = 2 * (8 + 8 + 256)
    assert workloads.row_floor_bytes("triton §12", (B, K, V, 4, 4, "draft"), fused) == 2048 + by_hand + emit
    assert workloads.row_floor_bytes("triton §12", (B, K, V, 4, 4, "greedy"), fused) == 1024 + by_hand
    unfused = sampler_inputs(params, k, drafts, V, "cpu", torch.float32)
    record = sum(a.itemsize for a in row_edits(params, k, drafts).values())
    n = len(row_edits(params, k, drafts)["row"])
    # token mask [4, 64] int8, allowed [2, 64] int8, bias, 3 penalties, the records, min_p [2] float64
    by_hand = 256 + 128 + 512 + 48 + record * n + 16
    emit = 2 * (64 + 64 + 256)   # the emitting rows' int8 mask, allowed and bias rows again
    assert workloads.row_floor_bytes("triton §12 unfused", (B, K, V, 4, 4, "draft"), unfused) == 2048 + by_hand + emit
    filters = dict(top_k=np.full(B, 50), top_p=np.full(B, 0.9))
    assert workloads.row_floor_bytes("triton §12+filters", (B, K, V, 4, 4, "draft"), (unfused, filters)) \
        == 2048 + by_hand + emit + 32


def test_a_row_floor_refuses_inputs_it_does_not_take():
    from specsim.bench import workloads
    with pytest.raises(ValueError, match="pass them as params"):
        workloads.row_floor_bytes("triton §12", SHAPE)
    with pytest.raises(ValueError, match="plain step"):
        workloads.row_floor_bytes("triton graph", SHAPE, {"x": b"1"})
    with pytest.raises(TypeError, match="object"):
        workloads.input_bytes([object()])


def test_rows_of_a_shape_get_their_ratios_to_the_plain_step_and_to_vllm():
    rows = [step.timed_row(label, (2, 1, 64, "draft", "float32"), SHAPE, None, t, 5.12e9)
            for label, t in (("triton graph", 1e-6), ("vllm", 4e-6), ("torch", 2e-6))]
    step.fill_ratios(rows)
    assert [r["vs_plain"] for r in rows] == [1.0, 4.0, 2.0] and [r["vs_vllm"] for r in rows] == [0.25, 1.0, 0.5]
    assert rows[0]["pct_floor"] == pytest.approx(40.0) and rows[0]["gb_s"] == pytest.approx(2.048)
    alone = [step.timed_row("torch", (2, 1, 64, "draft", "float32"), SHAPE, None, 1e-6, 5.12e9)]
    step.fill_ratios(alone)
    assert "vs_plain" not in alone[0] and step.cells(alone[0])[-1] == "-"


def goal_result(rows, sampler="all") -> step.BenchResult:
    result = fake_result(kernels=False)
    result.rows, result.sampler = rows, sampler
    return result


def anchor_row(label, ms, plain_ms=1.0, floor_mb=919.0, **where):
    r = step.timed_row(label, (where.get("batch", 256), 4, where.get("V", 128256), where.get("mode", "draft"),
                               where.get("dtype", "float32")), (256, 4, 128256, 4, 4, "draft"),
                       {} if "§12" in label or "filters" in label else None, ms * 1e-3, 3.0e12)
    r["floor_mb"] = floor_mb   # the row's own floor, set by hand
    r["pct_floor"], r["gb_s"] = 100 * floor_mb * 1e6 / 3.0e12 / (ms * 1e-3), floor_mb * 1e6 / (ms * 1e-3) / 1e9
    if plain_ms is not None:
        r["vs_plain"] = ms / plain_ms
    return r


def test_the_goals_say_met_not_met_and_not_measured():
    rows = [anchor_row("triton graph", 1.0), anchor_row("triton §12", 0.39, floor_mb=1075.0),
            anchor_row("triton filters", 1.6), anchor_row("triton §12", 1.3, mode="point"),
            anchor_row("triton §12+filters", 2.0, plain_ms=None)]
    goals = {(g[0], g[2]): g for g in step.goal_rows(goal_result(rows))}
    anchor = "B=256 K=4 V=128256 draft float32"
    s12 = goals[("§12, no filters", anchor)]
    assert s12[3:6] == ("92%", "≥ 90% of its floor", "met")
    assert s12[6] == "1075 MB at its floor (1.17x plain's 919 MB); 2756 of 3000 GB/s copy"
    assert goals[("§12, no filters", "B=256 K=4 V=128256 point float32")][5] == "not met"
    assert goals[("top-k 50, top-p 0.9 (graph)", anchor)][3:6] == ("1.60x", "≤ 1.50x triton graph", "not met")
    assert goals[("top-k 50, top-p 0.9 (graph)", anchor)][6].endswith("its floor alone is 0.31x triton graph's time")
    assert goals[("§12 + filters", anchor)][5] == "not measured in this run (no triton graph row)"
    assert goals[("plain step, draft probabilities", anchor)][5] == "not measured in this run (no read stream)"
    for what in ("top-k 50, top-p 0.9 eager (eager = graph)", "bfloat16 logits", "point proposals at V = 32000",
                 "point proposals", "top-k 50, top-p 0.9: eager within 10% of graph"):
        line = [g for g in goals.values() if g[0] == what]
        assert len(line) == 1 and line[0][5] == "not measured in this run" and line[0][3] == "-", what
    tree = [g for g in goals.values() if g[0].startswith("tree step")]
    assert tree[0][5] == "not measured in this run" and tree[0][2] == "B=64 V=128256 float32"
    assert tree[0][6].startswith("measured by python -m specsim.bench.trees --device triton")
    assert len({g[0] for g in goals.values()}) == len(step.GOALS)   # no goal dropped


def test_a_floor_goal_reads_the_rows_share_of_its_floor():
    rows = [anchor_row("triton graph", 0.7, V=32000, mode="point", batch=512, floor_mb=2000.0),
            anchor_row("triton graph", 0.8, dtype="bfloat16", floor_mb=2000.0)]
    goals = {g[0]: g for g in step.goal_rows(goal_result(rows, sampler="off"))}
    assert goals["point proposals at V = 32000"][3:6] == ("95%", "≥ 85% of its floor", "met")
    assert goals["bfloat16 logits"][3:6] == ("83%", "≥ 85% of its floor", "not met")
    assert step.shows_goals(goal_result(rows, sampler="off"))


def test_a_point_goal_adds_the_races_philox_to_its_floor_where_it_was_measured():
    """Target rows 657 MB at 3000 GB/s (0.219 ms), then the rest (131 MB, 0.044 ms) or the Philox alone."""
    rows = [anchor_row("triton graph", 0.3, mode="point", floor_mb=788.0)]
    plain = {g[0]: g for g in step.goal_rows(goal_result(rows, sampler="off"))}["point proposals"]
    assert plain[3:6] == ("88%", "≥ 85% of its floor", "met") and "Philox" not in plain[6]
    result = goal_result(rows, sampler="off")
    result.race_floors = {(256, 128256): 0.1e-3}            # slower than the rest's bytes: it bounds the race
    slow = {g[0]: g for g in step.goal_rows(result)}["point proposals"]
    assert slow[3:6] == ("106%", "≥ 85% of its floor", "met")
    assert slow[6].endswith("the race's Philox alone 0.1000 ms (floors.philox_floor): its floor with it 0.319 ms, "
                            "88% of the bytes' alone")
    result.race_floors = {(256, 128256): 0.01e-3}           # faster than the rest's bytes: the floor is the bytes'
    assert {g[0]: g for g in step.goal_rows(result)}["point proposals"][3] == "88%"
    assert step.headline_values(result)["philox-floor-b256-v128256-ms"] == "0.0100"
    assert step.to_json(result)["philox_floor_s"] == {"B=256 V=128256": 0.01e-3}


def test_the_stream_and_eager_goals_read_the_read_stream_and_the_graph_row():
    graph = anchor_row("triton graph", 0.25)
    graph["pct_read_stream"] = 91.0
    rows = [graph, anchor_row("triton filters", 0.35), anchor_row("triton filters eager", 0.40)]
    goals = {g[0]: g for g in step.goal_rows(goal_result(rows))}
    assert goals["plain step, draft probabilities"][3:6] == ("91%", "≥ 90% of the read stream", "met")
    eager = goals["top-k 50, top-p 0.9: eager within 10% of graph"]
    assert eager[3:7] == ("1.14x", "≤ 1.10x triton filters", "not met", "0.400 ms against triton filters's 0.350 ms")


def test_the_record_carries_the_goals_table_as_printed_and_only_where_it_is_shown():
    rows = [anchor_row("triton graph", 1.0), anchor_row("triton §12", 1.1)]
    rec = step.record(goal_result(rows), "specsim bench --sampler all")
    goals = rec["tables"]["goals"]
    assert goals["columns"] == list(step.GOALS_HEADER)
    assert goals["rows"] == [list(map(str, g)) for g in step.goal_rows(goal_result(rows))]
    assert "3000 GB/s" in goals["note"] and "row_floor_bytes" in goals["note"]
    elsewhere = [anchor_row("triton graph", 1.0, V=151936)]
    assert not step.shows_goals(goal_result(elsewhere, sampler="off"))
    assert "goals" not in step.record(goal_result(elsewhere, sampler="off"), "specsim bench")["tables"]
    assert "goals" in step.record(goal_result(elsewhere, sampler="all"), "specsim bench")["tables"]


def test_the_note_says_why_a_field_engine_is_absent():
    result = fake_result(kernels=False)
    result.engines = {"vllm v2": "vllm 0.33.0 Model Runner V2",
                      "flashinfer": "FlashInfer did not load (ImportError: x)"}
    assert "; flashinfer: FlashInfer did not load (ImportError: x)." in step.note(result)
    assert "vllm v2: vllm 0.33.0 Model Runner V2" in step.note(result)


V2_GLUE = """
import torch
from specsim.bench.field import vllm_v2_step
B, K, V = 3, 2, 40
g = torch.Generator().manual_seed(0)
x = dict(num_draft_tokens=torch.full((B,), K), cu=torch.arange(B + 1) * K,
         draft_token_ids=torch.randint(0, V, (B * K,), generator=g),
         draft_probs=torch.softmax(torch.randn(B * K, V, generator=g), 1),
         target_logits=torch.randn(B * (K + 1), V, generator=g), temperature=torch.ones(B, dtype=torch.float64),
         seeds=torch.randint(-2**62, 2**62, (B,), generator=g), positions=torch.randint(0, 2**20, (B,), generator=g),
         max_k=K, mode="draft")
for top_k, top_p, probs in ((0, 1.0, x["draft_probs"]), (5, 0.9, x["draft_probs"]), (0, 1.0, None)):
    call, label = vllm_v2_step(top_k=top_k, top_p=top_p, device="cpu")
    if call is None:
        print("ABSENT", label)
        raise SystemExit(0)
    sampled, num_sampled = call(dict(x, draft_probs=probs))[:2]
    assert tuple(sampled.shape) == (B, K + 1) and ((num_sampled >= 1) & (num_sampled <= K + 1)).all(), num_sampled
    n = num_sampled.tolist()
    assert all(0 <= t < V for i in range(B) for t in sampled[i, :n[i]].tolist()), sampled
    print(label)
"""


@pytest.mark.needs_extra("triton")
def test_the_v2_glue_runs_vllms_verifier_on_the_benchmarks_inputs():
    """``field.vllm_v2_step`` on an input dict of ``make_inputs``' keys, V2's kernels in Triton's interpreter
    (a process of its own: the interpreter is a per-process Triton mode)."""
    import os
    import subprocess
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", V2_GLUE], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, TRITON_INTERPRET="1"))
    assert out.returncode == 0, out.stderr[-3000:]
    if out.stdout.startswith("ABSENT"):
        pytest.skip(f"vLLM's V2 verifier is not loadable here: {out.stdout}")
    assert "Model Runner V2 RejectionSampler._verify_in_chunks; top-k 5, top-p 0.9" in out.stdout


def test_a_shapes_rows_are_built_from_its_variants_with_fake_timings(monkeypatch):
    """``measure_shape`` on CPU: the field engines' rows (flashinfer in draft mode only), each timed (the
    timing faked), its floors, and the ratios to the shape's ``triton graph`` (a faked plain row)."""
    torch = pytest.importorskip("torch")
    from specsim.bench import harness, workloads
    calls = []

    def make_inputs(torch, batch, k, vocab, dtype, mode, seed):
        return dict(num_draft_tokens=torch.full((batch,), k), max_k=k, mode=mode, seed=seed)

    def time_calls(torch, fn, reps, warmup):
        fn(0)
        return [dict(plain=1e-3, **{"vllm v2": 3e-3, "flashinfer": 2e-3})[calls[-1]]]

    def plain(torch, opts, config, sets, mode, vllm_calls):
        variants = [("triton graph", lambda i: calls.append("plain"), 0, None)]
        return variants + step.field_variants(vllm_calls[2], sets, mode)
    monkeypatch.setattr(workloads, "make_inputs", make_inputs)
    monkeypatch.setattr(harness, "time_calls", time_calls)
    monkeypatch.setattr(step, "step_variants", plain)
    engines = {"vllm v2": lambda x: calls.append("vllm v2"), "flashinfer": lambda x: calls.append("flashinfer")}
    result = fake_result(kernels=False)
    result.rows = []
    opts = step.Options(devices=["vllm-v2", "flashinfer"])
    for mode in ("draft", "point"):
        step.measure_shape(torch, opts, None, (2, 1, 64, mode), 1 << 20, (None, None, engines), result,
                           out=lambda *a, **k: None)
    got = [(r["device"], r["mode"], round(r["vs_plain"], 2), round(r["floor_mb"] * 1e6)) for r in result.rows]
    assert got == [("triton graph", "draft", 1.0, 2048), ("vllm v2", "draft", 3.0, 2048),
                   ("flashinfer", "draft", 2.0, 2048), ("triton graph", "point", 1.0, 1536),
                   ("vllm v2", "point", 3.0, 1536)]


def test_a_field_engine_failing_on_the_inputs_leaves_its_row_out_and_says_why(monkeypatch):
    torch = pytest.importorskip("torch")
    from specsim.bench import harness, workloads

    def broken(x):
        raise RuntimeError("no kernel for this dtype")
    monkeypatch.setattr(workloads, "make_inputs", lambda torch, b, k, v, d, mode, seed: {"seed": seed})
    monkeypatch.setattr(harness, "time_calls", lambda torch, fn, reps, warmup: [fn(0) or 1e-3])
    monkeypatch.setattr(step, "step_variants", lambda torch, opts, config, sets, mode, calls: [
        ("triton graph", lambda i: None, 0, None), *step.field_variants(calls[2], sets, mode)])
    result = fake_result(kernels=False)
    result.rows, result.engines = [], {"vllm v2": "vllm 0.33.0 Model Runner V2"}
    step.measure_shape(torch, step.Options(), None, (2, 1, 64, "draft"), 1 << 20, (None, None, {"vllm v2": broken}),
                       result, out=lambda *a, **k: None)
    assert [r["device"] for r in result.rows] == ["triton graph"]
    assert result.engines["vllm v2"] == ("vllm 0.33.0 Model Runner V2; vllm v2 failed at B=2 K=1 V=64 draft "
                                         "(RuntimeError: no kernel for this dtype)")
    monkeypatch.setattr(step, "step_variants", lambda torch, opts, config, sets, mode, calls: [
        ("triton graph", broken, 0, None)])
    with pytest.raises(RuntimeError):   # the project's own rows fail loudly
        step.measure_shape(torch, step.Options(), None, (2, 1, 64, "draft"), 1 << 20, (None, None, {}), result,
                           out=lambda *a, **k: None)


def test_the_json_carries_the_goals_and_the_engines():
    rows = [anchor_row("triton graph", 1.0), anchor_row("triton §12", 0.39, floor_mb=1075.0)]
    result = goal_result(rows)
    result.engines = {"flashinfer": "FlashInfer did not load (ImportError: x)"}
    doc = step.to_json(result)
    assert doc["goals"][0]["met"] == "met" and doc["goals"][0]["row"] == "triton §12"
    assert doc["engines"] == result.engines and len(doc["goals"]) == len(step.goal_rows(result))
    json.dumps(doc)


def test_the_tree_goal_reads_the_kernel_timings_of_a_goals_run():
    """``specsim bench --goals`` measures the tree goal itself: one goal row per tree variant, the tree
    kernel over the chain kernels reading as many rows, in place of the command that measures it."""
    result = goal_result([anchor_row("triton graph", 1.0)])
    result.trees = [dict(variant="rejected at root", batch=64, V=128256, chain_ms=0.85, tree_ms=0.80, accepted=0.0),
                    dict(variant="accepted to depth", batch=64, V=128256, chain_ms=0.85, tree_ms=1.20, accepted=5.8)]
    tree = [g for g in step.goal_rows(result) if g[0].startswith("tree step")]
    assert [g[1] for g in tree] == ["tree kernel, rejected at root", "tree kernel, accepted to depth"]
    assert [g[3:6] for g in tree] == [("0.94x", "≤ 1.30x a chain step of as many rows", "met"),
                                      ("1.41x", "≤ 1.30x a chain step of as many rows", "not met")]
    assert "chain kernels at K = N 0.850 ms" in tree[1][6] and tree[0][2] == "B=64 V=128256 depth 6 branch 4 width 3"
    assert {run["dtype"] for run in step.GOAL_RUNS} == {"float32", "bfloat16"}
    assert any(run["vocab"] == [32000] and run["modes"] == ["point"] for run in step.GOAL_RUNS)
