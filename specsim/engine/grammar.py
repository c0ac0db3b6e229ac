"""Structured output in the engine: a real grammar engine (llguidance 1.9.1) over a toy vocabulary.

A ``Grammar`` is a Lark grammar, a regex or a JSON schema (what llguidance
compiles) over the pieces of a small vocabulary whose ids are the ``ToyLM``'s
(``eos_id`` the special end token, which the grammar allows once the text is
complete). Each request with ``SamplingParams(grammar=...)`` owns a
``GrammarState``: llguidance's matcher at the request's **committed** output.

One step, the way a serving engine does it (vLLM's ``StructuredOutputManager``):

1. ``masks_along(drafts)``: the mask of position ``j`` is computed after
   advancing the matcher along drafts ``0 .. j−1``; a draft the grammar refuses
   stops the walk (it is rejected with certainty: its row bans it; the rows
   after it are never read and repeat its mask);
2. ``commit(num_accepted, kept)``: roll the matcher back to the accepted prefix
   (the rejected drafts must not stay in it), then advance it by the token the
   step emitted after them. Only committed tokens stay in the matcher.

A token the matcher refuses at commit raises ``GrammarError``: the masks are
meant to make that impossible, so it is a bug (a mutant of
``specsim.mutants.grammar``), never bad input.

>>> g = Grammar(["<eos>", "[", "]", ",", "1", "2"], 'start: "[" (item ("," item)*)? "]"\\nitem: /[12]+/')
>>> s = g.start()
>>> s.mask().astype(int).tolist()                       # only "[" opens the list
[0, 1, 0, 0, 0, 0]
>>> s.masks_along([1, 4, 1]).astype(int).tolist()       # "[", "1", then a refused "[" (its row bans it)
[[0, 1, 0, 0, 0, 0], [0, 0, 1, 0, 1, 1], [0, 0, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]]
>>> s.commit(1, [1, 2])                                 # "[" accepted, "]" emitted instead of "1"
>>> s.mask().astype(int).tolist(), g.accepts([1, 2, 0], complete=True)
([1, 0, 0, 0, 0, 0], True)
"""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

LLGUIDANCE_VERSION = "1.9.1"


def _load_llguidance():
    """llguidance at the pinned release, or ImportError saying how to get it."""
    try:
        import llguidance
    except ImportError as e:
        raise ImportError(f"specsim.engine.grammar needs llguidance=={LLGUIDANCE_VERSION} "
                          f"(pip install 'specsim[grammar]'): {e}") from e
    if llguidance.__version__ != LLGUIDANCE_VERSION:
        raise ImportError(f"specsim.engine.grammar checks llguidance=={LLGUIDANCE_VERSION}, found "
                          f"{llguidance.__version__} (pip install 'llguidance=={LLGUIDANCE_VERSION}')")
    return llguidance


llg = _load_llguidance()

KINDS = ("lark", "regex", "json_schema")


class GrammarError(RuntimeError):
    """The matcher refused a token the engine committed (the masks should have made that impossible)."""


class _ToyTokenizer:
    """llguidance's tokenizer interface over ``pieces`` (``TokenizerWrapper``): special ids' bytes are
    prefixed with 0xFF, as llguidance marks special tokens; text encodes greedily, longest piece first."""

    def __init__(self, pieces: Sequence[str], eos_id: int):
        self.eos_token_id, self.bos_token_id, self.special_token_ids = eos_id, None, [eos_id]
        self.tokens = [b"\xff" + p.encode() if i == eos_id else p.encode() for i, p in enumerate(pieces)]
        self._text = sorted((i for i in range(len(pieces)) if i != eos_id), key=lambda i: -len(self.tokens[i]))

    def __call__(self, text) -> list[int]:
        data, out = text.encode() if isinstance(text, str) else bytes(text), []
        while data:
            best = next((i for i in self._text if self.tokens[i] and data.startswith(self.tokens[i])), None)
            if best is None:
                raise ValueError(f"pieces: no piece starts {data!r}")
            out.append(best)
            data = data[len(self.tokens[best]):]
        return out


