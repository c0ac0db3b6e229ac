"""Noise placed next to the decisions it drives (SPEC §9): each coin beside its ratio, each race beside its tie.

Random noise leaves most decisions far from their boundaries, where no rounding can flip them. A check that
must see a device's arithmetic — 16-bit logits computed on in 16 bits (SPEC §6), say — moves the noise so that
every decision it can reach sits at a stated relative distance from its boundary: beyond the tolerance (a
device computing in float32 never flips one) and inside what 16-bit arithmetic moves (2⁻¹¹ to 2⁻⁸ relative).

* ``placed_coins``: each drafted coin ``u = r·(1 ± δ)`` beside its ratio ``r = t(x)/d(x)`` (point: ``t(x)``);
* ``placed_races``: on the path those coins give, each request's emission race made a near-tie: the runner-up's
  score ``w/E`` set to the winner's ``× (1 − δ)``, so the residual's or the row's rounding picks the other token;
* ``placed_tree_noise``: the same for a tree step (SPEC §11): each node's coin beside its boundary on the residual
  its earlier siblings leave (rrs) or the level's coin beside one sibling's running sum (sglang), then the
  emission race on the reference's path.

Both forms place through ``coins_beside`` and ``races_beside``.

``δ`` is drawn log-uniformly from ``NEAR`` × the tolerance, signed at random for coins.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, TreeBatch

NEAR = (3.0, 30.0)
"""Relative distance of a placed decision from its boundary, in units of the dtype's tolerance (SPEC §9): 3e-4
to 3e-3 at float32's 1e-4 — past the tolerance (float32's own error on a probability is ~1e-6), inside a 16-bit
step's rounding (float16's 2⁻¹¹ ≈ 4.9e-4, bfloat16's 2⁻⁸ ≈ 3.9e-3 on a value of a few units)."""

ROBUST = 0.1
"""A race is placed only where both its tokens keep at least this fraction of their target probability in the
residual: ``max(t − d, 0)`` computed in float32 loses ``t/w`` ulps of ``t`` to cancellation, and at
``w ≥ 0.1·t`` that stays far inside the tolerance, so a float32 device never flips a placed race."""

MASS = 0.01
"""In a tree, a decision after rejected siblings is placed only where each rejection left at least this much of the
residual's mass: renormalising by a mass ``Z`` multiplies the row's rounding by ``1/Z``, 100 float32 ulps at most
here, far inside the tolerance."""


