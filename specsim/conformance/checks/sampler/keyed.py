"""Group ``L1-keyed-sampler``: SPEC §5.2's keyed Philox streams on §12's batches, bit for bit.

A device declaring ``rng="philox"`` draws its own noise from ``(seed, position, purpose, column)``
on every path it serves. ``L1-keyed`` holds the plain step to that; ``L1-sampler`` compares §12's
batches under injected noise whenever the device takes it. This group asks the §12 path itself to
draw its streams: a device whose §12 kernel keys its round by the history length instead of
``positions``, or reads a coin by the flattened draft row instead of the draft's index in its
request, passes both and fails here.

Checks ``L1/keyed-sampler/<order>/<case>``, for each order profile the device declares:

- ``<case>`` of ``L1-sampler``'s random cases (``group.CASES``: each parameter alone, all of them,
  point proposals, float32, every request under a top-k, no filter, the declared set): the same
  construction (``group.random_case``: repetition loops, drafts close to the target, the
  parameters acting along the drafts), under seeds of this group's own;
- ``far-drafts`` and ``withdrawn`` (``OWN_CASES``; the latter for a device declaring
  ``withdrawn_drafts``): every declared parameter, with drafts accepted about half the time (most
  coins decide), and with a quarter of the drafts withdrawn (SPEC §4).

Each batch carries ``seeds [batch]`` and ``positions [batch]``; the device is called without
``noise`` and compared token for token with the reference on the keyed streams of §5.2 (SPEC §9's
near-tie allowances applied). Replay one: ``specsim replay --device D --seed N L1/keyed-sampler/<order>/<case>``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import SAMPLER_ORDERS
from specsim.conformance.cases.edges import sampler_lacking
from specsim.conformance.checks.sampler.group import CASES, QUICK_SPEC, SPEC, case_changes, case_params, random_case
from specsim.conformance.core.calls import missing
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.testing.batches import random_batch
from specsim.testing.sampler_params import close_drafts, random_sampler, repetitive
from specsim.testing.seeds import case_seed

PREFIX = "L1/keyed-sampler"
"""Every check of the group is ``PREFIX/<order>/<case>``; its one ``not_supported`` result is ``PREFIX``."""

GROUP = "L1-keyed-sampler"

OWN_CASES: dict[str, tuple[dict, bool]] = {
    "far-drafts": ({}, False),
    "withdrawn": ({"withdrawn_fraction": 0.25, "placeholder_fraction": 0.0}, True),
}
"""This group's cases beyond L1-sampler's, each with every parameter the device declares: case → (changes to
``group.SPEC``, whether the drafts are moved close to the target). ``far-drafts``: the batch's own drafts,
accepted about half the time, so most coins decide (L1-sampler's close drafts are accepted almost
whatever their coin, to reach the later rows). ``withdrawn``: a quarter of the drafts withdrawn (SPEC §4)
and no padding placeholder, whose -1 a device may read one way for both; a withdrawn draft's coin is
never read, so a device that packs the coins of the drafts it tests draws the others at other words."""

KEYED_CASES = (*CASES, *OWN_CASES)
"""Every case of the group, in run order: L1-sampler's random cases, then this group's own."""


def check_name(order: str, case: str) -> str:
    """The name of the keyed check of ``case`` in ``order``.

    >>> check_name("vllm", "all")
    'L1/keyed-sampler/vllm/all'
    """
    return f"{PREFIX}/{order}/{case}"


def not_asked(caps) -> str | None:
    """Why a device declaring ``caps`` gets none of the group's checks (None: it gets them)."""
    if caps.rng != "philox":
        return f"device rng is {caps.rng!r}, not the keyed Philox streams"
    if not caps.sampler:
        return "device declares no SPEC §12 sampler parameter"
    return None


def case_spec(case: str, caps, quick: bool = False):
    """The ``BatchSpec`` of ``case`` for a device declaring ``caps`` (``quick``: ``group.QUICK_SPEC``'s sizes)."""
    changes = {**OWN_CASES[case][0], **case_changes("declared", caps.dtypes)} if case in OWN_CASES \
        else case_changes(case, caps.dtypes)
    return replace(QUICK_SPEC if quick else SPEC, **changes)


def case_lacking(caps, order: str, case: str) -> str | None:
    """Why a device declaring ``caps`` cannot be asked ``case`` in ``order`` (None: it can)."""
    spec = case_spec(case, caps)
    params = tuple(caps.sampler) if case in OWN_CASES else case_params(case, caps)
    return sampler_lacking(caps, params, order) or missing(caps, spec.needs, dtype=spec.dtype)


def own_batch(case: str, order: str, ctx, seed: int, caps):
    """The batch of one of ``OWN_CASES`` (deterministic in ``seed``): ``group.random_case``'s construction,
    every parameter ``caps`` declare on; its ``seeds`` and ``positions`` key the noise."""
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, case_spec(case, caps, ctx.quick))
    batch = repetitive(rng, close_drafts(rng, batch) if OWN_CASES[case][1] else batch)
    return replace(batch, sampler=random_sampler(rng, batch, tuple(caps.sampler), order))


def keyed_batch(order: str, case: str, ctx, seed: int, caps):
    """The batch of check ``(order, case)``: ``group.random_case``'s (its injected noise unused), or one of
    ``OWN_CASES``."""
    if case in OWN_CASES:
        return own_batch(case, order, ctx, seed, caps)
    return random_case(case, order, ctx, seed, caps.dtypes, case_params(case, caps))[0]


def keyed_sampler_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """Every ``L1/keyed-sampler/<order>/<case>`` check (``only``: the one of that name, for ``run.one_check``)."""
    caps, results = device.capabilities, []
    for order in SAMPLER_ORDERS:
        for case in KEYED_CASES:
            name, seed = check_name(order, case), case_seed(ctx.seed, GROUP, order, case)
            if only is not None and name != only:
                continue
            why = case_lacking(caps, order, case)
            if why:
                results.append(CheckResult(name, "L1", "not_supported", why, seed=seed))
                continue
            batch = keyed_batch(order, case, ctx, seed, caps)
            results.append(judge(name, device, batch, None, seed,
                                 note=f" on their keyed streams ({', '.join(batch.sampler.given())}; order {order})"))
    return results


def keyed_sampler_group(device, ctx) -> list[CheckResult]:
    """Every ``L1-keyed-sampler`` check: §12's random batches (and withdrawn drafts) with no noise given,
    the device's own Philox draws against the reference's keyed streams."""
    why = not_asked(device.capabilities)
    if why:
        return [CheckResult(PREFIX, "L1", "not_supported", why)]
    return keyed_sampler_checks(device, ctx)
