"""Noise placed next to the decisions it drives (SPEC §9): each coin beside its ratio, each race beside its tie.

Random noise leaves most decisions far from their boundaries, where no rounding can flip them. A check that
must see a device's arithmetic — 16-bit logits computed on in 16 bits (SPEC §6), say — moves the noise so that
every decision it can reach sits at a stated relative distance from its boundary: beyond the tolerance (a
device computing in float32 never flips one) and inside what 16-bit arithmetic moves (2⁻¹¹ to 2⁻⁸ relative).

* ``placed_coins``: each drafted coin ``u = r·(1 ± δ)`` beside its ratio ``r = t(x)/d(x)`` (point: ``t(x)``);
* ``placed_races``: on the path those coins give, each request's emission race made a near-tie: the runner-up's
  score ``w/E`` set to the winner's ``× (1 − δ)``, so the residual's or the row's rounding picks the other token.

``δ`` is drawn log-uniformly from ``NEAR`` × the tolerance, signed at random for coins.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID

NEAR = (3.0, 30.0)
"""Relative distance of a placed decision from its boundary, in units of the dtype's tolerance (SPEC §9): 3e-4
to 3e-3 at float32's 1e-4 — past the tolerance (float32's own error on a probability is ~1e-6), inside a 16-bit
step's rounding (float16's 2⁻¹¹ ≈ 4.9e-4, bfloat16's 2⁻⁸ ≈ 3.9e-3 on a value of a few units)."""

ROBUST = 0.1
"""A race is placed only where both its tokens keep at least this fraction of their target probability in the
residual: ``max(t − d, 0)`` computed in float32 loses ``t/w`` ulps of ``t`` to cancellation, and at
``w ≥ 0.1·t`` that stays far inside the tolerance, so a float32 device never flips a placed race."""


def reference_rows(batch) -> np.ndarray:
    """``[num_tokens + batch, V]`` float64: every target row's ``target_probs`` (SPEC §2, with §12's parameters
    when the batch carries them), from the given logits exactly (16-bit values up-cast without rounding)."""
    from reference.sampler import sampler_rows
    params = {} if batch.sampler is None else batch.sampler.as_kwargs()
    return sampler_rows(np.asarray(batch.target_logits, np.float64), batch.num_draft_tokens, batch.draft_token_ids,
                        batch.temperature, batch.top_k, batch.top_p, **params)


def _distances(rng: np.random.Generator, n: int, tolerance: float) -> np.ndarray:
    """``[n]`` relative distances, log-uniform in ``NEAR × tolerance``."""
    low, high = (f * tolerance for f in NEAR)
    return np.exp(rng.uniform(np.log(low), np.log(high), n))


def placed_coins(rng: np.random.Generator, batch, noise, tolerance: float, rows: np.ndarray):
    """``noise`` with each drafted coin moved beside its ratio: ``u = r·(1 ± δ)`` wherever ``r·(1 + δ_max) < 1``
    (a ratio ≥ 1 accepts whatever the coin; a placeholder, ``t(x) = 0`` or ``d(x) = 0`` rejects structurally;
    greedy requests read no coin). ``rows``: ``reference_rows(batch)``. Returns the new noise."""
    ids = np.asarray(batch.draft_token_ids)
    request = np.repeat(np.arange(batch.batch_size), batch.num_draft_tokens)
    safe = np.where(ids >= 0, ids, 0)
    t_x = rows[np.arange(len(ids)) + request, safe]
    d_x = np.ones(len(ids)) if batch.draft_probs is None else \
        np.asarray(batch.draft_probs, np.float64)[np.arange(len(ids)), safe]
    ratio = t_x / np.where(d_x > 0, d_x, 1.0)
    delta = _distances(rng, len(ids), tolerance) * rng.choice([-1.0, 1.0], len(ids))
    near = (ids >= 0) & (t_x > 0) & (d_x > 0) & (ratio * (1 + NEAR[1] * tolerance) < 1) \
        & (np.asarray(batch.temperature)[request] > 0)
    return replace(noise, uniforms=np.where(near, ratio * (1 + delta), noise.uniforms))


def emission_weights(batch, num_accepted: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(w, t)`` ``[batch, V]``: each request's emission weights on the path ``num_accepted [batch]`` (the residual
    after its first rejection, or the bonus row; SPEC §3, §4) and the target row they come from."""
    from reference.verify import residual
    k = np.asarray(batch.num_draft_tokens)
    starts = np.cumsum(k) - k
    ids = np.asarray(batch.draft_token_ids)
    rejected = num_accepted < k
    emit_draft = np.where(rejected, starts + num_accepted, 0)
    emit_id = np.where(rejected, ids[emit_draft] if len(ids) else PLACEHOLDER_TOKEN_ID, PLACEHOLDER_TOKEN_ID)
    withdrawn = np.zeros(len(k), bool) if batch.withdrawn is None or not len(ids) else \
        np.asarray(batch.withdrawn, bool)[emit_draft] & rejected
    target = rows[starts + np.arange(len(k)) + num_accepted]
    draft = None if batch.draft_probs is None or not len(ids) else np.asarray(batch.draft_probs, np.float64)[emit_draft]
    return residual(emit_id, target, draft, withdrawn), target


def placed_races(rng: np.random.Generator, batch, noise, tolerance: float, rows: np.ndarray, num_accepted: np.ndarray):
    """``noise`` with each sampled request's emission race made a near-tie on the path ``num_accepted``: the
    runner-up's exponential lowered so its score is the winner's ``× (1 − δ)``. Races whose two tokens are not
    ``ROBUST`` in the residual, or with a single candidate, keep their noise. Returns the new noise."""
    w, t = emission_weights(batch, num_accepted, rows)
    E = np.array(noise.exponentials, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(w > 0, w / E, -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")
    every = np.arange(len(w))
    best, second = order[:, 0], order[:, 1] if w.shape[1] > 1 else order[:, 0]
    top = scores[every, best]
    robust = (w[every, best] >= ROBUST * t[every, best]) & (w[every, second] >= ROBUST * t[every, second])
    place = (np.asarray(batch.temperature) > 0) & (best != second) & np.isfinite(scores[every, second]) & robust
    delta = _distances(rng, len(w), tolerance)
    lowered = w[every, second] / np.where(place, top * (1 - delta), 1.0)
    E[every, second] = np.where(place, lowered, E[every, second])
    return replace(noise, exponentials=E)


def placed_noise(rng: np.random.Generator, batch, noise, tolerance: float):
    """``noise`` with every coin placed beside its ratio, then every emission race beside its tie on the path the
    placed coins give (the reference's: ``specsim.judge.compare.reference_step``)."""
    from specsim.judge.compare import reference_step
    rows = reference_rows(batch)
    noise = placed_coins(rng, batch, noise, tolerance, rows)
    return placed_races(rng, batch, noise, tolerance, rows, reference_step(batch, noise).num_accepted)
