"""A vectorised numpy verification step (SPEC §2–§4) with named places where real bugs live.

The mutants need to change the *inside* of a step (the residual, the
acceptance comparison, which coin the bonus uses); a correct device is a
black box. So a mutant asks its wrapped device for the correct answer (which
also validates the input, SPEC §6) and then recomputes the step here, with one
hook switched to its buggy variant, from the same noise. With every hook at
its default this walk is a correct device (``tests/stats`` checks it against
``reference.verify``).

Shapes follow ``devices.protocol.VerifyBatch``; all arithmetic is float64.

>>> import numpy as np
>>> probs = target_probs_rows(np.log([[0.5, 0.3, 0.2]]), np.array([1.0]), np.array([0]), np.array([0.7]))
>>> probs.round(4).tolist()
[[0.625, 0.375, 0.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch, VerifyOutput


def target_probs_rows(logits: np.ndarray, temperature: np.ndarray, top_k: np.ndarray,
                      top_p: np.ndarray, exact_k: bool = False) -> np.ndarray:
    """SPEC §2 for many rows at once: ``logits`` ``[rows, V]``, params ``[rows]`` (T > 0) → ``[rows, V]``.

    ``exact_k`` is a bug (``torch.topk``-style masks): keep exactly k tokens,
    dropping boundary ties beyond the k-th by id.
    """
    scaled = np.asarray(logits, dtype=np.float64) / np.asarray(temperature, dtype=np.float64)[:, None]
    rows, V = scaled.shape
    k = np.asarray(top_k, dtype=np.int64)
    use_k = (k > 0) & (k < V)
    if use_k.any():
        desc = -np.sort(-scaled[use_k], axis=1)
        kth = desc[np.arange(desc.shape[0]), k[use_k] - 1]
        block = scaled[use_k]
        if exact_k:
            rank = np.argsort(np.argsort(-block, axis=1, kind="stable"), axis=1)
            scaled[use_k] = np.where(rank >= k[use_k][:, None], -np.inf, block)
        else:
            scaled[use_k] = np.where(block < kth[:, None], -np.inf, block)
    shifted = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    probs = shifted / shifted.sum(axis=1, keepdims=True)
    p = np.asarray(top_p, dtype=np.float64)
    use_p = p < 1.0
    if use_p.any():
        block = probs[use_p]
        desc = -np.sort(-block, axis=1)
        cum = np.cumsum(desc, axis=1)
        m = np.minimum((cum < p[use_p][:, None]).sum(axis=1), V - 1)  # first index with c >= p
        tau = desc[np.arange(desc.shape[0]), m]
        kept = np.where(block >= tau[:, None], block, 0.0)
        probs[use_p] = kept / kept.sum(axis=1, keepdims=True)
    return probs


def race(weights: np.ndarray, exponentials: np.ndarray) -> np.ndarray:
    """Exponential race per row: smallest id maximising ``w/E`` over ``w > 0`` (``[rows, V]`` each → ``[rows]``)."""
    scores = np.where(weights > 0, weights / exponentials, -np.inf)
    return np.argmax(scores, axis=1)


@dataclass
class Hooks:
    """The buggy variants a mutant may switch on (all off = SPEC)."""

    residual: str = "spec"         # "spec" max(t-d,0) | "target" t | "swapped" max(d-t,0) | "unnormalised"
    residual_row_shift: int = 0    # read the residual from target row j + shift
    accept_inclusive: bool = False  # u <= ratio instead of u < ratio
    count_after_rejection: bool = False  # num_accepted counts every accepted coin, not the prefix
    bonus_from_last_coin: bool = False  # bonus by inverse CDF with the last acceptance coin
    greedy_tie_high: bool = False  # greedy argmax ties to the highest id
    top_k_exact: bool = False      # top-k keeps exactly k (boundary ties dropped)


def _inverse_cdf(weights: np.ndarray, u: np.ndarray, normalise: bool) -> np.ndarray:
    """Inverse-CDF draw per row; unnormalised: ``u`` against raw partial sums, falling back to the last valid id."""
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1:] if normalise else np.ones((len(u), 1))
    idx = (cum <= u[:, None] * total).sum(axis=1)
    last_valid = weights.shape[1] - 1 - np.argmax((weights > 0)[:, ::-1], axis=1)
    return np.where(idx >= weights.shape[1], last_valid, idx)


def walk(batch: VerifyBatch, noise: Noise, hooks: Hooks | None = None) -> VerifyOutput:
    """One step of SPEC §3 for the whole ragged batch, position by position, using ``noise``."""
    h = hooks or Hooks()
    k = np.asarray(batch.num_draft_tokens, dtype=np.int64)
    B, V, K = len(k), batch.vocab_size, batch.max_k
    cu = batch.request_offsets()
    logits = np.asarray(batch.target_logits, dtype=np.float64)
    T = np.asarray(batch.temperature, dtype=np.float64)
    greedy = T == 0
    row_req = np.repeat(np.arange(B), k + 1)
    safe_T = np.where(greedy, 1.0, T)
    tp = target_probs_rows(logits, safe_T[row_req], np.asarray(batch.top_k)[row_req],
                           np.asarray(batch.top_p)[row_req], exact_k=h.top_k_exact)
    argmax = V - 1 - np.argmax(logits[:, ::-1], axis=1) if h.greedy_tie_high else np.argmax(logits, axis=1)
    ids = np.asarray(batch.draft_token_ids, dtype=np.int64)
    dp = None if batch.draft_probs is None else np.asarray(batch.draft_probs, dtype=np.float64)
    u_all = np.asarray(noise.uniforms, dtype=np.float64)
    E = np.asarray(noise.exponentials, dtype=np.float64)

    out = np.full((B, K + 1), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
    accepted = np.zeros(B, dtype=np.int64)
    counted = np.zeros(B, dtype=np.int64)
    alive = np.ones(B, dtype=bool)
    last_coin = np.zeros(B)
    for j in range(K + 1):
        here = alive & (k >= j)
        bonus = here & (k == j)
        draft = here & (k > j)
        req = np.flatnonzero(draft)
        trow = cu[req] + req + j
        drow = cu[req] + j
        x = ids[drow]
        placeholder = x == PLACEHOLDER_TOKEN_ID
        xs = np.where(placeholder, 0, x)
        t_x = np.where(placeholder, 0.0, tp[trow, xs])
        u = u_all[drow]
        if dp is None:
            ratio = t_x
            d_x = np.ones_like(t_x)
        else:
            d_x = np.where(placeholder, 0.0, dp[drow, xs])
            ratio = np.where(d_x > 0, t_x / np.where(d_x > 0, d_x, 1.0), 0.0)
        ok = (u <= ratio) if h.accept_inclusive else (u < ratio)
        ok &= ~placeholder & ((d_x > 0) | (dp is None))
        ok = np.where(greedy[req], x == argmax[trow], ok)
        counted[req] += ok  # coins that say "accept", prefix or not
        if h.count_after_rejection:
            for jj in range(j + 1, K):  # later coins of requests rejected here are still "counted"
                later = req[~ok & (k[req] > jj)]
                r2, d2 = cu[later] + later + jj, cu[later] + jj
                x2 = ids[d2]
                valid = x2 != PLACEHOLDER_TOKEN_ID
                t2 = tp[r2, np.where(valid, x2, 0)]
                d2x = np.ones_like(t2) if dp is None else dp[d2, np.where(valid, x2, 0)]
                counted[later] += valid & ~greedy[later] & (u_all[d2] < t2 / np.maximum(d2x, 1e-300))
        last_coin[req[ok]] = u[ok]
        out[req[ok], j] = x[ok]
        accepted[req[ok]] += 1
        rej = req[~ok]
        if rej.size:
            r_row = cu[rej] + rej + j + h.residual_row_shift
            r_row = np.minimum(r_row, cu[rej] + rej + k[rej])
            t = tp[r_row]
            xr = ids[cu[rej] + j]
            ph = xr == PLACEHOLDER_TOKEN_ID
            if dp is None:
                d = np.zeros_like(t)
                d[np.flatnonzero(~ph), xr[~ph]] = 1.0
                w = np.where(d > 0, 0.0, t)
            else:
                d = np.where(ph[:, None], 0.0, dp[cu[rej] + j])
                w = {"spec": np.maximum(t - d, 0.0), "target": t, "swapped": np.maximum(d - t, 0.0),
                     "unnormalised": np.maximum(t - d, 0.0)}[h.residual]
            empty = ~(w > 0).any(axis=1)
            w[empty] = t[empty]
            if h.residual == "unnormalised" and dp is not None:
                y = _inverse_cdf(w, 1.0 - np.exp(-E[rej, 0]), normalise=False)
            else:
                y = race(w, E[rej])
            y = np.where(greedy[rej], argmax[cu[rej] + rej + j], y)
            out[rej, j] = y
            alive[rej] = False
        breq = np.flatnonzero(bonus)
        if breq.size:
            brow = cu[breq] + breq + j
            if h.bonus_from_last_coin:
                y = np.where(k[breq] > 0, _inverse_cdf(tp[brow], last_coin[breq], normalise=True),
                             race(tp[brow], E[breq]))
            else:
                y = race(tp[brow], E[breq])
            out[breq, j] = np.where(greedy[breq], argmax[brow], y)
            alive[breq] = False
    return VerifyOutput(out, counted if h.count_after_rejection else accepted)


def keyed_noise(batch: VerifyBatch) -> Noise:
    """The keyed Philox noise of SPEC §5.2 for ``batch`` (vectorised torch, bit for bit the reference's)."""
    import torch

    from devices.torch_philox import seeds_to_int64, step_noise
    if batch.seeds is None or batch.positions is None:
        from devices.protocol import InvalidInput
        raise InvalidInput("seeds: seeds and positions are required when no noise is injected (SPEC §5.2)")
    u, e = step_noise(seeds_to_int64(np.asarray(batch.seeds)), torch.as_tensor(np.asarray(batch.positions, dtype=np.int64)),
                      torch.as_tensor(np.asarray(batch.num_draft_tokens, dtype=np.int64)), batch.vocab_size)
    return Noise(u.numpy(), e.numpy())


class WalkDevice:
    """``walk`` as a device (injected noise, keyed Philox): a fast stand-in and the mutants' fallback base.

    It does not validate its input (SPEC §6); a mutant's wrapped device does.
    """

    name = "numpy-walk"

    def __init__(self, hooks: Hooks | None = None):
        from devices.protocol import Capabilities
        self.hooks = hooks
        self.capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=1 << 20, max_k=64)

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        return walk(batch, noise if noise is not None else keyed_noise(batch), self.hooks)
