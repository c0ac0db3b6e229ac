"""What a shard is, the case profiles a campaign draws from, and the function a worker runs.

A worker gets a ``ShardTask`` (small, picklable), loads the device by its
spec and the plan by (profile, α, quick) once per process, runs the shard and
returns its counts as JSON (``Tally.to_json``: sparse integers), with where
and how long it ran.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from dataclasses import asdict, dataclass

from specsim.conformance.cases.chain import CASES, Case, Request

SIGNOFF_CASES: tuple[Case, ...] = (
    Case("v128256-signoff", 128256, (Request(2, 1.0, scale=3.0, draft="near"), Request(0, 0.8, scale=3.0)),
         note="Llama 3's vocabulary: two drafts near the target, and a bonus-only request at temperature 0.8"),
    Case("v151936-signoff", 151936, (Request(1, 1.0, scale=3.0, top_p=0.95, draft="near"),),
         note="Qwen 2's vocabulary: one draft near the target, top-p 0.95"),
)
"""The sign-off profile: worst-case TV ≤ ``TARGET_TV`` at every position (bonus included) at a real V."""

PROFILES: dict[str, tuple[Case, ...]] = {"suite": CASES, "signoff": SIGNOFF_CASES}


@dataclass(frozen=True)
class ShardTask:
    """One shard: ``(suite seed, case, index)`` of a profile, and how to load the device that runs it."""

    device: str
    profile: str
    suite_seed: int
    alpha_family: float
    quick: bool
    case_id: str
    index: int
    shard_trials: int

    @property
    def key(self) -> str:
        """``seed/case/index``: the shard's name in the store and in progress lines."""
        return f"{self.suite_seed}/{self.case_id}/{self.index}"

    def to_json(self) -> dict:
        return asdict(self)


@functools.lru_cache(maxsize=8)
def plan_for(device_spec: str, profile: str, alpha_family: float, quick: bool):
    """The L3 plan of a profile (built once per process): ``suite`` at each check's α in the run-wide plan
    of ``specsim conform`` on that device (the same trials and verdicts); ``signoff`` a family of its own,
    ``alpha_family`` over its checks."""
    from specsim.conformance.stats.l3_design import make_plan
    if profile == "suite":
        from specsim.conformance.run.runner import Context
        from specsim.conformance.stats.plan import run_plan
        caps = device_for(device_spec).capabilities
        return make_plan(run_plan(caps, Context(alpha_family=alpha_family, quick=quick)), quick)
    return make_plan(alpha_family, quick, cases=PROFILES[profile])


def statistical_plan_for(device_spec: str, profile: str, alpha_family: float, quick: bool, seed: int):
    """The ``StatPlan`` a campaign's ``conformance.json`` lists: the run's (``suite``) or the profile's own."""
    if profile == "suite":
        return None  # ``run.document`` lists the run-wide plan
    from specsim.conformance.stats.plan import family_plan
    return family_plan(alpha_family, quick, PROFILES[profile], seed)


@functools.lru_cache(maxsize=2)
def device_for(spec: str):
    """The device of a spec (loaded once per process)."""
    from devices.registry import load
    return load(spec)


def case_plan(task: ShardTask):
    return next(cp for cp in plan_for(task.device, task.profile, task.alpha_family, task.quick).cases
                if cp.case.id == task.case_id)


def run_task(task: ShardTask) -> dict:
    """The worker's function: run one shard, return ``{"tally": ..., "seconds": ..., "where": ...}``.

    The sign-off profile calls the device's ``verify_repeated`` where it has one
    (same draws and result as ``verify``; at V = 128k only ids cross per call).
    """
    from specsim.conformance.stats.shards import run_shard
    device = device_for(task.device)
    start = time.perf_counter()
    tally = run_shard(device, case_plan(task), task.suite_seed, task.index, task.shard_trials,
                      repeated=task.profile == "signoff")
    return {"tally": tally.to_json(), "seconds": time.perf_counter() - start, "where": where()}


def where() -> str:
    """``host:pid`` and the GPU this process sees, if any."""
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    return f"{socket.gethostname()}:{os.getpid()}" + (f" gpu {gpu}" if gpu else "")
