"""Token-Level Intersection (TLI; Timor et al., ICML 2025): draft in T ∩ D, verify in T.

The draft model's law ``draft_probs [Vd]`` is restricted to the tokens whose
normalised strings exist in both vocabularies and renormalised,

    d'(x) = d(x) / Σ_{y ∈ T∩D} d(y)   for x ∈ T∩D,   0 elsewhere,

then laid out over the target vocabulary ``[Vt]``. Verification is the
unchanged rejection sampling of SPEC §3 on target ids, so the output law is
the target's (lossless: d' is a proper law over target ids); the acceptance
probability is ``Σ_x min(t(x), d'(x))`` (Timor et al., arXiv:2502.05202).

The draft's *context* (target ids mapped back to draft ids) may be lossy —
a target token outside the intersection has no draft id. That changes only
acceptance, never the output law; ``map_target_to_draft`` takes a fallback
for it, as vLLM's ``VocabMapping`` maps to ``unk``.

>>> from specsim.vocab.tokenizers import ToyTokenizer
>>> target = ToyTokenizer(["a", "b", "Ġ", "Ġa"], marker="Ġ")
>>> draft = ToyTokenizer(["▁a", "c", "a"], marker="▁")
>>> m = VocabMapping(target, draft)
>>> m.draft_to_target.tolist(), m.target_to_draft.tolist()
([3, -1, 0], [2, -1, -1, 0])
>>> m.to_target(np.array([0.5, 0.25, 0.25])).round(4).tolist()    # 'c' dropped, renormalised, mapped
[0.3333, 0.0, 0.0, 0.6667]
"""

from __future__ import annotations

import numpy as np

from specsim.vocab.tokenizers import ToyTokenizer, is_special


class VocabError(ValueError):
    """A vocabulary pair TLI cannot serve, or an id/law that breaks the mapping; the message says which."""


