"""Group ``L1-keyed-sampler``: SPEC §5.2's keyed Philox streams on §12's batches, bit for bit, and §5.2's
contract on them for any device drawing its own randomness.

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
  ``withdrawn_drafts``): the declared parameters that ban no draft, with the batch's own drafts
  (most coins decide); every declared parameter with a quarter of the drafts withdrawn (SPEC §4).

Each batch carries ``seeds [batch]`` and ``positions [batch]``; the device is called without
``noise`` and compared token for token with the reference on the keyed streams of §5.2 (SPEC §9's
near-tie allowances applied). Replay one: ``specsim replay --device D --seed N L1/keyed-sampler/<order>/<case>``.

Checks ``L2/sampler/<order>/<contract>``, for every device drawing its own randomness (keyed or
seeded: a black box too, which has no stream to replay): on 32 requests of ``far-drafts``, the same
call twice agrees (``determinism``), a request's tokens stay the same in the batch reversed and
alone (``batch-invariance``: the flattened-row coin shows here), and moving every seed or every
position by one moves some sampled request (``seed-sensitivity``, ``position-sensitivity``: a
position derived from the history shows here). ``L2-rng`` asks the same of plain batches only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import SAMPLER_ORDERS, SamplerParams
from specsim.conformance.cases.edges import sampler_lacking
from specsim.conformance.checks.sampler.group import CASES, QUICK_SPEC, SPEC, case_changes, case_params, random_case
from specsim.conformance.core.calls import Malformed, call, formed, malformed_result, missing
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.testing.batches import random_batch, select_requests
from specsim.testing.sampler_params import close_drafts, random_sampler, repetitive
from specsim.testing.seeds import case_seed

PREFIX = "L1/keyed-sampler"
"""Every check of the group is ``PREFIX/<order>/<case>``; its one ``not_supported`` result is ``PREFIX``."""

GROUP = "L1-keyed-sampler"

OWN_CASES: dict[str, tuple[dict, bool, bool]] = {
    "far-drafts": ({}, False, True),
    "withdrawn": ({"withdrawn_fraction": 0.25, "placeholder_fraction": 0.0}, True, False),
}
"""This group's cases beyond L1-sampler's: case → (changes to ``group.SPEC``, whether the drafts are moved close to
the target, whether only the ``SOFT_PARAMETERS`` are on; else every parameter the device declares).
``far-drafts``: the batch's own drafts and no parameter that bans a draft, so that most coins decide (L1-sampler's
close drafts are accepted almost whatever their coin, and its bans reject many with certainty).
``withdrawn``: a quarter of the drafts withdrawn (SPEC §4) and no padding placeholder, whose -1 a device may read
one way for both; a withdrawn draft's coin is never read, so a device that packs the coins of the drafts it
tests draws the others at other words."""

SOFT_PARAMETERS = ("min_tokens", "logit_bias", "repetition_penalty", "frequency_penalty", "presence_penalty")
"""The §12 parameters that reshape a row without banning a drafted token (min_tokens bans stop ids only)."""

KEYED_CASES = (*CASES, *OWN_CASES)
"""Every case of the group, in run order: L1-sampler's random cases, then this group's own."""


def check_name(order: str, case: str) -> str:
    """The name of the keyed check of ``case`` in ``order``.

    >>> check_name("vllm", "all")
    'L1/keyed-sampler/vllm/all'
    """
    return f"{PREFIX}/{order}/{case}"


def case_spec(case: str, caps, quick: bool = False):
    """The ``BatchSpec`` of ``case`` for a device declaring ``caps`` (``quick``: ``group.QUICK_SPEC``'s sizes)."""
    changes = {**OWN_CASES[case][0], **case_changes("declared", caps.dtypes)} if case in OWN_CASES \
        else case_changes(case, caps.dtypes)
    return replace(QUICK_SPEC if quick else SPEC, **changes)


def case_lacking(caps, order: str, case: str) -> str | None:
    """Why a device declaring ``caps`` cannot be asked ``case`` in ``order`` (None: it can)."""
    spec = case_spec(case, caps)
    return sampler_lacking(caps, keyed_params(case, caps), order) or missing(caps, spec.needs, dtype=spec.dtype)


def keyed_params(case: str, caps) -> tuple:
    """The §12 parameters ``case`` turns on for a device declaring ``caps``: ``group.case_params`` for L1-sampler's
    cases; the declared ``SOFT_PARAMETERS`` (all declared ones if none is soft) or every declared one for ours."""
    if case not in OWN_CASES:
        return case_params(case, caps)
    soft = tuple(p for p in caps.sampler if p in SOFT_PARAMETERS) if OWN_CASES[case][2] else ()
    return soft or tuple(caps.sampler)


def own_batch(case: str, order: str, ctx, seed: int, caps, batch_size: int | None = None):
    """The batch of one of ``OWN_CASES`` (deterministic in ``seed``): ``group.random_case``'s construction with
    ``keyed_params``; its ``seeds`` and ``positions`` key the noise (``batch_size``: other than the spec's)."""
    rng = np.random.default_rng(seed)
    spec = case_spec(case, caps, ctx.quick)
    batch = random_batch(rng, spec if batch_size is None else replace(spec, batch=batch_size))
    batch = repetitive(rng, close_drafts(rng, batch) if OWN_CASES[case][1] else batch)
    return replace(batch, sampler=random_sampler(rng, batch, keyed_params(case, caps), order))


def keyed_batch(order: str, case: str, ctx, seed: int, caps):
    """The batch of check ``(order, case)``: ``group.random_case``'s (its injected noise unused), or one of
    ``OWN_CASES``."""
    if case in OWN_CASES:
        return own_batch(case, order, ctx, seed, caps)
    return random_case(case, order, ctx, seed, caps.dtypes, keyed_params(case, caps))[0]


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


# --- SPEC §5.2's contract on §12's batches, for any device drawing its own randomness ------------------------

CONTRACTS = "L2/sampler"
"""The contract checks are ``CONTRACTS/<order>/<contract>``; their one ``not_supported`` result is ``CONTRACTS``."""


CONTRACT_BATCH = 32
"""The contracts' requests, whatever ``--quick``: enough that a correct device leaves every sampled request's tokens
unchanged when every seed (or position) moves with a probability far below any run's false-fail budget, and that a
coin read by the batch's layout flips some decision."""


def contract_batch(order: str, ctx, caps):
    """The contracts' batch ``[CONTRACT_BATCH]``: ``far-drafts`` at ``group.SPEC``'s vocabulary, seeded apart."""
    return own_batch("far-drafts", order, replace(ctx, quick=False), case_seed(ctx.seed, CONTRACTS, order), caps,
                     batch_size=CONTRACT_BATCH)


def select_sampled(batch, order):
    """``select_requests`` with §12's parameters selected too: ``order`` ``[n]`` request indices (any order, no
    repeats); per-request entries taken in that order, ``token_mask``'s rows with their target rows."""
    sub, _ = select_requests(batch, order)
    s, cu = batch.sampler, batch.request_offsets()
    rows = np.concatenate([np.arange(cu[i] + i, cu[i + 1] + i + 1) for i in order])

    def pick(name, value):
        if value is None or name == "order":
            return value
        if name == "token_mask":
            return np.asarray(value)[rows]
        return tuple(value[i] for i in order) if isinstance(value, (tuple, list)) else np.asarray(value)[order]
    return replace(sub, sampler=SamplerParams(**{name: pick(name, v) for name, v in s.as_kwargs().items()}))


def _emitted(out) -> list[list[int]]:
    ids, accepted = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    return [ids[i, : int(accepted[i]) + 1].tolist() for i in range(len(accepted))]


def _determinism(device, batch, first) -> tuple[bool, str]:
    again = _emitted(formed(device, batch))
    differ = [i for i, (a, b) in enumerate(zip(first, again)) if a != b]
    return not differ, (f"the same call twice differs at request(s) {differ[:5]}" if differ else
                        "the same call twice, the same tokens")


def _batch_invariance(device, batch, first) -> tuple[bool, str]:
    n = batch.batch_size
    reversed_rows = _emitted(formed(device, select_sampled(batch, np.arange(n)[::-1])))[::-1]
    alone = {i: _emitted(formed(device, select_sampled(batch, [i])))[0] for i in range(0, n, 3)}
    moved = sorted({i for i in range(n) if reversed_rows[i] != first[i]} | {i for i, row in alone.items() if row != first[i]})
    return not moved, (f"request(s) {moved[:5]} changed when the batch was reversed or split: its streams follow "
                       "the batch's layout (a row or flattened draft index), not the request" if moved else
                       "each request's tokens are the same reversed and alone")


def _sensitivity(field: str):
    def check(device, batch, first) -> tuple[bool, str]:
        sampled = [i for i in range(batch.batch_size) if batch.temperature[i] > 0]
        values = getattr(batch, field)
        moved_batch = replace(batch, **{field: values + (np.uint64(1) if field == "seeds" else 1)})
        other = _emitted(formed(device, moved_batch))
        changed = sum(other[i] != first[i] for i in sampled)
        what = field[:-1]
        return changed > 0 or not sampled, (f"{changed} of {len(sampled)} sampled requests changed when every "
                                            f"{what} moved by one" + ("" if changed else f": the key ignores the {what}"))
    return check


CONTRACT_CHECKS = {"determinism": _determinism, "batch-invariance": _batch_invariance,
                   "seed-sensitivity": _sensitivity("seeds"), "position-sensitivity": _sensitivity("positions")}
"""Contract → ``(device, batch, its first tokens) -> (held, detail)``: SPEC §5.2's contract (a pure function of seed,
position, purpose and column) on §12's path, which L2-rng asks of plain batches only."""


def contract_checks(device, ctx) -> list[CheckResult]:
    """``L2/sampler/<order>/<contract>`` for a device drawing its own randomness (keyed or seeded): on a batch with
    every declared parameter, the same call twice agrees, a request's tokens do not depend on its neighbours or its
    row, and the seed and the position each move the tokens. A black box is judged by these alone."""
    caps, results = device.capabilities, []
    if caps.rng == "none":
        return [CheckResult(CONTRACTS, "L2", "not_supported", "device draws no randomness of its own")]
    for order in SAMPLER_ORDERS:
        why = case_lacking(caps, order, "far-drafts")
        if why:
            results += [CheckResult(f"{CONTRACTS}/{order}/{c}", "L2", "not_supported", why) for c in CONTRACT_CHECKS]
            continue
        batch = contract_batch(order, ctx, caps)
        first, problem = call(f"{CONTRACTS}/{order}/determinism", "L2", lambda: _emitted(formed(device, batch)), caps)
        if problem:
            results.append(problem)
            continue
        for contract, check in CONTRACT_CHECKS.items():
            name = f"{CONTRACTS}/{order}/{contract}"
            held, problem = call(name, "L2", lambda: check(device, batch, first), caps)
            results.append(problem or CheckResult(name, "L2", "pass" if held[0] else "fail",
                                                  f"{held[1]} ({', '.join(batch.sampler.given())}; order {order})"))
    return results


def keyed_sampler_group(device, ctx) -> list[CheckResult]:
    """Every ``L1-keyed-sampler`` check: §12's random batches (and withdrawn drafts) with no noise given, the
    device's own Philox draws against the reference's keyed streams; then SPEC §5.2's contract on §12's path."""
    caps = device.capabilities
    if not caps.sampler:
        return [CheckResult(PREFIX, "L1", "not_supported", "device declares no SPEC §12 sampler parameter")]
    keyed = [CheckResult(PREFIX, "L1", "not_supported", f"device rng is {caps.rng!r}, not the keyed Philox streams")] \
        if caps.rng != "philox" else keyed_sampler_checks(device, ctx)
    try:
        return keyed + contract_checks(device, ctx)
    except Malformed as e:
        return keyed + [malformed_result("L2", e)]
