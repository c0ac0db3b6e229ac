"""Parallel token drafting (PTD, seed 002): K drafts from ONE pass with mask tokens.

Draft ``j``'s law is the drafter's row after the context and ``j`` mask tokens
(``reference.ptd.ptd_draft_rows``), independent of the drafts before it.
Acceptance falls with ``j``; the engine's per-position ``acc_counts`` show it
(seed 002's table). Drafts are keyed per SPEC §5.2 like the draft model's.

>>> from specsim.engine.state import Request, SamplingParams
>>> prop = PtdProposer(ToyLM(5, order=2, seed=1))
>>> (ids, rows), = prop.propose([Request("a", [0, 1], SamplingParams(), seed=3)], np.array([2]))
>>> ids.shape, rows.shape
((2,), (2, 5))
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specsim.engine.models import ToyLM
from specsim.engine.proposers.law import draft_law
from specsim.engine.rng import draft_exponentials, race
from specsim.engine.state import Request


class PtdProposer:
    """Parallel token drafting: K drafts from one pass with ``mask`` tokens.

    - ``draft``: a ``ToyLM`` over the target vocabulary; the mask token is its
      pad digit ``V`` (never a real token), so the row after ``j`` masks is
      ``table[key(context + [mask]·j)]``;
    - ``use_probs``: False gives point proposals (argmax of each row).
    """

    name = "ptd"
    greedy = True                    # temperature 0: the argmax, as a one-hot row
    sampling = ("temperature",)         # what draft_probs applies (specsim.conformance.proposer.proposers)

    def __init__(self, draft: ToyLM, *, use_probs: bool = True):
        self.draft, self.has_probs = draft, use_probs
        self.vocab_size = draft.vocab_size
        self.mask_token_id = draft.vocab_size
        self.max_len = draft.max_position if draft.max_position < (1 << 30) else None

    def rows(self, request: Request, k: int) -> np.ndarray:
        """The ``k`` draft laws ``[k, V]`` of one pass (``reference.ptd.ptd_draft_rows`` semantics)."""
        key = self.draft.key_of(request.tokens)
        length = request.num_tokens
        out = np.zeros((k, self.vocab_size))
        temperature = float(request.params.temperature)
        for j in range(k):
            out[j] = draft_law(self.draft.logits_at(np.array([key]), np.array([length + j])), np.array([temperature]))[0]
            key = int(self.draft.roll(np.array([key]), np.array([self.mask_token_id]))[0])
        return out

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list:
        out = []
        for request, k in zip(requests, ks):
            k = int(k)
            rows = self.rows(request, k)
            if request.params.temperature == 0 or not self.has_probs:
                ids = np.argmax(rows, axis=1).astype(np.int64)
            else:
                noise = draft_exponentials(np.array([request.seed], np.uint64), np.array([request.num_tokens]),
                                           np.arange(k), self.vocab_size)[0]          # [k, V]
                ids = race(rows, noise).astype(np.int64)       # the rows are independent: one race each
            out.append((ids, rows if self.has_probs else None))
        return out
