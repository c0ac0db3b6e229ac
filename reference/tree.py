"""SPEC §11: tree and multi-draft verification — layout, the three schemes, exact laws.

A request's draft tree has ``N`` nodes in topological order: ``parents[n]`` is
-1 (the root: the request's context) or an earlier node. A node's children are
*siblings*, tried in node order. Target row ``0`` is the root's, row ``1 + n``
the one after node ``n`` (a leaf's row is its path's bonus row); node ``n``'s
draft row is the law it was drawn from, given its path and its earlier
siblings. A chain is the tree ``parents = [-1, 0, 1, …]``: the layout and the
noise are then SPEC §1 and §5 exactly, and ``"rrs"`` is SPEC §3.

The level rules work on one node's siblings with rows as lists of floats or
``Fraction``s, so the noisy step (``verify_tree``) and the exact laws
(``tree_law``) share them.

Worked example (§11.3) — V = 3, two siblings drawn with replacement from
d = [1/4, 1/2, 1/4] at a root whose target row is t = [1/2, 1/4, 1/4]; the
first (token 1) is accepted with min(1, (1/4)/(1/2)) = 1/2; after its
rejection the residual is max(t − d, 0) normalised = [1, 0, 0], so the second
(token 0) is accepted with min(1, 1/(1/4)) = 1:

>>> from fractions import Fraction as F
>>> t, d = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]
>>> p_accept, p_none, r = level("rrs", t, [1, 0], [d, d])
>>> [str(p) for p in p_accept], str(p_none)
(['1/2', '1/2'], '0')
>>> law = tree_law([-1, -1], lambda prefix: t, lambda prefix: d, "rrs", "with_replacement")
>>> str(lossless_error(law, [lambda prefix: t] * 2))
'0'
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Sequence

import numpy as np

from reference.layout import PLACEHOLDER_TOKEN_ID, offsets, pad_outputs
from reference.layout import target_rows as rows_of_request
from reference.laws import greedy_row, lossless_error, normalised, num_accepted_from_law, spread
from reference.target import target_rows
from reference.validate import InvalidInput, check_step
from reference.verify import race, step_inputs

SCHEMES = ("rrs", "sglang")
"""Schemes of a tree batch's sampled requests; greedy requests (T = 0) verify greedily (§11.2)."""
DRAFTINGS = ("with_replacement", "without_replacement", "top")


# ------------------------------------------------------------------ §11.1 layout

def children_of(parents: Sequence[int]) -> list[list[int]]:
    """Each slot's children in trying order; slot 0 is the root, slot ``1 + n`` node ``n``.

    >>> children_of([-1, -1, 0, 1])
    [[0, 1], [2], [3], [], []]
    """
    kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for n, p in enumerate(parents):
        kids[int(p) + 1].append(n)
    return kids


def depths(parents: Sequence[int]) -> list[int]:
    """Each node's depth (the root's children: 1). ``parents`` ``[N]``, each -1 or an earlier node."""
    out: list[int] = []
    for n, p in enumerate(parents):
        if not -1 <= int(p) < n:
            raise InvalidInput(f"parents: node {n} has parent {int(p)}; must be -1 or an earlier node in [0, {n})")
        out.append(1 if p < 0 else out[int(p)] + 1)
    return out


# ------------------------------------------------------------------ §11.2–§11.4 one level

def _rrs(target: list, tokens: Sequence[int], draft_rows: Sequence | None) -> tuple[list, list]:
    """§11.3: conditional acceptance ``a_k`` of each sibling reached, and the residual after all rejections."""
    r, accept = list(target), []
    for x, d in zip(tokens, [None] * len(tokens) if draft_rows is None else draft_rows):
        if x == PLACEHOLDER_TOKEN_ID:           # never drawn: rejected, residual untouched
            accept.append(0)
            continue
        d = [type(r[0])(v == x) for v in range(len(r))] if d is None else d   # point proposal: one-hot
        accept.append(min(1, r[x] / d[x]) if r[x] > 0 and d[x] > 0 else 0)
        r = normalised([max(rv - dv, 0) for rv, dv in zip(r, d)], r)   # empty: by rounding, or d(x) = 0 with r = d
    return accept, r


