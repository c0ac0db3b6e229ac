"""The ``conformance.json`` document: the run's results, their verdict, the statistical plan and where the run
happened."""

from __future__ import annotations

import platform
import sys

from specsim.conformance.core.context import Context
from specsim.conformance.core.results import SCHEMA_VERSION, STATUSES, CheckResult
from specsim.conformance.run.registry import GROUPS
from specsim.conformance.run.runner import verdict_of
from specsim.conformance.verdict.profiles import PASSING


def environment(device=None) -> dict:
    """Where the run happened: versions and machine, for every report."""
    from specsim import __version__
    env = {"specsim": __version__, "python": sys.version.split()[0], "platform": platform.platform(),
           "machine": platform.machine(), "processor": platform.processor() or None}
    try:
        import numpy
        env["numpy"] = numpy.__version__
    except ImportError:  # pragma: no cover
        pass
    if "torch" in sys.modules or device is None or "torch" in type(device).__module__:
        try:
            import torch
            env["torch"] = torch.__version__
            env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        except ImportError:
            pass
    return env


def device_config(device) -> str | None:
    """The device's settings where it keeps them as a dataclass (``config``: the Triton device's launch shape, with
    where it comes from): a certificate names the settings it was earned with, and a resumed run's code holds them.
    None for a device without one."""
    import dataclasses
    config = getattr(device, "config", None)
    return repr(config) if dataclasses.is_dataclass(config) and not isinstance(config, type) else None


def document(device_spec: str, device, ctx: Context, results: list[CheckResult],
             groups: list[str] | None = None, plan=None, *, complete: bool = True,
             scope: dict | None = None) -> dict:
    """The ``conformance.json`` document (schema ``SCHEMA_VERSION``).

    ``groups``: the groups that ran (default: every group). ``verdict`` is ``verdict_of``'s
    (SPEC §10), its ``scope`` first among what a report shows; ``complete``: False while the run is
    under way or after it was stopped (the verdict is then ``incomplete``, whatever ran so far);
    ``scope``: ``specsim.conformance.core.scope.of_run`` of the groups' records. ``passed`` is true only
    for the verdicts ``pass`` and ``pass-with-waivers`` (every failure waived, none of the core's
    evidence): never for ``partial``, ``quick``, ``incomplete`` or ``fail``.
    ``statistical_plan`` is the run's plan (``stats.plan.run_plan``): every statistical test of every
    group for the device's capabilities, its α share and level, n and detectable TV, each marked
    ``ran`` if its group is in ``groups``; the shares sum to ``alpha_family``. ``plan``: another
    ``StatPlan`` to list instead (a campaign profile that is a family of its own).
    """
    from specsim import __version__
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}   # every status, in order: reports read the columns from it
    checks = [r.to_json() for r in results]
    _add_replay(checks, device_spec, ctx)
    caps = getattr(device, "capabilities", None)
    judged = verdict_of(device, checks, ctx, groups, complete=complete, scope=scope)
    ran = list(groups) if groups is not None else list(GROUPS)
    return {
        "schema_version": SCHEMA_VERSION,
        "spec_version": judged["spec_version"],
        "suite_version": __version__,
        "device": {"spec": device_spec, "name": getattr(device, "name", None),
                   "engine": getattr(device, "engine", None),   # a field adapter's "<engine> <release>"
                   "config": device_config(device),
                   "capabilities": caps.to_json() if caps is not None else None},
        "environment": environment(device),
        "seed": ctx.seed,
        "alpha_family": ctx.alpha_family,
        "quick": ctx.quick,
        "summary": counts,
        "passed": judged["status"] in PASSING,
        "verdict": judged,
        "statistical_plan": plan.to_json(ran) if plan is not None else _statistical_plan(caps, ctx, ran),
        "checks": checks,
    }


def _add_replay(checks: list[dict], device_spec: str, ctx: Context) -> None:
    """Each failing L1 check that can run alone gets ``extra["replay"]``: the command that re-runs it."""
    from specsim.conformance.run.one_check import replay_command
    for c in checks:
        if c["status"] in ("fail", "error"):
            command = replay_command(device_spec, ctx.seed, c["name"], ctx.quick)
            if command:
                c.setdefault("extra", {})["replay"] = command


def _statistical_plan(caps, ctx: Context, groups: list[str]) -> dict | None:
    """The run's statistical plan for ``conformance.json``; None without capabilities to plan for."""
    if caps is None:
        return None
    from specsim.conformance.stats.plan import run_plan
    return run_plan(caps, ctx).to_json(groups)
