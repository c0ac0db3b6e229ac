"""Draft trees of the shapes engines send (SPEC §11), for L1-trees' engine-sized cases.

Engines draft far bigger trees than a random test tree: EAGLE-2 expands the
top-k children of its best nodes level by level (about 60 nodes at depth 6),
Medusa verifies one fixed sparse tree of top-k paths (60+ nodes), SpecInfer
merges several sampled candidate sequences into one token tree. The builders
here give those shapes with their tokens, each from a drafter row per slot:

* ``eagle2_tree``: ``top_k`` root children, then at each level the ``beam``
  best nodes of the level before (by cumulative drafter probability) get
  ``branch`` children each (8 + 5 × 4 × 3 = 68 nodes at depth 6 by default);
  siblings are the parent's top tokens in order (point proposals);
* ``medusa_tree``: the ``nodes`` rank paths of highest estimated accuracy
  (rank r at depth d: ``0.75 · 0.5^r · 0.9^(d-1)``), a prefix-closed tree
  (64 nodes reaching depth 6); the node at depth d with rank r drafts the
  r-th token of head d's row (heads depend on the depth, not the path);
* ``specinfer_tree``: candidate sequences of ``depth`` tokens sampled from the
  drafter rows, merged on shared prefixes until the tree has ``min_nodes``
  nodes; siblings are distinct tokens.

Each returns an ``EngineTree``: parents, tokens, the drafter row of every slot
(kept only when the rows are asked for) and one root-to-deepest-leaf path, so
a case can steer a request down to depth 6.

>>> rng = np.random.default_rng(0)
>>> t = eagle2_tree(rng, 50)
>>> len(t.parents), max(depths(t.parents.tolist())), len(t.path)
(68, 6, 6)
>>> m = medusa_tree(np.random.default_rng(1), 50)
>>> len(m.parents), max(depths(m.parents.tolist()))
(64, 6)
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from reference.tree import children_of, depths


@dataclass(frozen=True)
class EngineTree:
    """``parents``, ``tokens`` ``[N]`` int64; ``drafter`` ``[N + 1, V]`` each slot's drafter row (root first),
    or None when not kept; ``path``: the nodes of one root-to-deepest-leaf path."""

    parents: np.ndarray
    tokens: np.ndarray
    drafter: np.ndarray | None
    path: list

    def draft_rows(self, drafting: str) -> np.ndarray | None:
        """``[N, V]`` the law each node was drawn from: ``"with"`` the parent's drafter row, ``"without"`` that
        row less the earlier siblings' tokens (renormalised), ``"point"`` None."""
        if drafting == "point":
            return None
        if self.drafter is None:
            raise ValueError("drafting: this tree kept no drafter rows (build it with keep_rows=True)")
        rows = self.drafter[self.parents + 1].copy()
        if drafting == "without":
            for siblings in children_of(self.parents.tolist()):
                for k, node in enumerate(siblings):
                    rows[node, self.tokens[siblings[:k]]] = 0.0
            rows /= rows.sum(axis=1, keepdims=True)
        return rows


def _drafter_row(rng, V: int, scale: float, peaks: int = 0) -> np.ndarray:
    """A drafter row ``[V]``: softmax of N(0, scale²) logits, ``peaks`` random tokens lifted by ~log V
    (a confident drafter: most of the mass on a few tokens, at any V)."""
    z = rng.normal(0.0, scale, V)
    if peaks:
        z[rng.choice(V, size=min(peaks, V), replace=False)] += np.log(V) + scale + rng.normal(0.0, 1.0, min(peaks, V))
    w = np.exp(z - z.max())
    return w / w.sum()


def _top(row: np.ndarray, m: int) -> np.ndarray:
    """The ``m`` largest entries' ids, largest first (ties: lowest id)."""
    part = np.argpartition(-row, min(m, len(row) - 1))[:m] if m < len(row) else np.arange(len(row))
    return part[np.lexsort((part, -row[part]))]


def _deepest_path(parents: np.ndarray, rng) -> list:
    d = depths(parents.tolist())
    leaf = int(rng.choice(np.flatnonzero(np.array(d) == max(d))))
    path = [leaf]
    while parents[path[0]] >= 0:
        path.insert(0, int(parents[path[0]]))
    return path