def _sglang_accepts(target: list, tokens: Sequence[int], threshold_single, threshold_acc):
    """§11.4: for sibling k, (``A_k`` = Σ_{j≤k} t(x_j), whether ``0 < t(x_k)`` and ``t(x_k) ≥ threshold_single``:
    a sibling the target forbids is never accepted, even at ``threshold_single = 0``)."""
    acc, out = 0, []
    for x in tokens:
        real = x != PLACEHOLDER_TOKEN_ID
        acc = acc + (target[x] if real else 0)
        out.append((acc, real and target[x] > 0 and target[x] >= threshold_single))
    return out


def _coin_below(acc, threshold_acc):
    """``P(u·threshold_acc < acc)`` for ``u ~ U[0, 1)``."""
    if acc <= 0:
        return 0
    return 1 if threshold_acc == 0 else min(1, acc / threshold_acc)


def level(scheme: str, target: list, tokens: Sequence[int], draft_rows: Sequence | None = None,
          threshold_single=1, threshold_acc=1) -> tuple[list, object, list]:
    """One node's verification law: (``P(accept sibling k)`` ``[m]``, ``P(none)``, residual ``[V]``).

    ``target``: ``[V]`` target_probs of the node (its argmax for ``"greedy"``: §11.2 is ``"rrs"`` of point
    proposals on ``greedy_row(target)``); ``tokens``: the ``m`` siblings' ids; ``draft_rows``: their ``[V]``
    rows (rrs; None or None entries: point).
    """
    if scheme == "greedy":
        scheme, target, draft_rows = "rrs", greedy_row(target), None
    if scheme == "rrs":
        a, r = _rrs(target, tokens, draft_rows)
        reach, probs = 1, []
        for ak in a:
            probs.append(reach * ak)
            reach = reach * (1 - ak)
        return probs, reach, r
    probs, below = [], 0
    for acc, single in _sglang_accepts(target, tokens, threshold_single, threshold_acc):
        now = 1 if single else _coin_below(acc, threshold_acc)
        probs.append(max(now - below, 0))
        below = max(below, now)
    return probs, 1 - below, normalised([0 * t if v in tokens else t for v, t in enumerate(target)], list(target))


def choose(scheme: str, target: list, tokens: Sequence[int], draft_rows, coins: Sequence[float],
           threshold_single=1.0, threshold_acc=1.0) -> int | None:
    """The accepted sibling's index (or None) under the coins: rrs reads sibling k's own coin
    ``coins[k]``; sglang reads one coin per level, the first sibling's ``coins[0]``."""
    if scheme == "greedy":
        scheme, target, draft_rows = "rrs", greedy_row(target), None
    if scheme == "rrs":
        a, _ = _rrs(target, tokens, draft_rows)
        return next((k for k, ak in enumerate(a) if coins[k] < ak), None)
    for k, (acc, single) in enumerate(_sglang_accepts(target, tokens, threshold_single, threshold_acc)):
        if single or (tokens[k] != PLACEHOLDER_TOKEN_ID and coins[0] * threshold_acc < acc):
            return k
    return None


# ------------------------------------------------------------------ §11 one step, float64

@dataclass(frozen=True)
class TreeStepResult:
    """``output_token_ids`` ``[batch, max_depth + 1]``, ``num_accepted`` ``[batch]``,
    ``accepted_nodes`` ``[batch, max_depth]`` (request-local node ids, -1 padded), the noise used."""

    output_token_ids: np.ndarray
    num_accepted: np.ndarray
    accepted_nodes: np.ndarray
    uniforms: np.ndarray
    exponentials: np.ndarray


