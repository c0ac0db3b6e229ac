"""SPEC §12: the whole sampler at every speculative position, in float64.

Row ``r`` of ``target_logits`` belongs to request ``i`` and position
``j ∈ [0, K_i]`` (``j = K_i``: the bonus row; layout §1). Its *output so far*
is the request's ``output_token_ids`` followed by its drafts ``0 .. j−1``:
every history-dependent rule (penalties, bad words, min_tokens) reads that,
never the pre-step output. The row's ``target_probs`` is the non-speculative
pipeline of the order profile applied to ``target_logits[r]``:

- ``"canonical"``: bans → penalties → logit_bias → temperature → top-k → top-p → min_p
- ``"vllm"``:      bans → logit_bias → penalties → temperature → min_p → top-k → top-p

Bans (``-inf``, they commute): ``token_mask[r]``, ``allowed_token_ids``,
``bad_words`` whose last token completes the output so far, ``stop_token_ids``
while ``len(output so far) < min_tokens``. Greedy rows (T = 0) take the argmax
of the logits after bans, penalties and bias (min_p, top-k, top-p keep it).

Worked example (V = 4; request 0 drafted [2, 2], output so far []; presence 1):
the three rows see outputs [], [2], [2, 2], so only row 0 keeps token 2's logit.

>>> rows = process_logits(np.zeros((3, 4)), [2], np.array([2, 2]), presence_penalty=np.array([1.0]))
>>> rows[:, 2].tolist()
[0.0, -1.0, -1.0]
>>> rows = process_logits(np.zeros((2, 3)), [1], np.array([0]), bad_words=[[[0, 1]]])
>>> rows.tolist()                 # [0, 1] is bad: after draft 0, token 1 is banned
[[0.0, 0.0, 0.0], [0.0, -inf, 0.0]]
"""

from __future__ import annotations

import numpy as np

from reference.target import apply_temperature, apply_top_k, apply_top_p, softmax
from reference.validate import InvalidInput

ORDERS = ("canonical", "vllm")
"""The named order profiles of SPEC §12."""


def _entry(lists, i: int):  # request i's entry; () for a None list or entry (SPEC §12.1: its default)
    return () if lists is None or lists[i] is None else lists[i]


def row_histories(num_draft_tokens, draft_token_ids, output_token_ids=None):
    """Each target row's (request, position, output so far, read), placeholders absent (SPEC §12.2): ``[rows]``.

    >>> [h[2] for h in row_histories([2], np.array([7, 8]), [[5]])]
    [[5], [5, 7], [5, 7, 8]]
    """
    counts, ids, rows, start = np.asarray(num_draft_tokens, dtype=np.int64), list(draft_token_ids), [], 0
    for i, k in enumerate(counts):
        before = [int(t) for t in _entry(output_token_ids, i)]
        drafts = [int(t) for t in ids[start: start + k]]
        first = drafts.index(-1) if -1 in drafts else k
        rows += [(i, j, before + [t for t in drafts[:j] if t >= 0], j <= first) for j in range(k + 1)]
        start += k
    return rows


def banned(V: int, request: int, output: list, position_mask=None, allowed_token_ids=None, bad_words=None,
           min_tokens=None, stop_token_ids=None) -> np.ndarray:
    """``[V]`` bool: the tokens one row bans (mask, allowed ids, completed bad words, min_tokens)."""
    ban = np.zeros(V, dtype=bool) if position_mask is None else ~np.asarray(position_mask, dtype=bool)
    if allowed_token_ids is not None and allowed_token_ids[request] is not None:
        keep = np.zeros(V, dtype=bool)
        keep[np.asarray(allowed_token_ids[request], dtype=np.int64)] = True
        ban |= ~keep
    for word in _entry(bad_words, request):
        word = [int(t) for t in word]
        if len(output) >= len(word) - 1 and output[len(output) - len(word) + 1:] == word[:-1] or len(word) == 1:
            ban[word[-1]] = True
    if min_tokens is not None and len(output) < int(min_tokens[request]):
        ban[np.asarray(_entry(stop_token_ids, request), dtype=np.int64)] = True
    return ban


def penalise(z: np.ndarray, request: int, output: list, prompt_token_ids=None, repetition_penalty=None,
             frequency_penalty=None, presence_penalty=None) -> np.ndarray:
    """One row ``[V]``: repetition (prompt ∪ output so far; z/r above 0, z·r below), then
    frequency (``− f · count``) and presence (``− p · [count > 0]``) over the output so far."""
    counts = np.bincount(np.asarray(output, dtype=np.int64), minlength=len(z)).astype(np.float64)
    if repetition_penalty is not None:
        r = float(repetition_penalty[request])
        seen = counts > 0
        seen[np.asarray(_entry(prompt_token_ids, request), dtype=np.int64)] = True
        z = np.where(seen, np.where(z > 0, z / r, z * r), z)
    if frequency_penalty is not None:
        z = z - float(frequency_penalty[request]) * counts
    if presence_penalty is not None:
        z = z - float(presence_penalty[request]) * (counts > 0)
    return z