def eagle2_tree(rng, V: int, depth: int = 6, top_k: int = 8, beam: int = 4, branch: int = 3, scale: float = 2.0,
                keep_rows: bool = False) -> EngineTree:
    """EAGLE-2's dynamic tree: the root's ``top_k`` best tokens, then each level's ``beam`` best nodes
    (cumulative drafter probability) expanded by their ``branch`` best tokens."""
    parents, tokens, score, rows = [], [], [], [_drafter_row(rng, V, scale)]

    def add(parent: int, x: int) -> int:
        parents.append(parent)
        tokens.append(int(x))
        score.append((score[parent] if parent >= 0 else 0.0) + float(np.log(rows[parent + 1][x])))
        return len(parents) - 1

    level = [add(-1, x) for x in _top(rows[0], top_k)]
    for _ in range(depth - 1):
        best = sorted(level, key=lambda n: (-score[n], n))[:beam]
        level = []
        for node in sorted(best):
            while len(rows) <= node + 1:
                rows.append(_drafter_row(rng, V, scale))
            level += [add(node, x) for x in _top(rows[node + 1], branch)]
    while len(rows) < len(parents) + 1:
        rows.append(_drafter_row(rng, V, scale))
    p = np.array(parents, np.int64)
    return EngineTree(p, np.array(tokens, np.int64), np.stack(rows) if keep_rows else None, _deepest_path(p, rng))


def medusa_paths(nodes: int = 64, accuracy=lambda d, r: 0.75 * 0.5 ** r * 0.9 ** (d - 1), max_rank: int = 10) -> list:
    """Medusa's sparse tree: the ``nodes`` rank paths ``(r_1, …, r_d)`` of highest ``Π accuracy(d, r_d)``
    (best first; a path's prefixes score higher, so the set is a tree)."""
    heap, out = [(-accuracy(1, r), (r,)) for r in range(max_rank)], []
    heapq.heapify(heap)
    while heap and len(out) < nodes:
        negative, path = heapq.heappop(heap)
        out.append(path)
        for r in range(max_rank):
            heapq.heappush(heap, (negative * accuracy(len(path) + 1, r), path + (r,)))
    return sorted(out, key=lambda p: (len(p), p))


def medusa_tree(rng, V: int, nodes: int = 64, scale: float = 2.0, keep_rows: bool = False) -> EngineTree:
    """Medusa's fixed tree: node (r_1, …, r_d) drafts head d's r_d-th best token."""
    paths = medusa_paths(nodes)
    index = {p: n for n, p in enumerate(paths)}
    heads = [_drafter_row(rng, V, scale) for _ in range(max(len(p) for p in paths))]
    ranked = [_top(h, 10) for h in heads]
    parents = np.array([index[p[:-1]] if len(p) > 1 else -1 for p in paths], np.int64)
    tokens = np.array([ranked[len(p) - 1][p[-1]] for p in paths], np.int64)
    drafter = None
    if keep_rows:
        drafter = np.stack([heads[0]] + [heads[min(len(p), len(heads) - 1)] for p in paths])
    return EngineTree(parents, tokens, drafter, _deepest_path(parents, rng))


def specinfer_tree(rng, V: int, min_nodes: int = 64, depth: int = 6, scale: float = 1.0,
                   keep_rows: bool = False) -> EngineTree:
    """SpecInfer's merged candidates: sequences of ``depth`` tokens drawn from the drafter rows (each slot's
    own), merged on shared prefixes, until the tree has ``min_nodes`` nodes."""
    parents, tokens, rows, child = [], [], [_drafter_row(rng, V, scale, peaks=3)], {}
    while len(parents) < min_nodes:
        slot = 0
        for _ in range(depth):
            x = int(np.argmax(np.log(rows[slot]) - np.log(rng.exponential(size=V))))   # a draw from the row
            if (slot, x) not in child:
                parents.append(slot - 1)
                tokens.append(x)
                child[(slot, x)] = len(parents)
                rows.append(_drafter_row(rng, V, scale, peaks=3))
            slot = child[(slot, x)]
    p = np.array(parents, np.int64)
    return EngineTree(p, np.array(tokens, np.int64), np.stack(rows) if keep_rows else None, _deepest_path(p, rng))


def chain_tree(rng, V: int, k: int, scale: float = 2.0, keep_rows: bool = False) -> EngineTree:
    """A chain of ``k`` drafts (``parents = [-1, 0, 1, …]``), each its slot's best token."""
    rows = [_drafter_row(rng, V, scale) for _ in range(k + 1)]
    tokens = np.array([int(_top(rows[s], 1)[0]) for s in range(k)], np.int64)
    p = np.arange(k, dtype=np.int64) - 1
    return EngineTree(p, tokens, np.stack(rows) if keep_rows else None, list(range(k)))


BUILDERS = {"eagle2": eagle2_tree, "medusa": medusa_tree, "specinfer": specinfer_tree}

__all__ = ["EngineTree", "eagle2_tree", "medusa_paths", "medusa_tree", "specinfer_tree", "chain_tree", "BUILDERS"]
