"""EAGLE-style tree drafting: top-k expansion of the most probable frontier, level by level.

At each of ``depth`` levels the proposer keeps the ``width`` frontier nodes of
highest path probability (the product of the drafter's probabilities along
the path; EAGLE-2's dynamic tree) and gives each its ``branch`` most probable
tokens as children (distinct, ties to the lowest id). The tree is returned in
SPEC §11.1's layout: ``parents [N]`` (-1: the root), ``token_ids [N]``, and —
since top-k siblings are deterministic — no draft rows: the tree is verified
as point proposals (``"rrs"`` with ``draft_probs=None``, or ``"sglang"`` at
thresholds 1), lossless for any drafter (SPEC §11.3). ``branch = 1`` and
``width = 1`` give the chain of greedy drafts.

>>> from specsim.engine.models import ToyLM
>>> prop = TreeProposer(ToyLM(6, order=2, seed=1), depth=2, branch=2, width=2)
>>> parents, ids = prop.propose_tree([0, 1], temperature=1.0)
>>> parents.tolist(), len(ids)
([-1, -1, 0, 0, 1, 1], 6)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specsim.engine.models import ToyLM
from specsim.engine.proposers.law import draft_law


class TreeProposer:
    """Top-k tree drafts from a toy drafter; ``depth`` levels, ``branch`` children, ``width`` expanded."""

    name = "tree"
    has_probs = False

    def __init__(self, draft: ToyLM, *, depth: int = 4, branch: int = 2, width: int = 2):
        if depth < 1 or branch < 1 or width < 1:
            raise ValueError(f"depth, branch, width: each must be >= 1, got {depth}, {branch}, {width}")
        if branch > draft.vocab_size:
            raise ValueError(f"branch: at most the vocabulary size {draft.vocab_size}, got {branch}")
        self.draft, self.depth, self.branch, self.width = draft, depth, branch, width
        self.vocab_size = draft.vocab_size

    @property
    def max_nodes(self) -> int:
        return self.branch + (self.depth - 1) * self.width * self.branch

    def propose_tree(self, context: Sequence[int], temperature: float,
                     max_depth: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(parents [N], token_ids [N])`` int64 for one request's ``context``; at most ``max_depth`` levels
        (a request near ``max_model_len`` drafts a shallower tree)."""
        depth = self.depth if max_depth is None else min(self.depth, max_depth)
        parents, ids = [], []
        frontier = [(-1, tuple(context), 1.0)]            # (node, path tokens, path probability)
        for _ in range(depth):
            children = []
            for node, path, prob in frontier:
                logits = self.draft.next_logits(list(path))
                row = draft_law(logits[None, :], np.array([temperature]))[0]
                for token in np.argsort(-row, kind="stable")[: self.branch]:
                    parents.append(node)
                    ids.append(int(token))
                    children.append((len(ids) - 1, path + (int(token),), prob * float(row[token])))
            frontier = sorted(children, key=lambda c: (-c[2], c[0]))[: self.width]
            frontier.sort(key=lambda c: c[0])              # expand in node order: parents stay earlier
        return np.array(parents, np.int64), np.array(ids, np.int64)


__all__ = ["TreeProposer"]