class VocabMapping:
    """Id maps between a ``target`` and a ``draft`` tokenizer, by normalised string.

    - ``draft_to_target [Vd]`` int64: the target id of each draft token, ``-1`` outside the intersection;
    - ``target_to_draft [Vt]`` int64: the reverse;
    - ``in_intersection [Vd]`` bool. Special tokens (``<eos>``) match by exact name.

    Raises ``VocabError`` if the intersection is empty.
    """

    def __init__(self, target: ToyTokenizer, draft: ToyTokenizer):
        self.target, self.draft = target, draft
        self.target_vocab_size, self.draft_vocab_size = target.vocab_size, draft.vocab_size
        self.draft_to_target = np.full(draft.vocab_size, -1, np.int64)
        self.target_to_draft = np.full(target.vocab_size, -1, np.int64)
        for d_id, piece in enumerate(draft.pieces):
            t_id = target.specials.get(piece) if is_special(piece) else target.by_text.get(draft.texts[d_id])
            if t_id is not None:
                self.draft_to_target[d_id] = t_id
                self.target_to_draft[t_id] = d_id
        self.in_intersection = self.draft_to_target >= 0
        if not self.in_intersection.any():
            raise VocabError(f"vocabularies: the target ({target.vocab_size} pieces, marker {target.marker!r}) and "
                             f"draft ({draft.vocab_size} pieces, marker {draft.marker!r}) share no token after "
                             "space-marker normalisation; TLI needs a non-empty intersection")

    @property
    def intersection_size(self) -> int:
        return int(self.in_intersection.sum())

    # -- laws -----------------------------------------------------------------
    def constrain(self, draft_probs: np.ndarray) -> np.ndarray:
        """``draft_probs [..., Vd]`` → the law restricted to the intersection and renormalised ``[..., Vd]``.

        Raises ``VocabError`` for a wrong last dimension, a negative or
        non-finite entry, or a row with no mass on the intersection (it cannot
        be renormalised: the drafter must not draft for it).
        """
        probs = np.asarray(draft_probs, np.float64)
        if probs.ndim < 1 or probs.shape[-1] != self.draft_vocab_size:
            raise VocabError(f"draft_probs: last dimension must be the draft vocabulary size "
                             f"{self.draft_vocab_size}, got shape {probs.shape}")
        if not np.isfinite(probs).all() or (probs < 0).any():
            raise VocabError("draft_probs: entries must be finite and >= 0")
        kept = np.where(self.in_intersection, probs, 0.0)
        mass = kept.sum(axis=-1, keepdims=True)
        if (mass <= 0).any():
            row = int(np.flatnonzero(mass.reshape(-1) <= 0)[0])
            raise VocabError(f"draft_probs: row {row} has no mass on the {self.intersection_size}-token "
                             "intersection; it cannot be renormalised")
        return kept / mass

    def to_target(self, draft_probs: np.ndarray) -> np.ndarray:
        """``draft_probs [..., Vd]`` → the constrained law over target ids ``[..., Vt]``."""
        constrained = self.constrain(draft_probs)
        out = np.zeros(constrained.shape[:-1] + (self.target_vocab_size,))
        out[..., self.draft_to_target[self.in_intersection]] = constrained[..., self.in_intersection]
        return out

    def acceptance_probability(self, target_probs: np.ndarray, draft_probs: np.ndarray) -> float:
        """``Σ_x min(t(x), d'(x))`` for ``target_probs [Vt]`` and the draft's ``draft_probs [Vd]``."""
        return float(np.minimum(np.asarray(target_probs, np.float64), self.to_target(draft_probs)).sum())

    # -- ids ------------------------------------------------------------------
    def map_draft_to_target(self, draft_ids) -> np.ndarray:
        """Drafted ids ``[n]`` (draft vocabulary) → target ids ``[n]``.

        Raises ``VocabError`` for an id outside ``[0, Vd)`` or outside the
        intersection (TLI never drafts one: it would have no target id).
        """
        ids = np.asarray(draft_ids, np.int64)
        bad = (ids < 0) | (ids >= self.draft_vocab_size)
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(-1))[0])
            raise VocabError(f"draft_ids: entry {i} is {int(ids.reshape(-1)[i])}, outside the draft "
                             f"vocabulary [0, {self.draft_vocab_size})")
        mapped = self.draft_to_target[ids]
        if (mapped < 0).any():
            i = int(np.flatnonzero(mapped.reshape(-1) < 0)[0])
            d = int(ids.reshape(-1)[i])
            raise VocabError(f"draft_ids: entry {i} is draft token {d} ({self.draft.pieces[d]!r}), which is "
                             "not in the intersection: TLI drafts only tokens both vocabularies spell")
        return mapped

    def map_target_to_draft(self, target_ids, fallback: int | None = None) -> np.ndarray:
        """Target ids ``[n]`` → draft ids ``[n]`` (the draft's context).

        A target token outside the intersection becomes ``fallback`` (a draft
        ``unk``/``eos`` id), or raises ``VocabError`` when ``fallback`` is None.
        """
        ids = np.asarray(target_ids, np.int64)
        bad = (ids < 0) | (ids >= self.target_vocab_size)
        if bad.any():
            i = int(np.flatnonzero(bad.reshape(-1))[0])
            raise VocabError(f"target_ids: entry {i} is {int(ids.reshape(-1)[i])}, outside the target "
                             f"vocabulary [0, {self.target_vocab_size})")
        mapped = self.target_to_draft[ids]
        missing = mapped < 0
        if missing.any():
            if fallback is None:
                i = int(np.flatnonzero(missing.reshape(-1))[0])
                t = int(ids.reshape(-1)[i])
                raise VocabError(f"target_ids: entry {i} is target token {t} ({self.target.pieces[t]!r}), "
                                 "which has no draft id; pass a fallback")
            if not 0 <= fallback < self.draft_vocab_size:
                raise VocabError(f"fallback: {fallback} is outside the draft vocabulary [0, {self.draft_vocab_size})")
            mapped = np.where(missing, fallback, mapped)
        return mapped

    def draft_context(self, target_ids) -> list[int]:
        """The draft's context for a target sequence: its text re-tokenised by the draft tokenizer
        (exact, unlike id mapping, whenever the draft's alphabet covers the text)."""
        return self.draft.encode(self.target.decode(target_ids))


__all__ = ["VocabMapping", "VocabError"]
