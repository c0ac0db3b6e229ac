"""Run the conformance suite against every mutant and every correct built-in device.

A mutant is *killed* when some check fails (or errors) on it; the first
killing check is reported with its p-value or its exact mismatch. Groups run
in the runner's order (exact layers first) and a mutant stops at its first
killing group: the family budget and every check's α are those of a full run,
so stopping early changes nothing about the check that killed it.

``black_box=True`` hides the mutant's injected-noise capability and declares
its randomness ``"seeded"``, so only the layers a vendor's closed RNG allows
(L2 contracts, L3 statistics, input rules) can kill it: the demonstration that
the statistical layer has power on its own.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.results import CheckResult
from specsim.conformance.run.runner import Context, available_groups, run_group
from specsim.mutants.verdict import Verdict  # noqa: F401 - judged here, and named here by callers


def hunt(device, ctx: Context, *, stop_early: bool = True,
         groups=None) -> tuple[CheckResult | None, list[str], list[CheckResult]]:
    """Run groups in order until one kills ``device``: (killer, groups run, all results).

    ``groups``: the groups to run, in the runner's order (default: every group)."""
    seen, everything = [], []
    for name in (available_groups() if groups is None else [g for g in available_groups() if g in groups]):
        results = run_group(name, device, ctx, stop_at_first_fail=stop_early)
        seen.append(name)
        everything += results
        bad = [r for r in results if r.status in ("fail", "error")]
        if bad and stop_early:
            return bad[0], seen, everything
    bad = [r for r in everything if r.status in ("fail", "error")]
    return (bad[0] if bad else None), seen, everything


def judge_mutant(mutant, ctx: Context, black_box: bool = False, groups=None) -> Verdict:
    device = BlackBox(mutant) if black_box else mutant
    start = time.perf_counter()
    killer, seen, _ = hunt(device, ctx, stop_early=True, groups=groups)
    return Verdict(mutant.id, mutant.bug, mutant.models, killer is not None, killer, seen,
                   time.perf_counter() - start)


def judge_correct(name: str, device, ctx: Context, groups=None) -> Verdict:
    start = time.perf_counter()
    killer, seen, results = hunt(device, ctx, stop_early=False, groups=groups)
    v = Verdict(name, "(correct device)", "", killer is not None, killer, seen, time.perf_counter() - start)
    v.counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "not_supported", "error")}
    return v


@dataclass(frozen=True)
class Job:
    """One judgement of a ``specsim mutants`` run, a pure function of its fields (so it can run on any
    worker of a campaign executor): a mutant of ``base`` (``kind="mutant"``, also ``black_box``) or a
    correct built-in device (``kind="correct"``, ``name`` its registry name); with ``family`` other than
    ``"device"``, a mutant or correct subject of that family (``specsim.mutants.families``; ``base`` unused).
    ``groups``: the conformance groups that judge it (default: every group, as ``hunt``); a correct
    device with ``black_box`` is judged behind ``BlackBox`` too."""

    kind: str
    name: str
    base: str
    black_box: bool
    seed: int
    alpha_family: float
    quick: bool
    family: str = "device"
    groups: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        where = "" if self.family == "device" else f"{self.family}/"
        return f"{self.kind}:{where}{self.name}" + (" [black box]" if self.black_box else "")


def run_job(job: Job) -> dict:
    """Build the device in this process, judge it: ``Verdict.to_json()`` plus counts and ``where``."""
    from devices.registry import load
    from specsim.campaign.tasks import where
    ctx = Context(seed=job.seed, alpha_family=job.alpha_family, quick=job.quick)
    if job.family != "device":
        from specsim.mutants.families import FAMILIES
        v = FAMILIES[job.family].judge(job.kind, job.name, ctx)
        v.family = job.family
    elif job.kind == "mutant":
        from specsim.mutants.zoo import make_mutant
        v = judge_mutant(make_mutant(load(job.base), job.name), ctx, black_box=job.black_box, groups=job.groups)
    else:
        device = load(job.name)
        v = judge_correct(job.name, BlackBox(device) if job.black_box else device, ctx, groups=job.groups)
    return {**v.to_json(), "counts": getattr(v, "counts", None), "where": where()}
