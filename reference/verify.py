"""SPEC §3–§5: one speculative verification step for a whole batch, in float64.

The rungs ``accept → residual → race`` (and §2's ``target_rows``) each work on
one request's row or on every row of the batch at once; ``verify`` applies
them to the whole batch in a fixed number of numpy passes (fast enough for
10⁵ requests), records every **decision** on each request's path with its
margin (SPEC §9), and hands the rare request with a decision closer than
``RECHECK`` to its boundary to the exact ladder ``reference.exact.verify_request``,
so the reference's own float64 rounding never decides a near-tie.

Worked example — one request, V = 3, K = 1, full rejection sampling::

    target_probs t = [0.6, 0.3, 0.1]     draft_probs d = [0.2, 0.7, 0.1]
    draft x = 1:  ratio t[1]/d[1] = 0.3/0.7 ≈ 0.43
    coin u = 0.9 ≥ 0.43 → rejected; residual max(t − d, 0) = [0.4, 0, 0]
    the race can only pick token 0, so the step emits [0] and accepts 0.

>>> r = verify([1], [1], np.array([[0.2, 0.7, 0.1]]), np.log([[0.6, 0.3, 0.1], [1/3, 1/3, 1/3]]),
...            [1.0], [0], [1.0], uniforms=np.array([0.9]), exponentials=np.ones((1, 3)))
>>> r.output_token_ids.tolist(), r.num_accepted.tolist()
([[0, -1]], [0])
>>> [(kind, j, round(margin, 3)) for kind, j, margin in r.decisions.of(0)]   # the coin, then the race
[('coin', 0, 0.524), ('race', 0, 1.0)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import exact
from reference.layout import PLACEHOLDER_TOKEN_ID, draft_rows, offsets, pad_outputs
from reference.layout import target_rows as target_rows_of
from reference.rng import step_noise
from reference.sampler import filtered_cuts, process_logits
from reference.target import _last, target_rows
from reference.validate import InvalidInput, check_noise, check_sampler, check_step

INF = float("inf")
KINDS = ("coin", "top_k", "top_p", "race", "greedy", "min_p", "greedy_computed")
"""Decisions on a request's path (SPEC §9, §12.5): each verified position's coin, each read row's filter cuts,
the emission's race, each greedy row's argmax (``greedy_computed``: of values a §12 penalty or bias computed)."""
ARGMAXES = [KINDS.index("greedy"), KINDS.index("greedy_computed")]   # decided on float64 values, never re-decided

RECHECK = 1e-8
"""A decision whose float64 margin is below this is re-decided exactly (``reference.exact``).
float64's own error on a margin is below 1e-11 for V ≤ 10⁵ (sums of V terms of relative
error 2⁻⁵³), so at or above ``RECHECK`` float64 decides as exact arithmetic does."""


@dataclass(frozen=True)
class Decisions:
    """Every decision on the requests' paths, as parallel arrays ``[n]``: ``request``,
    ``position`` (j; the emission position for a race), ``kind`` (index into ``KINDS``) and
    ``margin`` (relative; 0 is an exact tie, decided by its SPEC rule; exact below ``RECHECK``)."""

    request: np.ndarray
    position: np.ndarray
    kind: np.ndarray
    margin: np.ndarray

    def of(self, i: int) -> list[tuple[str, int, float]]:
        """Request ``i``'s decisions as ``(kind, position, margin)``."""
        at = np.flatnonzero(self.request == i)
        return [(KINDS[self.kind[n]], int(self.position[n]), float(self.margin[n])) for n in at]


@dataclass(frozen=True)
class StepResult:
    """``output_token_ids`` ``[batch, max_k + 1]``, ``num_accepted`` ``[batch]``, the path
    ``decisions``, the noise used (``uniforms [num_tokens]``, ``exponentials [batch, V]``), and
    what a judge needs to re-walk a request as the step did (SPEC §9, §12.5): ``processed_logits``
    ``[num_tokens + batch, V]`` float64, the logits every row read (after §12's bans, penalties and
    bias; the given logits when no §12 parameter acts), and ``computed`` ``[num_tokens + batch]`` bool,
    the rows whose kept values a penalty or bias computed (a greedy argmax there: ``greedy_computed``)."""

    output_token_ids: np.ndarray
    num_accepted: np.ndarray
    decisions: Decisions
    uniforms: np.ndarray
    exponentials: np.ndarray
    processed_logits: np.ndarray
    computed: np.ndarray

    @property
    def margins(self) -> np.ndarray:
        """``[batch]``: each request's smallest decision margin (inf when it has none)."""
        out = np.full(len(self.num_accepted), INF)
        np.minimum.at(out, self.decisions.request, self.decisions.margin)
        return out


