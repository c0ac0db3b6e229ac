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
from decimal import Context, Decimal, localcontext
from itertools import accumulate, groupby

import numpy as np

from reference.layout import PLACEHOLDER_TOKEN_ID

DIGITS = 60
PRECISE = Context(prec=DIGITS)
"""The context of every exact computation: ``DIGITS`` significant digits, the default rounding and traps."""
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
    """One target row in exact arithmetic: ``probs`` ``[V]`` Decimal, its three cuts (``min_p``: SPEC
    §12's) and ``variant`` (``"exact"``, or the near-tie move that made it)."""

    probs: tuple
    top_k: Cut
    top_p: Cut
    min_p: Cut
    variant: str = "exact"


CUTS = ("top_k", "top_p", "min_p")


def _classes(values, ids) -> list[frozenset]:
    """``ids`` grouped by equal value, largest value first."""
    order = sorted(ids, key=lambda v: values[v], reverse=True)
    return [frozenset(group) for _, group in groupby(order, key=lambda v: values[v])]


def _cut(classes: list, kept: frozenset, gaps) -> Cut:
    """The cut keeping ``kept``, the first of ``classes`` (largest first), with its margin from ``gaps``."""
    n = sum(1 for c in classes if c <= kept)
    return Cut(kept, margin_of(gaps), classes[n - 1] if n else frozenset(), classes[n] if n < len(classes) else frozenset())


def _top_k(z, temperature: Decimal, top_k: int) -> Cut:
    """§2.2 (0 < k < V) on raw logits (dividing by T > 0 keeps their order exactly): keep ``z >= z_(k)``."""
    classes = _classes(z, range(len(z)))
    n = next(c + 1 for c, count in enumerate(accumulate(map(len, classes))) if count >= top_k)
    kth, nxt = z[min(classes[n - 1])], z[min(classes[n])] if n < len(classes) else Decimal("-Infinity")
    finite = kth.is_finite() and nxt.is_finite()
    gaps = [(kth - nxt) / temperature / max(abs(kth / temperature), Decimal(1))] if finite else []
    return _cut(classes, frozenset().union(*classes[:n]), gaps)


def _softmax(z, temperature: Decimal, kept: frozenset) -> list[Decimal]:
    """§2.3 over the kept tokens, in ``DIGITS`` digits."""
    top = max(z[v] for v in kept)
    weights = [((z[v] - top) / temperature).exp() if v in kept and z[v].is_finite() else Decimal(0)
               for v in range(len(z))]
    total = sum(weights)
    return [w / total for w in weights]


def _top_p(probs, p: Decimal) -> Cut:
    """§2.4 (p < 1): m* the smallest m with ``c_m >= p``; keep ``probs >= τ`` (ties at the cut kept)."""
    ordered = sorted(probs, reverse=True)
    cumulative, m = Decimal(0), len(ordered) - 1
    for index, q in enumerate(ordered):
        before, cumulative = cumulative, cumulative + q
        if cumulative >= p:
            m = index
            break
    tau = ordered[m]
    lower = max((q for q in probs if 0 < q < tau), default=None)
    gaps = [cumulative - p, p - before] + ([(tau - lower) / tau] if lower else [])
    kept = frozenset(v for v, q in enumerate(probs) if q >= tau)
    return _cut(_classes(probs, [v for v, q in enumerate(probs) if q > 0]), kept, gaps)


def _min_p(probs, min_p: Decimal) -> Cut:
    """§12's min_p (> 0) among the tokens ``probs > 0``: keep ``p_v >= min_p · max p`` (ties kept)."""
    candidates, top = [v for v, q in enumerate(probs) if q > 0], max(probs)
    ratio = {v: probs[v] / top for v in candidates}   # exp((z_v − z_max)/T): equal values, equal ratios
    gaps = {v: abs(ratio[v] / min_p - 1) for v in candidates}
    kept = frozenset(v for v in candidates if ratio[v] >= min_p or gaps[v] <= TIE)
    return _cut(_classes(ratio, candidates), kept, gaps.values())


def _restricted(probs: list, kept: frozenset) -> list:
    """``probs`` restricted to ``kept`` and renormalised."""
    total = sum(probs[v] for v in kept)
    return [q / total if v in kept else Decimal(0) for v, q in enumerate(probs)]


