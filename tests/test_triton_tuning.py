"""The Triton device's launch shapes per GPU (devices.triton_tuning) and the sweep that chooses them
(specsim.bench.tune), without a GPU: the sweep runs on a timer that knows the answer."""

from __future__ import annotations

import dataclasses
import json

import pytest

from devices import triton_tuning
from devices import triton_device
from devices.triton_device import KernelConfig, call_key, config_of, default_config, pdl_launch
from specsim.bench import tune


def test_a_call_takes_its_kinds_entry_else_the_shared_shape():
    point = KernelConfig(race_block=1024, race_warps=4)
    config = KernelConfig(by_call=(("point/32", point),))
    assert config.for_call(False, 4) is point
    assert config.for_call(True, 4) is config and config.for_call(False, 2) is config
    assert call_key(False, 2) == "point/16"


def test_programmatic_dependent_launch_only_where_the_gpu_has_it_early_only_for_a_grid_of_one_wave(monkeypatch):
    import torch
    gpu = torch.device("cuda", 0)
    monkeypatch.setattr(triton_device, "_gpu_traits", lambda index: (True, 132))  # an H200: sm_90, 132 SMs
    assert pdl_launch(gpu, 315, KernelConfig()) == (True, True)          # B = 1 at K = 4: one wave
    assert pdl_launch(gpu, 4 * 132, KernelConfig()) == (True, True)
    assert pdl_launch(gpu, 4 * 132 + 1, KernelConfig()) == (True, False)  # as the statistics programs finish
    assert pdl_launch(gpu, 315, KernelConfig(pdl=False)) == (False, False)
    assert pdl_launch(gpu, 315, KernelConfig(pdl_early_per_sm=0)) == (True, False)
    monkeypatch.setattr(triton_device, "_gpu_traits", lambda index: (False, 108))  # an A100: no griddepcontrol
    assert pdl_launch(gpu, 315, KernelConfig()) == (False, False)
    assert pdl_launch(torch.device("cpu"), 315, KernelConfig()) == (False, False)  # the interpreter


def test_the_shipped_file_holds_the_h100_defaults_under_its_name():
    entries = triton_tuning.read_entries(triton_tuning.SHIPPED)
    assert "NVIDIA H100 80GB HBM3" in entries
    h100 = tuned_config("NVIDIA H100 80GB HBM3")
    assert dataclasses.replace(h100, source="") == KernelConfig(source="")
    other = tuned_config("a GPU nobody tuned")
    assert dataclasses.replace(other, source="") == KernelConfig(source="")
    assert "no tuned entry for 'a GPU nobody tuned'" in other.source


def test_every_shipped_entry_is_well_formed_and_says_how_it_was_measured():
    for name, entry in triton_tuning.read_entries(triton_tuning.SHIPPED).items():
        assert {"command", "date", "torch", "triton"} <= set(entry["measured"]), name
        config = config_of(entry, name)
        for key, c in config.by_call:
            assert key in triton_tuning.CALL_KEYS and c.block % 32 == 0 and (c.race_block or c.block) % 32 == 0


def test_an_entry_round_trips_and_records_only_what_each_kind_changes(tmp_path):
    base = KernelConfig(block=4096, num_warps=8, programs=4224)
    point = dataclasses.replace(base, race_block=1024, race_warps=4)
    entry = triton_tuning.entry_of(base, {"point/32": point, "draft/16": base}, {"command": "c", "date": "d",
                                                                                   "torch": "t", "triton": "x"})
    assert entry["by_call"] == {"draft/16": {}, "point/32": {"race_block": 1024, "race_warps": 4}}
    path = tmp_path / "tuning.json"
    triton_tuning.write_entry(path, "GPU X", entry)
    triton_tuning.write_entry(path, "GPU Y", entry)
    assert sorted(json.loads(path.read_text())) == ["GPU X", "GPU Y"]
    config = config_of(triton_tuning.read_entries(path)["GPU X"], "here")
    assert config.for_call(False, 4).race_block == 1024 and config.for_call(True, 4).race_block == 512
    assert (config.block, config.num_warps, config.programs) == (4096, 8, 4224)


