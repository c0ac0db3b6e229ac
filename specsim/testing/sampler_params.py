"""Random SPEC §12 parameters at realistic strengths, built to bite along the drafts.

``random_sampler`` gives each request of a batch the parameters named, at the
strengths users set (repetition 1.1–1.3, frequency and presence 0.2 to
1.0, min_p 0.05–0.1, a sparse logit bias, a mask allowing ~80 % of tokens),
and makes the history-dependent ones act *inside* the step: a bad word is
completed by two of the request's own drafts, a stop token is one of its
drafts with ``min_tokens`` crossing inside the step, the prompt repeats a
draft. One *safe* token per request stays allowed everywhere, so no row is
ever emptied by the bans (SPEC §12.4's error is the input rules' business).

>>> from specsim.testing.batches import BatchSpec, random_batch
>>> rng = np.random.default_rng(0)
>>> batch = random_batch(rng, BatchSpec(batch=3, vocab_size=16))
>>> s = random_sampler(rng, batch, ("bad_words", "min_tokens"), "vllm")
>>> s.given(), s.order, len(s.bad_words)
(('bad_words', 'min_tokens'), 'vllm', 3)
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, SAMPLER_PARAMETERS, SamplerParams, VerifyBatch
from reference.target import target_rows

def _drafts(batch: VerifyBatch) -> list[np.ndarray]:
    """Each request's real drafts (placeholders left out)."""
    cu = np.concatenate([[0], np.cumsum(batch.num_draft_tokens)])
    ids = np.asarray(batch.draft_token_ids)
    return [ids[cu[i]: cu[i + 1]][ids[cu[i]: cu[i + 1]] != PLACEHOLDER_TOKEN_ID] for i in range(batch.batch_size)]


