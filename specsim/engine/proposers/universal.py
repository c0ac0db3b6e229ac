"""Universal draft (TLI, seed 001): a draft model over its own vocabulary, drafting for the target's.

Its context is the target text re-tokenised by the draft tokenizer (or target
ids mapped back, with a fallback); each draft's law is constrained to the
intersection and renormalised (``VocabMapping.constrain``), the token drawn
from it, and both the id and the law mapped to the target vocabulary — so
the verifier gets exactly the law the draft was drawn from (lossless).
Drafting is keyed like the engine's draft model: draft ``j`` of the round at
length ``L`` races its law against ``S(seed, L, DRAFT, j)`` (SPEC §5.2), so
proposals survive preemption.

>>> from specsim.engine.state import Request, SamplingParams
>>> from specsim.vocab import VocabMapping, random_tokenizer
>>> t_tok, d_tok = random_tokenizer("ab c", 5, seed=1), random_tokenizer("ab c", 7, seed=2, marker="▁")
>>> prop = UniversalDraftProposer(ToyLM(d_tok.vocab_size, seed=4), VocabMapping(t_tok, d_tok))
>>> (ids, rows), = prop.propose([Request("a", [0, 1, 2], SamplingParams(), seed=3)], np.array([3]))
>>> rows.shape == (3, t_tok.vocab_size), bool(np.allclose(rows.sum(axis=1), 1))
(True, True)
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specsim.engine.models import ToyLM
from specsim.engine.proposers.law import draft_law
from specsim.engine.rng import draft_exponentials, race
from specsim.engine.state import Request
from specsim.vocab.mapping import VocabMapping


def _row_law(logits: np.ndarray, temperature: float) -> np.ndarray:
    """One row's law ``[V]``; temperature 0 gives the one-hot argmax."""
    return draft_law(np.asarray(logits, np.float64)[None, :], np.array([temperature]))[0]


class UniversalDraftProposer:
    """TLI drafting across vocabularies; ``vocab_size`` is the target's.

    - ``draft``: a ``ToyLM`` over the draft vocabulary;
    - ``mapping``: ``VocabMapping(target_tokenizer, draft_tokenizer)``;
    - ``context``: ``"text"`` (re-tokenise the target text, exact) or ``"ids"``
      (map target ids, ``fallback`` for tokens outside the intersection —
      lossy context, lossless output);
    - ``use_probs``: False gives point proposals (greedy rows still drafted in
      the intersection).
    """

    name = "universal_draft"
    greedy = True                    # temperature 0: the argmax, as a one-hot row
    sampling = ("temperature",)         # what draft_probs applies (specsim.conformance.proposer.proposers)

    def __init__(self, draft: ToyLM, mapping: VocabMapping, *, context: str = "text", fallback: int | None = None,
                 use_probs: bool = True):
        if draft.vocab_size != mapping.draft_vocab_size:
            raise ValueError(f"draft: vocab_size {draft.vocab_size} != the mapping's draft vocabulary "
                             f"{mapping.draft_vocab_size}")
        if context not in ("text", "ids"):
            raise ValueError(f"context: must be 'text' or 'ids', got {context!r}")
        if context == "ids" and fallback is None:
            raise ValueError("fallback: required with context='ids' (the draft id for target tokens "
                             "outside the intersection)")
        self.draft, self.mapping, self.context, self.fallback = draft, mapping, context, fallback
        self.has_probs = use_probs
        self.vocab_size = mapping.target_vocab_size
        self.max_len = None   # the draft's own positions differ from the target's; checked per draft below

    def draft_context(self, request: Request) -> list[int]:
        if self.context == "text":
            return self.mapping.draft_context(request.tokens)
        return self.mapping.map_target_to_draft(request.tokens, self.fallback).tolist()

    def propose(self, requests: Sequence[Request], ks: np.ndarray) -> list:
        return [self._propose_one(r, int(k)) for r, k in zip(requests, ks)]

    def _propose_one(self, request: Request, k: int):
        context = self.draft_context(request)
        if not context or len(context) + k > self.draft.max_position:
            return None                     # the draft cannot place k more tokens: no drafts this round
        key = self.draft.key_of(context)
        temperature = float(request.params.temperature)
        ids, rows = np.zeros(k, np.int64), np.zeros((k, self.vocab_size))
        noise = None if temperature == 0 else draft_exponentials(       # [k, Vd]: column j keys draft j
            np.array([request.seed], np.uint64), np.array([request.num_tokens]), np.arange(k),
            self.mapping.draft_vocab_size)[0]
        for j in range(k):
            logits = self.draft.logits_at(np.array([key]), np.array([len(context) + j]))[0]
            if temperature == 0:            # greedy: argmax within the intersection
                constrained = _row_law(np.where(self.mapping.in_intersection, logits, -np.inf), 0.0)
            else:
                constrained = self.mapping.constrain(_row_law(logits, temperature))
            if temperature == 0:
                token = int(np.argmax(constrained))
            else:
                token = int(race(constrained[None, :], noise[j][None, :])[0])
            ids[j] = self.mapping.map_draft_to_target([token])[0]
            rows[j] = self.mapping.to_target(constrained)
            key = int(self.draft.roll(np.array([key]), np.array([token]))[0])
        return ids, (rows if self.has_probs else None)
