"""Hypothesis strategies for the exact layers (L0, L1). Never for statistics:
statistical cases are a frozen list with seeds derived from the case.

Small vocabularies are drawn value by value (so hypothesis finds ties, zeros
and -inf, and shrinks them); larger ones come from a drawn numpy seed.

- ``rational_rows(V)``: one probability row as Fractions (zeros and ties likely).
- ``step_tables(max_v, max_k)``: target rows ``[K+1][V]`` and draft rows ``[K][V]``.
- ``verify_cases(...)``: a ragged ``VerifyBatch`` with its injected ``Noise``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch

SPECIAL_UNIFORMS = (0.0, 2.0**-24, 0.5, 1 - 2.0**-24, float(np.nextafter(1.0, 0.0)))
SMALL_LOGITS = (-np.inf, -3.0, -1.0, 0.0, 0.0, 1.0, 2.5, 6.0)


@st.composite
def rational_rows(draw, V: int, allow_zeros: bool = True):
    """A probability row ``[V]`` of Fractions; weights 0..4 make ties and zeros common."""
    low = 0 if allow_zeros else 1
    weights = draw(st.lists(st.integers(low, 4), min_size=V, max_size=V).filter(lambda w: sum(w) > 0))
    total = sum(weights)
    return [Fraction(w, total) for w in weights]


@st.composite
def step_tables(draw, max_v: int = 5, max_k: int = 3, exact: bool = True):
    """(target_rows ``[K+1][V]``, draft_rows ``[K][V]``) with identical, one-hot and
    position-dependent rows all likely."""
    V = draw(st.integers(1, max_v))
    K = draw(st.integers(0, max_k))
    targets = [draw(rational_rows(V)) for _ in range(K + 1)]
    drafts = []
    for j in range(K):
        kind = draw(st.sampled_from(["independent", "equal", "one-hot", "uniform"]))
        if kind == "equal":
            drafts.append(list(targets[j]))
        elif kind == "one-hot":
            hot = draw(st.integers(0, V - 1))
            drafts.append([Fraction(int(v == hot)) for v in range(V)])
        elif kind == "uniform":
            drafts.append([Fraction(1, V)] * V)
        else:
            drafts.append(draw(rational_rows(V)))
    if not exact:
        targets = [[float(x) for x in r] for r in targets]
        drafts = [[float(x) for x in r] for r in drafts]
    return targets, drafts


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@st.composite
def verify_cases(draw, *, max_batch: int = 6, max_k: int = 8, vocab_sizes=(1, 2, 3, 5, 8, 33, 257, 1024, 4096),
                 dtype: str = "float64", draft_probs: bool | None = None, greedy: bool = True,
                 top_k: bool = True, top_p: bool = True, placeholders: bool = True, withdrawn: bool = False):
    """A ragged batch (K from 0 to ``max_k`` per request) and injected noise for it. ``placeholders``: padding
    (-1, SPEC §4); ``withdrawn``: with draft probabilities, some drafts withdrawn (SPEC §4's withdrawn drafts)."""
    B = draw(st.integers(1, max_batch))
    V = draw(st.sampled_from(vocab_sizes))
    K = np.array(draw(st.lists(st.integers(0, max_k), min_size=B, max_size=B)), np.int64)
    num_tokens, rows = int(K.sum()), int(K.sum()) + B
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if V <= 8 and rows * V <= 64:
        logits = np.array(draw(st.lists(st.sampled_from(SMALL_LOGITS), min_size=rows * V, max_size=rows * V))).reshape(rows, V)
    else:
        logits = rng.normal(0, draw(st.sampled_from([0.5, 2.0, 8.0])), size=(rows, V))
        logits[rng.random((rows, V)) < draw(st.sampled_from([0.0, 0.3]))] = -np.inf
    dead = ~np.isfinite(logits).any(axis=1)
    logits[dead, 0] = 0.0
    use_probs = draw(st.booleans()) if draft_probs is None else draft_probs
    request = np.repeat(np.arange(B), K)
    own = np.where(np.isfinite(logits[np.arange(num_tokens) + request]), logits[np.arange(num_tokens) + request], -30.0)
    closeness = draw(st.sampled_from([0.0, 0.3, 3.0]))
    probs = softmax_rows(own + rng.normal(0, closeness, size=own.shape)) if num_tokens else np.zeros((0, V))
    ids = np.array([rng.choice(V, p=p) for p in probs], np.int64).reshape(num_tokens)
    if num_tokens and draw(st.booleans()):
        arbitrary = rng.random(num_tokens) < 0.3  # not drawn from the row: draft probability may be 0
        ids[arbitrary] = rng.integers(0, V, size=int(arbitrary.sum()))
    if placeholders and num_tokens and draw(st.booleans()):
        ids[rng.random(num_tokens) < 0.25] = PLACEHOLDER_TOKEN_ID
    temps = [0.0] * greedy + [0.3, 0.7, 1.0, 1.7]
    temperature = np.array(draw(st.lists(st.sampled_from(temps), min_size=B, max_size=B)))
    top_ks = np.array(draw(st.lists(st.integers(0, V + 1) if top_k else st.just(0), min_size=B, max_size=B)), np.int64)
    top_ps = np.array(draw(st.lists(st.sampled_from([0.3, 0.6, 0.9, 1.0]) if top_p else st.just(1.0), min_size=B, max_size=B)))
    uniforms = np.array([draw(st.sampled_from(SPECIAL_UNIFORMS)) if draw(st.booleans()) else rng.random()
                         for _ in range(num_tokens)], float).reshape(num_tokens)
    exponentials = np.ones((B, V)) if draw(st.integers(0, 9)) == 0 else rng.exponential(size=(B, V)) + 1e-12
    dt = np.dtype(dtype)
    probs = probs.astype(dt)
    if dt == np.float32 and num_tokens:
        probs = probs / probs.sum(axis=1, keepdims=True, dtype=np.float32)
    batch = VerifyBatch(num_draft_tokens=K, draft_token_ids=ids, draft_probs=probs if use_probs else None,
                        target_logits=logits.astype(dt), temperature=temperature, top_k=top_ks, top_p=top_ps,
                        seeds=rng.integers(0, 2**63, size=B).astype(np.uint64), positions=rng.integers(0, 2**20, size=B))
    if withdrawn and use_probs and num_tokens:   # drawn last: the examples without it are unchanged
        from dataclasses import replace
        gone = (ids != PLACEHOLDER_TOKEN_ID) & (rng.random(num_tokens) < draw(st.sampled_from([0.2, 0.6, 1.0])))
        batch = replace(batch, draft_token_ids=np.where(gone, PLACEHOLDER_TOKEN_ID, ids), withdrawn=gone)
    return batch, Noise(uniforms, exponentials)


def as_dtype(batch: VerifyBatch, dtype) -> VerifyBatch:
    """The same batch in another float dtype (draft rows renormalised in that dtype)."""
    from dataclasses import replace
    probs = batch.draft_probs
    if probs is not None:
        probs = probs.astype(dtype)
        sums = probs.sum(axis=1, keepdims=True, dtype=dtype)
        probs = np.where(sums > 0, probs / np.where(sums > 0, sums, 1), probs)
    return replace(batch, target_logits=batch.target_logits.astype(dtype), draft_probs=probs)
