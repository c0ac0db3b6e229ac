"""SPEC §2–§4 decided exactly: the ladder for the decisions float64 may get wrong (SPEC §9).

Every input is a binary float, hence an exact rational; ``exact(x)`` turns it
into a ``Decimal`` without rounding, so comparisons of given values (top-k on
raw logits, ``u`` against a dyadic ratio) are exact. The softmax needs
``exp``, which has no rational value: it runs in ``decimal`` at ``DIGITS = 60``
significant digits (relative error below 1e-57, against float64's 1e-16). A
computed gap above ``TIE = 1e-45`` is therefore decided right; a smaller one
is a tie in exact arithmetic — ties arise only between quantities computed
from equal inputs (equal logits, ``u`` equal to a dyadic ratio), where the
computed gap is exactly 0 — and the SPEC's tie rule decides it. A margin of 0
means such a tie: no near-tie allowance covers it.

Worked example — the coin of §3 at its boundary. Target logits ``[0, 0]``
give ``t(x) = 1/2`` exactly; with ``d(x) = 1/2`` and ``u = 1 − 2⁻⁵³`` the
ratio is 1 and ``u`` is 1.1e-16 below it: accepted, margin 1.1e-16 (a
near-tie for any device dtype). With ``d(x) = 1`` and ``u = 1/2`` it is a
tie: rejected (strict), margin 0.

>>> probs = row([0.0, 0.0], 1.0, 0, 1.0).probs
>>> coin(1 - 2**-53, probs[1], 0.5), coin(0.5, probs[1], 1.0)
((True, 1.1102230246251565e-16), (False, 0.0))
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, localcontext

import numpy as np

from reference.layout import PLACEHOLDER_TOKEN_ID

DIGITS = 60
TIE = Decimal("1e-45")
INF = float("inf")


def exact(x) -> Decimal:
    """A binary float (float32 or float64) as the ``Decimal`` it is, without rounding (-inf kept)."""
    return Decimal(float(x))


def margin_of(gaps) -> float:
    """A decision's margin from its gaps: the smallest gap that is not a tie; 0 if all are ties."""
    gaps = list(gaps)
    real = [g for g in gaps if g > TIE]
    return float(min(real)) if real else (0.0 if gaps else INF)


@dataclass(frozen=True)
class Cut:
    """A filter's exact decision: ``kept`` ids, its ``margin``, the boundary's last kept class and
    the next class below it (sets of ids; equal values form one class, never split)."""

    kept: frozenset
    margin: float = INF
    last: frozenset = frozenset()
    next: frozenset = frozenset()


@dataclass(frozen=True)
class Row:
    """One target row in exact arithmetic: ``probs`` ``[V]`` Decimal, its two cuts, and ``variant``
    (``"exact"``, or the near-tie move that made it)."""

    probs: tuple
    top_k: Cut
    top_p: Cut
    variant: str = "exact"


def _classes(values, ids) -> list[frozenset]:
    """``ids`` grouped by equal value, largest value first."""
    order = sorted(ids, key=lambda v: values[v], reverse=True)
    groups: list[list[int]] = []
    for v in order:
        if groups and values[groups[-1][0]] == values[v]:
            groups[-1].append(v)
        else:
            groups.append([v])
    return [frozenset(g) for g in groups]


def _top_k(z, temperature: Decimal, top_k: int) -> Cut:
    """§2.2 on raw logits (dividing by T > 0 keeps their order exactly): keep ``z >= z_(k)``."""
    everything = frozenset(range(len(z)))
    if not 0 < top_k < len(z):
        return Cut(everything)
    classes, count = _classes(z, range(len(z))), 0
    for c, members in enumerate(classes):
        count += len(members)
        if count >= top_k:
            break
    kept = frozenset().union(*classes[: c + 1])
    below = classes[c + 1] if c + 1 < len(classes) else frozenset()
    kth, nxt = z[min(members)], (z[min(below)] if below else Decimal("-Infinity"))
    if not (kth.is_finite() and nxt.is_finite()):
        return Cut(kept, INF, members, below)
    return Cut(kept, margin_of([(kth - nxt) / temperature / max(abs(kth / temperature), Decimal(1))]), members, below)


def _softmax(z, temperature: Decimal, kept: frozenset) -> list[Decimal]:
    """§2.3 over the kept tokens, in ``DIGITS`` digits."""
    top = max(z[v] for v in kept)
    weights = [((z[v] - top) / temperature).exp() if v in kept and z[v].is_finite() else Decimal(0)
               for v in range(len(z))]
    total = sum(weights)
    return [w / total for w in weights]


def _top_p(probs, p: Decimal) -> Cut:
    """§2.4: m* the smallest m with ``c_m >= p``; keep ``probs >= τ`` (ties at the cut kept)."""
    everything = frozenset(range(len(probs)))
    if p >= 1:
        return Cut(everything)
    ordered = sorted(probs, reverse=True)
    cumulative, m = Decimal(0), len(ordered) - 1
    for index, q in enumerate(ordered):
        before, cumulative = cumulative, cumulative + q
        if cumulative >= p:
            m = index
            break
    tau = ordered[m]
    kept = frozenset(v for v in everything if probs[v] >= tau)
    classes = _classes(probs, [v for v in everything if probs[v] > 0])
    last = next(c for c in classes if tau == probs[min(c)])
    following = classes[classes.index(last) + 1] if last != classes[-1] else frozenset()
    gaps = [cumulative - p, p - before] + ([(tau - probs[min(following)]) / tau] if following else [])
    return Cut(kept, margin_of(gaps), last, following)


