"""The conformance runner: check groups, run in order, in this process, and the verdict gate.

A *group* is a function ``run(device, ctx) -> list[CheckResult]`` named by a
``"module:function"`` string in ``GROUPS``. Groups are the unit of isolation
(a crash or hang loses one group, not the run) and of resumption; a group
whose capabilities the device lacks returns ``not_supported`` results rather
than nothing, so the report shows what was not checked. The run's ``conformance.json`` is
``run.document``'s.
"""

from __future__ import annotations

import traceback
from typing import Callable

from devices.registry import UnresolvedTarget, resolve
from specsim.conformance.core import scope as run_scope
from specsim.conformance.core.context import Context
from specsim.conformance.run.registry import GROUPS
from specsim.conformance.core.results import CheckResult
from specsim.conformance.core.spec_versions import annotate

__all__ = ["GROUPS", "Context", "MissingGroup", "available_groups", "chosen_groups", "resolve_group", "run_group",
           "run_conformance", "verdict_of"]


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


STOPS_EARLY = frozenset({"L1-edges", "L1-sampler", "L3-statistical"})
"""The groups whose function takes ``stop_at_first_fail``: stopped after the first part of the group with a failing
check, the checks before it and that check as a whole run makes them (``specsim mutants`` wants the first killer)."""


def run_group(name: str, device, ctx: Context, scopes: dict | None = None, *,
              stop_at_first_fail: bool = False) -> list[CheckResult]:
    """Run one group in this process; an exception becomes one ``error`` result, and a ``MutatedInput``
    (the device wrote to its inputs, SPEC §1) that the group let through one ``<group>/mutated-input``
    ``fail``. Each result's ``extra["group"]`` names the group (profiles read it); ``scopes``, if given,
    gets ``scopes[name]``: what the group's calls exercised (``specsim.conformance.core.scope``).
    ``stop_at_first_fail``: a group of ``STOPS_EARLY`` ends after the part holding its first failure (its first
    failing check unchanged; a verdict is never made of such a run); any other group runs whole."""
    run_scope.clear()
    results = _group_results(name, device, ctx, stop_at_first_fail and name in STOPS_EARLY)
    for r in results:
        r.extra = {**r.extra, "group": name}
    if scopes is not None:
        scopes[name] = run_scope.snapshot()
    return results


def _group_results(name: str, device, ctx: Context, stop_at_first_fail: bool = False) -> list[CheckResult]:
    try:
        group = resolve_group(name)
    except MissingGroup as e:
        return [CheckResult(name=f"{name}/missing", layer=name.split("-")[0], status="error", detail=str(e))]
    from specsim.conformance.core.calls import MutatedInput, mutated_result
    try:
        results = group(device, ctx, stop_at_first_fail=True) if stop_at_first_fail else group(device, ctx)
        return annotate(list(results), getattr(device, "capabilities", None))
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