def check_tree(num_nodes, parents, draft_probs, scheme: str, threshold_single, threshold_acc) -> list[list[int]]:
    """§11.6 rules beyond §6's; returns each request's node depths."""
    cu = offsets(num_nodes)
    p = np.asarray(parents)
    if p.shape != (int(cu[-1]),) or p.dtype.kind not in "iu":
        raise InvalidInput(f"parents: must be an integer array of shape ({int(cu[-1])},), got {p.dtype} {p.shape}")
    if scheme not in SCHEMES:
        raise InvalidInput(f"scheme: must be one of {SCHEMES}, got {scheme!r}")
    if scheme == "sglang" and draft_probs is not None:
        raise InvalidInput("draft_probs: the sglang scheme is target-only; pass None")
    for name, v in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if not 0 <= v <= 1:
            raise InvalidInput(f"{name}: must be in [0, 1] (1 = lossless), got {v}")
    return [depths(p[cu[i]:cu[i + 1]].tolist()) for i in range(len(cu) - 1)]


def verify_tree(num_nodes, parents, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p,
                *, scheme: str = "rrs", threshold_single: float = 1.0, threshold_acc: float = 1.0,
                uniforms=None, exponentials=None, seeds=None, positions=None) -> TreeStepResult:
    """One tree step for a ragged batch (shapes: SPEC §11.1, ``devices.protocol.TreeBatch``).

    Noise as SPEC §5.1 with ``num_nodes`` for ``num_draft_tokens`` (§11.5): injected, or keyed.
    """
    try:
        check_step(num_nodes, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p, seeds, positions)
    except InvalidInput as e:   # §11.6: §6's rules, named as the tree's arguments
        raise InvalidInput(str(e).replace("num_draft_tokens", "num_nodes").replace("num_tokens", "num_nodes_total")) \
            from None
    tree_depths = check_tree(num_nodes, parents, draft_probs, scheme, threshold_single, threshold_acc)
    n, logits, u, E = step_inputs(num_nodes, target_logits, uniforms, exponentials, seeds, positions)
    T = np.asarray(temperature, dtype=np.float64)
    cu, ids, par = offsets(n), np.asarray(draft_token_ids, np.int64), np.asarray(parents, np.int64)
    draft = None if draft_probs is None else np.asarray(draft_probs, dtype=np.float64)
    emitted, paths = [], []
    for i in range(len(n)):
        rows = logits[rows_of_request(cu, i)]
        greedy = T[i] == 0
        if not greedy:  # one request's parameters, broadcast over its rows
            rows = target_rows(rows, T[i], np.asarray(top_k)[i], np.asarray(top_p)[i])[0]
        nodes = slice(cu[i], cu[i + 1])
        path, token = _walk("greedy" if greedy else scheme, par[nodes], ids[nodes],
                            None if draft is None else draft[nodes], rows, u[nodes], E[i],
                            threshold_single, threshold_acc)
        paths.append(path)
        emitted.append([int(ids[cu[i] + k]) for k in path] + [token])
    width = max((max(d, default=0) for d in tree_depths), default=0)
    accepted = pad_outputs(paths, width) if width else np.zeros((len(n), 0), np.int64)
    return TreeStepResult(pad_outputs(emitted, width + 1), np.array([len(p) for p in paths], np.int64),
                          accepted, u, E)


def _walk(scheme, parents, ids, draft, rows, u, E, threshold_single, threshold_acc) -> tuple[list[int], int]:
    """One request from the root down: (accepted nodes, emitted token). ``rows`` ``[N + 1, V]``:
    target_probs, or raw logits for greedy."""
    kids, slot, path = children_of(parents.tolist()), 0, []
    while True:
        siblings = kids[slot]
        target = rows[slot].tolist()
        k = choose(scheme, target, ids[siblings].tolist(), None if draft is None else list(draft[siblings]),
                   u[siblings].tolist(), threshold_single, threshold_acc) if siblings else None
        if k is None:
            residual = level(scheme, target, ids[siblings].tolist(),
                             None if draft is None else [list(r) for r in draft[siblings]],
                             threshold_single, threshold_acc)[2] if siblings else target
            return path, int(race(np.array(greedy_row(residual) if scheme == "greedy" else residual), E)[0])
        path.append(siblings[k])
        slot = siblings[k] + 1