def reference_rows(batch) -> np.ndarray:
    """``[num_tokens + batch, V]`` float64: every target row's ``target_probs`` (SPEC §2, with §12's parameters
    when the batch carries them), from the given logits exactly (16-bit values up-cast without rounding). A
    ``TreeBatch``'s rows are laid out the same way, ``num_nodes`` for ``num_draft_tokens`` (SPEC §11.1)."""
    from reference.sampler import sampler_rows
    counts = batch.num_nodes if isinstance(batch, TreeBatch) else batch.num_draft_tokens
    params = {} if getattr(batch, "sampler", None) is None else batch.sampler.as_kwargs()
    return sampler_rows(np.asarray(batch.target_logits, np.float64), counts, batch.draft_token_ids,
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
    placeable = (ids >= 0) & (d_x > 0) & (np.asarray(batch.temperature)[request] > 0)
    return replace(noise, uniforms=coins_beside(rng, noise.uniforms, ratio, placeable, tolerance))


def coins_beside(rng: np.random.Generator, uniforms: np.ndarray, ratio: np.ndarray, placeable: np.ndarray,
                 tolerance: float) -> np.ndarray:
    """``uniforms [n]`` with each ``placeable [n]`` coin moved to ``ratio·(1 ± δ)`` (``ratio [n]``, the coin's
    acceptance boundary) wherever ``0 < ratio`` and ``ratio·(1 + δ_max) < 1``: a boundary at or past 1 accepts
    whatever the coin, a boundary at 0 rejects structurally."""
    delta = _distances(rng, len(ratio), tolerance) * rng.choice([-1.0, 1.0], len(ratio))
    near = placeable & (ratio > 0) & (ratio * (1 + NEAR[1] * tolerance) < 1)
    return np.where(near, ratio * (1 + delta), uniforms)


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
    sampled = np.asarray(batch.temperature) > 0
    return replace(noise, exponentials=races_beside(rng, noise.exponentials, w, w >= ROBUST * t, sampled, tolerance))


def races_beside(rng: np.random.Generator, exponentials: np.ndarray, w: np.ndarray, robust: np.ndarray,
                 sampled: np.ndarray, tolerance: float) -> np.ndarray:
    """``exponentials [B, V]`` with each ``sampled [B]`` race over the weights ``w [B, V]`` made a near-tie: the
    runner-up's exponential lowered so its score is the winner's ``× (1 − δ)``, where both tokens are ``robust
    [B, V]`` (their weights computed in float32 stay far inside the tolerance) and there are two candidates."""
    E = np.array(exponentials, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = np.where(w > 0, w / E, -np.inf)
    order = np.argsort(-scores, axis=1, kind="stable")
    every = np.arange(len(w))
    best, second = order[:, 0], order[:, 1] if w.shape[1] > 1 else order[:, 0]
    top = scores[every, best]
    place = sampled & (best != second) & np.isfinite(scores[every, second]) \
        & robust[every, best] & robust[every, second]
    delta = _distances(rng, len(w), tolerance)
    lowered = w[every, second] / np.where(place, top * (1 - delta), 1.0)
    E[every, second] = np.where(place, lowered, E[every, second])
    return E


def placed_noise(rng: np.random.Generator, batch, noise, tolerance: float):
    """``noise`` with every coin placed beside its ratio, then every emission race beside its tie on the path the
    placed coins give (the reference's: ``specsim.judge.compare.reference_step``)."""
    from specsim.judge.compare import reference_step
    rows = reference_rows(batch)
    noise = placed_coins(rng, batch, noise, tolerance, rows)
    return placed_races(rng, batch, noise, tolerance, rows, reference_step(batch, noise).num_accepted)


# --- trees (SPEC §11): the same placement on each node's boundary and on the path's emission race ----------------

def _rrs_level(target: np.ndarray, ids: list[int], drafts: list | None):
    """One slot's siblings under §11.3, all rejected in turn: ``(ratios [m], robust [m], residual [V], kept [V])``.

    ``ratios[k]``: sibling ``k``'s boundary ``r(x)/d(x)`` on the residual the earlier siblings leave (0 for a
    placeholder or ``d(x) = 0``); ``robust[k]``: every earlier rejection kept ``ROBUST`` of ``r(x)`` and ``MASS``
    of the residual; ``residual``: after every sibling (the emission law if none is accepted); ``kept``: the tokens
    every rejection kept ``ROBUST`` of, while the mass held ``MASS``."""
    from reference.tree import level
    r, kept = np.asarray(target, np.float64), np.ones(len(target), bool)
    ratios, robust = np.zeros(len(ids)), np.zeros(len(ids), bool)
    for k, x in enumerate(ids):
        if x == PLACEHOLDER_TOKEN_ID:           # skipped: the residual is untouched (§11.3)
            continue
        d = np.asarray(drafts[k], np.float64) if drafts is not None else np.eye(len(r))[x]
        ratios[k], robust[k] = (r[x] / d[x] if d[x] > 0 else 0.0), kept[x]
        left = np.maximum(r - d, 0.0)
        kept &= (left >= ROBUST * r) & (left.sum() >= MASS)
        r = np.asarray(level("rrs", r.tolist(), [x], None if drafts is None else [d.tolist()])[2])
    return ratios, robust, r, kept


def _sglang_boundary(rng: np.random.Generator, target: np.ndarray, ids: list[int], batch: TreeBatch) -> float:
    """The level's one coin's boundary (§11.4): ``A_k / threshold_acc`` for a sibling ``k`` drawn among those the
    coin decides (real, ``t(x) > 0``, below ``threshold_single``, no earlier sibling accepted outright); 0: none."""
    running, boundaries = 0.0, []
    for x in ids:
        if x == PLACEHOLDER_TOKEN_ID:
            continue
        running += target[x]
        if target[x] > 0 and target[x] >= batch.threshold_single:
            break                               # accepted whatever the coin: later siblings are never reached
        if target[x] > 0 and batch.threshold_acc > 0:
            boundaries.append(running / batch.threshold_acc)
    return float(boundaries[rng.integers(len(boundaries))]) if boundaries else 0.0


def _slots(batch: TreeBatch):
    """``(request, target row, sibling nodes)`` of every slot with children, nodes as global indices."""
    from reference.tree import children_of
    cu = batch.request_offsets()
    for i in range(batch.batch_size):
        for slot, kids in enumerate(children_of(np.asarray(batch.parents[cu[i]:cu[i + 1]]).tolist())):
            if kids:
                yield i, int(cu[i]) + i + slot, [int(cu[i]) + n for n in kids]


def placed_tree_coins(rng: np.random.Generator, batch: TreeBatch, noise, tolerance: float, rows: np.ndarray):
    """``noise`` with each sampled request's coins beside their boundaries: rrs, every node's coin beside its
    ``r(x)/d(x)`` where ``robust``; sglang, each level's coin (its first sibling's) beside one sibling's running
    sum. ``rows``: ``reference_rows(batch)``. Returns the new noise."""
    ids = np.asarray(batch.draft_token_ids)
    ratio, placeable = np.zeros(len(ids)), np.zeros(len(ids), bool)
    sampled = np.asarray(batch.temperature) > 0
    for i, row, nodes in _slots(batch):
        if not sampled[i]:
            continue
        if batch.scheme == "sglang":
            ratio[nodes[0]], placeable[nodes[0]] = _sglang_boundary(rng, rows[row], ids[nodes].tolist(), batch), True
            continue
        drafts = None if batch.draft_probs is None else list(np.asarray(batch.draft_probs)[nodes])
        ratio[nodes], placeable[nodes] = _rrs_level(rows[row], ids[nodes].tolist(), drafts)[:2]
    return replace(noise, uniforms=coins_beside(rng, noise.uniforms, ratio, placeable, tolerance))


def tree_emission_weights(batch: TreeBatch, accepted_nodes: np.ndarray, rows: np.ndarray):
    """``(w, robust)`` ``[batch, V]``: each request's emission law on the path ``accepted_nodes [batch, D]`` (the
    residual its last slot's rejected siblings leave, or the leaf's bonus row; SPEC §11.3, §11.4) and the tokens
    whose weight a float32 device computes far inside the tolerance."""
    from reference.tree import children_of, level
    cu, ids = batch.request_offsets(), np.asarray(batch.draft_token_ids)
    w, robust = np.zeros((batch.batch_size, batch.vocab_size)), np.ones((batch.batch_size, batch.vocab_size), bool)
    for i in range(batch.batch_size):
        path = [int(n) for n in np.asarray(accepted_nodes)[i] if n >= 0] if np.size(accepted_nodes) else []
        slot = path[-1] + 1 if path else 0
        kids = [int(cu[i]) + n for n in children_of(np.asarray(batch.parents[cu[i]:cu[i + 1]]).tolist())[slot]]
        target = rows[int(cu[i]) + i + slot]
        if not kids:
            w[i] = target
        elif batch.scheme == "sglang":
            w[i] = level("sglang", target.tolist(), ids[kids].tolist(), None, batch.threshold_single,
                         batch.threshold_acc)[2]
        else:
            drafts = None if batch.draft_probs is None else list(np.asarray(batch.draft_probs)[kids])
            _, _, w[i], robust[i] = _rrs_level(target, ids[kids].tolist(), drafts)
    return w, robust


def placed_tree_noise(rng: np.random.Generator, batch: TreeBatch, noise, tolerance: float):
    """``noise`` for a tree step with every coin placed beside its boundary, then every sampled request's emission
    race beside its tie on the path the placed coins give (the reference's: ``reference.tree.verify_tree``)."""
    from specsim.testing.trees import reference_tree_step
    rows = reference_rows(batch)
    noise = placed_tree_coins(rng, batch, noise, tolerance, rows)
    w, robust = tree_emission_weights(batch, reference_tree_step(batch, noise).accepted_nodes, rows)
    sampled = np.asarray(batch.temperature) > 0
    return replace(noise, exponentials=races_beside(rng, noise.exponentials, w, robust, sampled, tolerance))
