"""Draft-model and EAGLE-style proposers: autoregressive drafts from a toy drafter, keyed per SPEC §5.2.

>>> from specsim.engine.state import Request, SamplingParams
>>> target = ToyLM(4, order=2, seed=0)
>>> prop = DraftModelProposer(target.mixed(0.5, seed=1))
>>> (ids, rows), = prop.propose([Request("a", [1, 2], SamplingParams(), seed=1)], np.array([3]))
>>> ids.shape, rows.shape
((3,), (3, 4))
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specsim.engine.models import ToyLM
from specsim.engine.proposers.law import draft_law
from specsim.engine.rng import draft_exponentials, race
from specsim.engine.sampling import processed_row
from specsim.engine.state import Request


class DraftModelProposer:
    """Drafts autoregressively from a toy draft model, keyed per SPEC §5.2.

    With ``use_probs`` (default) each draft is sampled from
    ``softmax(draft_logits / T)`` by the keyed race and that row is returned as
    ``draft_probs``. The kill switch ``use_probs=False`` (seed 003) returns
    point proposals: the argmax of the draft logits (vLLM V1's behaviour), or,
    with ``point_drafts="sample"``, the same keyed sample without its row.
    The toy drafter ignores top-k/top-p: ``draft_probs`` is exactly what it
    sampled from, which is all losslessness needs. Greedy requests draft the
    argmax (one-hot rows).

    A request with SPEC §12 parameters (``Request.sampler``) drafts from the
    drafter's row through the same processors the target's row gets (bans,
    penalties and bias over its output plus the drafts before, its grammar's
    mask along its own drafts on a fork of the matcher, min_p, temperature;
    still no top-k/top-p), and reports that row: its drafts are ones the target
    can keep, so acceptance stays sane. Losslessness does not rest on it (an
    n-gram proposer's drafts ignore every processor; the device rejects what
    the target's row bans).
    """

    name = "draft_model"
    greedy = True                    # temperature 0: the argmax, as a one-hot row
    sampling = ("temperature",)         # what draft_probs applies (specsim.conformance.proposer.proposers)

    def __init__(self, draft: ToyLM, *, use_probs: bool = True, point_drafts: str = "argmax"):
        if point_drafts not in ("argmax", "sample"):
            raise ValueError(f"point_drafts: must be 'argmax' or 'sample', got {point_drafts!r}")
        self.draft, self.has_probs, self.point_drafts = draft, use_probs, point_drafts
        self.max_len = draft.max_position if draft.max_position < (1 << 30) else None
        self.vocab_size = draft.vocab_size

    def _start_keys(self, requests: Sequence[Request]) -> np.ndarray:
        return np.array([self.draft.key_of(r.tokens) for r in requests], np.int64)

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list:
        keys = self._start_keys(requests)
        valid = keys >= 0
        seeds = np.array([r.seed for r in requests], np.uint64)
        length = np.array([r.num_tokens for r in requests], np.int64)
        temperature = np.array([r.params.temperature for r in requests], np.float64)
        sampled = (temperature > 0) & (self.has_probs or self.point_drafts == "sample")
        k_max = int(np.max(ks))
        # The noise of every draft column at once: S(seed, L, DRAFT, j) does not depend on earlier drafts.
        racing = np.flatnonzero(sampled & valid)
        noise = draft_exponentials(seeds[racing], length[racing], np.arange(k_max), self.vocab_size)
        noise_row = np.full(len(requests), -1)
        noise_row[racing] = np.arange(len(racing))
        ids = np.zeros((len(requests), k_max), np.int64)
        rows = np.zeros((len(requests), k_max, self.vocab_size)) if self.has_probs else None
        forks = [None if r.sampler is None or r.sampler.grammar is None else r.sampler.grammar.fork()
                 for r in requests]   # each §12 request's matcher, walked along its own drafts
        for j in range(k_max):
            live = np.flatnonzero((ks > j) & valid)
            logits = self.draft.logits_at(keys[live], length[live] + j)
            probs = draft_law(logits, temperature[live]) if self.has_probs or sampled.any() else None
            tok = np.argmax(logits, axis=1)
            race_rows = np.flatnonzero(sampled[live])
            if len(race_rows):
                tok[race_rows] = race(probs[race_rows], noise[noise_row[live[race_rows]], j])
            for n, b in enumerate(live):
                if requests[b].sampler is not None:
                    row, tok[n] = self._processed_draft(requests[b], logits[n], ids[b, :j].tolist(), forks[b],
                                                        noise[noise_row[b], j] if sampled[b] else None)
                    if probs is not None:
                        probs[n] = row
            ids[live, j] = tok
            if rows is not None:
                rows[live, j] = probs
            keys[live] = self.draft.roll(keys[live], tok)
        return [None if not valid[b] else (ids[b, :ks[b]], None if rows is None else rows[b, :ks[b]])
                for b in range(len(requests))]

    @staticmethod
    def _processed_draft(request: Request, logits: np.ndarray, drafts: list, fork, noise: np.ndarray | None):
        """A §12 request's draft row ``[V]`` (the drafter's ``logits`` ``[V]`` through its processors after
        its output and ``drafts``, its grammar ``fork``'s mask) and its token: the keyed race on that row
        (``noise`` ``[V]``), or the processed argmax (greedy, or a point drafter's argmax)."""
        mask = None if fork is None else fork.mask()
        context = dict(prompt=request.prompt, output=request.output + drafts, mask=mask, top_k=0, top_p=1.0)
        row = processed_row(request.sampler, logits, **context)
        if noise is not None:
            token = int(race(row[None], noise[None])[0])
        else:
            token = int(np.argmax(processed_row(request.sampler, logits, temperature=0.0, **context)))
        if fork is not None:
            fork.advance([token])
        return row, token


class EagleProposer(DraftModelProposer):
    """EAGLE-style: the drafter's context is the target's hidden feature, not the tokens.

    The feature of the row that produced the last token (coordinate 0: that
    row's context key) is advanced by the last token to give the key of the
    current context; from there the head drafts like a draft model. A request
    with no feature (never verified) gets no proposal.
    """

    name = "eagle"

    def __init__(self, head: ToyLM, *, use_probs: bool = True, point_drafts: str = "argmax"):
        super().__init__(head, use_probs=use_probs, point_drafts=point_drafts)

    def _start_keys(self, requests: Sequence[Request]) -> np.ndarray:
        keys = np.full(len(requests), -1, np.int64)
        for b, r in enumerate(requests):
            if r.hidden is not None and r.output:
                keys[b] = self.draft.roll(np.array([int(r.hidden[0])]), np.array([r.tokens[-1]]))[0]
        return keys