def row(logits, temperature, top_k, top_p, *, keep_k: frozenset | None = None,
        keep_p: frozenset | None = None, variant: str = "exact") -> Row:
    """SPEC §2 for one row ``[V]`` exactly; ``keep_k``/``keep_p`` impose a cut's kept set instead."""
    with localcontext() as ctx:
        ctx.prec = DIGITS
        z, t = [exact(v) for v in logits], exact(temperature)
        cut_k = _top_k(z, t, int(top_k)) if keep_k is None else Cut(keep_k)
        probs = _softmax(z, t, cut_k.kept)
        cut_p = _top_p(probs, exact(top_p)) if keep_p is None else Cut(keep_p)
        if exact(top_p) < 1:
            total = sum(probs[v] for v in cut_p.kept)
            probs = [q / total if v in cut_p.kept else Decimal(0) for v, q in enumerate(probs)]
    return Row(tuple(probs), cut_k, cut_p, variant)


def _moves(cut: Cut) -> list[tuple[str, frozenset]]:
    """The one-class moves of a boundary: add the next class, drop the last, swap the two."""
    moves = [("add next", cut.kept | cut.next), ("drop last", cut.kept - cut.last),
             ("swap", (cut.kept - cut.last) | cut.next)]
    return [(name, kept) for name, kept in moves if kept and kept != cut.kept]


def near_tie_rows(logits, temperature, top_k, top_p, tolerance: float) -> list[Row]:
    """The exact row, then the rows a device within ``tolerance`` may have used instead: each
    near-tie cut (``0 < margin < tolerance``) moved by one class (one near-tie allowance each)."""
    base = row(logits, temperature, top_k, top_p)
    rows = [base]
    for name, cut in (("top_k", base.top_k), ("top_p", base.top_p)):
        if 0 < cut.margin < tolerance:
            for move, kept in _moves(cut):
                if name == "top_k" and len(kept) < top_k:
                    continue  # a top-k set never holds fewer than k tokens
                rows.append(row(logits, temperature, top_k, top_p, variant=f"{name} {move}",
                                **{"keep_k" if name == "top_k" else "keep_p": kept}))
    return rows


def coin(u, t_x: Decimal, d_x) -> tuple[bool, float]:
    """§3: ``u < t(x) / d(x)``, strict; ``d_x`` None for a point proposal (ratio ``t(x)``).
    ``t(x) = 0`` or ``d(x) <= 0`` reject structurally (margin inf). Returns (accepted, margin)."""
    if t_x == 0 or (d_x is not None and not d_x > 0):
        return False, INF
    with localcontext() as ctx:
        ctx.prec = DIGITS
        ratio = t_x if d_x is None else t_x / exact(d_x)
        u = exact(u)
        gap = abs(u - ratio) / max(u, ratio)
        return (u < ratio and gap > TIE), margin_of([gap])


def residual(draft_id: int, target, draft, withdrawn: bool = False) -> list[Decimal]:
    """§3/§4: ``max(t − d, 0)`` (also after a ``withdrawn`` draft), ``t`` with ``x`` zeroed (point), ``t``
    after padding; an empty residual falls back to ``t``."""
    if draft_id == PLACEHOLDER_TOKEN_ID and not withdrawn:
        return list(target)
    if draft is None:
        weights = [Decimal(0) if v == draft_id else t for v, t in enumerate(target)]
    else:
        weights = [max(t - exact(d), Decimal(0)) for t, d in zip(target, draft)]
    return weights if any(w > 0 for w in weights) else list(target)


def race(weights, exponentials) -> tuple[int, list[float]]:
    """§3: the smallest id maximising ``w/E`` over ``w > 0``. Returns (winner, ``[V]`` each token's
    relative gap below the best score: 0 for the winner and its exact ties, inf where ``w = 0``)."""
    with localcontext() as ctx:
        ctx.prec = DIGITS
        scores = [w / exact(e) if w > 0 else None for w, e in zip(weights, exponentials)]
        best = max(s for s in scores if s is not None)
        gaps = [INF if s is None else margin_of([(best - s) / best]) for s in scores]
    return gaps.index(0.0), gaps


def verify_request(draft_ids, draft_rows, logits, temperature, top_k, top_p, uniforms, exponentials, withdrawn=None):
    """One sampled request (T > 0) walked exactly: ``draft_ids [K]``, ``draft_rows [K, V]`` or None,
    ``logits [K+1, V]``, ``uniforms [K]``, ``exponentials [V]``, ``withdrawn [K]`` bool (§4) or None.
    Returns (tokens, num_accepted, decisions ``[(kind, position, margin)]``)."""
    decisions, tokens, V = [], [], len(logits[0])
    filters = [name for name, on in (("top_k", 0 < top_k < V), ("top_p", top_p < 1)) if on]
    for j in range(len(draft_ids) + 1):
        target = row(logits[j], temperature, top_k, top_p)
        decisions += [(name, j, getattr(target, name).margin) for name in filters]
        if j == len(draft_ids):
            weights = list(target.probs)
        else:
            x, draft = int(draft_ids[j]), None if draft_rows is None else np.asarray(draft_rows)[j]
            accepted, margin = (False, INF) if x == PLACEHOLDER_TOKEN_ID else \
                coin(uniforms[j], target.probs[x], None if draft is None else draft[x])
            decisions.append(("coin", j, margin))
            if accepted:
                tokens.append(x)
                continue
            weights = residual(x, target.probs, draft, withdrawn is not None and withdrawn[j])
        token, gaps = race(weights, exponentials)
        decisions.append(("race", j, margin_of(g for v, g in enumerate(gaps) if v != token)))
        return tokens + [token], j, decisions
