"""``specsim bench --latency`` on CPU: the measured floors' arithmetic, each row's bound from faked floor
timings, the latency goals from synthetic rows, the record's tables, and the command without CUDA."""

from __future__ import annotations

import argparse
import doctest
import json
import sys

import pytest

from specsim.bench import floors, step
from specsim.figures import records

READ_BW = 4.0e12      # bytes/s, a faked read stream
COPY_BW = 3.0e12      # bytes/s, read + write


def test_the_floors_docstring_examples_run():
    assert doctest.testmod(floors).failed == 0


def test_a_row_bound_is_one_pass_plus_the_other_launches_never_below_the_launches():
    assert floors.row_bound(8e-6, 5e-6, 5e-6, 1e-6) == (8e-6, "launches")   # a pass as cheap as an empty launch
    seconds, what = floors.row_bound(8e-6, 5e-6, 9e-6, 4e-6)
    assert seconds == pytest.approx(12e-6) and what == "one pass"          # bytes less than half the pass
    seconds, what = floors.row_bound(8e-6, 5e-6, 9e-6, 4.5e-6)
    assert seconds == pytest.approx(12e-6) and what == "bytes"             # half the pass: bandwidth-bound
    assert floors.row_bound(5e-6, 5e-6, 300e-6, 290e-6) == (300e-6, "bytes")   # one launch: the pass alone


@pytest.mark.parametrize("args, name", [((-1e-6, 0.0, 0.0, 0.0), "launches_s"),
                                        ((1e-6, 0.0, float("nan"), 0.0), "pass_s"),
                                        ((1e-6, 2e-6, 1e-6, 0.0), "one_launch_s")])
def test_a_row_bound_refuses_times_that_cannot_be(args, name):
    with pytest.raises(ValueError, match=f"row_bound: {name}"):
        floors.row_bound(*args)


@pytest.mark.parametrize("call, name", [(lambda: floors.launch_floor(None, 0), "launches"),
                                        (lambda: floors.launch_floor(None, 2, reps=0), "reps"),
                                        (lambda: floors.read_stream(None, 0), "nbytes"),
                                        (lambda: floors.read_stream(None, 4.5), "nbytes"),
                                        (lambda: floors.read_stream(None, 64, buffers=0), "buffers")])
def test_the_measurements_refuse_bad_sizes_before_touching_a_gpu(call, name):
    with pytest.raises(ValueError, match=f"{name} must be an integer ≥ 1"):
        call()


def test_the_plain_step_is_two_launches_for_every_mode():
    assert floors.PLAIN_STEP_LAUNCHES == 2
    assert {step.ROW_LAUNCHES[label] for label in ("triton graph", "triton eager")} == {2}


# --- rows of a latency run, their bounds and goals (timings faked) ----------------------------

def launch_s(n: int) -> float:
    """A faked launch floor: 4 µs for a graph's first launch, 2 µs for each further one."""
    return 4e-6 + 2e-6 * (n - 1)


def pass_s(nbytes: int) -> float:
    """A faked read pass: 9 µs of latency, then the bytes at ``READ_BW``."""
    return 9e-6 + nbytes / READ_BW


def latency_rows(times: dict) -> list[dict]:
    """Rows as ``measure`` leaves them: ``times`` ``{(label, batch, mode): ms}``, with the read stream."""
    rows = [step.timed_row(label, (B, 4, 128256, mode, "float32"), (B, 4, 128256, 4, 4, mode), None, ms * 1e-3,
                           COPY_BW, READ_BW) for (label, B, mode), ms in times.items()]
    step.add_bounds(rows, launch_s, pass_s, READ_BW)
    return rows


TIMES = {("triton graph", 1, "draft"): 0.017, ("triton eager", 1, "draft"): 0.027, ("vllm v2", 1, "draft"): 0.243,
         ("triton graph", 32, "draft"): 0.058, ("triton eager", 32, "draft"): 0.060, ("vllm v2", 32, "draft"): 0.441,
         ("triton graph", 8, "point"): 0.026, ("triton eager", 8, "point"): 0.029, ("vllm", 8, "point"): 1.02}


