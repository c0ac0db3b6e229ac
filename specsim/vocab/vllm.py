"""Seed 001 against the real thing: vLLM 0.33.0's ``VocabMapping`` behind specsim's TLI mapping.

vLLM's ``vllm/v1/spec_decode/vocab_mapping.py`` (loaded from its wheel by
``devices.field.vllm_loader.load_vocab_mapping``, never copied) builds its id
maps from two Hugging Face-style tokenizers: ``get_vocab()``, the space
marker found by encoding ``" a"`` (``encode`` and ``convert_ids_to_tokens``),
and ``unk_token_id`` / ``eos_token_id`` for ids outside the intersection.
``TokenizerView`` gives a ``ToyTokenizer`` (toy or built from a real
vocabulary) that interface; ``VllmVocabMapping`` is specsim's ``VocabMapping``
with vLLM's ``draft_to_target``, ``target_to_draft`` and intersection, so
specsim's TLI law (``constrain``, ``to_target``) and the universal-draft
proposer run on vLLM's maps; ``differences`` says where the two mappings part.

The one difference by construction: vLLM normalises only a *leading* space
marker (``_normalize_token``), specsim every marker, so a piece with a marker
inside (``"aĠb"``, ``"ĠĠ"``) is matched by specsim and not by vLLM — a smaller
intersection (lower acceptance), never a different law.

>>> from specsim.vocab import random_tokenizer
>>> view = TokenizerView(random_tokenizer("ab ", 2, seed=0, marker="▁"))
>>> view.convert_ids_to_tokens(view.encode(" a", add_special_tokens=False)[0]), view.eos_token_id
('▁a', 5)
"""

from __future__ import annotations

import numpy as np

from specsim.vocab.mapping import VocabError, VocabMapping
from specsim.vocab.tokenizers import ToyTokenizer


class TokenizerView:
    """The Hugging Face tokenizer surface vLLM's ``VocabMapping`` reads, over a ``ToyTokenizer``."""

    def __init__(self, tokenizer: ToyTokenizer):
        self.tokenizer = tokenizer
        self.unk_token_id = tokenizer.specials.get("<unk>")
        self.eos_token_id = next((tokenizer.specials[s] for s in ("<eos>", "</s>") if s in tokenizer.specials), None)

    def get_vocab(self) -> dict[str, int]:
        return {piece: i for i, piece in enumerate(self.tokenizer.pieces)}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tokenizer.encode(text)

    def convert_ids_to_tokens(self, token_id: int) -> str:
        return self.tokenizer.pieces[int(token_id)]


class VllmVocabMapping(VocabMapping):
    """specsim's TLI mapping with vLLM's id maps (``vllm``: the vLLM ``VocabMapping`` object, on CPU).

    ``vocab_mapping_class``: vLLM's class (default: loaded from the pinned wheel)."""

    def __init__(self, target: ToyTokenizer, draft: ToyTokenizer, vocab_mapping_class=None):
        if vocab_mapping_class is None:
            from devices.field.vllm_loader import load_vocab_mapping
            vocab_mapping_class = load_vocab_mapping()
        self.target, self.draft = target, draft
        self.target_vocab_size, self.draft_vocab_size = target.vocab_size, draft.vocab_size
        self.vllm = vocab_mapping_class(TokenizerView(target), TokenizerView(draft), target.vocab_size,
                                        draft.vocab_size, "cpu")
        self.draft_to_target = self.vllm.draft_to_target_ids.numpy().astype(np.int64)
        self.target_to_draft = self.vllm.target_to_draft_ids.numpy().astype(np.int64)
        self.in_intersection = self.vllm.intersection_mask_draft.numpy().astype(bool)
        if not self.in_intersection.any():
            raise VocabError(f"vocabularies: vLLM's VocabMapping finds no shared token between the target "
                             f"({target.vocab_size} pieces) and the draft ({draft.vocab_size} pieces)")

    def constrain_logits(self, draft_logits: np.ndarray) -> np.ndarray:
        """vLLM's own constraint: ``draft_logits [..., Vd]`` with every token outside the intersection -inf."""
        import torch
        return self.vllm.constrain_draft_logits(torch.as_tensor(np.asarray(draft_logits, np.float64))).numpy()


def is_partial_bijection(mapping: VocabMapping) -> bool:
    """Each intersection draft id has one target id and maps back to itself (``to_target`` then scatters
    each drafted token's probability to exactly its own target id: what losslessness needs)."""
    d = np.flatnonzero(mapping.in_intersection)
    t = mapping.draft_to_target[d]
    return bool((t >= 0).all() and len(set(t.tolist())) == len(t) and (mapping.target_to_draft[t] == d).all())


def differences(ours: VocabMapping, theirs: VocabMapping) -> dict[str, list[int]]:
    """Draft ids where two mappings of one pair part: ``only_ours``, ``only_theirs`` (in one intersection), and
    ``disagree`` (both map it, to different target ids)."""
    a, b = ours.in_intersection, theirs.in_intersection
    both = a & b
    return {"only_ours": np.flatnonzero(a & ~b).tolist(), "only_theirs": np.flatnonzero(b & ~a).tolist(),
            "disagree": np.flatnonzero(both & (ours.draft_to_target != theirs.draft_to_target)).tolist()}


def marker_inside(piece: str) -> bool:
    """A space marker past the first character: specsim normalises it, vLLM (leading marker only) does not.

    >>> marker_inside("aĠb"), marker_inside("ĠĠ"), marker_inside("Ġa")
    (True, True, False)
    """
    return any(m in piece[1:] for m in ("Ġ", "▁"))


def first_token_law(mapping: VocabMapping, target_probs: np.ndarray, draft_probs: np.ndarray) -> np.ndarray:
    """The law of the first emitted token (SPEC §3: accept with min(1, t/d'), else the residual) for
    ``target_probs [Vt]`` and the draft's own ``draft_probs [Vd]`` drawn through the mapping: equals
    ``target_probs`` when the mapping is lossless."""
    d = mapping.to_target(draft_probs)
    accepted = np.minimum(target_probs, d)
    residual = np.maximum(target_probs - d, 0.0)
    rejected = 1.0 - accepted.sum()
    return accepted + (rejected * residual / residual.sum() if residual.sum() > 0 else 0.0)


__all__ = ["TokenizerView", "VllmVocabMapping", "differences", "first_token_law", "is_partial_bijection",
           "marker_inside"]
