"""The law a proposer samples a draft from (and returns as ``draft_probs``).

>>> draft_law(np.array([[0.0, 1.0], [2.0, 0.0]]), np.array([1.0, 0.0])).round(3).tolist()
[[0.269, 0.731], [1.0, 0.0]]
"""

from __future__ import annotations

import numpy as np


def draft_law(logits: np.ndarray, temperature: np.ndarray) -> np.ndarray:
    """Rows ``[B, V]`` at per-row ``temperature`` ``[B]``; temperature 0 → one-hot argmax."""
    greedy = temperature == 0
    z = logits / np.where(greedy, 1.0, temperature)[:, None]
    z = np.exp(z - z.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    if greedy.any():
        probs[greedy] = 0.0
        probs[np.flatnonzero(greedy), np.argmax(logits[greedy], axis=1)] = 1.0
    return probs