def test_the_file_the_environment_names_comes_first(tmp_path, monkeypatch):
    path = tmp_path / "mine.json"
    triton_tuning.write_entry(path, "NVIDIA H100 80GB HBM3", {"measured": {}, "config": {"block": 1024}})
    monkeypatch.setenv(triton_tuning.ENV, str(path))
    config = tuned_config("NVIDIA H100 80GB HBM3")
    assert config.block == 1024 and config.source == "mine.json: NVIDIA H100 80GB HBM3"
    monkeypatch.setenv(triton_tuning.ENV, str(tmp_path / "absent.json"))
    with pytest.raises(ValueError, match="SPECSIM_TRITON_TUNING=.*absent.json: no such file"):
        tuned_config("NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("entry, rule", [
    ({"config": {"blocks": 1024}}, "blocks not a tuned field"),
    ({"config": {"block": 1000}}, "block must be a power of two"),
    ({"config": {"race_block": 16}}, "race_block must be a power of two ≥ 32"),
    ({"config": {"num_warps": 0}}, "num_warps must be an integer ≥ 1"),
    ({"config": {}, "by_call": {"greedy/32": {}}}, "'greedy/32' is not a kind of call"),
    ({"config": {}, "by_call": {"point/32": {"race_warps": 2.5}}}, "race_warps must be an integer"),
    ({"measured": {}}, "must be an object with a 'config' object"),
    ({"config": {"programs_by_batch": [[32, 1056], [1, 528]]}}, "batches strictly ascending"),
    ({"config": {"programs_by_batch": [[1, 0]]}}, "pairs of integers ≥ 1"),
    ({"config": {"programs_by_batch": 1056}}, "programs_by_batch must be a list"),
    ({"config": {"race_by_batch": [[1, 1000, 4]]}}, "race_block a power of two ≥ 32"),
    ({"config": {"race_by_batch": [[1, 1024]]}}, r"race_by_batch must be a list of \[batch, race_block, race_warps\] triples"),
    ({"config": {"race_by_batch": [[8, 1024, 4], [8, 256, 1]]}}, "batches strictly ascending"),
    ({"config": {"race_programs_by_batch": [[1, 0]]}}, "race_programs_by_batch must be a list of .* pairs of integers ≥ 1"),
])
def test_a_malformed_entry_is_refused_naming_the_gpu_and_the_rule(tmp_path, entry, rule):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"GPU Z": entry}))
    with pytest.raises(ValueError, match=rule) as e:
        triton_tuning.read_entries(path)
    assert "'GPU Z'" in str(e.value)


def test_off_cuda_the_default_shape_is_the_defaults():
    class Cpu:
        type, index = "cpu", None
    assert default_config(Cpu()) == KernelConfig()


def tuned_config(gpu_name):
    return config_of(*triton_tuning.tuned_entry(gpu_name))


# --- the sweep, on a timer that knows the answer ------------------------------------------------------------

def synthetic_timer(refuse=lambda c: False):
    """Seconds with a known best: stats 4096 x 8 at 2 stages, race 1024 x 4 (draft) and 2048 x 8 (point),
    but 512 x 2 at B = 1 for both, 4, 8 and 32 programs per SM at B = 1, 32 and 256, the race at the pass's programs
    but 0.75 times them at B = 256, 16-bit stats 2048 x 8."""
    calls = []

    def timer(config, key, batch):
        calls.append((key, batch))
        if refuse(config):
            raise RuntimeError("out of resources: shared memory")
        t = 1.0
        t += 0.1 * (config.block != 4096) + 0.1 * (config.num_warps != 8) + 0.05 * (config.num_stages != 2)
        best_race = (512, 2) if batch == 1 else (2048, 8) if key.startswith("point") else (1024, 4)
        t += 0.2 * (config.race_at(batch) != best_race)
        race_best = round(0.75 * config.programs_at(batch)) if batch == 256 else config.programs_at(batch)
        t += 0.05 * (config.race_programs_at(batch) != race_best)
        per_sm = config.programs_at(batch) // 132
        t += {1: 0.3 * (per_sm != 4), 32: 0.2 * (per_sm != 8), 256: 0.01 * (per_sm != 32)}.get(batch, 0)
        if key.endswith("/16"):
            t += 0.3 * (config.block16 != 2048)
        return t
    return timer, calls


def test_the_sweep_keeps_each_parts_winner_and_tunes_each_kind_of_call():
    timer, calls = synthetic_timer()
    result = tune.sweep(timer, KernelConfig(), 132, out=lambda *a, **k: None)
    draft, point = result.configs["draft/32"], result.configs["point/32"]
    assert (draft.block, draft.num_warps, draft.num_stages) == (4096, 8, 2)
    assert (draft.race_block, draft.race_warps) == (1024, 4) and (point.race_block, point.race_warps) == (2048, 8)
    assert draft.programs_by_batch == point.programs_by_batch == ((1, 4 * 132), (32, 8 * 132), (256, 32 * 132))
    assert draft.programs == point.programs == 32 * 132   # the anchor's, for the passes that are not the step's
    # the race at small batches, each mode apart; an entry the same as the one before it left out
    assert draft.race_by_batch == ((1, 512, 2), (8, 1024, 4)) and point.race_by_batch == ((1, 512, 2), (8, 2048, 8))
    assert [draft.race_at(b) for b in (1, 7, 8, 32, 256)] == [(512, 2)] * 2 + [(1024, 4)] * 3
    # the race's programs apart from the pass's, at the small batches and the anchor
    assert draft.race_programs_by_batch == point.race_programs_by_batch == (
        (1, 4 * 132), (8, 4 * 132), (32, 8 * 132), (256, 24 * 132))
    assert draft.race_programs_at(1000) == 24 * 132 and draft.programs_at(1000) == 32 * 132
    assert result.configs["draft/16"].block16 == result.configs["point/16"].block16 == 2048
    assert {b for k, b in calls if k == "draft/32"} == {*tune.PROGRAM_BATCHES, *tune.RACE_BATCHES}
    chosen = [t for t in result.trials if t.chosen]
    assert len(chosen) == 5 + len(tune.PROGRAM_BATCHES) + 2 * len(tune.RACE_BATCHES) + 2 * (len(tune.RACE_BATCHES) + 1)
    # stats, 2 races, 2 16-bit, programs, each mode's race and race programs (one per batch)
    assert {b for k, b in calls if k == "point/32"} == {256, *tune.RACE_BATCHES}
    entry = tune.tuned_entry(result, {"command": "c", "date": "d", "torch": "t", "triton": "x"})
    triton_tuning.check_entry(entry, "the sweep's entry")
    assert entry["by_call"]["point/32"] == {"race_block": 2048, "race_warps": 8,
                                            "race_by_batch": [[1, 512, 2], [8, 2048, 8]]}
    assert entry["config"]["race_programs_by_batch"] == [[1, 528], [8, 528], [32, 1056], [256, 3168]]
    assert entry["config"]["race_by_batch"] == [[1, 512, 2], [8, 1024, 4]]