def random_sampler(rng: np.random.Generator, batch: VerifyBatch, params=SAMPLER_PARAMETERS,
                   order: str = "canonical") -> SamplerParams:
    """``SamplerParams`` for ``batch`` with ``params`` (of ``SAMPLER_PARAMETERS``) on, in ``order``."""
    B, V = batch.batch_size, batch.vocab_size
    drafts = _drafts(batch)
    safe = rng.integers(0, V, B)                                   # allowed at every row of its request
    outputs = tuple(rng.integers(0, V, rng.integers(0, 4)).astype(np.int64) for _ in range(B))
    chosen = {"order": order, "output_token_ids": outputs}

    def pick(i: int, n: int) -> np.ndarray:   # n ids, a later draft first, never the safe token
        later = [int(t) for t in drafts[i][1:]]
        rng.shuffle(later)
        pool = later + [int(t) for t in rng.integers(0, V, n)]
        return np.array([t for t in pool if t != safe[i]][:n] or [(safe[i] + 1) % V], dtype=np.int64)

    if "token_mask" in params:
        rows = np.repeat(np.arange(B), np.asarray(batch.num_draft_tokens) + 1)
        mask = rng.random((len(rows), V)) < 0.8
        mask[np.arange(len(rows)), safe[rows]] = True
        chosen["token_mask"] = mask
    if "allowed_token_ids" in params:
        chosen["allowed_token_ids"] = tuple(
            None if rng.random() < 0.25 else np.union1d(rng.choice(V, max(1, 3 * V // 4), replace=False), [safe[i]])
            for i in range(B))
    if "bad_words" in params:
        words = []
        for i in range(B):
            d, own = drafts[i], []
            if len(d) >= 2:
                j = int(rng.integers(1, len(d)))
                own.append(d[j - 1: j + 1].copy())                    # completed inside the step
            if len(outputs[i]) and len(d) and rng.random() < 0.25:
                own.append(np.array([outputs[i][-1], d[0]], dtype=np.int64))  # output so far + draft 0
            own.append(np.array([(safe[i] + 1 + rng.integers(0, V - 1)) % V], dtype=np.int64))  # always banned
            words.append(tuple(w for w in own if safe[i] not in w[-1:]))
        chosen["bad_words"] = tuple(words)
    if "min_tokens" in params:
        chosen["stop_token_ids"] = tuple(pick(i, 2) for i in range(B))
        chosen["min_tokens"] = np.array([len(outputs[i]) + rng.integers(0, len(drafts[i]) + 2) for i in range(B)],
                                        dtype=np.int64)
    if "logit_bias" in params:
        bias = np.zeros((B, V))
        hit = rng.random((B, V)) < 0.2
        bias[hit] = rng.normal(0, 2, hit.sum())
        chosen["logit_bias"] = bias
    if "repetition_penalty" in params:
        chosen["repetition_penalty"] = rng.uniform(1.1, 1.3, B)
        chosen["prompt_token_ids"] = tuple(rng.integers(0, V, 3) for _ in range(B))  # the drafts' repeats are the step's
    if "frequency_penalty" in params:
        chosen["frequency_penalty"] = rng.uniform(0.2, 1.0, B)
    if "presence_penalty" in params:
        chosen["presence_penalty"] = rng.uniform(0.2, 1.0, B)
    if "min_p" in params:
        chosen["min_p"] = rng.uniform(0.05, 0.1, B)
    return SamplerParams(**chosen)


def repetitive(rng: np.random.Generator, batch: VerifyBatch, lead: float = 0.5) -> VerifyBatch:
    """``batch`` in a repetition loop, where penalties and history act: in half the requests each draft
    ``j ≥ 1`` repeats draft ``j − 1`` with probability 1/2, its target logit at row ``j`` raised to the
    row's largest plus ``lead`` and its draft probability to the row's largest (then renormalised in
    the row's dtype), so the repeat is likely under both and a penalty moves its coin."""
    ids = np.array(batch.draft_token_ids, copy=True)
    logits = np.array(batch.target_logits, copy=True)
    probs = None if batch.draft_probs is None else np.array(batch.draft_probs, dtype=np.float64, copy=True)
    start = 0
    for i, k in enumerate(np.asarray(batch.num_draft_tokens)):
        loop = rng.random() < 0.5
        for n in range(start + 1, start + k):
            if loop and ids[n - 1] != PLACEHOLDER_TOKEN_ID and ids[n] != PLACEHOLDER_TOKEN_ID and rng.random() < 0.5:
                ids[n] = ids[n - 1]
                logits[n + i, ids[n]] = logits[n + i].max() + lead
                if probs is not None:
                    probs[n, ids[n]] = probs[n].max()
                    probs[n] /= probs[n].sum()
        start += k
    if probs is not None:
        probs = probs.astype(batch.draft_probs.dtype)
        probs = probs / probs.sum(axis=1, keepdims=True, dtype=probs.dtype)
    return replace(batch, draft_token_ids=ids, target_logits=logits.astype(batch.target_logits.dtype), draft_probs=probs)


def close_drafts(rng: np.random.Generator, batch: VerifyBatch, mix: float = 0.15) -> VerifyBatch:
    """``batch`` with drafts from a drafter close to the target's §2 rows (``(1 − mix)·target + mix·uniform``;
    greedy requests: the argmax row), so most drafts are accepted and later positions are reached —
    where the history-dependent rules of §12 act. Placeholders stay."""
    k = np.asarray(batch.num_draft_tokens)
    request = np.repeat(np.arange(batch.batch_size), k)
    rows = np.arange(len(request)) + request
    T = np.asarray(batch.temperature)[request]
    logits = np.asarray(batch.target_logits, dtype=np.float64)[rows]
    target = target_rows(logits, np.where(T > 0, T, 1.0), np.asarray(batch.top_k)[request],
                         np.asarray(batch.top_p)[request])[0]
    target = np.where((T > 0)[:, None], target, np.eye(batch.vocab_size)[np.argmax(logits, axis=1)])
    probs = (1 - mix) * target + mix / batch.vocab_size
    ids = np.array([rng.choice(batch.vocab_size, p=row / row.sum()) for row in probs], dtype=np.int64)
    ids = np.where(np.asarray(batch.draft_token_ids) == PLACEHOLDER_TOKEN_ID, PLACEHOLDER_TOKEN_ID, ids)
    if batch.draft_probs is None:
        return replace(batch, draft_token_ids=ids)
    dtype = batch.draft_probs.dtype
    return replace(batch, draft_token_ids=ids, draft_probs=(probs / probs.sum(axis=1, keepdims=True)).astype(dtype))