class Grammar:
    """A grammar (``kind``: ``"lark"``, ``"regex"`` or ``"json_schema"``) over the vocabulary ``pieces``
    (``pieces[i]`` the text of token id i; ``eos_id`` the end token, a special piece)."""

    def __init__(self, pieces: Sequence[str], source: str | dict, *, kind: str = "lark", eos_id: int = 0):
        if kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
        if not 0 <= eos_id < len(pieces):
            raise ValueError(f"eos_id: must be in [0, {len(pieces)}), got {eos_id}")
        if len(set(pieces)) != len(pieces) or any(not p for i, p in enumerate(pieces) if i != eos_id):
            raise ValueError(f"pieces: must be distinct and non-empty, got {list(pieces)}")
        self.pieces, self.source, self.kind, self.eos_id = list(pieces), source, kind, eos_id
        self.vocab_size = len(pieces)
        self.tokenizer = llg.LLTokenizer(llg.TokenizerWrapper(_ToyTokenizer(pieces, eos_id)), slices=[])
        build = {"lark": llg.LLMatcher.grammar_from_lark, "regex": llg.LLMatcher.grammar_from_regex,
                 "json_schema": lambda s: llg.LLMatcher.grammar_from_json_schema(
                     s if isinstance(s, str) else json.dumps(s))}[kind]
        self.compiled = build(source)
        error = llg.LLMatcher.validate_grammar(self.compiled, self.tokenizer)
        if error:
            raise ValueError(f"grammar: llguidance refuses this {kind} grammar: {error}")
        self._fresh = llg.LLMatcher(self.tokenizer, self.compiled, log_level=0)  # copied per request (cheaper)

    def __repr__(self) -> str:
        return f"Grammar({self.kind}, V={self.vocab_size}, eos={self.eos_id})"

    def start(self) -> "GrammarState":
        """A fresh matcher, before any output token."""
        return GrammarState(self._fresh.deep_copy(), self.vocab_size, self.eos_id)

    def accepts(self, tokens: Sequence[int], *, complete: bool) -> bool:
        """Whether a fresh matcher takes every one of ``tokens`` (the independent check of an output);
        ``complete``: and the output ends with the end token where the grammar allows it."""
        state = self.start()
        for token in (int(t) for t in tokens):
            if not state.mask()[token] or not state._matcher.consume_token(token):
                return False
        return not complete or (bool(tokens) and int(tokens[-1]) == self.eos_id)


class GrammarState:
    """One request's matcher at its committed output (module docstring: ``masks_along``, ``commit``)."""

    def __init__(self, matcher, vocab_size: int, eos_id: int):
        self._matcher, self.vocab_size, self.eos_id = matcher, vocab_size, eos_id
        self.pending = 0      # drafts the matcher holds beyond the committed output (between the two calls)

    def mask(self) -> np.ndarray:
        """``[V]`` bool: the tokens the grammar allows next."""
        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[:self.vocab_size].astype(bool)

    def masks_along(self, drafts: Sequence[int]) -> np.ndarray:
        """``[k + 1, V]`` bool: row j is the mask after drafts ``0 .. j−1`` (the matcher keeps the drafts it
        took, ``pending``, until ``commit``). A refused draft ends the walk, and so does the end token
        (nothing follows it: a request ends at it); later rows repeat its row."""
        if self.pending:
            raise GrammarError(f"masks_along: {self.pending} drafts of the last step were never committed")
        rows = [self.mask()]
        for token in drafts:
            if not rows[-1][int(token)] or int(token) == self.eos_id or not self._matcher.consume_token(int(token)):
                break
            self.pending += 1
            rows.append(self.mask())
        rows += [rows[-1]] * (len(drafts) + 1 - len(rows))
        return np.stack(rows)

    def commit(self, num_accepted: int, kept: Sequence[int]) -> None:
        """The step's outcome: ``num_accepted`` drafts accepted, ``kept`` the tokens emitted (after trimming).
        Roll back the rejected drafts, then take the kept tokens after them (an accepted draft the walk did not
        take — the end token, or one the grammar refused — is taken here, or refused with GrammarError)."""
        taken = min(int(num_accepted), len(kept), self.pending)
        self.rollback(self.pending - taken)
        self.pending = 0
        self.advance(kept[taken:])

    def rollback(self, n: int) -> None:
        """Forget the last ``n`` tokens taken."""
        if n and not self._matcher.rollback(n):
            raise GrammarError(f"rollback of {n} tokens failed: {self._matcher.get_error()}")

    def advance(self, tokens: Sequence[int]) -> None:
        """Take ``tokens`` (GrammarError at the first one refused)."""
        for token in tokens:
            if not self._matcher.consume_token(int(token)):
                raise GrammarError(f"the grammar refuses token {int(token)}: {self._matcher.get_error()}")

    def fork(self) -> "GrammarState":
        """An independent copy (a drafter walks its own drafts on it)."""
        return GrammarState(self._matcher.deep_copy(), self.vocab_size, self.eos_id)


LIST_PIECES = ("<eos>", "[", "]", ",", "1", "2")
LIST_LARK = 'start: "[" (item ("," item)*)? "]"\nitem: /[12]+/'


def list_grammar() -> Grammar:
    """The toy grammar of the tests and mutants: a bracketed list of numbers made of 1s and 2s, over six
    tokens (0 the end token). Every branch point matters: ``]`` closes only after ``[`` or a number, ``,``
    only after a number, and the end token only after the closing ``]``.

    >>> g = list_grammar()
    >>> g.accepts([1, 4, 5, 3, 4, 2, 0], complete=True), g.accepts([1, 3], complete=False)   # "[12,1]", "[,"
    (True, False)
    """
    return Grammar(LIST_PIECES, LIST_LARK)


__all__ = ["Grammar", "GrammarState", "GrammarError", "LLGUIDANCE_VERSION", "KINDS", "list_grammar",
           "LIST_PIECES", "LIST_LARK"]
