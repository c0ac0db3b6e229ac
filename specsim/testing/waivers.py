"""Explaining a device's differing request by near-tie allowances (SPEC §9).

A device computing in float32 may flip a decision of the reference only where
that decision is within rounding of its boundary: its **margin** is below the
declared dtype's tolerance (a *near-tie*). ``explain`` re-walks one request
along the path the device took, deciding every step exactly
(``reference.exact``), and returns the fewest near-tie decisions that must be
flipped for the reference to emit the device's tokens — or None if no set of
at most ``budget`` flips does. Each flip is one near-tie allowance, counted
toward the check's cap. A ``Request``'s ``logits`` are the rows the reference
step read — after SPEC §12's bans, penalties and bias
(``reference.verify.StepResult.processed_logits``) — so a device that skips
§12 is judged on the rows it should have computed.

The visible decisions are checked directly against the device's output: the
coin at each position (accepted iff the device kept the draft) and the race
winner (the token it emitted). The hidden ones — the top-k boundary and the
top-p cut of each row, which the device's output does not show — are tried
as their near-tie variants (``reference.exact.near_tie_rows``: the boundary
moved by one class), each costing one allowance. Greedy requests are exact
(an argmax of given values involves no rounding): they are never explained.

Worked example — a point proposal with ``t(x) = 1/2`` (two equal logits):

>>> import numpy as np
>>> tie = Request(draft_ids=np.array([0]), draft_rows=None, logits=np.zeros((2, 2)), temperature=1.0,
...               top_k=0, top_p=1.0, uniforms=np.array([0.5]), exponentials=np.ones(2))
>>> explain(tie, [1], 0, tolerance=1e-4, budget=2)          # u = t(x): rejected, token 1: the reference itself
[]
>>> explain(tie, [0, 0], 1, tolerance=1e-4, budget=2) is None   # accepting flips an exact tie: never allowed
True
>>> near = Request(**{**tie.__dict__, "uniforms": np.array([0.49999])})   # u 2e-5 below t(x): accepted
>>> [str(flip) for flip in explain(near, [1], 0, tolerance=1e-4, budget=2)]   # float32 may reject it
['coin at position 0 (margin 2e-05)']
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID
from reference import exact


@dataclass(frozen=True)
class Request:
    """One sampled request's inputs: ``draft_ids [K]``, ``draft_rows [K, V]`` or None (point),
    ``logits [K+1, V]`` (the rows the step read: after SPEC §12's bans, penalties and bias), its
    parameters, ``uniforms [K]``, ``exponentials [V]`` and ``withdrawn [K]`` bool or None (SPEC §4's
    withdrawn drafts, whose residual reads their draft row)."""

    draft_ids: np.ndarray
    draft_rows: np.ndarray | None
    logits: np.ndarray
    temperature: float
    top_k: int
    top_p: float
    uniforms: np.ndarray
    exponentials: np.ndarray
    withdrawn: np.ndarray | None = None


@dataclass(frozen=True)
class Flip:
    """One flipped near-tie decision (one near-tie allowance): its kind (``coin``, ``race``,
    ``top_k ...``, ``top_p ...``), position, margin."""

    kind: str
    position: int
    margin: float

    def __str__(self) -> str:
        return f"{self.kind} at position {self.position} (margin {self.margin:.2g})"


def _near(margin: float, tolerance: float) -> bool:
    """A near-tie: within the tolerance but not an exact tie (those follow their rule, SPEC §9)."""
    return 0 < margin < tolerance


def _coin(request: Request, j: int, probs) -> tuple[bool, float]:
    """The exact coin at position ``j`` against target row ``probs``."""
    x = int(request.draft_ids[j])
    if x == PLACEHOLDER_TOKEN_ID:
        return False, exact.INF
    draft = None if request.draft_rows is None else request.draft_rows[j][x]
    return exact.coin(request.uniforms[j], probs[x], draft)


def _contradicted(request: Request, j: int, probs, token: int) -> list[Flip]:
    """The emission decisions at ``j`` that emitting ``token`` contradicts (a rejection at j < K,
    else the bonus): the coin, if the exact one accepts; the race, if another token wins.
    Margin inf where no rounding can explain it (a token outside V or of weight 0)."""
    flips, weights = [], list(probs)
    if j < len(request.draft_ids):
        accepted, margin = _coin(request, j, probs)
        if accepted:
            flips.append(Flip("coin", j, margin))
        x = int(request.draft_ids[j])
        withdrawn = request.withdrawn is not None and bool(request.withdrawn[j])
        reads_row = request.draft_rows is not None and (x >= 0 or withdrawn)
        weights = exact.residual(x, probs, request.draft_rows[j] if reads_row else None, withdrawn)
    if not 0 <= token < len(weights):
        return flips + [Flip("race", j, exact.INF)]
    winner, gaps = exact.race(weights, request.exponentials)
    return flips + ([Flip("race", j, gaps[token])] if token != winner else [])


def _emission(request: Request, j: int, probs, token: int, tolerance: float) -> list[Flip] | None:
    """Flips needed for the emission at ``j`` to be ``token``; None if one is not a near-tie."""
    flips = _contradicted(request, j, probs, token)
    return flips if all(_near(flip.margin, tolerance) for flip in flips) else None


def _walk(request: Request, tokens: list[int], n: int, j: int, tolerance: float, budget: int):
    """The fewest flips (≤ ``budget``) from position ``j`` on, or None."""
    best = None
    for row in exact.near_tie_rows(request.logits[j], request.temperature, request.top_k, request.top_p, tolerance):
        flips = [] if row.variant == "exact" else [Flip(row.variant, j, min(row.top_k.margin, row.top_p.margin))]
        if j < n:
            accepted, margin = _coin(request, j, row.probs)
            if not accepted:
                if not _near(margin, tolerance):
                    continue
                flips.append(Flip("coin", j, margin))
            rest = None if len(flips) > budget else _walk(request, tokens, n, j + 1, tolerance, budget - len(flips))
        else:
            rest = _emission(request, j, row.probs, tokens[j], tolerance)
        if rest is not None and len(flips) + len(rest) <= budget and (best is None or len(flips) + len(rest) < len(best)):
            best = flips + rest
    return best


def explain(request: Request, tokens: list[int], num_accepted: int, *, tolerance: float, budget: int):
    """The fewest near-tie flips (at most ``budget``) after which the reference emits ``tokens``
    with ``num_accepted`` accepted drafts; ``[]`` if none are needed, None if impossible."""
    K = len(request.draft_ids)
    if not 0 <= num_accepted <= K or len(tokens) != num_accepted + 1:
        return None
    if [int(x) for x in request.draft_ids[:num_accepted]] != list(tokens[:num_accepted]):
        return None  # an accepted position must emit its draft: no rounding explains another token
    return _walk(request, list(tokens), num_accepted, 0, tolerance, budget)


def _greedy_divergence(request: Request, tokens: list[int], num_accepted: int) -> Flip | None:
    """The first argmax the device contradicts, margin ``(z_best − z_token) / max(|z_best|, 1)``."""
    for j in range(num_accepted + 1):
        z = np.asarray(request.logits[j], dtype=np.float64)
        best = int(np.argmax(z))
        if tokens[j] != best:
            y = tokens[j]
            return Flip("greedy", j, (z[best] - z[y]) / max(abs(z[best]), 1.0) if 0 <= y < len(z) else exact.INF)
        if j == num_accepted < len(request.draft_ids) and int(request.draft_ids[j]) == best:
            return Flip("greedy", j, exact.INF)  # a draft equal to the argmax was rejected
    return None


def first_divergence(request: Request, tokens: list[int], num_accepted: int) -> Flip | None:
    """The first decision of the exact walk along the device's path that the device contradicts,
    with its exact margin (inf: no rounding explains it — a wrong accepted id, a token outside V).
    A token the exact row gives weight 0 is charged to that row's filter cut, with the cut's margin.
    The margin tells a precision defect (just past the tolerance) from a logic bug (far from any tie)."""
    if request.temperature == 0:
        return _greedy_divergence(request, tokens, num_accepted)
    for j in range(num_accepted + 1):
        row = exact.row(request.logits[j], request.temperature, request.top_k, request.top_p)
        if j == num_accepted:
            flip = next(iter(_contradicted(request, j, row.probs, tokens[j])), None)
            cuts = [(cut.margin, name) for name, cut in (("top_k", row.top_k), ("top_p", row.top_p))
                    if cut.margin < exact.INF]
            if flip is not None and flip.kind == "race" and flip.margin == exact.INF and cuts:
                return Flip(f"{min(cuts)[1]} cut", j, min(cuts)[0])
            return flip
        accepted, margin = _coin(request, j, row.probs)
        if tokens[j] != int(request.draft_ids[j]) or not accepted:
            return Flip("coin", j, margin if tokens[j] == int(request.draft_ids[j]) else exact.INF)
    return None