def process_logits(target_logits, num_draft_tokens, draft_token_ids, *, order="canonical", output_token_ids=None,
                   prompt_token_ids=None, token_mask=None, allowed_token_ids=None, bad_words=None,
                   min_tokens=None, stop_token_ids=None, logit_bias=None, repetition_penalty=None,
                   frequency_penalty=None, presence_penalty=None, **_) -> np.ndarray:
    """``[num_tokens + batch, V]`` float64: every row's logits after bans, penalties and bias
    (the order of penalties and bias is the profile's). A row a step reads left with no token raises."""
    if order not in ORDERS:
        raise InvalidInput(f"order: must be one of {ORDERS}, got {order!r}")
    logits = np.asarray(target_logits, dtype=np.float64)
    out = np.empty_like(logits)
    for r, (i, j, output, read) in enumerate(row_histories(num_draft_tokens, draft_token_ids, output_token_ids)):
        ban = banned(logits.shape[1], i, output, None if token_mask is None else token_mask[r],
                     allowed_token_ids, bad_words, min_tokens, stop_token_ids)
        if ban.all() and read:
            raise InvalidInput(f"token_mask: row {r} (request {i}, position {j}) allows no token after every ban")
        bias = 0.0 if logit_bias is None else np.asarray(logit_bias[i], dtype=np.float64)
        z = logits[r] + bias if order == "vllm" else logits[r]
        z = penalise(z, i, output, prompt_token_ids, repetition_penalty, frequency_penalty, presence_penalty)
        out[r] = np.where(ban, -np.inf, z if order == "vllm" else z + bias)
    return out


def min_p_cut(scaled: np.ndarray, min_p, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SPEC §12's min_p among ``candidates [n, V]`` of scaled logits ``[n, V]`` (``min_p [n]``, 0: off): keeps
    ``exp(s_v − s_max) ≥ min_p`` (ties kept); (kept ``[n, V]``, margin ``[n]``: ``min |exp(s_v − s_max)/min_p − 1|``)."""
    m = np.asarray(min_p, dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.exp(np.where(candidates, scaled - np.where(candidates, scaled, -np.inf).max(-1, keepdims=True), -np.inf))
        gap = np.where(candidates, np.abs(ratio / np.where(m > 0, m, 1.0) - 1), np.inf).min(axis=-1)
    return candidates & ((ratio >= m) | (m == 0)), np.where(m[:, 0] > 0, gap, np.inf)


def filtered_cuts(z: np.ndarray, T, top_k, top_p, min_p=None, order="canonical") -> tuple[np.ndarray, dict]:
    """Processed logits ``[n, V]`` through T and the profile's filters (parameters ``[n]``): (probs, §9's cut margins)."""
    m = np.zeros(len(z)) if min_p is None else np.asarray(min_p, dtype=np.float64)
    scaled = apply_temperature(z, T)
    if order == "vllm":
        kept, margin_m = min_p_cut(scaled, m, np.isfinite(scaled))
        scaled = np.where(kept, scaled, -np.inf)
    masked, margin_k = apply_top_k(scaled, top_k)
    probs, margin_p = apply_top_p(softmax(masked), top_p)
    if order == "canonical":
        kept, margin_m = min_p_cut(scaled, m, probs > 0)
        probs = np.where(kept, probs, 0.0) / np.where(kept, probs, 0.0).sum(axis=-1, keepdims=True)
    return probs, {"top_k": margin_k, "top_p": margin_p, "min_p": margin_m}


def sampler_rows(target_logits, num_draft_tokens, draft_token_ids, temperature, top_k, top_p, *,
                 min_p=None, order="canonical", **params) -> np.ndarray:
    """SPEC §12: ``target_probs [num_tokens + batch, V]`` of every row (one-hot argmax for T = 0).

    ``temperature``, ``top_k``, ``top_p``, ``min_p``: ``[batch]``; ``params``: ``process_logits``'.
    Without sampler parameters this is SPEC §2 row by row.
    """
    z = process_logits(target_logits, num_draft_tokens, draft_token_ids, order=order, **params)
    request = np.repeat(np.arange(len(num_draft_tokens)), np.asarray(num_draft_tokens) + 1)
    T = np.asarray(temperature, dtype=np.float64)[request]
    probs = filtered_cuts(z, np.where(T > 0, T, 1.0), np.asarray(top_k)[request], np.asarray(top_p)[request],
                          None if min_p is None else np.asarray(min_p)[request], order)[0]
    return np.where((T > 0)[:, None], probs, np.arange(z.shape[1]) == np.argmax(z, axis=1)[:, None])  # one-hot


def prefix_rows(target_logits, temperature, top_k, top_p, **params) -> list:
    """One request's ``K + 1`` rows as functions of the drafted prefix (``reference.laws``' rows):
    ``target_logits [K + 1, V]``; ``params``: ``sampler_rows``' for a batch of one request."""
    K = len(target_logits) - 1

    def row(j: int):
        return lambda prefix: sampler_rows(target_logits, [K], np.array(list(prefix) + [-1] * (K - len(prefix))),
                                           [temperature], [top_k], [top_p], **params)[j]
    return [row(j) for j in range(K + 1)]
