"""Random SPEC §12 parameters at realistic strengths, built to bite along the drafts.

``random_sampler`` gives each request of a batch the parameters named, at the
strengths engines ship with (repetition 1.1–1.3, frequency and presence up to
0.5, min_p 0.05–0.1, a sparse logit bias, a mask allowing ~80 % of tokens),
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

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, SAMPLER_PARAMETERS, SamplerParams, VerifyBatch

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

    def pick(i: int, n: int) -> np.ndarray:   # n ids, drafts first, never the safe token
        pool = [int(t) for t in drafts[i]] + [int(t) for t in rng.integers(0, V, n)]
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
            if len(outputs[i]) and len(d):
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
        chosen["prompt_token_ids"] = tuple(pick(i, 3) for i in range(B))
    if "frequency_penalty" in params:
        chosen["frequency_penalty"] = rng.uniform(0.0, 0.5, B)
    if "presence_penalty" in params:
        chosen["presence_penalty"] = rng.uniform(0.0, 0.5, B)
    if "min_p" in params:
        chosen["min_p"] = rng.uniform(0.05, 0.1, B)
    return SamplerParams(**chosen)
