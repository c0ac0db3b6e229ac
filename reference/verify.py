"""SPEC §3–§5: one speculative verification step, request by request, in float64.

The whole step is the ladder ``verify → verify_request → (accept, residual,
race)``; each rung is a few lines and cites its SPEC section. Clarity wins
over speed here: devices are the fast ones.

Worked example — one request, V = 3, K = 1, full rejection sampling::

    target_probs t = [0.6, 0.3, 0.1]     draft_probs d = [0.2, 0.7, 0.1]
    draft x = 1:  ratio t[1]/d[1] = 0.3/0.7 ≈ 0.43
    coin u = 0.9 ≥ 0.43 → rejected; residual max(t − d, 0) = [0.4, 0, 0]
    the race can only pick token 0, so the step emits [0] and accepts 0.

>>> r = verify([1], [1], np.array([[0.2, 0.7, 0.1]]), np.log([[0.6, 0.3, 0.1], [1/3, 1/3, 1/3]]),
...            [1.0], [0], [1.0], uniforms=np.array([0.9]), exponentials=np.ones((1, 3)))
>>> r.output_token_ids.tolist(), r.num_accepted.tolist()
([[0, -1]], [0])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference.layout import PLACEHOLDER_TOKEN_ID, offsets, pad_outputs, target_rows
from reference.rng import step_noise
from reference.target import greedy_token, target_row
from reference.validate import InvalidInput, check_noise, check_step

INF = float("inf")


@dataclass(frozen=True)
class StepResult:
    """``output_token_ids`` ``[batch, max_k + 1]``, ``num_accepted`` ``[batch]``,
    ``margins`` ``[batch]`` (SPEC §9: the smallest decision margin on each request's path)."""

    output_token_ids: np.ndarray
    num_accepted: np.ndarray
    margins: np.ndarray


def accept(draft_id: int, target: np.ndarray, draft: np.ndarray | None, u: float) -> tuple[bool, float]:
    """SPEC §3/§4: is draft ``draft_id`` accepted with coin ``u``? Returns (accepted, margin).

    ``target``: ``[V]`` target_probs; ``draft``: ``[V]`` draft_probs or None (point proposal).
    """
    if draft_id == PLACEHOLDER_TOKEN_ID:
        return False, INF
    if target[draft_id] == 0:  # structurally zero (masked or filtered): exact, whatever u is
        return False, INF
    if draft is None:
        ratio = target[draft_id]
    elif draft[draft_id] <= 0:  # x could not have been drawn from this row: reject (§4)
        return False, INF
    else:
        ratio = target[draft_id] / float(draft[draft_id])
    return bool(u < ratio), abs(u - ratio) / max(u, ratio)


def residual(draft_id: int, target: np.ndarray, draft: np.ndarray | None) -> np.ndarray:
    """SPEC §3: the unnormalised law of the recovered token after a rejection, ``[V]``."""
    if draft_id == PLACEHOLDER_TOKEN_ID:
        return target
    if draft is None:
        w = target.copy()
        w[draft_id] = 0.0
        return w
    return np.maximum(target - np.asarray(draft, dtype=np.float64), 0.0)


def race(weights: np.ndarray, exponentials: np.ndarray) -> tuple[int, float]:
    """SPEC §3: smallest id maximising ``w/E`` over ``w > 0``. Returns (token, margin).

    ``weights``: ``[V]`` >= 0, not all zero; ``exponentials``: ``[V]`` > 0.

    >>> race(np.array([0.0, 2.0, 1.0]), np.array([1.0, 4.0, 1.0]))[0]
    2
    """
    scores = np.where(weights > 0, weights / exponentials, -INF)
    best = int(np.argmax(scores))
    rest = np.delete(scores, best)
    second = rest.max() if rest.size else -INF
    margin = INF if not np.isfinite(second) else (scores[best] - second) / scores[best]
    return best, margin


def sample(weights: np.ndarray, target: np.ndarray, exponentials: np.ndarray) -> tuple[int, float]:
    """Race over ``weights``; an empty residual (rounding only, §4) falls back to ``target``."""
    return race(weights if (weights > 0).any() else target, exponentials)


def verify_greedy(draft_ids: np.ndarray, logits: np.ndarray) -> tuple[list[int], int]:
    """SPEC §3 greedy: accept while the draft is the argmax; emit the argmax. ``logits``: ``[K+1, V]``."""
    tokens = []
    for j, x in enumerate(draft_ids):
        best = greedy_token(logits[j])
        if x != best:
            return tokens + [best], j
        tokens.append(int(x))
    return tokens + [greedy_token(logits[len(draft_ids)])], len(draft_ids)


def verify_request(draft_ids, draft, logits, temperature, top_k, top_p, uniforms, exponentials):
    """One request: ``draft_ids`` ``[K]``, ``draft`` ``[K, V]`` or None, ``logits`` ``[K+1, V]``,
    ``uniforms`` ``[K]``, ``exponentials`` ``[V]``. Returns (emitted tokens, num_accepted, margin)."""
    if temperature == 0:
        tokens, n = verify_greedy(draft_ids, logits)
        return tokens, n, INF  # argmax of the given values: no arithmetic, nothing to round
    margin, tokens = INF, []
    for j, x in enumerate(int(x) for x in draft_ids):
        target, m = target_row(logits[j], temperature, top_k, top_p)
        row = None if draft is None else draft[j]
        accepted, m_accept = accept(x, target, row, uniforms[j])
        margin = min(margin, m, m_accept)
        if not accepted:
            y, m_race = sample(residual(x, target, row), target, exponentials)
            return tokens + [y], j, min(margin, m_race)
        tokens.append(x)
    bonus, m = target_row(logits[len(draft_ids)], temperature, top_k, top_p)
    y, m_race = race(bonus, exponentials)
    return tokens + [y], len(tokens), min(margin, m, m_race)


def verify(num_draft_tokens, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p,
           *, uniforms=None, exponentials=None, seeds=None, positions=None) -> StepResult:
    """One step for a ragged batch (argument shapes: SPEC §1, ``devices.protocol.VerifyBatch``).

    Noise is injected (``uniforms`` ``[num_tokens]``, ``exponentials`` ``[batch, V]``,
    SPEC §5.1) or, when both are None, drawn from the keyed streams of §5.2
    for ``seeds``/``positions``.
    """
    check_step(num_draft_tokens, draft_token_ids, draft_probs, target_logits,
               temperature, top_k, top_p, seeds, positions)
    k = np.asarray(num_draft_tokens, dtype=np.int64)
    logits = np.asarray(target_logits, dtype=np.float64)
    batch, V = len(k), logits.shape[1]
    if uniforms is None and exponentials is None:
        if seeds is None or positions is None:
            raise InvalidInput("seeds: seeds and positions are required when no noise is injected (SPEC §5.2)")
        uniforms, exponentials = step_noise(seeds, positions, k, V)
    elif uniforms is None or exponentials is None:
        raise InvalidInput("uniforms: inject both uniforms and exponentials, or neither (SPEC §5.1)")
    check_noise(uniforms, exponentials, int(k.sum()), batch, V)
    cu = offsets(k)
    draft_ids = np.asarray(draft_token_ids, dtype=np.int64)
    emitted, accepted, margins = [], np.zeros(batch, np.int64), np.full(batch, INF)
    for i in range(batch):
        d = slice(cu[i], cu[i + 1])
        tokens, accepted[i], margins[i] = verify_request(
            draft_ids[d], None if draft_probs is None else np.asarray(draft_probs)[d],
            logits[target_rows(cu, i)], float(np.asarray(temperature)[i]), int(np.asarray(top_k)[i]),
            float(np.asarray(top_p)[i]), np.asarray(uniforms)[d], np.asarray(exponentials)[i])
        emitted.append(tokens)
    return StepResult(pad_outputs(emitted, int(k.max()) + 1), accepted, margins)
