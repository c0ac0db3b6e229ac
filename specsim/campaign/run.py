"""A campaign: plan → shard tasks → executor → exact merge → L3 verdicts; and calibration over seeds.

>>> from specsim.campaign.executors import InProcess
>>> out = run_campaign("torch", [0], InProcess(), alpha_family=1e-3, quick=True, cases=["v8-far"], progress=False)
>>> sorted({r.status for r in out.results[0]}), out.run["shards"]
(['pass'], 1)
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

from specsim.campaign.store import ShardStore
from specsim.campaign.tasks import ShardTask, device_for, plan_for, run_task


@dataclass
class Campaign:
    """What a campaign gave: per suite seed, its L3 results; and how it ran (``run``)."""

    results: dict = field(default_factory=dict)   # suite seed -> list[CheckResult]
    tallies: dict = field(default_factory=dict)   # (suite seed, case id) -> merged Tally
    run: dict = field(default_factory=dict)


def shard_tasks(device_spec: str, profile: str, seeds, alpha_family: float, quick: bool, cases, shard_trials: int):
    """Every shard of every supported case, seed by seed, and the not_supported results per seed."""
    from specsim.conformance.stats.shards import shard_sizes
    from specsim.conformance.stats.verdicts import NO_RANDOMNESS, not_supported
    device = device_for(device_spec)
    plan = plan_for(device_spec, profile, alpha_family, quick)
    tasks, unsupported = [], []
    if device.capabilities.rng == "none":
        return tasks, [NO_RANDOMNESS]
    for cp in plan.cases:
        if cases is not None and cp.case.id not in cases:
            continue
        missing = not_supported(device, cp)
        unsupported += missing
        if not missing:
            tasks += [ShardTask(device_spec, profile, s, alpha_family, quick, cp.case.id, i, shard_trials)
                      for s in seeds for i in range(len(shard_sizes(cp, shard_trials)))]
    return tasks, unsupported


class Progress:
    """One line per finished shard, and after the first ones an estimate of the rest (and the workers for < 1 h)."""

    def __init__(self, tasks, workers: int, enabled: bool = True):
        from specsim.conformance.stats.shards import shard_sizes
        self.total = len(tasks)
        self.trials = {t.key: shard_sizes(case_plan_of(t), t.shard_trials)[t.index] for t in tasks}
        self.left = sum(self.trials.values())
        self.workers = max(1, workers)
        self.enabled = enabled
        self.done = 0
        self.busy = 0.0        # worker-seconds spent on finished shards
        self.trials_done = 0
        self.start = time.perf_counter()
        self.estimate = None

    def shard(self, task, result: dict, resumed: bool = False) -> None:
        self.done += 1
        self.left -= self.trials[task.key]
        if not resumed:
            self.busy += result["seconds"]
            self.trials_done += self.trials[task.key]
        if self.trials_done:
            rate = self.busy / self.trials_done                      # worker-seconds per trial
            self.estimate = {"remaining_worker_seconds": rate * self.left,
                             "remaining_wall_seconds": rate * self.left / self.workers,
                             "workers_for_one_hour": max(1, math.ceil(rate * self.left / 3600))}
        if self.enabled:
            tail = "" if resumed else f" {result['seconds']:.1f}s on {result.get('where', '?')}"
            eta = "" if not self.estimate else (f"; about {self.estimate['remaining_wall_seconds']:.0f}s left with "
                                                f"{self.workers} worker(s), "
                                                f"{self.estimate['workers_for_one_hour']} for < 1 h")
            print(f"  [{self.done}/{self.total}] shard {task.key}{' (resumed)' if resumed else ''}{tail}{eta}",
                  file=sys.stderr, flush=True)


def case_plan_of(task: ShardTask):
    from specsim.campaign.tasks import case_plan
    return case_plan(task)


def projection(shard_seconds: list[float], workers: int) -> float:
    """Wall seconds of shards of these durations on ``workers`` workers, longest first to the least loaded (LPT).

    A projection from measured shard times, not a measurement: it ignores
    start-up, transfer and stragglers.

    >>> projection([4.0, 3.0, 3.0, 2.0], 2)
    6.0
    """
    loads = [0.0] * max(1, workers)
    for s in sorted(shard_seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


class OverBudget(RuntimeError):
    """The estimate after the first shards exceeds ``max_hours``; finished shards are kept for a resume."""


def run_campaign(device_spec: str, seeds, executor, *, profile: str = "suite", alpha_family: float = 1e-3,
                 quick: bool = False, cases=None, out_dir: str | None = None, resume: bool = False,
                 max_hours: float | None = None, progress: bool = True, shard_trials: int | None = None,
                 work=run_task) -> Campaign:
    """Run the L3 statistical layer of ``device_spec`` for each suite seed in ``seeds`` through ``executor``.

    Shards already in ``out_dir`` (``resume``) are read, not rerun. With
    ``max_hours``, the campaign stops once the first shards' rate says the
    rest would take longer (``OverBudget``, with the estimate). ``work``: the
    worker's function (``run_task``; tests wrap it to kill workers).
    """
    from specsim.conformance.stats.shards import SHARD_TRIALS
    from specsim.conformance.stats.tally import Tally
    from specsim.conformance.stats.verdicts import case_verdicts, mark_holm

    seeds = list(seeds)
    shard_trials = shard_trials or SHARD_TRIALS
    tasks, unsupported = shard_tasks(device_spec, profile, seeds, alpha_family, quick, cases, shard_trials)
    key = {"device": device_spec, "profile": profile, "seeds": seeds, "alpha_family": alpha_family,
           "quick": quick, "cases": cases, "shard_trials": shard_trials}
    store = ShardStore(out_dir, key, resume)
    done: dict[str, dict] = {}
    bar = Progress(tasks, getattr(executor, "workers", None) or 1, progress)
    for t in tasks:
        found = store.finished(t) if resume else None
        if found is not None:
            done[t.key] = found
            bar.shard(t, found, resumed=True)
    todo = [t for t in tasks if t.key not in done]
    start = time.perf_counter()
    probe = max(1, getattr(executor, "workers", 1) or 1)
    for task, result in executor.map(work, todo):
        if task.key in done:  # a retried shard that also returned: taken once
            continue
        store.save(task, result)
        done[task.key] = result
        bar.shard(task, result)
        if max_hours is not None and bar.done - (len(tasks) - len(todo)) >= probe and bar.estimate and \
                bar.estimate["remaining_wall_seconds"] > max_hours * 3600:
            raise OverBudget(f"the rest of the campaign would take about {bar.estimate['remaining_wall_seconds']:.0f}s "
                             f"with {bar.workers} worker(s) (> {max_hours} h); "
                             f"{bar.estimate['workers_for_one_hour']} workers would bring it under an hour. "
                             f"Finished shards are kept: rerun with --resume and more workers.")
    wall = time.perf_counter() - start
    out = Campaign()
    plan = plan_for(device_spec, profile, alpha_family, quick)
    for s in seeds:
        results = list(unsupported)
        for cp in plan.cases:
            mine = [t for t in tasks if t.suite_seed == s and t.case_id == cp.case.id]
            if not mine:
                continue
            tally = Tally.merged(Tally.from_json(done[t.key]["tally"]) for t in sorted(mine, key=lambda t: t.index))
            out.tallies[(s, cp.case.id)] = tally
            results += case_verdicts(cp, tally, plan, s, sum(done[t.key]["seconds"] for t in mine), shard_trials)
        mark_holm(results, plan)
        out.results[s] = results
    out.run = {**executor.describe(), "isolation": "campaign", "profile": profile, "shards": len(tasks),
               "shards_resumed": len(tasks) - len(todo), "shard_trials": shard_trials,
               "wall_seconds": round(wall, 2), "worker_seconds": round(sum(r["seconds"] for r in done.values()), 2),
               "trials": sum(t.n for t in out.tallies.values()),
               "projection_wall_seconds": {str(n): round(projection([r["seconds"] for r in done.values()], n), 1)
                                           for n in (1, 2, 4, 8, 16)}}
    store.close(out.run)
    return out
