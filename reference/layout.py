"""SPEC §1 and §7: where each request's rows live, and the padded output layout.

>>> offsets([2, 0, 3]).tolist()
[0, 2, 2, 5]
>>> [target_rows(offsets([2, 0, 3]), i).tolist() for i in range(3)]
[[0, 1, 2], [3], [4, 5, 6, 7]]
>>> pad_outputs([[5, 6, 7], [1], [2, 3]], width=4).tolist()
[[5, 6, 7, -1], [1, -1, -1, -1], [2, 3, -1, -1]]
"""

from __future__ import annotations

import numpy as np

PLACEHOLDER_TOKEN_ID = -1
"""Draft id that is never verified, and the padding of ``output_token_ids``
(the same value as ``devices.protocol.PLACEHOLDER_TOKEN_ID``)."""


def offsets(num_draft_tokens) -> np.ndarray:
    """``cu``: ``[batch + 1]`` exclusive cumulative sum of ``num_draft_tokens`` ``[batch]``."""
    return np.concatenate([[0], np.cumsum(np.asarray(num_draft_tokens, dtype=np.int64))]).astype(np.int64)


def draft_rows(cu: np.ndarray, i: int) -> np.ndarray:
    """Rows of ``draft_token_ids``/``draft_probs`` owned by request ``i``."""
    return np.arange(cu[i], cu[i + 1])


def target_rows(cu: np.ndarray, i: int) -> np.ndarray:
    """Rows of ``target_logits`` owned by request ``i``: one per draft, then the bonus row."""
    return np.arange(cu[i] + i, cu[i + 1] + i + 1)


def pad_outputs(emitted: list[list[int]], width: int) -> np.ndarray:
    """``[batch, width]`` int64: each request's emitted tokens, then placeholders."""
    out = np.full((len(emitted), width), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
    for i, tokens in enumerate(emitted):
        out[i, : len(tokens)] = tokens
    return out
