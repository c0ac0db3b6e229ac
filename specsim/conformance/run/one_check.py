"""One L1 check alone, by the name ``specsim conform`` gives it: ``specsim replay`` re-runs a failure with it,
and a test holds a slow device to a named check without running its whole group."""

from __future__ import annotations

import re

from specsim.conformance.checks.chain.exact import edge_group, run_cases
from specsim.conformance.checks.chain.offsets import offsets_group
from specsim.conformance.checks.chain.sizes import sizes_group
from specsim.conformance.checks.sampler.group import edge_batch_checks as sampler_edge_batch_checks, random_checks
from specsim.conformance.checks.sampler.keyed import keyed_sampler_checks
from specsim.conformance.core.results import CheckResult


REPLAYABLE = ("L1/injected/", "L1/keyed/", "L1/keyed-sampler/", "L1/edge/", "L1/edge-neighbours/", "L1/sizes/",
              "L1-sampler/")
"""The checks ``specsim replay`` offers to run alone: a name starting with one of these (not ``L1-sampler/edge/``
but its edges at batch sizes, ``SAMPLER_EDGE_BATCHES``), or one of ``DECLARED_POSITIONS``. ``one_check`` also runs an
``L1/offsets/`` check alone (at the context's ``call_bytes``); replay does not offer it: its calls hold GiBs, too large
to save with ``--npz``."""
DECLARED_POSITIONS = re.compile(r"L1/declared/(injected|keyed)/empty-residual-(positions|between)-K(\d+)")
"""The declared groups' positions checks (SPEC 1.7, 1.8), each one call of small rows: replayable alone."""
SAMPLER_EDGE_BATCHES = re.compile(r"L1-sampler/edge(-neighbours)?/[^/]+/[^/]+(/[^/]+)?/(batches|mixed)")
"""§12's edges at every batch size (SPEC 1.9) and among filler requests, and their fillers' rows (SPEC 1.11): each
edge's own calls, replayable alone."""


def replayable(name: str) -> bool:
    """Whether ``specsim replay`` can run check ``name`` alone (``REPLAYABLE``, ``DECLARED_POSITIONS``).

    >>> replayable("L1/declared/keyed/empty-residual-between-K256"), replayable("L1/declared/keyed/K256")
    (True, False)
    >>> replayable("L1-sampler/edge/min-p-ties/vllm/batches"), replayable("L1-sampler/edge/min-p-ties/vllm")
    (True, False)
    >>> replayable("L1-sampler/edge/min-p-ties/vllm/float16/batches"), replayable("L1-sampler/edge-neighbours/min-p-threshold-ties/vllm/mixed")
    (True, True)
    """
    return (name.startswith(REPLAYABLE) and not name.startswith("L1-sampler/edge/")) or \
        DECLARED_POSITIONS.fullmatch(name) is not None or SAMPLER_EDGE_BATCHES.fullmatch(name) is not None


def replay_command(device_spec: str, seed: int, name: str, quick: bool = False) -> str | None:
    """The command that re-runs check ``name`` alone (``specsim replay``), or None if it cannot run alone.

    >>> replay_command("torch", 3, "L1/edge/vocab-one")
    'specsim replay --device torch --seed 3 L1/edge/vocab-one'
    """
    if not replayable(name):
        return None
    return f"specsim replay --device {device_spec} --seed {seed}{' --quick' if quick else ''} {name}"


def one_check(device, ctx, name: str) -> CheckResult:
    """The one L1 check called ``name`` (as ``specsim conform`` names it), alone: for a test that
    holds a slow device (Triton's interpreter) to a named check without running its whole group.

    >>> from devices.registry import load
    >>> from specsim.conformance import Context
    >>> one_check(load("torch"), Context(quick=True), "L1/edge/vocab-one").status
    'pass'
    """
    if DECLARED_POSITIONS.fullmatch(name):
        found = _declared_positions(device, ctx, name)
    elif name.startswith(("L1/edge/", "L1/edge-neighbours/")):
        found = edge_group(device, ctx, only=name)
    elif name.startswith("L1/sizes/"):
        found = sizes_group(device, ctx, only=name)
    elif SAMPLER_EDGE_BATCHES.fullmatch(name):
        found = sampler_edge_batch_checks(device, ctx, only=name, kind=SAMPLER_EDGE_BATCHES.fullmatch(name).group(3))
    elif name.startswith("L1-sampler/") and not name.startswith("L1-sampler/edge/"):
        found = random_checks(device, ctx, only=name)
    elif name.startswith("L1/offsets/"):
        found = offsets_group(device, ctx, only=name)
    elif name.startswith("L1/keyed-sampler/"):
        found = keyed_sampler_checks(device, ctx, only=name)
    else:
        group = "/".join(name.split("/")[:2])
        if group not in ("L1/injected", "L1/keyed"):
            raise ValueError(f"name: {name!r} is not an L1 check (L1/injected/..., L1/keyed/..., L1/edge/..., "
                             "L1/sizes/..., L1-sampler/<order>/<case>, L1/keyed-sampler/<order>/<case>)")
        found = run_cases(device, ctx, group, injected=group == "L1/injected", only=name)
    found = [r for r in found if r.name == name]   # an edge among fillers is asked once for two checks (SPEC 1.10, 1.11)
    if len(found) != 1:
        raise ValueError(f"name: no L1 check {name!r} at these sizes (quick={ctx.quick})")
    return found[0]


def _declared_positions(device, ctx, name: str) -> list[CheckResult]:
    """The positions check ``name`` (``DECLARED_POSITIONS``) at the K its declaration checks (``k_limits``); none
    where the device's declaration checks no such K or mode, or the set is empty there."""
    from specsim.conformance.cases.declared import logits_dtype
    from specsim.conformance.checks.declared.group import empty_residual_positions, noise_modes, position_limits
    mode, kind, K = DECLARED_POSITIONS.fullmatch(name).groups()
    caps = device.capabilities
    return [empty_residual_positions(device, ctx, mode, lim, logits_dtype(caps), kind)
            for made, lim in position_limits(caps)
            if made == kind and lim.value == int(K) and mode in noise_modes(caps)]