# ------------------------------------------------------------------ §11.8 exact laws

def sibling_draws(drafter: list, m: int, drafting: str):
    """Every way ``m`` siblings are drafted from the drafter's row ``[V]``:
    ``(tokens [m], their draft rows [m][V] or None for point proposals, probability)``.
    Without replacement, a sibling for which no token is left is a placeholder."""
    if drafting == "top":
        order = sorted(range(len(drafter)), key=lambda v: (-drafter[v], v))[:m]
        yield order + [PLACEHOLDER_TOKEN_ID] * (m - len(order)), None, 1
        return

    def draw(k: int, tokens: list, rows: list, mass):
        if k == m:
            yield tokens, rows, mass
            return
        gone = tokens if drafting == "without_replacement" else []
        row = [0 * d if v in gone else d for v, d in enumerate(drafter)]
        total = sum(row)
        if not total:
            yield from draw(k + 1, tokens + [PLACEHOLDER_TOKEN_ID], rows + [row], mass)
            return
        row = [d / total for d in row]
        for x, d in enumerate(row):
            if d:
                yield from draw(k + 1, tokens + [x], rows + [row], mass * d)

    yield from draw(0, [], [], 1)


def tree_law(parents: Sequence[int], target_row_of: Callable[[tuple], Sequence], draft_row_of: Callable[[tuple], Sequence],
             scheme: str = "rrs", drafting: str = "with_replacement", threshold_single=1, threshold_acc=1,
             exact: bool = True) -> dict[tuple, object]:
    """Exact law of the emitted tuple of one tree step (its length − 1 is ``num_accepted``).

    ``target_row_of(prefix)`` / ``draft_row_of(prefix)``: the target's and the drafter's ``[V]``
    rows after the accepted ``prefix``. Siblings are drafted per ``drafting`` (§11.3); the
    verifier sees their rows in ``"rrs"`` unless ``drafting == "top"`` (point proposals).
    Enumerates each visited level's drafts and each outcome: ``O(Σ V^m)`` over visited levels.
    """
    if drafting not in DRAFTINGS:
        raise ValueError(f"drafting: must be one of {DRAFTINGS}, got {drafting!r}")
    kids = children_of(parents)
    num = Fraction if exact else float
    law: dict[tuple, object] = defaultdict(lambda: num(0))

    def row(f, prefix):
        return [num(x) for x in f(prefix)]

    def walk(slot: int, prefix: tuple, mass) -> None:
        target = row(target_row_of, prefix)
        target = greedy_row(target) if scheme == "greedy" else target
        if not kids[slot]:
            spread(law, prefix, mass, target)
            return
        for tokens, rows, p in sibling_draws(row(draft_row_of, prefix), len(kids[slot]), drafting):
            p_accept, p_none, residual = level(scheme, target, tokens, rows, threshold_single, threshold_acc)
            for k, pk in enumerate(p_accept):
                if pk:
                    walk(kids[slot][k] + 1, prefix + (tokens[k],), mass * p * pk)
            if p_none:
                spread(law, prefix, mass * p * p_none, residual)

    walk(0, (), num(1))
    return dict(law)


def accepted_length_law(law: dict[tuple, object], parents: Sequence[int]) -> list:
    """``P(num_accepted = m)``, m = 0..depth, read off a tree law."""
    return num_accepted_from_law(law, max(depths(parents), default=0))


__all__ = ["SCHEMES", "DRAFTINGS", "children_of", "depths", "level", "choose", "TreeStepResult", "check_tree",
           "verify_tree", "sibling_draws", "tree_law", "accepted_length_law", "lossless_error"]
