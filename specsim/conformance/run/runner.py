"""The conformance runner: check groups, run in order, one JSON document.

A *group* is a function ``run(device, ctx) -> list[CheckResult]`` named by a
``"module:function"`` string in ``GROUPS``. Groups are the unit of isolation
(a crash or hang loses one group, not the run) and of resumption; a group
whose capabilities the device lacks returns ``not_supported`` results rather
than nothing, so the report shows what was not checked.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import traceback
from typing import Callable

from devices.registry import UnresolvedTarget, resolve
from specsim.conformance.core import scope as run_scope
from specsim.conformance.core.context import Context
from specsim.conformance.run.registry import GROUPS
from specsim.conformance.verdict.profiles import PASSING
from specsim.conformance.core.results import SCHEMA_VERSION, STATUSES, CheckResult
from specsim.conformance.core.spec_versions import annotate



def available_groups() -> dict[str, str]:
    """Every group of ``GROUPS``: one whose module is missing is run, and is an ``error`` there."""
    return dict(GROUPS)


def chosen_groups(spec: str | None) -> dict[str, str]:
    """The groups a ``--groups G1,G2`` value names → their ``"module:attr"``, in its order (None or empty:
    every group, in run order); ``ValueError`` naming each unknown one and the known ones.

    >>> list(chosen_groups("L2-rng,capabilities"))
    ['L2-rng', 'capabilities']
    >>> chosen_groups("L9")
    Traceback (most recent call last):
    ...
    ValueError: --groups: unknown ['L9']; known: [...]
    """
    known = available_groups()
    names = [g for g in spec.split(",") if g] if spec else list(known)
    unknown = [g for g in names if g not in known]
    if unknown:
        raise ValueError(f"--groups: unknown {unknown}; known: {sorted(known)}")
    return {g: known[g] for g in names}


class MissingGroup(RuntimeError):
    """A group's module or function is not in this checkout."""


def resolve_group(name: str) -> Callable:
    """The group's function; ``MissingGroup`` (naming group, module and attribute) if absent."""
    try:
        return resolve(GROUPS[name], f"group {name!r}")
    except UnresolvedTarget as e:
        if e.missing is None:
            raise
        raise MissingGroup(f"group {name!r}: {e.missing} is missing from this checkout; a check that vanishes "
                           "is an error, never a skip") from e


def run_group(name: str, device, ctx: Context, scopes: dict | None = None) -> list[CheckResult]:
    """Run one group in this process; an exception becomes one ``error`` result, and a ``MutatedInput``
    (the device wrote to its inputs, SPEC §1) that the group let through one ``<group>/mutated-input``
    ``fail``. Each result's ``extra["group"]`` names the group (profiles read it); ``scopes``, if given,
    gets ``scopes[name]``: what the group's calls exercised (``specsim.conformance.core.scope``)."""
    run_scope.clear()
    results = _group_results(name, device, ctx)
    for r in results:
        r.extra = {**r.extra, "group": name}
    if scopes is not None:
        scopes[name] = run_scope.snapshot()
    return results


def _group_results(name: str, device, ctx: Context) -> list[CheckResult]:
    try:
        group = resolve_group(name)
    except MissingGroup as e:
        return [CheckResult(name=f"{name}/missing", layer=name.split("-")[0], status="error", detail=str(e))]
    from specsim.conformance.core.calls import MutatedInput, mutated_result
    try:
        return annotate(list(group(device, ctx)), getattr(device, "capabilities", None))
    except MutatedInput as e:  # a write the group let through: a failure of the device, not of the group
        return [mutated_result(f"{name}/mutated-input", name.split("-")[0], e)]
    except Exception as e:  # the device raised something the group did not expect
        return [CheckResult(name=f"{name}/crashed", layer=name.split("-")[0], status="error",
                            detail=f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=8)}")]


def run_conformance(device, ctx: Context | None = None, groups: list[str] | None = None,
                    scopes: dict | None = None) -> list[CheckResult]:
    """Run the chosen groups (default: all available) against ``device`` in this process; the
    results, to be judged by ``verdict_of`` (SPEC §10's verdict, the one gate)::

        from specsim.conformance.run.runner import Context, run_conformance, verdict_of
        device = MyDevice()
        results = run_conformance(device, Context())
        verdict = verdict_of(device, results)
        assert verdict["status"] == "pass", verdict["reasons"]

    ``scopes``: a dict that gets each group's record of what its calls exercised (pass it on to
    ``verdict_of`` as ``scope=scope.of_run(scopes)`` for the verdict's scope).
    """
    ctx = ctx or Context()
    results: list[CheckResult] = []
    for name in groups or list(available_groups()):
        results.extend(run_group(name, device, ctx, scopes))
    return results


def verdict_of(device, results: list[CheckResult], ctx: Context | None = None,
               groups: list[str] | None = None, *, complete: bool = True, scope: dict | None = None) -> dict:
    """SPEC §10's verdict on ``results`` (``run_conformance``'s, or a run's ``checks``): the gate.

    ``status`` is ``"pass"`` only if the device declares the core profile, no check failed or
    errored, none the core needs is ``not_supported``, the core's evidence ran and passed, and the
    run was the whole suite (every group of ``GROUPS``, full size, the suite seed, at least the suite's
    α); ``reasons`` says why not. ``ctx``: the run's (its ``quick`` runs are never ``pass``: status
    ``"quick"``). ``groups``: the groups that ran (default every group); a subset is at best
    ``"partial"``. ``complete``: False for a run that did not finish (``"incomplete"``). Not
    ``results.passed``, which only asks that nothing failed: a device declaring nothing meets it.

    >>> from devices.protocol import Capabilities
    >>> class Small:
    ...     capabilities = Capabilities(injected_noise=True, rng="none", max_vocab_size=8)
    >>> v = verdict_of(Small(), [], groups=["capabilities"])
    >>> v["status"], v["core_profile"]["missing"]
    ('fail', ['max_vocab_size >= 262144 (declares 8)'])
    """
    from specsim.conformance.verdict.profiles import verdict
    ctx = ctx or Context()
    checks = [r.to_json() if isinstance(r, CheckResult) else r for r in results]
    ran = list(groups) if groups is not None else list(GROUPS)
    return verdict(getattr(device, "capabilities", None), checks, ran, quick=ctx.quick, complete=complete,
                   seed=ctx.seed, alpha_family=ctx.alpha_family, all_groups=list(GROUPS), scope=scope)


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
    ``statistical_plan`` is the run's plan (``stat_plan.run_plan``): every statistical test of every
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


def write_json_atomic(path: str, doc: dict) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, default=float)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is for reading
    os.replace(tmp, path)
