"""SPEC §2: from raw target logits to ``target_probs`` — temperature, top-k, softmax, top-p.

Each rung works on one row ``[V]`` or on many rows ``[..., V]`` at once (the
parameters then per row, ``[...]``), in float64, and also reports its
*margin* (SPEC §9): how close its decision was to flipping. Near a boundary
``reference.exact`` decides instead.

>>> target_probs(np.log([0.5, 0.3, 0.2]), temperature=1.0, top_k=0, top_p=0.7).round(4).tolist()
[0.625, 0.375, 0.0]
>>> target_probs(np.array([2.0, 1.0, 1.0, 0.0]), temperature=1.0, top_k=2, top_p=1.0).round(4).tolist()
[0.5761, 0.2119, 0.2119, 0.0]
"""

from __future__ import annotations

import numpy as np

INF = float("inf")


def _last(values: np.ndarray, index) -> np.ndarray:
    """``values[..., index]`` with one index per row ``[...]``."""
    return np.take_along_axis(values, np.asarray(index)[..., None], axis=-1)[..., 0]


def apply_temperature(logits: np.ndarray, temperature) -> np.ndarray:
    """``logits / T`` in float64 (T > 0; greedy never reaches here). ``temperature``: scalar or ``[...]``."""
    return np.asarray(logits, dtype=np.float64) / np.asarray(temperature, dtype=np.float64)[..., None]


def apply_top_k(scaled: np.ndarray, top_k) -> tuple[np.ndarray, np.ndarray]:
    """Mask every value below the k-th largest to -inf; boundary ties are kept.

    ``scaled``: ``[..., V]`` float64; ``top_k``: ``[...]`` (0 or ≥ V: off).
    Returns (masked ``[..., V]``, margin ``[...]``: the gap from ``z_(k)`` to
    the next lower value, relative to ``max(|z_(k)|, 1)``).

    >>> apply_top_k(np.array([3.0, 1.0, 3.0, 2.0]), 1)[0].tolist()
    [3.0, -inf, 3.0, -inf]
    """
    V = scaled.shape[-1]
    k = np.broadcast_to(np.asarray(top_k, dtype=np.int64), scaled.shape[:-1])
    active = (k > 0) & (k < V)
    if not active.any():          # no row filtered: the same result without sorting (V ~ 10⁵ rows)
        return scaled.copy(), np.full(scaled.shape[:-1], INF)
    kth = _last(-np.sort(-scaled, axis=-1), np.clip(k, 1, V) - 1)
    below = np.where(scaled < kth[..., None], scaled, -INF).max(axis=-1)
    with np.errstate(invalid="ignore"):
        gap = (kth - below) / np.maximum(np.abs(kth), 1.0)
    margin = np.where(active & np.isfinite(kth) & np.isfinite(below), gap, INF)
    return np.where(active[..., None] & (scaled < kth[..., None]), -INF, scaled), margin


def softmax(scaled: np.ndarray) -> np.ndarray:
    """Softmax of ``[..., V]`` float64 with -inf entries; each row has a finite entry."""
    shifted = np.exp(scaled - np.max(scaled, axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def apply_top_p(probs: np.ndarray, top_p) -> tuple[np.ndarray, np.ndarray]:
    """Keep the smallest top set with mass >= p; every token tied with the cut is kept.

    ``probs``: ``[..., V]`` float64 summing to 1; ``top_p``: ``[...]`` (1: off).
    Returns (renormalised ``[..., V]``, margin ``[...]``: the smallest of
    ``c_{m*} − p``, ``p − c_{m*−1}`` and the relative gap from τ to the next
    lower probability).

    >>> apply_top_p(np.array([0.4, 0.2, 0.2, 0.2]), 0.5)[0].tolist()
    [0.4, 0.2, 0.2, 0.2]
    >>> apply_top_p(np.array([0.4, 0.3, 0.2, 0.1]), 0.5)[0].round(4).tolist()
    [0.5714, 0.4286, 0.0, 0.0]
    """
    p = np.broadcast_to(np.asarray(top_p, dtype=np.float64), probs.shape[:-1])
    if not (p < 1.0).any():       # no row filtered: the same result without sorting
        return probs.copy(), np.full(probs.shape[:-1], INF)
    ordered = -np.sort(-probs, axis=-1)
    cumulative = np.cumsum(ordered, axis=-1)
    # m* - 1 = prefixes short of p; rounding can leave the total a hair under p.
    m = np.minimum((cumulative < p[..., None]).sum(axis=-1), probs.shape[-1] - 1)
    threshold = _last(ordered, m)
    kept = np.where(probs >= threshold[..., None], probs, 0.0)
    lower = np.where(probs < threshold[..., None], probs, 0.0).max(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        tau_gap = np.where(lower > 0, (threshold - lower) / threshold, INF)
    before = np.where(m > 0, _last(cumulative, np.maximum(m - 1, 0)), 0.0)
    margin = np.maximum(0.0, np.minimum.reduce([_last(cumulative, m) - p, p - before, tau_gap]))
    active = p < 1.0
    renormalised = np.where(active[..., None], kept / kept.sum(axis=-1, keepdims=True), probs)
    return renormalised, np.where(active, margin, INF)


def target_rows(logits: np.ndarray, temperature, top_k, top_p) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """SPEC §2 in order for ``[..., V]`` logits with per-row parameters ``[...]`` (T > 0).

    Returns (``target_probs [..., V]``, margins ``{"top_k": [...], "top_p": [...]}``).
    """
    masked, margin_k = apply_top_k(apply_temperature(logits, temperature), top_k)
    probs, margin_p = apply_top_p(softmax(masked), top_p)
    return probs, {"top_k": margin_k, "top_p": margin_p}


def target_probs(logits: np.ndarray, temperature: float, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """``target_probs`` of ``[V]`` or ``[rows, V]`` logits sharing one set of parameters (T > 0)."""
    if not temperature > 0:
        raise ValueError(f"temperature: target_probs needs T > 0 (greedy is an argmax), got {temperature}")
    return target_rows(logits, temperature, top_k, top_p)[0]