def test_the_sweep_from_a_tuned_entry_with_races_per_batch_times_the_races_it_tries():
    """A tuned entry's race per batch size would stand in for every race the anchor's part tries (at B = 256 its
    last entry applies): the sweep drops it first, so that it ends where a sweep from the defaults does."""
    timer, _ = synthetic_timer()
    fresh = tune.sweep(timer, KernelConfig(), 132, out=lambda *a, **k: None)
    tuned = KernelConfig(race_by_batch=((1, 256, 1), (32, 256, 1)), race_programs_by_batch=((1, 132),))
    again = tune.sweep(timer, tuned, 132, out=lambda *a, **k: None)
    assert again.configs == fresh.configs


def test_a_refused_candidate_never_wins_and_is_listed_with_the_compilers_reason():
    timer, _ = synthetic_timer(refuse=lambda c: c.block == 4096)
    result = tune.sweep(timer, KernelConfig(), 132, out=lambda *a, **k: None)
    assert result.configs["draft/32"].block != 4096
    refused = [t for t in result.trials if t.seconds is None]
    assert refused and all("shared memory" in t.why and not t.chosen for t in refused)
    assert "refused: RuntimeError" in tune.trial_cells(refused[0])[4]


def test_a_sweep_where_every_candidate_is_refused_says_so():
    timer, _ = synthetic_timer(refuse=lambda c: True)
    with pytest.raises(ValueError, match="every candidate was refused"):
        tune.sweep(timer, KernelConfig(), 132, out=lambda *a, **k: None)


def test_the_sweeps_record_names_each_trial_and_the_winners():
    timer, _ = synthetic_timer()
    result = tune.sweep(timer, KernelConfig(), 132, out=lambda *a, **k: None)
    entry = tune.tuned_entry(result, {"command": "c", "date": "d", "torch": "t", "triton": "x"})
    rec = tune.record("GPU X", result, entry, "specsim bench --tune", "GPU X", {"torch": "t"})
    assert len(rec["tables"]["trials"]["rows"]) == len(result.trials)
    assert rec["values"]["tuned-draft-32"].startswith("stats 4096 x 8 warps")
    assert rec["entry"] == entry


def test_tune_out_without_tune_is_refused(capsys):
    from specsim.cli import main
    assert main(["bench", "--tune-out", "x.json"]) == 2
    assert "--tune-out FILE goes with --tune" in capsys.readouterr().out


def test_programs_by_batch_round_trips_through_a_tuning_file_and_picks_by_batch_size(tmp_path):
    config = KernelConfig(programs=4224, programs_by_batch=((1, 528), (256, 4224)))
    entry = triton_tuning.entry_of(config, {}, {"command": "c"})
    path = tmp_path / "mine.json"
    triton_tuning.write_entry(path, "GPU Y", entry)
    back = config_of(triton_tuning.read_entries(path)["GPU Y"], "mine.json: GPU Y")
    assert back.programs_by_batch == ((1, 528), (256, 4224))
    assert [back.programs_at(b) for b in (1, 32, 255, 256, 1024)] == [528, 528, 528, 4224, 4224]


def test_race_by_batch_round_trips_through_a_tuning_file_and_picks_by_batch_size(tmp_path):
    config = KernelConfig(race_block=256, race_warps=1, race_by_batch=((1, 1024, 4), (8, 512, 2), (32, 256, 1)))
    entry = triton_tuning.entry_of(config, {}, {"command": "c"})
    path = tmp_path / "mine.json"
    triton_tuning.write_entry(path, "GPU Y", entry)
    back = config_of(triton_tuning.read_entries(path)["GPU Y"], "mine.json: GPU Y")
    assert back.race_by_batch == ((1, 1024, 4), (8, 512, 2), (32, 256, 1))
    assert [back.race_at(b) for b in (1, 7, 8, 31, 32, 256)] == [(1024, 4)] * 2 + [(512, 2)] * 2 + [(256, 1)] * 2