def row(logits, temperature, top_k, top_p, min_p=0.0, order="canonical", *, keep: dict | None = None,
        variant: str = "exact") -> Row:
    """SPEC §2 for one row ``[V]`` exactly, with §12's ``min_p`` where ``order`` puts it (``reference.sampler``'s
    profiles); ``keep`` imposes a cut's kept set by name (of ``CUTS``) instead of deciding it."""
    cuts, keep = {}, keep or {}

    def cut(name: str, decide) -> frozenset:
        cuts[name] = Cut(keep[name]) if name in keep else decide()
        return cuts[name].kept

    with localcontext(PRECISE):
        z, t, m = [exact(v) for v in logits], exact(temperature), exact(min_p)
        everything = frozenset(range(len(z)))
        if order == "vllm" and m > 0:  # min_p first; top-k and top-p on the row it cut
            kept = cut("min_p", lambda: _min_p(_softmax(z, t, everything), m))
            z = [x if v in kept else Decimal("-Infinity") for v, x in enumerate(z)]
        kept = cut("top_k", lambda: _top_k(z, t, int(top_k))) if 0 < top_k < len(z) else everything
        probs = _softmax(z, t, kept)
        if exact(top_p) < 1:
            probs = _restricted(probs, cut("top_p", lambda: _top_p(probs, exact(top_p))))
        if order == "canonical" and m > 0:
            probs = _restricted(probs, cut("min_p", lambda: _min_p(probs, m)))
    return Row(tuple(probs), *(cuts.get(name, Cut(everything)) for name in CUTS), variant)


def _moves(cut: Cut) -> list[tuple[str, frozenset]]:
    """The one-class moves of a boundary: add the next class, drop the last, swap the two."""
    moves = [("add next", cut.kept | cut.next), ("drop last", cut.kept - cut.last),
             ("swap", (cut.kept - cut.last) | cut.next)]
    return [(name, kept) for name, kept in moves if kept and kept != cut.kept]


def near_tie_rows(logits, temperature, top_k, top_p, tolerance: float, min_p=0.0, order="canonical") -> list[Row]:
    """The exact row, then the rows a device within ``tolerance`` may have used instead: each near-tie
    cut (``0 < margin < tolerance``, of ``CUTS``) moved by one class (one near-tie allowance each)."""
    base = row(logits, temperature, top_k, top_p, min_p, order)
    rows = [base]
    for name in CUTS:
        cut = getattr(base, name)
        if 0 < cut.margin < tolerance:  # a top-k set never holds fewer than k tokens
            rows += [row(logits, temperature, top_k, top_p, min_p, order, keep={name: kept}, variant=f"{name} {move}")
                     for move, kept in _moves(cut) if name != "top_k" or len(kept) >= top_k]
    return rows


def coin(u, t_x: Decimal, d_x) -> tuple[bool, float]:
    """§3: ``u < t(x) / d(x)``, strict; ``d_x`` None for a point proposal (ratio ``t(x)``).
    ``t(x) = 0`` or ``d(x) <= 0`` reject structurally (margin inf). Returns (accepted, margin)."""
    if t_x == 0 or (d_x is not None and not d_x > 0):
        return False, INF
    with localcontext(PRECISE):
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
    with localcontext(PRECISE):
        scores = [w / exact(e) if w > 0 else None for w, e in zip(weights, exponentials)]
        best = max(s for s in scores if s is not None)
        gaps = [INF if s is None else margin_of([(best - s) / best]) for s in scores]
    return gaps.index(0.0), gaps


def verify_request(draft_ids, draft_rows, logits, temperature, top_k, top_p, uniforms, exponentials, withdrawn=None,
                   min_p=0.0, order="canonical"):
    """One sampled request (T > 0) walked exactly: ``draft_ids [K]``, ``draft_rows [K, V]`` or None,
    ``logits [K+1, V]``, ``uniforms [K]``, ``exponentials [V]``, ``withdrawn [K]`` bool (§4) or None,
    ``min_p`` and ``order`` (§12). Returns (tokens, num_accepted, decisions ``[(kind, position, margin)]``)."""
    decisions, tokens, V = [], [], len(logits[0])
    filters = [name for name, on in zip(CUTS, (0 < top_k < V, top_p < 1, min_p > 0)) if on]
    for j in range(len(draft_ids) + 1):
        target = row(logits[j], temperature, top_k, top_p, min_p, order)
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
