"""A step at a small vocabulary re-stated at a large one, its tokens at the ids where kernels change path.

A hand-built case (an edge of SPEC §12, say) holds at V = 4, where every kernel runs one tile
of one chunk and no id needs more than a few bits. ``embed`` moves its ``v`` token ids, in
order, onto ``v`` increasing ids of a ``V``-wide vocabulary (``spread_ids``: id 0, each side of
a 128 … 4096-wide tile edge and of 2^15 and 2^16, the middle, the last ids; or ``tail_ids``: the
last ``v``), and every id-shaped part of the step moves with them: the logit, draft, mask and
bias rows, the drafts, and SPEC §12's token lists (prompt, output, allowed ids, bad words, stop
ids). Every other id gets logit ``-inf`` (so a row the bans empty stays empty), draft
probability 0, mask False, bias 0 and exponential 1. The order is kept, so ties still go to the
lowest id, and the step's exact answer is the small step's with its ids mapped (``embed_at``,
``mapped``).

>>> spread_ids(65537, 4).tolist()
[0, 2047, 32767, 65536]
>>> tail_ids(10, 3).tolist()
[7, 8, 9]
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, SamplerParams, VerifyBatch


def _edges(V: int) -> set[int]:
    """The ids where a kernel's path changes: each side of the tile widths 128 … 4096 and of 2^15
    and 2^16, id 0, the middle and the last three."""
    ids = {0, V // 2, V - 1, V - 2, V - 3}
    for w in (128, 1024, 2048, 4096, 2 ** 15, 2 ** 16):
        ids |= {w - 1, w}
    return {i for i in ids if 0 <= i < V}


def spread_ids(V: int, v: int) -> np.ndarray:
    """``v`` increasing ids of ``[0, V)`` spread evenly over the path-changing ids (``_edges``,
    with an even grid where those are fewer than ``v``), the first and the last id among them."""
    if not 1 <= v <= V:
        raise ValueError(f"v: need 1 ≤ v ≤ V = {V} ids, got {v}")
    pool = np.array(sorted(_edges(V) | set(np.linspace(0, V - 1, v).astype(np.int64).tolist())), dtype=np.int64)
    return pool[np.round(np.linspace(0, len(pool) - 1, v)).astype(np.int64)]


def tail_ids(V: int, v: int) -> np.ndarray:
    """The last ``v`` ids of ``[0, V)``: the partial last tile of every tile width."""
    return np.arange(V - v, V, dtype=np.int64)


def mapped(ids: np.ndarray, tokens):
    """``tokens`` (an int, or nested lists/tuples/arrays of them) with every id ``t ≥ 0`` as
    ``ids[t]``; placeholders stay."""
    if isinstance(tokens, (list, tuple)):
        return type(tokens)(mapped(ids, t) for t in tokens)
    a = np.asarray(tokens, dtype=np.int64)
    out = np.where(a >= 0, ids[np.maximum(a, 0)], a)
    return int(out) if out.ndim == 0 else out


def _widened(rows: np.ndarray, ids: np.ndarray, V: int, fill) -> np.ndarray:
    """``rows [..., v]`` as ``[..., V]``: column ``t`` at ``ids[t]``, ``fill`` elsewhere, same dtype."""
    out = np.full(rows.shape[:-1] + (V,), fill, dtype=rows.dtype)
    out[..., ids] = rows
    return out


def _lists(ids: np.ndarray, lists):
    """A per-request tuple of id arrays (None entries kept) mapped."""
    return None if lists is None else tuple(None if x is None else mapped(ids, x) for x in lists)


def _sampler(sampler: SamplerParams | None, ids: np.ndarray, V: int) -> SamplerParams | None:
    if sampler is None:
        return None
    words = None if sampler.bad_words is None else tuple(tuple(mapped(ids, w) for w in words)
                                                          for words in sampler.bad_words)
    return replace(sampler, prompt_token_ids=_lists(ids, sampler.prompt_token_ids),
                   output_token_ids=_lists(ids, sampler.output_token_ids),
                   allowed_token_ids=_lists(ids, sampler.allowed_token_ids), bad_words=words,
                   stop_token_ids=_lists(ids, sampler.stop_token_ids),
                   token_mask=None if sampler.token_mask is None else _widened(sampler.token_mask, ids, V, False),
                   logit_bias=None if sampler.logit_bias is None else _widened(sampler.logit_bias, ids, V, 0))


def embed_at(batch: VerifyBatch, noise: Noise | None, V: int, ids: np.ndarray) -> tuple[VerifyBatch, Noise | None]:
    """``batch`` (vocabulary ``v = len(ids)``) and its injected ``noise`` at vocabulary ``V``, token
    ``t`` at id ``ids[t]`` (``ids`` increasing, in ``[0, V)``); see the module docstring."""
    if batch.vocab_size != len(ids) or np.any(np.diff(ids) <= 0) or ids[0] < 0 or ids[-1] >= V:
        raise ValueError(f"ids: need {batch.vocab_size} increasing ids in [0, {V}), got {ids.tolist()}")
    drafts = np.asarray(batch.draft_token_ids, dtype=np.int64)
    wide = replace(batch, target_logits=_widened(np.asarray(batch.target_logits), ids, V, -np.inf),
                   draft_token_ids=np.where(drafts == PLACEHOLDER_TOKEN_ID, drafts, ids[np.maximum(drafts, 0)]),
                   draft_probs=None if batch.draft_probs is None else _widened(np.asarray(batch.draft_probs), ids, V, 0),
                   sampler=_sampler(batch.sampler, ids, V))
    if noise is None:
        return wide, None
    return wide, replace(noise, exponentials=_widened(np.asarray(noise.exponentials), ids, V, 1.0))


__all__ = ["spread_ids", "tail_ids", "mapped", "embed_at"]