def latency_result(times=TIMES) -> step.BenchResult:
    result = step.BenchResult(hardware="NVIDIA H200", versions={"torch": "2.13.0"}, gpu="NVIDIA H200, 132 SMs",
                              copy_bw=COPY_BW, config="KernelConfig()", vllm="vllm 0.33.0 RejectionSampler",
                              rows=latency_rows(times), read_bw=READ_BW, latency=True,
                              engines={"vllm v2": "vllm 0.33.0 Model Runner V2"})
    result.latency_trees = [dict(variant="rejected at root", batch=8, V=128256, nodes=64, chain_ms=0.2,
                                 tree_ms=0.05, accepted=0.0)]
    return result


def test_each_row_gets_its_launches_pass_and_floor():
    rows = {(r["device"], r["batch"], r["mode"]): r for r in latency_result().rows}
    graph = rows[("triton graph", 1, "draft")]
    nbytes = (5 + 1 + 1) * 128256 * 4   # five target rows, the row it emits from, one draft row (float32)
    assert round(graph["floor_mb"] * 1e6) == nbytes
    assert graph["launches"] == 2 and graph["launch_ms"] == pytest.approx(6e-3)
    assert graph["pass_ms"] == pytest.approx((9e-6 + nbytes / READ_BW) * 1e3)
    assert graph["floor_ms"] == pytest.approx(graph["pass_ms"] + 2e-3) and graph["bound"] == "one pass"
    assert graph["pct_latency_floor"] == pytest.approx(100 * graph["floor_ms"] / 0.017)
    assert graph["vs_v2"] == pytest.approx(0.017 / 0.243)
    vllm = rows[("vllm", 8, "point")]
    assert vllm["launches"] == 1 and vllm["floor_ms"] == pytest.approx(vllm["pass_ms"])   # one launch at least
    assert "vs_v2" not in vllm                                                            # no V2 row at B = 8
    cells = dict(zip(step.LATENCY_HEADER, step.latency_cells(vllm)))
    assert cells["launches"] == "≥ 1" and cells["vs vllm v2"] == "-"


def test_the_bounds_need_a_measured_read_stream():
    with pytest.raises(ValueError, match="add_bounds: read_bw"):
        step.add_bounds([], launch_s, pass_s, 0.0)


def test_the_latency_goals_say_met_not_met_and_why():
    goals = step.latency_goal_rows(latency_result())
    by = {(g[0], g[2]): g for g in goals}
    b1 = by[("B = 1, graphed", "B=1 K=4 V=128256 draft float32")]
    assert b1[3:6] == ("0.017 ms", "≤ 0.010 ms", "not met")
    assert b1[6].startswith("floor 0.0") and b1[6].endswith("the measured floor alone is above the goal: out of reach")
    gaps = [g for g in goals if g[0] == "eager = graph"]
    assert [g[3:6] for g in gaps] == [("+0.010 ms", "≤ 0.005 ms over triton graph", "not met"),
                                      ("+0.002 ms", "≤ 0.005 ms over triton graph", "met"),
                                      ("+0.003 ms", "≤ 0.005 ms over triton graph", "met")]
    copy = by[("B = 32, bytes' floor over the copy", "B=32 K=4 V=128256 draft float32")]
    read = by[("B = 32, bytes' floor over the read stream", "B=32 K=4 V=128256 draft float32")]
    graph32 = next(r for r in latency_result().rows if (r["device"], r["batch"]) == ("triton graph", 32))
    assert copy[3] == f"{graph32['pct_alg_floor']:.0f}%" and read[3] == f"{graph32['pct_read_stream']:.0f}%"
    assert copy[4] == "≥ 80% of the bytes' floor" and "at its floor the step would be" in copy[6]
    v2 = [g for g in goals if g[0] == "ahead of vLLM Model Runner V2"]
    assert [(g[2].split()[0], g[3], g[5]) for g in v2] == [("B=1", "0.07x", "met"), ("B=32", "0.13x", "met"),
                                                           ("B=8", "-", "not measured in this run")]
    assert v2[-1][6] == "vllm v2: vllm 0.33.0 Model Runner V2"


def test_a_goal_no_row_measured_is_listed_not_left_out():
    goals = step.latency_goal_rows(latency_result({("vllm", 8, "point"): 1.0}))
    assert [g[0] for g in goals] == ["B = 1, graphed", "eager = graph", "B = 32, bytes' floor",
                                     "ahead of vLLM Model Runner V2"]
    assert {g[5] for g in goals} == {"not measured in this run"}


