"""The campaign layer: shards merge exactly, whatever ran them; resume; a killed worker loses nothing (issue 14)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from specsim.campaign.executors import InProcess, Processes
from specsim.campaign.run import run_campaign, shard_tasks
from specsim.campaign.tasks import run_task
from specsim.conformance.runner import Context
from specsim.conformance.statistical import Tally, statistical_group

CASES = ["v8-far", "v32-topp"]
SHARD_TRIALS = 400  # quick cases have 1500 trials: 4 shards each


def campaign(executor, **kw):
    return run_campaign("torch", [0], executor, quick=True, cases=CASES, shard_trials=SHARD_TRIALS, progress=False,
                        **kw)


def verdicts(results) -> list:
    return [(r.name, r.status, r.p_value, r.statistic) for r in results]


def counts(tallies: dict) -> dict:
    """Every integer a campaign counted, as plain lists (for exact comparison)."""
    return {key: (t.n, {k: np.asarray(v).tolist() for k, v in t.counts.items()},
                  {k: np.asarray(v).tolist() for k, v in t.accepted.items()}, dict(t.violations))
            for key, t in tallies.items()}


def dies_once(task):
    """``run_task``, except that the first run of v8-far's shard 1 kills its worker process."""
    marker = os.path.join(os.environ["SPECSIM_TEST_DIE_DIR"], task.key.replace("/", "_"))
    if task.case_id == CASES[0] and task.index == 1 and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return run_task(task)


@pytest.fixture(scope="module")
def reference():
    """The in-process campaign: the counts every other executor must reproduce."""
    return campaign(InProcess())


def test_in_process_campaign_is_the_conform_group():
    from devices.registry import load
    group = statistical_group(load("torch"), Context(quick=True), cases=CASES)
    camp = run_campaign("torch", [0], InProcess(), quick=True, cases=CASES, progress=False)
    assert verdicts(camp.results[0]) == verdicts(group)


def test_local_processes_count_exactly_what_one_process_counts(reference):
    out = campaign(Processes(2))
    assert out.run["shards"] == 8 and out.run["workers"] == 2
    assert counts(out.tallies) == counts(reference.tallies)
    assert verdicts(out.results[0]) == verdicts(reference.results[0])


def test_an_interrupted_campaign_resumes_without_redoing_finished_shards(tmp_path, reference):
    campaign(InProcess(), out_dir=str(tmp_path))
    os.remove(tmp_path / "shards" / "0" / "v32-topp" / "2.json")   # as if killed before this shard finished
    again = campaign(InProcess(), out_dir=str(tmp_path), resume=True)
    assert again.run["shards_resumed"] == 7
    assert counts(again.tallies) == counts(reference.tallies)


def test_resuming_another_campaign_is_refused(tmp_path):
    from specsim.campaign.store import ResumeMismatch
    campaign(InProcess(), out_dir=str(tmp_path))
    with pytest.raises(ResumeMismatch, match="shard_trials"):
        run_campaign("torch", [0], InProcess(), quick=True, cases=CASES, shard_trials=500, progress=False,
                     out_dir=str(tmp_path), resume=True)


def test_a_killed_local_worker_loses_only_its_shard_which_runs_again(tmp_path, monkeypatch, reference):
    monkeypatch.setenv("SPECSIM_TEST_DIE_DIR", str(tmp_path))
    tasks, _ = shard_tasks("torch", "suite", [0], 1e-3, True, CASES, SHARD_TRIALS)
    got = list(Processes(2).map(dies_once, tasks))
    assert sorted(t.key for t, _ in got) == sorted(t.key for t in tasks)   # each shard once: none lost, none twice
    assert len(list(tmp_path.iterdir())) == 1                              # the shard did die once
    for case in CASES:
        merged = Tally.merged(Tally.from_json(r["tally"]) for t, r in sorted(got, key=lambda x: x[0].index)
                              if t.case_id == case)
        assert counts({case: merged}) == counts({case: reference.tallies[(0, case)]})


@pytest.mark.parametrize("name", ["specsim.conformance.statistical", "specsim.campaign.run", "specsim.engines.check"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0


def test_verify_repeated_counts_exactly_what_verify_counts():
    """The sign-off profile's transport (rows once, ids per call) changes nothing: same draws, same tallies."""
    from devices.registry import load
    from specsim.conformance.statistical import make_plan, run_shard
    device = load("torch")
    for cp in make_plan(1e-3, True).cases:
        if cp.case.id in ("v8-hetero", "v8-point", "v32-topp"):   # greedy, point and placeholder, top-p
            plain = run_shard(device, cp, 0, 0, 300)
            repeated = run_shard(device, cp, 0, 0, 300, repeated=True)
            assert counts({0: plain}) == counts({0: repeated}), cp.case.id
