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
winner (the token it emitted). The hidden ones — the top-k boundary, the
top-p cut and §12's min_p cut of each row (in the request's order profile:
with ``"vllm"``, top-k and top-p on the row min_p cut), which the device's
output does not show — are tried as their near-tie variants
(``reference.exact.near_tie_rows``: the boundary moved by one class), each
costing one allowance. A greedy row's argmax is visible: where a §12 penalty or
bias computed the row's values (``Request.computed``) the device may emit the
runner-up within the tolerance (one allowance); an argmax of given values
involves no rounding and never flips.

Worked example — a point proposal with ``t(x) = 1/2`` (two equal logits):

>>> import numpy as np
>>> from dataclasses import replace
>>> tie = Request(draft_ids=np.array([0]), draft_rows=None, logits=np.zeros((2, 2)), temperature=1.0,
...               top_k=0, top_p=1.0, uniforms=np.array([0.5]), exponentials=np.ones(2))
>>> explain(tie, [1], 0, tolerance=1e-4, budget=2)          # u = t(x): rejected, token 1: the reference itself
[]
>>> explain(tie, [0, 0], 1, tolerance=1e-4, budget=2) is None   # accepting flips an exact tie: never allowed
True
>>> near = replace(tie, uniforms=np.array([0.49999]))   # u 2e-5 below t(x): accepted
>>> [str(flip) for flip in explain(near, [1], 0, tolerance=1e-4, budget=2)]   # float32 may reject it
['coin at position 0 (margin 2e-05)']
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID
from reference import exact


@dataclass(frozen=True)
class Request:
    """One request's inputs: ``draft_ids [K]``, ``draft_rows [K, V]`` or None (point), ``logits [K+1, V]``
    (the rows the step read: after SPEC §12's bans, penalties and bias), its parameters (``min_p`` and
    ``order``: SPEC §12's), ``uniforms [K]``, ``exponentials [V]``, ``withdrawn [K]`` bool or None (SPEC §4's
    withdrawn drafts, whose residual reads their draft row) and ``computed [K+1]`` bool or None (the rows
    whose values a §12 penalty or bias computed: ``StepResult.computed``)."""

    draft_ids: np.ndarray
    draft_rows: np.ndarray | None
    logits: np.ndarray
    temperature: float
    top_k: int
    top_p: float
    uniforms: np.ndarray
    exponentials: np.ndarray
    withdrawn: np.ndarray | None = None
    min_p: float = 0.0
    order: str = "canonical"
    computed: np.ndarray | None = None

    @functools.cached_property
    def memo(self) -> dict:
        """The exact rows computed so far, by ``(position, tolerance)`` (``_rows``)."""
        return {}


@dataclass(frozen=True)
class Flip:
    """One flipped near-tie decision (one near-tie allowance): its kind (``coin``, ``race``,
    ``top_k ...``, ``top_p ...``, ``min_p ...``, ``greedy_computed``), position, margin."""

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


def _rows(request: Request, j: int, tolerance: float | None = None) -> list:
    """Row ``j`` decided exactly (``tolerance`` None), or with its near-tie variants (``exact.near_tie_rows``);
    each computed once per request (``explain`` and ``first_divergence`` walk the same rows)."""
    memo, args = request.memo, (request.logits[j], request.temperature, request.top_k, request.top_p)
    if (j, tolerance) not in memo:
        memo[j, tolerance] = [exact.row(*args, request.min_p, request.order)] if tolerance is None else \
            exact.near_tie_rows(*args, tolerance, request.min_p, request.order)
        memo.setdefault((j, None), memo[j, tolerance][:1])
    return memo[j, tolerance]


def _walk(request: Request, tokens: list[int], n: int, j: int, tolerance: float, budget: int):
    """The fewest flips (≤ ``budget``) from position ``j`` on, or None."""
    best, rows = None, _rows(request, j, tolerance)
    for row in rows:   # a variant costs one flip, at the margin of the cut it moved
        flips = [] if row.variant == "exact" else [Flip(row.variant, j, getattr(rows[0], row.variant.split()[0]).margin)]
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
    if request.temperature == 0:
        return _greedy_walk(request, list(tokens), num_accepted, tolerance, budget)
    return _walk(request, list(tokens), num_accepted, 0, tolerance, budget)


def _argmax(request: Request, j: int, token: int) -> tuple[Flip | None, bool]:
    """The argmax of row ``j`` that emitting ``token`` contradicts (None: ``token`` is it), margin
    ``(z_best − z_token) / max(|z_best|, 1)`` on the float64 values the step read (kind ``greedy_computed``
    where §12 computed them), and whether ``token`` is the runner-up (the argmax with the best removed)."""
    z = np.asarray(request.logits[j], dtype=np.float64)
    best = int(np.argmax(z))
    if token == best:
        return None, False
    kind = "greedy_computed" if request.computed is not None and request.computed[j] else "greedy"
    if not 0 <= token < len(z):
        return Flip(kind, j, exact.INF), False
    runner_up = int(np.argmax(np.where(np.arange(len(z)) == best, -np.inf, z)))
    return Flip(kind, j, (z[best] - z[token]) / max(abs(z[best]), 1.0)), token == runner_up


def _greedy_path(request: Request, tokens: list[int], num_accepted: int):
    """Each greedy row's decision along the device's path, as ``(flip or None, runner-up)``; None where
    the device rejected a draft yet emitted it (no argmax does that)."""
    decisions = []
    for j in range(num_accepted + 1):
        if j == num_accepted < len(request.draft_ids) and tokens[j] == int(request.draft_ids[j]):
            return decisions + [(Flip("greedy", j, exact.INF), False)]
        decisions.append(_argmax(request, j, tokens[j]))
    return decisions


def _greedy_walk(request: Request, tokens: list[int], num_accepted: int, tolerance: float, budget: int):
    """Greedy rows: each contradicted argmax is one visible flip, allowed only as a ``greedy_computed``
    near-tie whose runner-up the device emitted (SPEC §9); the flips, or None."""
    flips = []
    for flip, runner_up in _greedy_path(request, tokens, num_accepted):
        if flip is not None:
            if not (flip.kind == "greedy_computed" and runner_up and _near(flip.margin, tolerance)):
                return None
            flips.append(flip)
    return flips if len(flips) <= budget else None


def first_divergence(request: Request, tokens: list[int], num_accepted: int) -> Flip | None:
    """The first decision of the exact walk along the device's path that the device contradicts,
    with its exact margin (inf: no rounding explains it — a wrong accepted id, a token outside V).
    A token the exact row gives weight 0 is charged to that row's filter cut, with the cut's margin.
    The margin tells a precision defect (just past the tolerance) from a logic bug (far from any tie)."""
    if request.temperature == 0:
        return next((flip for flip, _ in _greedy_path(request, tokens, num_accepted) if flip is not None), None)
    for j in range(num_accepted + 1):
        row = _rows(request, j)[0]
        if j == num_accepted:
            flip = next(iter(_contradicted(request, j, row.probs, tokens[j])), None)
            cuts = [(getattr(row, name).margin, name) for name in exact.CUTS if getattr(row, name).margin < exact.INF]
            if flip is not None and flip.kind == "race" and flip.margin == exact.INF and cuts:
                return Flip(f"{min(cuts)[1]} cut", j, min(cuts)[0])
            return flip
        accepted, margin = _coin(request, j, row.probs)
        if tokens[j] != int(request.draft_ids[j]) or not accepted:
            return Flip("coin", j, margin if tokens[j] == int(request.draft_ids[j]) else exact.INF)
    return None
