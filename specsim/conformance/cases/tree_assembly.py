"""Tree batches assembled from engine-shaped trees, optionally steered down a path by their injected coins:
the tree size checks' batches and the declared limits' deep trees share them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import Noise, TreeBatch
from reference.target import target_probs
from reference.tree import children_of
from specsim.testing.engine_trees import EngineTree

BOOST = 2.0
"""A steered path's token gets logit ``log V + BOOST`` above the row's: about 0.8 of the target mass."""


@dataclass
class Request:
    tree: EngineTree
    greedy: bool
    steered: bool


def logits_of(rng, request: Request, V: int) -> np.ndarray:
    """``[N + 1, V]`` target logits: N(0, 1.5²), the steered path's tokens lifted at their parents' slots."""
    t = request.tree
    logits = rng.normal(0.0, 1.5, (len(t.parents) + 1, V))
    if request.steered or request.greedy:
        for node in t.path:
            slot = int(t.parents[node]) + 1
            logits[slot, t.tokens[node]] = logits[slot].max() + np.log(V) + BOOST
    return logits


def coins_of(rng, request: Request, logits: np.ndarray, scheme: str) -> np.ndarray:
    """``[N]`` coins: uniform, or steered down the path (rrs: path nodes' coins below 0.05, their earlier
    siblings' above 0.95; sglang: each level's coin inside its path sibling's interval of the running sum)."""
    t = request.tree
    u = rng.random(len(t.parents))
    if not request.steered:
        return u
    kids = children_of(t.parents.tolist())
    for node in t.path:
        slot = int(t.parents[node]) + 1
        siblings = kids[slot]
        earlier = siblings[:siblings.index(node)]
        if scheme == "rrs":
            u[node] = rng.uniform(0.0, 0.05)
            u[earlier] = rng.uniform(0.95, 1.0, len(earlier))
        else:
            row = target_probs(logits[slot], 1.0)
            below = float(sum(row[t.tokens[n]] for n in earlier))
            here = below + float(row[t.tokens[node]])
            u[siblings[0]] = min(below + (here - below) * rng.uniform(0.2, 0.8), 1.0 - 1e-9)
    return u


def assemble(rng, requests: list[Request], V: int, scheme: str, drafting: str, dtype: str) -> tuple[TreeBatch, Noise]:
    """The requests as one batch and its injected noise (seeds and positions for keyed noise too)."""
    logits = [logits_of(rng, r, V) for r in requests]
    coins = [coins_of(rng, r, x, scheme) for r, x in zip(requests, logits)]
    rows = None if drafting == "point" else np.concatenate(
        [r.tree.draft_rows(drafting) if len(r.tree.parents) else np.zeros((0, V)) for r in requests])
    n = len(requests)
    batch = TreeBatch(
        num_nodes=np.array([len(r.tree.parents) for r in requests], np.int64),
        parents=np.concatenate([r.tree.parents for r in requests]).astype(np.int64),
        draft_token_ids=np.concatenate([r.tree.tokens for r in requests]).astype(np.int64),
        draft_probs=None if rows is None else rows.astype(dtype), target_logits=np.concatenate(logits).astype(dtype),
        temperature=np.array([0.0 if r.greedy else 1.0 for r in requests]), top_k=np.zeros(n, np.int64),
        top_p=np.ones(n), seeds=rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1),
        positions=rng.integers(0, 4096, n).astype(np.int64), scheme=scheme)
    return batch, Noise(np.concatenate(coins), rng.exponential(size=(n, V)) + 1e-300)
