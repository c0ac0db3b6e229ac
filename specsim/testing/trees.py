"""Deterministic builders of tree batches (SPEC §11), the reference's result, and the comparison.

>>> b = random_tree_batch(np.random.default_rng(0), TreeSpec(batch=3, max_nodes=4, vocab_size=5))
>>> b.target_logits.shape == (int(b.num_nodes.sum()) + 3, 5)
True
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, TreeBatch, TreeOutput
from devices.validate import draft_dtype
from reference.layout import target_rows as request_rows
from reference.target import target_rows
from reference.tree import children_of, level, verify_tree
from specsim.testing.batches import softmax_rows, numpy_dtype

SHAPES = ("random", "chain", "wide", "binary")
"""``random``: parent of node n uniform in [-1, n); ``chain``; ``wide``: every node under the root
(full width); ``binary``: node 0 under the root, node k under node (k - 1) // 2."""


@dataclass(frozen=True)
class TreeSpec:
    """What a random tree batch contains; fractions are per request (or per node)."""

    batch: int = 12
    max_nodes: int = 6
    vocab_size: int = 16
    dtype: str = "float64"
    shape: str = "random"
    scheme: str = "rrs"
    drafting: str = "with_replacement"   # rrs with draft_probs: "with_replacement" or "without_replacement";
    #                                      "top": point proposals (top tokens of the drafter row, distinct)
    greedy_fraction: float = 0.25
    top_k_fraction: float = 0.2
    top_p_fraction: float = 0.2
    placeholder_fraction: float = 0.05   # placeholder siblings (SPEC §11.3: skipped, no row read)
    duplicate_fraction: float = 0.0      # point siblings replaced by an earlier sibling's token
    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    logit_scale: float = 2.0
    masked_fraction: float = 0.1         # logits set to -inf (a row keeps at least one finite)

    @property
    def schemes_needed(self) -> set[str]:
        return ({"greedy"} if self.greedy_fraction > 0 else set()) | ({self.scheme} if self.greedy_fraction < 1 else set())


