"""The campaign layer: shards merge exactly, whatever ran them; resume; a killed worker loses nothing."""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest

from specsim.campaign.executors import InProcess, Processes
from specsim.campaign.run import run_campaign
from specsim.campaign.tasks import run_task
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.chain.statistical import statistical_group

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


def dies_once(marker_dir: str, case_id: str, index: int, task):
    """``run_task``, except that the first run of shard (case_id, index) kills its worker process."""
    marker = os.path.join(marker_dir, task.key.replace("/", "_"))
    if task.case_id == case_id and task.index == index and not os.path.exists(marker):
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


def test_local_processes_count_exactly_what_one_process_counts_even_when_a_worker_is_killed(tmp_path, reference):
    out = campaign(Processes(2), work=functools.partial(dies_once, str(tmp_path), CASES[0], 1))
    assert os.listdir(tmp_path) == ["0_v8-far_1"]                   # that shard's worker did die
    assert out.run["shards"] == 8 and out.run["workers"] == 2
    assert counts(out.tallies) == counts(reference.tallies)          # nothing lost, nothing counted twice
    assert verdicts(out.results[0]) == verdicts(reference.results[0])


def test_an_interrupted_campaign_resumes_without_redoing_finished_shards(tmp_path, reference):
    campaign(InProcess(), out_dir=str(tmp_path))
    os.remove(tmp_path / "shards" / "0" / "v32-topp" / "2.json")   # as if killed before this shard finished
    again = campaign(InProcess(), out_dir=str(tmp_path), resume=True)
    assert again.run["shards_resumed"] == 7
    assert counts(again.tallies) == counts(reference.tallies)


def test_the_report_says_where_and_how_the_campaign_ran(reference):
    from reports.tables import provenance
    from specsim.conformance.run.document import document
    doc = document("torch", None, Context(quick=True), reference.results[0])
    doc["run"] = {**reference.run, "complete": True}
    assert provenance(doc)["campaign"].startswith("executor inprocess, 1 workers, 1 worker process(es)")
    assert "8 shards (0 resumed), 3000 trials" in provenance(doc)["campaign"]


def test_resuming_another_campaign_is_refused(tmp_path):
    from specsim.campaign.store import ResumeMismatch
    campaign(InProcess(), out_dir=str(tmp_path))
    with pytest.raises(ResumeMismatch, match="shard_trials"):
        run_campaign("torch", [0], InProcess(), quick=True, cases=CASES, shard_trials=500, progress=False,
                     out_dir=str(tmp_path), resume=True)


@pytest.mark.parametrize("name", ["specsim.conformance.stats.shards", "specsim.conformance.stats.tally", "specsim.campaign.run", "specsim.field.engines.check"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0


def test_verify_repeated_counts_exactly_what_verify_counts():
    """The sign-off profile's transport (rows once, ids per call) changes nothing: same draws, same tallies."""
    from devices.registry import load
    from specsim.conformance.stats.shards import run_shard
    from specsim.conformance.stats.l3_design import make_plan
    device = load("torch")
    for cp in make_plan(1e-3, True).cases:
        if cp.case.id in ("v8-hetero", "v8-point", "v32-topp"):   # greedy, point and placeholder, top-p
            plain = run_shard(device, cp, 0, 0, 300)
            repeated = run_shard(device, cp, 0, 0, 300, repeated=True)
            assert counts({0: plain}) == counts({0: repeated}), cp.case.id


def test_mutant_judgements_are_shards_whatever_runs_them():
    """``specsim mutants --executor``: each mutant's judgement is a pure function of its job, so local
    processes give the in-process verdicts (killed, first killing check, evidence). (Not the
    ``global-rng`` mutant's evidence: that mutant draws from its process's global RNG on purpose.)"""
    from specsim.mutants.runner import Job, run_job
    jobs = [Job("mutant", m, base="torch", black_box=bb, seed=0, alpha_family=1e-3, quick=True)
            for m, bb in (("residual-target", False), ("residual-target", True), ("accept-inclusive", False))]
    jobs.append(Job("mutant", "q-before-processors", base="torch", black_box=False, seed=0, alpha_family=1e-3,
                    quick=True, family="proposer"))                  # a family's judgement is a job too
    keep = ("name", "killed", "killer", "evidence", "groups_run")
    here = {j.key: {k: r[k] for k in keep} for j, r in InProcess().map(run_job, jobs)}
    there = {j.key: {k: r[k] for k in keep} for j, r in Processes(2).map(run_job, jobs)}
    assert there == here
    assert all(r["killed"] for r in here.values())
