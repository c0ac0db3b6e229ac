"""Toy tokenizers whose vocabularies differ the way real ones do.

Real pairs (Llama-3 target, Qwen draft) spell the same text with different
pieces, and mark a leading space differently: byte-level BPE writes ``"Ġ"``
(GPT-2, Llama-3, Qwen), SentencePiece writes ``"▁"`` (Llama-2, T5). A piece's
**normalised string** replaces the marker by a space; two vocabularies share a
token when their normalised strings are equal (the intersection TLI drafts in).

A ``ToyTokenizer`` encodes by greedy longest match over the normalised pieces
(maximal munch): deterministic, every string over its alphabet is encodable
(all single characters are pieces), and — like BPE — not injective across
boundaries: ``encode(a) + encode(b)`` may differ from ``encode(a + b)``.

>>> gpt = ToyTokenizer(["a", "b", "Ġ", "ab", "Ġa", "<eos>"], marker="Ġ")
>>> sp = ToyTokenizer(["a", "b", "▁", "▁a", "ba", "<eos>"], marker="▁")
>>> gpt.encode(" ab"), gpt.decode(gpt.encode(" ab"))
([4, 1], ' ab')
>>> sp.encode(" ab"), sp.normalised(3)
([3, 1], ' a')
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

SPACE_MARKERS = ("Ġ", "▁")
"""Leading-space markers of byte-level BPE (``Ġ``, U+0120) and SentencePiece (``▁``, U+2581)."""


def normalise(piece: str) -> str:
    """A piece's text: every space marker becomes a space.

    >>> normalise("Ġthe"), normalise("▁the"), normalise("the")
    (' the', ' the', 'the')
    """
    for marker in SPACE_MARKERS:
        piece = piece.replace(marker, " ")
    return piece


def is_special(piece: str) -> bool:
    """``<eos>``-style control tokens: never produced by ``encode``, shared only by exact name."""
    return len(piece) > 2 and piece.startswith("<") and piece.endswith(">")


class TokenizerError(ValueError):
    """A vocabulary or a text the tokenizer cannot handle; the message says which piece or character."""


class ToyTokenizer:
    """A vocabulary of pieces ``[V]`` (raw strings, markers included); id = index.

    - ``marker``: the space marker this vocabulary's pieces use (``"Ġ"`` or ``"▁"``).
    - ``encode(text)``: greedy longest match over normalised pieces; a character
      with no single-character piece raises ``TokenizerError`` naming it.
    - ``decode(ids)``: the concatenated normalised pieces (specials decode to "").
    """

    def __init__(self, pieces: Sequence[str], marker: str = "Ġ"):
        if marker not in SPACE_MARKERS:
            raise TokenizerError(f"marker: must be one of {SPACE_MARKERS}, got {marker!r}")
        self.pieces, self.marker = list(pieces), marker
        if not self.pieces:
            raise TokenizerError("pieces: a vocabulary needs at least one piece")
        self.texts = [("" if is_special(p) else normalise(p)) for p in self.pieces]
        self.by_text: dict[str, int] = {}
        for i, (piece, text) in enumerate(zip(self.pieces, self.texts)):
            if is_special(piece):
                continue
            if not text:
                raise TokenizerError(f"pieces: entry {i} is empty")
            if text in self.by_text:
                j = self.by_text[text]
                raise TokenizerError(f"pieces: entries {j} ({self.pieces[j]!r}) and {i} ({piece!r}) both "
                                     f"normalise to {text!r}; a vocabulary must spell each string once")
            self.by_text[text] = i
        self.longest = max((len(t) for t in self.by_text), default=1)
        self.specials = {p: i for i, p in enumerate(self.pieces) if is_special(p)}

    @property
    def vocab_size(self) -> int:
        return len(self.pieces)

    def normalised(self, token_id: int) -> str:
        return self.texts[int(token_id)]

    def encode(self, text: str) -> list[int]:
        ids, i = [], 0
        while i < len(text):
            for width in range(min(self.longest, len(text) - i), 0, -1):
                token = self.by_text.get(text[i:i + width])
                if token is not None:
                    ids.append(token)
                    i += width
                    break
            else:
                raise TokenizerError(f"text: character {text[i]!r} at {i} has no piece in this vocabulary")
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        for t in ids:
            if not 0 <= int(t) < self.vocab_size:
                raise TokenizerError(f"ids: {int(t)} is outside [0, {self.vocab_size})")
        return "".join(self.texts[int(t)] for t in ids)


def random_tokenizer(alphabet: str, num_merges: int, seed: int, *, marker: str = "Ġ",
                     max_len: int = 3, specials: Sequence[str] = ("<eos>",)) -> ToyTokenizer:
    """A vocabulary: every character of ``alphabet`` (a space as the bare marker),
    plus ``num_merges`` distinct random strings of 2..``max_len`` characters,
    spelled with ``marker``; then ``specials``. Deterministic in ``seed``.

    >>> random_tokenizer("ab ", 3, seed=0, marker="▁").pieces[:3]
    ['a', 'b', '▁']
    """
    rng = np.random.default_rng([seed, num_merges, max_len])
    chars = list(dict.fromkeys(alphabet))
    spell = lambda s: s.replace(" ", marker)  # noqa: E731
    pieces, seen = [spell(c) for c in chars], set(chars)
    attempts = 0
    while len(pieces) < len(chars) + num_merges and attempts < 100 * (num_merges + 1):
        attempts += 1
        s = "".join(rng.choice(chars, size=int(rng.integers(2, max_len + 1))))
        if s not in seen:
            seen.add(s)
            pieces.append(spell(s))
    return ToyTokenizer(pieces + list(specials), marker=marker)


__all__ = ["ToyTokenizer", "TokenizerError", "SPACE_MARKERS", "normalise", "is_special", "random_tokenizer"]
