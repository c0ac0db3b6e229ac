"""The proposer contract and seed 004's Top1 merge.

A proposer gets the requests to draft for and each one's wanted length
``k_i`` and returns, per request, ``(token_ids [k'], draft_probs [k', V] or
None)`` with ``k' ≤ k_i``, or None when it has nothing ("a drafter returning
nothing for some requests"). Two optional attributes declare what a checked
proposer is (``specsim proposer``, ``specsim.conformance.proposer.proposers``): ``greedy``
(temperature 0 drafts the argmax of its q) and ``sampling`` (which of
``"temperature"``, ``"top_k"``, ``"top_p"`` its ``draft_probs`` apply); absent,
they declare nothing.

``top1_propose`` wraps any proposer with vLLM V0's Top1Proposer semantics:

* a request whose sequence length ``L`` plus ``k_i`` would exceed the
  drafter's ``max_len`` goes **without drafts** that step (not truncated).
  Choice: drafts occupy positions ``L .. L+k-1``, so ``L + k == max_len``
  ("fits exactly") **does** speculate; vLLM V0 used a strict ``<`` and
  skipped it (vLLM v0.6's ``Top1Proposer``,
  https://github.com/vllm-project/vllm/blob/v0.6.0/vllm/spec_decode/top1_proposer.py);
* proposals are merged into ``[batch, k_max]`` ids padded with the
  placeholder ``-1`` and ``[batch, k_max, V]`` probs padded with zero rows,
  plus ``lens [batch]``.

>>> from specsim.engine.models import ToyLM
>>> from specsim.engine.state import Request, SamplingParams
>>> target = ToyLM(4, order=2, seed=0)
>>> from specsim.engine.proposers.draft_model import DraftModelProposer
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