def test_the_record_holds_the_latency_tables_as_printed():
    result = latency_result()
    rec = step.record(result, "specsim bench --latency --record docs/results/bench-h200-latency.json")
    table = rec["tables"]["latency"]
    assert table["columns"] == list(step.LATENCY_HEADER)
    assert table["rows"] == [list(map(str, c)) for c in step.latency_table(result)]
    assert table["rows"][-1][0] == "tree kernel, rejected at root" and len(table["rows"]) == len(TIMES) + 1
    assert rec["tables"]["latency-goals"]["rows"] == [list(map(str, g)) for g in step.latency_goal_rows(result)]
    assert "read stream 4000 GB/s" in table["note"] and "empty launches" in table["note"]
    assert rec["values"]["read-stream-gb-s"] == "4000"
    assert rec["values"]["latency-triton-graph-draft-b1-ms"] == "0.017"
    assert rec["values"]["latency-vllm-point-b8-pct-floor"] == dict(zip(
        step.LATENCY_HEADER, step.latency_cells(next(r for r in result.rows if r["device"] == "vllm"))))["% of floor"]
    assert "goals" not in rec["tables"]                     # none of these rows is a GOALS row (B ≤ 32)
    assert "latency" not in step.record(step.BenchResult("x", {}, "x", COPY_BW, "c", "v"), "specsim bench")["tables"]


def test_a_written_latency_record_renders_in_the_docs(tmp_path):
    records.write(step.record(latency_result(), "specsim bench --latency"), tmp_path / "bench-h200-latency.json")
    rec = records.load("bench-h200-latency", tmp_path)
    assert "| triton graph | 1 | 4 | 128256 | draft | 0.017 | 2 |" in records.render_table(rec, "latency")
    assert records.render_table(rec, "latency-goals").startswith("| what | row | shape |")


def test_the_steps_table_shows_the_read_stream_share():
    rows = latency_rows({("triton graph", 256, "draft"): 0.331})
    cells = dict(zip(step.HEADER, step.cells(rows[0])))
    assert cells["% of read stream"] == f"{100 * 919.0e6 / READ_BW / 0.331e-3:.0f}%"


# --- the command ---------------------------------------------------------------------------------

def parsed(argv: list[str]):
    from specsim.commands import bench
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    return bench, parser.parse_args(argv)