def tree_shape(rng: np.random.Generator, n: int, shape: str) -> np.ndarray:
    """``parents [n]`` (request-local) of one tree."""
    if shape == "chain":
        return np.arange(n, dtype=np.int64) - 1
    if shape == "wide":
        return np.full(n, -1, np.int64)
    if shape == "binary":
        return np.array([(k - 1) // 2 if k else -1 for k in range(n)], np.int64)
    return np.array([rng.integers(-1, k) for k in range(n)], np.int64)


def _draft_tree(rng, parents: np.ndarray, drafter_rows: np.ndarray, spec: TreeSpec):
    """Tokens ``[n]`` and rows ``[n, V]`` drafted per §11.1 from ``drafter_rows [n + 1, V]`` (per slot)."""
    n, V = len(parents), drafter_rows.shape[1]
    ids, rows = np.zeros(n, np.int64), np.zeros((n, V))
    earlier: dict[int, list[int]] = {}
    for node in range(n):
        slot = int(parents[node]) + 1
        taken = earlier.setdefault(slot, [])
        row = drafter_rows[slot].copy()
        if spec.drafting == "top":
            seen = set(taken)
            ids[node] = next((v for v in np.argsort(-row, kind="stable") if v not in seen), PLACEHOLDER_TOKEN_ID)
            if taken and rng.random() < spec.duplicate_fraction:
                ids[node] = taken[int(rng.integers(len(taken)))]
        else:
            if spec.drafting == "without_replacement":
                row[[x for x in taken if x >= 0]] = 0.0
            if row.sum() <= 0:
                ids[node] = PLACEHOLDER_TOKEN_ID
            else:
                row = row / row.sum()
                ids[node] = rng.choice(V, p=row)
            rows[node] = row
        taken.append(int(ids[node]))
    return ids, rows


def random_tree_batch(rng: np.random.Generator, spec: TreeSpec) -> TreeBatch:
    """A ragged batch of trees with heterogeneous sizes, shapes' parameters and sampling parameters."""
    num_nodes = rng.integers(0, spec.max_nodes + 1, size=spec.batch)
    return tree_batch_of(rng, [tree_shape(rng, int(n), spec.shape) for n in num_nodes], spec)


def tree_batch_of(rng: np.random.Generator, parents: list[np.ndarray], spec: TreeSpec) -> TreeBatch:
    """A batch whose request i has the tree ``parents[i]`` (``[N_i]``, request-local); rows, drafts and
    sampling parameters drawn per ``spec`` as ``random_tree_batch`` draws them (``spec.batch`` unused)."""
    B, V = len(parents), spec.vocab_size
    num_nodes = np.array([len(p) for p in parents], np.int64)
    logits = rng.normal(0.0, spec.logit_scale, size=(int(num_nodes.sum()) + B, V))
    logits[rng.random(logits.shape) < spec.masked_fraction] = -np.inf
    dead = ~np.isfinite(logits).any(axis=1)
    logits[dead, rng.integers(0, V, size=int(dead.sum()))] = 0.0
    ids, rows, start = [], [], 0
    for i, p in enumerate(parents):
        own = logits[start + i: start + i + len(p) + 1]                    # the request's slots
        drafter = softmax_rows(np.where(np.isfinite(own), own, -30.0) + rng.normal(0, 1.0, size=own.shape))
        tok, row = _draft_tree(rng, p, drafter, spec)
        tok[rng.random(len(tok)) < spec.placeholder_fraction] = PLACEHOLDER_TOKEN_ID
        ids.append(tok)
        rows.append(row)
        start += len(p)
    temperature = rng.choice([0.5, 0.7, 1.0, 1.3], size=B)
    temperature[rng.random(B) < spec.greedy_fraction] = 0.0
    top_k = np.where(rng.random(B) < spec.top_k_fraction, rng.integers(1, V + 1, size=B), 0)
    top_p = np.where(rng.random(B) < spec.top_p_fraction, rng.choice([0.5, 0.8, 0.95], size=B), 1.0)
    point = spec.drafting == "top" or spec.scheme == "sglang"
    # 16-bit logits pair with float32 draft probs (SPEC §6)
    probs = np.concatenate(rows).astype(draft_dtype(spec.dtype)) if len(rows) and not point else None
    if probs is not None and probs.dtype == np.float32:
        sums = probs.sum(axis=1, keepdims=True, dtype=np.float32)
        probs = np.where(sums > 0, probs / np.where(sums > 0, sums, 1), probs)
    return TreeBatch(
        num_nodes=num_nodes.astype(np.int64), parents=np.concatenate(parents).astype(np.int64),
        draft_token_ids=np.concatenate(ids).astype(np.int64), draft_probs=probs,
        target_logits=logits.astype(numpy_dtype(spec.dtype)), temperature=temperature.astype(np.float64),
        top_k=top_k.astype(np.int64), top_p=top_p.astype(np.float64),
        seeds=rng.integers(0, 2**63, size=B, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1),
        positions=rng.integers(0, 4096, size=B).astype(np.int64), scheme=spec.scheme,
        threshold_single=spec.threshold_single, threshold_acc=spec.threshold_acc)


def layered_parents(n: int, depth: int) -> np.ndarray:
    """``parents [n]`` of a tree of ``n`` nodes and depth ``min(n, depth)``: levels as even as possible
    (the first ones larger), the nodes of a level hung one each from the previous level's nodes, the
    last first — so the root has ``≈ n / depth`` children and late siblings carry the deep subtrees.
    With ``n == depth`` it is a chain.

    >>> layered_parents(7, 3).tolist()
    [-1, -1, -1, 2, 1, 4, 3]
    """
    levels = min(n, depth)
    parents: list[int] = []
    previous: list[int] = []
    for level in range(levels):
        size = n // levels + (level < n % levels)
        here = list(range(len(parents), len(parents) + size))
        parents += [-1 if not level else previous[-1 - j % len(previous)] for j in range(size)]
        previous = here
    return np.array(parents, np.int64)


def deepest_path(parents) -> list[int]:
    """The request-local nodes of a root-to-leaf path of greatest depth; at each node the **last**
    child on such a path (late siblings: what a device dropping siblings would miss).

    >>> deepest_path(layered_parents(7, 3))
    [2, 3, 6]
    """
    kids = children_of([int(p) for p in parents])
    height = [0] * (len(parents) + 1)
    for slot in reversed(range(len(parents) + 1)):
        height[slot] = 1 + max((height[c + 1] for c in kids[slot]), default=0)
    path, slot = [], 0
    while kids[slot]:
        best = max(height[c + 1] for c in kids[slot])
        node = [c for c in kids[slot] if height[c + 1] == best][-1]
        path.append(node)
        slot = node + 1
    return path


def _steer_level(batch: TreeBatch, target: np.ndarray, tokens: list[int], rows, j: int) -> tuple[list, list[int]]:
    """Coins ``[j + 1]`` and tokens for siblings ``0..j`` of one level (``target [V]``, ``tokens [m]``,
    ``rows`` their ``[V]`` draft rows or None) under which siblings ``0..j-1`` are rejected and ``j``
    accepted, each coin in the middle of its interval; None where the SPEC leaves no choice.

    ``"sglang"`` reads the first coin only. ``"rrs"``: each sibling's acceptance ``a`` against the
    residual it meets is ``reference.tree.level``'s; a sure one (``a = 1``) before ``j`` takes instead
    the token its row over-proposes most, an impossible one at ``j`` (``a = 0``) the token it
    under-proposes most — a token its row can draw, so the batch stays a valid tree."""
    if batch.scheme == "sglang":
        probs = level("sglang", target.tolist(), tokens, None, batch.threshold_single, batch.threshold_acc)[0]
        below = float(sum(probs[:j]))
        return [below + float(probs[j]) / 2 if probs[j] > 0 else None], tokens
    r, coins, tokens = target.tolist(), [], list(tokens)
    for k in range(j + 1):
        d = None if rows is None else rows[k]
        accept = lambda x: float(level("rrs", r, [x], None if d is None else [d])[0][0])  # noqa: E731
        a = accept(tokens[k]) if tokens[k] != PLACEHOLDER_TOKEN_ID else 0.0
        if (a >= 1) if k < j else (a <= 0):
            drawable = np.flatnonzero(np.asarray(d) > 0) if d is not None else np.arange(len(r))
            ratio = np.array([accept(int(v)) for v in drawable])
            if len(drawable) and (ratio.min() < 1 if k < j else ratio.max() > 0):
                tokens[k] = int(drawable[ratio.argmin() if k < j else ratio.argmax()])
                a = accept(tokens[k])
        coins.append(((1 + a) / 2 if a < 1 else None) if k < j else (a / 2 if a > 0 else None))
        if tokens[k] != PLACEHOLDER_TOKEN_ID:
            r = level("rrs", r, [tokens[k]], None if d is None else [d])[2]
    return coins, tokens


def steer_tree(batch: TreeBatch, noise: Noise, requests) -> tuple[TreeBatch, Noise]:
    """``batch`` and ``noise`` changed so that each of ``requests`` accepts its ``deepest_path`` as far
    as the SPEC lets it: a greedy request's path nodes carry their row's argmax (earlier siblings
    another token); a sampled request's coins reject every earlier sibling and accept the path's node
    (their acceptance computed by ``reference.tree.level``). The reference still decides every answer:
    steering only makes a deep or late acceptance likely, so a device truncating trees shows it."""
    ids, coins = np.array(batch.draft_token_ids, copy=True), np.array(noise.uniforms, dtype=np.float64, copy=True)
    cu, V = batch.request_offsets(), batch.vocab_size
    logits = np.asarray(batch.target_logits, dtype=np.float64)
    paths: dict[bytes, list[int]] = {}
    for i in requests:
        start, parents = int(cu[i]), batch.parents[cu[i]:cu[i + 1]]
        path = paths.setdefault(parents.tobytes(), deepest_path(parents))
        rows = logits[start + i: int(cu[i + 1]) + i + 1]
        T = float(batch.temperature[i])
        probs = None if T == 0 else target_rows(rows, np.full(len(rows), T), np.full(len(rows), batch.top_k[i]),
                                                 np.full(len(rows), batch.top_p[i]))[0]
        kids, slot = children_of(parents.tolist()), 0
        for node in path:
            siblings = kids[slot]
            j = siblings.index(node)
            if probs is None:
                best = int(np.argmax(rows[slot]))
                earlier = [start + s for s in siblings[:j] if ids[start + s] == best]
                ids[earlier] = (best + 1) % V if V > 1 else PLACEHOLDER_TOKEN_ID
                ids[start + node] = best
            else:
                draft = None if batch.draft_probs is None else [batch.draft_probs[start + s].astype(np.float64)
                                                                for s in siblings[:j + 1]]
                level_nodes = start + np.array(siblings[:j + 1])
                chosen, ids[level_nodes] = _steer_level(batch, probs[slot], ids[level_nodes].tolist(), draft, j)
                for n, u in zip(level_nodes, chosen):
                    if u is not None:
                        coins[n] = u
            slot = node + 1
    return replace(batch, draft_token_ids=ids), Noise(coins, noise.exponentials)


def random_tree_noise(rng: np.random.Generator, batch: TreeBatch) -> Noise:
    """Injected noise of SPEC §11.5 for ``batch``: one coin per node, one Exp(1) vector per request."""
    return Noise(uniforms=rng.random(int(batch.num_nodes.sum())),
                 exponentials=rng.exponential(size=(batch.batch_size, batch.vocab_size)) + 1e-300)


def reference_tree_step(batch: TreeBatch, noise: Noise | None):
    """``reference.tree.verify_tree`` for ``batch``: with ``noise``, or keyed noise when None."""
    kwargs = {} if noise is None else {"uniforms": noise.uniforms, "exponentials": noise.exponentials}
    return verify_tree(batch.num_nodes, batch.parents, batch.draft_token_ids, batch.draft_probs, batch.target_logits,
                       batch.temperature, batch.top_k, batch.top_p, scheme=batch.scheme,
                       threshold_single=batch.threshold_single, threshold_acc=batch.threshold_acc,
                       seeds=batch.seeds, positions=batch.positions, **kwargs)


def drafted_law(parents: Sequence[int], tokens: Sequence[int], target_rows: Sequence, draft_rows: Sequence | None = None,
                scheme: str = "rrs", threshold_single=1, threshold_acc=1, *, nodes: bool = False) -> dict[tuple, object]:
    """Exact law of one tree step *given its drafts* (SPEC §11.2–§11.4: ``reference.tree.level`` at every slot the
    walk can reach; ``reference.tree.tree_law`` draws the drafts too):
    ``tokens [N]`` the drafted ids, ``target_rows [N + 1][V]`` each slot's target_probs (root first; for
    ``"greedy"`` any row whose argmax is the target's: ``level`` takes it), ``draft_rows [N][V]`` the rows the
    siblings were drafted from, or None (point proposals). Keys: the emitted tuple, or with ``nodes`` (emitted
    tuple, accepted nodes), which tells apart duplicate siblings with one token. Floats or ``Fraction``s in,
    the same out.

    >>> from fractions import Fraction as F
    >>> t = [F(1, 2), F(1, 2)]
    >>> law = drafted_law([-1, -1], [0, 0], [t, t, t], nodes=True)   # the second copy of 0 meets r(0) = 0
    >>> sorted((k, str(p)) for k, p in law.items())
    [(((0, 0), (0,)), '1/4'), (((0, 1), (0,)), '1/4'), (((1,), ()), '1/2')]
    """
    kids, law = children_of(parents), defaultdict(int)

    def walk(slot: int, emitted: tuple, path: tuple, mass) -> None:
        siblings, target = kids[slot], list(target_rows[slot])
        rows = None if draft_rows is None else [list(draft_rows[n]) for n in siblings]
        p_accept, p_none, residual = level(scheme, target, [tokens[n] for n in siblings], rows, threshold_single,
                                           threshold_acc)
        for k in (k for k, pk in enumerate(p_accept) if pk):
            walk(siblings[k] + 1, emitted + (tokens[siblings[k]],), path + (siblings[k],), mass * p_accept[k])
        if p_none:
            for y in (y for y, w in enumerate(residual) if w):
                law[(emitted + (y,), path) if nodes else emitted + (y,)] += mass * p_none * residual[y]

    walk(0, (), (), 1)
    return dict(law)


def request_laws(batch: TreeBatch) -> list[dict]:
    """Each request's exact law given its drafts (``drafted_law``), keyed by (emitted tuple,
    accepted nodes): its rows as the reference reads them (SPEC §2's target_probs in float64; a greedy request's
    logits, whose argmax ``level`` takes). What a request's answer under the device's own unkeyed draws must
    fall in (zeros are exact: a token or node the rows give no mass has probability 0 here too).

    >>> b = random_tree_batch(np.random.default_rng(0), TreeSpec(batch=2, max_nodes=3, vocab_size=4))
    >>> [round(float(sum(law.values())), 12) for law in request_laws(b)]
    [1.0, 1.0]
    """
    cu, logits = batch.request_offsets(), np.asarray(batch.target_logits, np.float64)
    drafts = None if batch.draft_probs is None else np.asarray(batch.draft_probs, np.float64)
    laws = []
    for i in range(batch.batch_size):
        rows = logits[request_rows(cu, i)]
        greedy = batch.temperature[i] == 0
        if not greedy:
            rows = target_rows(rows, batch.temperature[i], batch.top_k[i], batch.top_p[i])[0]
        draft = None if drafts is None else drafts[cu[i]:cu[i + 1]]
        laws.append(drafted_law(batch.parents[cu[i]:cu[i + 1]].tolist(), batch.draft_token_ids[cu[i]:cu[i + 1]].tolist(),
                                rows.tolist(), None if draft is None else draft.tolist(),
                                "greedy" if greedy else batch.scheme, batch.threshold_single, batch.threshold_acc,
                                nodes=True))
    return laws


def compare_tree(got: TreeOutput, want, repro: str = "") -> list[str]:
    """Mismatches (one line each) between a device's tree output and the reference's: shapes, then
    per request the emitted tokens and the accepted nodes (SPEC §11.7)."""
    problems = []
    for name in ("output_token_ids", "num_accepted", "accepted_nodes"):
        g, w = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        if g.shape != w.shape:
            problems.append(f"{name}: shape {g.shape}, expected {w.shape}{repro}")
    if problems:
        return problems
    for i in range(len(want.num_accepted)):
        g_row, w_row = np.asarray(got.output_token_ids)[i].tolist(), want.output_token_ids[i].tolist()
        g_nodes, w_nodes = np.asarray(got.accepted_nodes)[i].tolist(), want.accepted_nodes[i].tolist()
        if g_row != w_row or g_nodes != w_nodes or int(got.num_accepted[i]) != int(want.num_accepted[i]):
            problems.append(f"request {i}: emitted {_short(g_row)} via nodes {_short(g_nodes)}, expected "
                            f"{_short(w_row)} via {_short(w_nodes)}{repro}")
    return problems


def _short(row: list[int], keep: int = 12) -> str:
    """A row for a message: its padding (trailing -1) dropped, a long one cut in the middle.

    >>> _short([5, 6, -1, -1]), _short(list(range(30)))
    ('[5, 6]', '[0, 1, 2, 3, 4, 5, …(18 more)…, 24, 25, 26, 27, 28, 29]')
    """
    while row and row[-1] == PLACEHOLDER_TOKEN_ID:
        row = row[:-1]
    if len(row) <= keep:
        return str(row)
    half = keep // 2
    return f"[{', '.join(map(str, row[:half]))}, …({len(row) - keep} more)…, {', '.join(map(str, row[-half:]))}]"


def select_tree_requests(batch: TreeBatch, order, noise: Noise | None = None):
    """The sub-batch of requests ``order`` with their noise (for batch invariance)."""
    order = np.asarray(order, dtype=np.int64)
    cu = batch.request_offsets()
    nodes = np.concatenate([np.arange(cu[i], cu[i + 1]) for i in order]).astype(np.int64)
    rows = np.concatenate([np.arange(cu[i] + i, cu[i + 1] + i + 1) for i in order]).astype(np.int64)
    sub = replace(batch, num_nodes=batch.num_nodes[order], parents=batch.parents[nodes],
                  draft_token_ids=batch.draft_token_ids[nodes],
                  draft_probs=None if batch.draft_probs is None else batch.draft_probs[nodes],
                  target_logits=batch.target_logits[rows], temperature=batch.temperature[order],
                  top_k=batch.top_k[order], top_p=batch.top_p[order],
                  seeds=None if batch.seeds is None else batch.seeds[order],
                  positions=None if batch.positions is None else batch.positions[order])
    if noise is None:
        return sub, None
    return sub, Noise(noise.uniforms[nodes], noise.exponentials[order])


def join_tree_requests(first: TreeBatch, second: TreeBatch, first_noise: Noise | None = None,
                       second_noise: Noise | None = None):
    """One tree batch of ``first``'s requests then ``second``'s (one V, logits dtype, scheme, thresholds and
    proposal form), with their noise (both or neither); keys (``seeds``, ``positions``) kept only where both have
    them. Used to mix a §11 edge with filler trees (``select_tree_requests`` then lays out any mix of the two).

    >>> a = random_tree_batch(np.random.default_rng(0), TreeSpec(batch=2, vocab_size=5))
    >>> b = random_tree_batch(np.random.default_rng(1), TreeSpec(batch=3, vocab_size=5))
    >>> j, _ = join_tree_requests(a, b)
    >>> j.batch_size, int(j.num_nodes.sum()) == int(a.num_nodes.sum() + b.num_nodes.sum())
    (5, True)
    """
    same = {"V": (first.vocab_size, second.vocab_size), "logits dtype": (first.target_logits.dtype,
            second.target_logits.dtype), "scheme": (first.scheme, second.scheme),
            "threshold_single": (first.threshold_single, second.threshold_single),
            "threshold_acc": (first.threshold_acc, second.threshold_acc),
            "draft_probs given": (first.draft_probs is not None, second.draft_probs is not None)}
    differ = [f"{what} {a} and {b}" for what, (a, b) in same.items() if a != b]
    if differ:
        raise ValueError(f"join_tree_requests: both batches need one V, logits dtype, scheme, thresholds and "
                         f"proposal form, got {'; '.join(differ)}")
    if (first_noise is None) != (second_noise is None):
        raise ValueError("join_tree_requests: noise for both batches, or for neither")

    def both(a, b):
        return None if a is None or b is None else np.concatenate([a, b])

    joined = replace(first, num_nodes=both(first.num_nodes, second.num_nodes),
                     parents=both(first.parents, second.parents),
                     draft_token_ids=both(first.draft_token_ids, second.draft_token_ids),
                     draft_probs=both(first.draft_probs, second.draft_probs),
                     target_logits=both(first.target_logits, second.target_logits),
                     temperature=both(first.temperature, second.temperature), top_k=both(first.top_k, second.top_k),
                     top_p=both(first.top_p, second.top_p), seeds=both(first.seeds, second.seeds),
                     positions=both(first.positions, second.positions))
    noise = None if first_noise is None else Noise(both(first_noise.uniforms, second_noise.uniforms),
                                                   both(first_noise.exponentials, second_noise.exponentials))
    return joined, noise
