"""N-gram prompt lookup: propose what followed the latest earlier occurrence of the suffix."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from specsim.engine.state import Request


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