def test_latency_without_cuda_exits_2_and_says_why(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    bench, args = parsed(["--latency"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench.run(args) == 2
    assert "specsim bench --latency: no CUDA GPU here" in capsys.readouterr().out


def test_latency_and_goals_are_one_run_or_the_other():
    from specsim.commands import bench
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--latency", "--goals"])


def test_the_latency_command_prints_and_records_its_tables(tmp_path, monkeypatch, capsys):
    """``specsim bench --latency --record FILE`` (CUDA and the measurement faked: the wiring, not a timing)."""
    torch = pytest.importorskip("torch")
    out = tmp_path / "bench-h200-latency.json"
    argv = ["bench", "--latency", "--record", str(out)]
    bench, args = parsed(argv[1:])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(step, "measure_latency", lambda torch, opts: latency_result())
    monkeypatch.setattr(sys, "argv", ["specsim", *argv])
    assert bench.run(args) == 0
    printed = capsys.readouterr().out
    assert "eager = graph" in printed and "tree kernel, rejected at root" in printed
    rec = json.loads(out.read_text())
    assert rec["command"] == f"specsim bench --latency --record {out}"
    assert set(rec["tables"]) == {"steps", "latency", "latency-goals"}


def test_the_latency_run_asks_for_the_issues_shapes_and_only_its_devices(monkeypatch):
    """``measure_latency`` hands ``measure`` B = 1, 8, 32, 256 at K = 4, V = 128256, float32, draft and
    point, and the devices asked for among triton, vllm and vllm-v2 (``measure`` and floors faked)."""
    asked = {}

    def measure(torch, opts, out=print):
        asked["opts"] = opts
        return latency_result({("vllm", 8, "point"): 1.0})
    monkeypatch.setattr(step, "measure", measure)
    monkeypatch.setattr(floors, "launch_floor", lambda torch, n, reps, warmup: launch_s(n))
    monkeypatch.setattr(floors, "read_stream", lambda torch, nbytes, reps, warmup: pass_s(nbytes))
    result = step.measure_latency(None, step.Options(devices=["vllm", "torch", "flashinfer"]), out=lambda *a, **k: None)
    opts = asked["opts"]
    assert (opts.batch, opts.k, opts.vocab, opts.dtype, opts.modes) == ([1, 8, 32, 256], [4], [128256], "float32",
                                                                        ["draft", "point"])
    assert opts.devices == ["vllm"] and opts.no_launches and result.latency
    assert result.rows[0]["bound"] in ("launches", "one pass", "bytes")


def test_the_json_carries_the_latency_goals_and_floors():
    doc = step.to_json(latency_result())
    assert doc["read_stream_gb_s"] == 4000 and doc["rows"][0]["bound"] == "one pass"
    assert doc["latency_goals"][0]["what"] == "B = 1, graphed" and doc["latency_trees"][0]["nodes"] == 64
    json.dumps(doc)


def test_a_row_timed_on_the_device_gets_a_device_floor_and_the_b1_goal_reads_it():
    rows = [step.timed_row("triton graph", (1, 4, 128256, "draft", "float32"), (1, 4, 128256, 4, 4, "draft"), None,
                           0.017e-3, COPY_BW, READ_BW)]
    rows[0]["device_ms"] = 0.0090
    # queued, the launches cost 1.5 µs and 0.5 µs each further one; the pass 3 µs of latency then the bytes
    step.add_bounds(rows, launch_s, pass_s, READ_BW, lambda n: 1.5e-6 + 0.5e-6 * (n - 1),
                    lambda nbytes: 3e-6 + nbytes / READ_BW)
    r = rows[0]
    nbytes = (5 + 1 + 1) * 128256 * 4
    assert r["device_launch_ms"] == pytest.approx(2e-3)
    assert r["device_floor_ms"] == pytest.approx((3e-6 + nbytes / READ_BW + 0.5e-6) * 1e3)
    cells = dict(zip(step.LATENCY_HEADER, step.latency_cells(r)))
    assert cells["device ms"] == "0.0090" and cells["device floor ms"] == f"{r['device_floor_ms']:.4f}"
    goal = step.graph_time_goals({step.shape_of(r): {"triton graph": r}})[0]
    assert goal[3:6] == ("0.009 ms", "≤ 0.010 ms", "met")          # the device time, not the replay's 0.017
    assert goal[6].startswith("device time (submission hidden) 0.0090 ms") and "out of reach" not in goal[6]


def test_rows_not_timed_on_the_device_keep_their_cells_empty():
    r = next(r for r in latency_result().rows if r["device"] == "vllm")
    cells = dict(zip(step.LATENCY_HEADER, step.latency_cells(r)))
    assert cells["device ms"] == cells["device floor ms"] == "-" and "device_floor_ms" not in r


def test_the_v2_goal_is_also_read_on_device_time_where_both_rows_have_it():
    rows = {"triton graph": dict(device="triton graph", median_ms=0.018, device_ms=0.0147, floor_ms=0.0169,
                                 bound="one pass", launches=2, launch_ms=0.0167, floor_mb=3.6, pass_ms=0.0169,
                                 pct_latency_floor=91.0),
            "vllm v2": dict(device="vllm v2", median_ms=0.450, device_ms=0.0227)}
    goals = step.v2_goals({(1, 4, 128256, "draft", "float32"): rows}, "vllm v2")
    assert [g[0] for g in goals] == ["ahead of vLLM Model Runner V2", "ahead of vLLM Model Runner V2, device time"]
    assert goals[1][3:6] == ("0.65x", "< 1.00x vllm v2", "met")
    assert "graph 0.0147 ms, vllm v2 0.0227 ms (called from Python 0.450 ms)" in goals[1][6]
    values = step.latency_values(step.BenchResult("x", {}, "x", COPY_BW, "c", "v", rows=latency_rows(TIMES)))
    assert "latency-triton-graph-draft-b1-device-ms" not in values    # rows not timed on the device: no such value
