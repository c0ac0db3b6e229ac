"""SPEC §2: from raw target logits to ``target_probs`` — temperature, top-k, softmax, top-p.

Each step also reports its *margin* (SPEC §9): how close the float64 decision
was to flipping, so a float32 device is forgiven only where rounding could
honestly have flipped it.

>>> target_probs(np.log([0.5, 0.3, 0.2]), temperature=1.0, top_k=0, top_p=0.7).round(4).tolist()
[0.625, 0.375, 0.0]
>>> target_probs(np.array([2.0, 1.0, 1.0, 0.0]), temperature=1.0, top_k=2, top_p=1.0).round(4).tolist()
[0.5761, 0.2119, 0.2119, 0.0]
"""

from __future__ import annotations

import numpy as np

INF = float("inf")


def apply_temperature(logits: np.ndarray, temperature: float) -> np.ndarray:
    """``logits / T`` in float64 (T > 0; greedy never reaches here)."""
    return np.asarray(logits, dtype=np.float64) / float(temperature)


def apply_top_k(scaled: np.ndarray, top_k: int) -> tuple[np.ndarray, float]:
    """Mask every value below the k-th largest to -inf; boundary ties are kept.

    ``scaled``: ``[V]`` float64. Returns (masked ``[V]``, margin).

    >>> apply_top_k(np.array([3.0, 1.0, 3.0, 2.0]), 1)[0].tolist()
    [3.0, -inf, 3.0, -inf]
    """
    V = scaled.shape[-1]
    if top_k <= 0 or top_k >= V:
        return scaled, INF
    kth = np.sort(scaled)[::-1][top_k - 1]
    below = scaled[scaled < kth]
    margin = INF
    if np.isfinite(kth) and below.size and np.isfinite(below.max()):
        margin = (kth - below.max()) / max(abs(kth), 1.0)
    return np.where(scaled < kth, -INF, scaled), margin


def softmax(scaled: np.ndarray) -> np.ndarray:
    """Softmax of ``[V]`` float64 with -inf entries; at least one entry is finite."""
    shifted = np.exp(scaled - np.max(scaled))
    return shifted / shifted.sum()


def apply_top_p(probs: np.ndarray, top_p: float) -> tuple[np.ndarray, float]:
    """Keep the smallest top set with mass >= p; every token tied with the cut is kept.

    ``probs``: ``[V]`` float64 summing to 1. Returns (renormalised ``[V]``, margin).

    >>> apply_top_p(np.array([0.4, 0.2, 0.2, 0.2]), 0.5)[0].tolist()
    [0.4, 0.2, 0.2, 0.2]
    >>> apply_top_p(np.array([0.4, 0.3, 0.2, 0.1]), 0.5)[0].round(4).tolist()
    [0.5714, 0.4286, 0.0, 0.0]
    """
    if top_p >= 1.0:
        return probs, INF
    ordered = np.sort(probs)[::-1]
    cumulative = np.cumsum(ordered)
    m = int(np.searchsorted(cumulative, top_p, side="left"))  # first index with c >= p
    m = min(m, len(ordered) - 1)  # rounding can leave the total a hair under p
    threshold = ordered[m]
    kept = np.where(probs >= threshold, probs, 0.0)
    margins = [cumulative[m] - top_p, top_p - (cumulative[m - 1] if m else 0.0)]
    lower = ordered[ordered < threshold]
    if lower.size and lower[0] > 0:
        margins.append((threshold - lower[0]) / threshold)
    return kept / kept.sum(), max(0.0, min(margins))


def target_row(logits: np.ndarray, temperature: float, top_k: int, top_p: float) -> tuple[np.ndarray, float]:
    """One row, SPEC §2 in order: ``[V]`` logits → (``[V]`` target_probs, margin)."""
    masked, margin_k = apply_top_k(apply_temperature(logits, temperature), int(top_k))
    probs, margin_p = apply_top_p(softmax(masked), float(top_p))
    return probs, min(margin_k, margin_p)


def target_probs(logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """``target_probs`` of ``[V]`` or ``[rows, V]`` logits sharing one set of parameters (T > 0)."""
    if not temperature > 0:
        raise ValueError(f"temperature: target_probs needs T > 0 (greedy is an argmax), got {temperature}")
    logits = np.asarray(logits)
    if logits.ndim == 1:
        return target_row(logits, temperature, top_k, top_p)[0]
    return np.stack([target_row(row, temperature, top_k, top_p)[0] for row in logits])


def greedy_token(logits: np.ndarray) -> int:
    """Argmax of raw logits, ties to the smallest id (``np.argmax`` returns the first maximum)."""
    return int(np.argmax(logits))