def accept(draft_id, target: np.ndarray, draft: np.ndarray | None, u) -> tuple[np.ndarray, np.ndarray]:
    """SPEC §3/§4 for drafts ``draft_id [...]``: accepted ``[...]`` and margin ``[...]``.

    ``target``: ``[..., V]`` target_probs; ``draft``: ``[..., V]`` draft_probs or None (point
    proposal); ``u``: ``[...]``. A placeholder, ``t(x) = 0`` (masked or filtered) or ``d(x) = 0``
    (x could not have been drawn) reject structurally: margin inf.
    """
    x = np.asarray(draft_id)
    real = x != PLACEHOLDER_TOKEN_ID
    safe = np.where(real, x, 0)
    t_x = _last(target, safe)
    d_x = np.ones_like(t_x) if draft is None else _last(np.asarray(draft, dtype=np.float64), safe)
    with np.errstate(invalid="ignore"):  # a placeholder's draft row may hold anything (NaN)
        drawable = real & (t_x > 0) & (d_x > 0)
    ratio = t_x / np.where(drawable, d_x, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        margin = np.abs(u - ratio) / np.maximum(u, ratio)
    return drawable & (u < ratio), np.where(drawable, margin, INF)


def residual(draft_id, target: np.ndarray, draft: np.ndarray | None, withdrawn=False) -> np.ndarray:
    """SPEC §3: the unnormalised law ``[..., V]`` of the token emitted after rejecting ``draft_id``;
    an empty residual (rounding only, §4) falls back to ``target``. §4: after padding, ``target``; after
    a ``withdrawn`` draft (``[...]`` bool, its id the placeholder), ``max(target − draft, 0)`` from its row."""
    x = np.asarray(draft_id)[..., None]
    real = (x != PLACEHOLDER_TOKEN_ID) | np.asarray(withdrawn, dtype=bool)[..., None]
    if draft is None:
        w = np.where(real & (np.arange(target.shape[-1]) == x), 0.0, target)
    else:
        with np.errstate(invalid="ignore"):
            w = np.where(real, np.maximum(target - np.asarray(draft, dtype=np.float64), 0.0), target)
    return np.where((w > 0).any(axis=-1, keepdims=True), w, target)


def race(weights: np.ndarray, exponentials: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SPEC §3: smallest id maximising ``w/E`` over ``w > 0``. Returns (token, margin) ``[...]``.

    ``weights``: ``[..., V]`` >= 0, not all zero; ``exponentials``: ``[..., V]`` > 0.

    >>> int(race(np.array([0.0, 2.0, 1.0]), np.array([1.0, 4.0, 1.0]))[0])
    2
    """
    scores = np.where(weights > 0, weights / exponentials, -INF)
    best = np.argmax(scores, axis=-1)
    top = _last(scores, best)
    second = np.where(np.arange(scores.shape[-1]) == best[..., None], -INF, scores).max(axis=-1)
    return best, np.where(np.isfinite(second), (top - second) / top, INF)


def greedy_margin(logits: np.ndarray) -> np.ndarray:
    """``[...]``: the argmax's gap to the runner-up, relative to ``max(|top|, 1)`` (informative:
    an argmax of given values involves no rounding, so no near-tie allowance covers a greedy decision)."""
    ordered = -np.sort(-np.asarray(logits, dtype=np.float64), axis=-1)
    if ordered.shape[-1] < 2:
        return np.full(ordered.shape[:-1], INF)
    with np.errstate(invalid="ignore"):
        gap = (ordered[..., 0] - ordered[..., 1]) / np.maximum(np.abs(ordered[..., 0]), 1.0)
    return np.where(np.isfinite(ordered[..., 1]), gap, INF)


def step_inputs(counts, target_logits, uniforms, exponentials, seeds, positions):
    """A checked step's ``(counts, logits, uniforms, exponentials)``: ``counts [batch]`` int64, each request's
    coins (drafts, or a tree's nodes); ``target_logits`` as float64; the noise (SPEC §5.1) as float64 ``[Σ counts]``
    and ``[batch, V]``: the injected arrays checked, or — both None — drawn from the keyed streams of §5.2."""
    counts, logits = np.asarray(counts, dtype=np.int64), np.asarray(target_logits, dtype=np.float64)
    V = logits.shape[1]
    if uniforms is None and exponentials is None:
        if seeds is None or positions is None:
            raise InvalidInput("seeds: seeds and positions are required when no noise is injected (SPEC §5.2)")
        uniforms, exponentials = step_noise(seeds, positions, counts, V)
    elif uniforms is None or exponentials is None:
        raise InvalidInput("uniforms: inject both uniforms and exponentials, or neither (SPEC §5.1)")
    check_noise(uniforms, exponentials, int(np.sum(counts)), len(counts), V)
    return counts, logits, np.asarray(uniforms, dtype=np.float64), np.asarray(exponentials, dtype=np.float64)


def verify(num_draft_tokens, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p,
           *, uniforms=None, exponentials=None, seeds=None, positions=None, sampler=None, withdrawn=None) -> StepResult:
    """One step for a ragged batch (argument shapes: SPEC §1, ``devices.protocol.VerifyBatch``);
    ``withdrawn``: ``[num_tokens]`` bool, SPEC §4's withdrawn drafts, or None (every placeholder is padding).

    ``sampler``: SPEC §12's parameters by name (``reference.sampler.sampler_rows``' keywords) or
    None; each row then reads its logits after bans, penalties and bias along the drafts before it.

    Noise is injected (``uniforms`` ``[num_tokens]``, ``exponentials`` ``[batch, V]``,
    SPEC §5.1) or, when both are None, drawn from the keyed streams of §5.2
    for ``seeds``/``positions``.
    """
    check_step(num_draft_tokens, draft_token_ids, draft_probs, target_logits,
               temperature, top_k, top_p, seeds, positions, withdrawn)
    k, logits, u, E = step_inputs(num_draft_tokens, target_logits, uniforms, exponentials, seeds, positions)
    batch, V = len(k), logits.shape[1]
    T, top_k, top_p = (np.asarray(a) for a in (temperature, top_k, top_p))
    ids = np.asarray(draft_token_ids, dtype=np.int64)
    gone = np.zeros(len(ids) + 1, bool) if withdrawn is None else np.append(np.asarray(withdrawn, bool), False)
    draft = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)
    cu, greedy = offsets(k), T == 0
    sampler = {name: value for name, value in (sampler or {}).items() if value is not None}
    check_sampler(sampler, batch, len(ids), V)
    sampler, raw = (sampler if set(sampler) - {"order"} else {}), logits  # an order alone: the plain step
    if sampler:  # §12: every rule that is not a filter acts on the logits; greedy reads them too
        logits = process_logits(logits, k, ids, **sampler)   # a row no step reads may be emptied: stand-in 0
        logits = np.where(np.isfinite(logits).any(axis=1, keepdims=True), logits, 0.0)
    min_p, order = sampler.get("min_p"), sampler.get("order", "canonical")
    plain = min_p is None and order == "canonical"

    # §1 layout: each draft's request and position; each target row's request and position.
    request, row_request = np.repeat(np.arange(batch), k), np.repeat(np.arange(batch), k + 1)
    position = np.arange(len(ids)) - cu[request]
    row_position = np.arange(len(logits)) - cu[row_request] - row_request
    draft_row_target = np.arange(len(ids)) + request           # cu[i] + i + j

    # §2 every target row, §3 every coin (sampled) or argmax test (greedy), then the first rejection.
    filters = (logits, np.where(greedy, 1.0, T)[row_request], top_k[row_request], top_p[row_request])
    probs, cuts = target_rows(*filters) if plain else filtered_cuts(  # min_p, vllm: §12.5, in float64
        *filters, None if min_p is None else np.asarray(min_p)[row_request], order)
    computed = ((logits != raw) & np.isfinite(logits)).any(axis=1)   # a value computed: §9's greedy_computed
    coins, coin_margin = accept(ids, probs[draft_row_target], draft, u)
    argmax = np.argmax(logits, axis=1)
    accepted = np.where(greedy[request], ids == argmax[draft_row_target], coins)
    num_accepted = k.copy()
    np.minimum.at(num_accepted, request[~accepted], position[~accepted])

    # §3 emission: the residual of the first rejected row, or the bonus row; the race, or the argmax.
    emit_row = cu[:-1] + np.arange(batch) + num_accepted
    rejected = num_accepted < k
    emit_draft = np.where(rejected, cu[:-1] + num_accepted, 0)
    emit_id = np.where(rejected, ids[emit_draft] if len(ids) else PLACEHOLDER_TOKEN_ID, PLACEHOLDER_TOKEN_ID)
    emit_draft_rows = None if draft is None or not len(ids) else draft[emit_draft]
    weights = residual(emit_id, probs[emit_row], emit_draft_rows, rejected & gone[emit_draft])
    raced, race_margin = race(weights, E)
    token = np.where(greedy, argmax[emit_row], raced)

    # §9 the decisions on each path: rows and coins at positions <= num_accepted.
    on_row = row_position <= num_accepted[row_request]
    sampled_row = on_row & ~greedy[row_request]
    coin = (position <= num_accepted[request]) & ~greedy[request]
    parts = [_part(request[coin], position[coin], "coin", coin_margin[coin]),
             _part(np.flatnonzero(~greedy), num_accepted[~greedy], "race", race_margin[~greedy])]
    min_p_on = np.zeros(batch, bool) if min_p is None else np.asarray(min_p) > 0
    for kind, active in (("top_k", (top_k > 0) & (top_k < V)), ("top_p", top_p < 1), ("min_p", min_p_on)):
        chosen = sampled_row & active[row_request]
        parts.append(_part(row_request[chosen], row_position[chosen], kind, cuts.get(kind, row_position)[chosen]))
    for kind, rows in (("greedy", ~computed), ("greedy_computed", computed)):
        chosen = on_row & greedy[row_request] & rows
        parts.append(_part(row_request[chosen], row_position[chosen], kind, greedy_margin(logits[chosen])))
    decisions = _decisions(parts)

    emitted = [[*ids[cu[i]: cu[i] + num_accepted[i]].tolist(), int(token[i])] for i in range(batch)]
    close = np.unique(decisions.request[(decisions.margin < RECHECK) & ~np.isin(decisions.kind, ARGMAXES)])
    close = close if plain else close[:0]
    for i in close:  # re-decided exactly, request by request (rare: a margin below 1e-8)
        d = draft_rows(cu, i)
        emitted[i], num_accepted[i], exact_decisions = exact.verify_request(
            ids[d], None if draft is None else draft[d], logits[target_rows_of(cu, i)], T[i], top_k[i], top_p[i],
            u[d], E[i], gone[d])
        decisions = _replace(decisions, i, exact_decisions)
    return StepResult(pad_outputs(emitted, int(k.max()) + 1), num_accepted, decisions, u, E, logits, computed)


def _part(request, position, kind: str, margin) -> tuple:
    """One kind of decision as arrays ``(request, position, kind index, margin)``."""
    request = np.asarray(request, dtype=np.int64)
    return request, np.asarray(position, np.int64), np.full(len(request), KINDS.index(kind)), np.asarray(margin, float)


def _decisions(parts) -> Decisions:
    """Concatenate parts, ordered by request, then position, then kind."""
    request, position, kind, margin = (np.concatenate([p[n] for p in parts]) for n in range(4))
    order = np.lexsort((kind, position, request))
    return Decisions(request[order], position[order], kind[order], margin[order])


def _replace(decisions: Decisions, i: int, exact_decisions) -> Decisions:
    """``decisions`` with request ``i``'s replaced by the exact ladder's ``(kind, position, margin)``."""
    keep = decisions.request != i
    parts = [(decisions.request[keep], decisions.position[keep], decisions.kind[keep], decisions.margin[keep])]
    return _decisions(parts + [_part([i], [j], kind, [m]) for kind, j, m in exact_decisions])
