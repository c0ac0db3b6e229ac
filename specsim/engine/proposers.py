"""Proposers: draft model, n-gram prompt lookup, EAGLE-style; and seed 004's Top1 merge.

A proposer gets the requests to draft for and each one's wanted length
``k_i`` and returns, per request, ``(token_ids [k'], draft_probs [k', V] or
None)`` with ``k' ≤ k_i``, or None when it has nothing ("a drafter returning
nothing for some requests").

``top1_propose`` wraps any proposer with vLLM V0's Top1Proposer semantics:

* a request whose sequence length ``L`` plus ``k_i`` would exceed the
  drafter's ``max_len`` goes **without drafts** that step (not truncated).
  Choice: drafts occupy positions ``L .. L+k-1``, so ``L + k == max_len``
  ("fits exactly") **does** speculate; vLLM V0 used a strict ``<`` and
  skipped it (research/peers.md §7.2);
* proposals are merged into ``[batch, k_max]`` ids padded with the
  placeholder ``-1`` and ``[batch, k_max, V]`` probs padded with zero rows,
  plus ``lens [batch]``.

>>> from specsim.engine.models import ToyLM
>>> from specsim.engine.state import Request, SamplingParams
>>> target = ToyLM(4, order=2, seed=0)
>>> prop = DraftModelProposer(target.mixed(0.5, seed=1, max_position=6))
>>> reqs = [Request("a", [1, 2], SamplingParams(), seed=1), Request("b", [1, 2, 3, 0], SamplingParams(), seed=2)]
>>> ids, probs, lens = top1_propose(prop, reqs, np.array([2, 3]))
>>> lens.tolist(), ids[1].tolist(), probs.shape      # b: 4 + 3 > 6, no drafts
([2, 0], [-1, -1, -1], (2, 3, 4))
"""

from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID
from specsim.engine.models import ToyLM
from specsim.engine.rng import draft_exponentials, race
from specsim.engine.state import Request

Proposal = "tuple[np.ndarray, np.ndarray | None] | None"


class Proposer(Protocol):
    name: str
    has_probs: bool          # proposals carry draft_probs (full rejection sampling) or not (point)
    max_len: int | None      # the drafter's largest sequence length (Top1 rule); None: unlimited
    vocab_size: int

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list: ...


def top1_propose(proposer: Proposer, requests: Sequence[Request], ks: np.ndarray):
    """Seed 004: split by length, draft the rest, merge → ``(ids [B, k_max], probs [B, k_max, V] | None, lens [B])``."""
    batch, k_max = len(requests), int(np.max(ks, initial=0))
    lens = np.zeros(batch, np.int64)
    fits = [i for i, (r, k) in enumerate(zip(requests, ks))
            if k > 0 and (proposer.max_len is None or r.num_tokens + int(k) <= proposer.max_len)]
    outputs = proposer.propose([requests[i] for i in fits], np.asarray(ks)[fits]) if fits else []
    ids = np.full((batch, k_max), PLACEHOLDER_TOKEN_ID, np.int64)
    probs = np.zeros((batch, k_max, proposer.vocab_size)) if proposer.has_probs else None
    for i, out in zip(fits, outputs):
        if out is None or len(out[0]) == 0:
            continue  # the drafter returned nothing: zero drafts this step
        tok, rows = out
        lens[i] = len(tok)
        ids[i, :lens[i]] = tok
        if probs is not None:
            probs[i, :lens[i]] = rows
    return ids, probs, lens


def _softmax(logits: np.ndarray, temperature: np.ndarray) -> np.ndarray:
    """Rows ``[B, V]`` at per-row ``temperature`` ``[B]``; temperature 0 → one-hot argmax."""
    greedy = temperature == 0
    z = logits / np.where(greedy, 1.0, temperature)[:, None]
    z = np.exp(z - z.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    if greedy.any():
        probs[greedy] = 0.0
        probs[np.flatnonzero(greedy), np.argmax(logits[greedy], axis=1)] = 1.0
    return probs


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
    """

    name = "draft_model"

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
        for j in range(k_max):
            live = np.flatnonzero((ks > j) & valid)
            logits = self.draft.logits_at(keys[live], length[live] + j)
            probs = _softmax(logits, temperature[live]) if self.has_probs or sampled.any() else None
            tok = np.argmax(logits, axis=1)
            race_rows = np.flatnonzero(sampled[live])
            if len(race_rows):
                tok[race_rows] = race(probs[race_rows], noise[noise_row[live[race_rows]], j])
            ids[live, j] = tok
            if rows is not None:
                rows[live, j] = probs
            keys[live] = self.draft.roll(keys[live], tok)
        return [None if not valid[b] else (ids[b, :ks[b]], None if rows is None else rows[b, :ks[b]])
                for b in range(len(requests))]


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


class NgramProposer:
    """Prompt lookup: find the latest earlier occurrence of the last ``n`` tokens
    (``n`` from ``max_n`` down to ``min_n``) and propose what followed it.

    Point proposals; may return fewer than ``k`` tokens, or nothing.

    >>> from specsim.engine.state import Request, SamplingParams
    >>> r = Request("a", [5, 6, 7, 8, 5, 6], SamplingParams(), seed=0)
    >>> NgramProposer(vocab_size=9).propose([r], np.array([3]))[0][0].tolist()
    [7, 8, 5]
    """

    name, has_probs, max_len = "ngram", False, None

    def __init__(self, vocab_size: int, min_n: int = 1, max_n: int = 3):
        if not 1 <= min_n <= max_n:
            raise ValueError(f"min_n, max_n: need 1 <= min_n <= max_n, got {min_n}, {max_n}")
        self.vocab_size, self.min_n, self.max_n = vocab_size, min_n, max_n

    def _lookup(self, tokens: list[int], k: int) -> np.ndarray | None:
        """One numpy pass: for every earlier end position, the length of its match with the suffix."""
        seq, m = np.asarray(tokens, np.int64), self.max_n
        if len(seq) < 2:
            return None
        padded = np.concatenate([np.full(m, -1), seq])                  # window pads: -1
        windows = np.lib.stride_tricks.sliding_window_view(padded, m)[1:len(seq)]  # [L-1, m]: n-grams ending at i
        suffix = np.concatenate([np.full(m, -2), seq])[-m:]             # suffix pads: -2, never equal to -1
        run = np.cumprod((windows == suffix)[:, ::-1], axis=1).sum(axis=1)   # trailing match length per end i
        n = int(run.max())
        if n < self.min_n:
            return None
        end = int(np.flatnonzero(run >= n)[-1])                         # the latest longest match
        return seq[end + 1:end + 1 + k]

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list:
        out = []
        for r, k in zip(requests, ks):
            found = self._lookup(r.tokens, int(k))
            out.append(None if found is None else (found, None))
        return out
