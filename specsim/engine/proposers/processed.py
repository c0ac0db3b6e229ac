"""A draft model that applies its own sampling processors (temperature, top-k, top-p) before it drafts.

Each draft is drawn from the drafter's row after SPEC §2's pipeline
(``reference.target.target_rows``) with the request's ``temperature``,
``top_k`` and ``top_p``, by the keyed race of SPEC §5.2, and that same row is
returned as ``draft_probs``; greedy requests draft the argmax (one-hot rows).
The two laws are two methods, ``sampled_law`` and ``reported_law``, so a
mutant proposer (``specsim.mutants.proposers``) changes exactly one side —
the way the field's bugs did (docs/bugs.md #41, #44).

>>> from specsim.engine.models import ToyLM
>>> from specsim.engine.state import Request, SamplingParams
>>> prop = ProcessedDraftProposer(ToyLM(6, order=2, seed=1))
>>> (ids, rows), = prop.propose([Request("a", [0, 1], SamplingParams(top_k=2), seed=3)], np.array([2]))
>>> ids.shape, rows.shape, (rows > 0).sum(axis=1).tolist()      # top-k 2: two tokens per row
((2,), (2, 6), [2, 2])
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from reference.target import target_rows
from specsim.engine.models import ToyLM
from specsim.engine.rng import draft_exponentials, race
from specsim.engine.state import Request


def processed_law(logits: np.ndarray, temperature: np.ndarray, top_k: np.ndarray, top_p: np.ndarray) -> np.ndarray:
    """SPEC §2 rows ``[B, V]`` from draft logits ``[B, V]`` and per-row parameters ``[B]``; T = 0 → one-hot argmax.

    >>> processed_law(np.array([[0.0, 1.0, 3.0]]), np.array([0.0]), np.array([0]), np.array([1.0])).tolist()
    [[0.0, 0.0, 1.0]]
    """
    greedy = temperature == 0
    rows = np.zeros(logits.shape)
    if (~greedy).any():
        rows[~greedy] = target_rows(logits[~greedy], temperature[~greedy], top_k[~greedy], top_p[~greedy])[0]
    rows[np.flatnonzero(greedy), np.argmax(logits[greedy], axis=1)] = 1.0
    return rows


class ProcessedDraftProposer:
    """Autoregressive drafts from a toy drafter, through temperature, top-k and top-p (module docstring)."""

    name = "processed_draft"
    has_probs = True
    greedy = True                                   # temperature 0: the argmax, reported as a one-hot row
    sampling = ("temperature", "top_k", "top_p")    # what the reported rows apply (specsim.conformance.proposer.proposers)
    max_len = None

    def __init__(self, draft: ToyLM):
        self.draft = draft
        self.vocab_size = draft.vocab_size

    def sampled_law(self, logits: np.ndarray, temperature, top_k, top_p) -> np.ndarray:
        """The rows ``[B, V]`` the drafts are drawn from."""
        return processed_law(logits, temperature, top_k, top_p)

    def reported_law(self, logits: np.ndarray, temperature, top_k, top_p) -> np.ndarray:
        """The rows ``[B, V]`` returned as ``draft_probs`` (here: the same rows)."""
        return processed_law(logits, temperature, top_k, top_p)

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list:
        ks = np.asarray(ks, np.int64)
        n, k_max = len(requests), int(np.max(ks, initial=0))
        keys = np.array([self.draft.key_of(r.tokens) for r in requests], np.int64)
        length = np.array([r.num_tokens for r in requests], np.int64)
        params = [np.array([getattr(r.params, p) for r in requests]) for p in ("temperature", "top_k", "top_p")]
        noise = draft_exponentials(np.array([r.seed for r in requests], np.uint64), length, np.arange(k_max),
                                   self.vocab_size)                                  # [n, k_max, V]
        ids, rows = np.zeros((n, k_max), np.int64), np.zeros((n, k_max, self.vocab_size))
        for j in range(k_max):
            live = np.flatnonzero(ks > j)
            logits = self.draft.logits_at(keys[live], length[live] + j)
            live_params = [p[live] for p in params]
            ids[live, j] = race(self.sampled_law(logits, *live_params), noise[live, j])
            rows[live, j] = self.reported_law(logits, *live_params)
            keys[live] = self.draft.roll(keys[live], ids[live, j])
        return [(ids[b, :ks[b]], rows[b, :ks[b]]) for b in range(n)]


__all__ = ["ProcessedDraftProposer", "processed_law"]
