"""A case's trials in shards: drafts drawn, batches built, the device called, the output tallied.

A shard is a pure function of (suite seed, case, shard index) and its size
(``shard_seed``, ``shard_sizes``): every draft, request seed and position it
uses comes from its seed, so its ``Tally`` does not depend on which worker ran
it (``specsim.campaign``). ``run_shard`` runs one, ``run_trials`` every shard of
a case in this process.
"""

from __future__ import annotations

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, UnsupportedCall, VerifyBatch
from specsim.judge import stats
from specsim.conformance.core.calls import Refusal, ask, frozen_call
from specsim.conformance.cases.chain import Built
from specsim.conformance.stats.l3_design import CasePlan
from specsim.conformance.stats.tally import Tally, tally_chunk

MAX_FLOATS_PER_CALL = 20_000_000
"""Bound on the floats of one verify call (logits + draft rows), to bound memory."""

SHARD_TRIALS = 20_000
"""Trials of one shard (``shard_sizes``); part of the draw, so changing it changes the suite's samples."""


def shard_sizes(plan: CasePlan, shard_trials: int = SHARD_TRIALS) -> list[int]:
    """The trials of each shard of a case: ``shard_trials`` each, the last one the rest.

    A shard is a pure function of (suite seed, case, shard index) and its
    size; merging shards is exact addition of integer counts, so the verdict
    is the same whatever ran them, in whatever order (``specsim.campaign``).

    >>> from specsim.conformance.cases.chain import CASES
    >>> plan = CasePlan(CASES[0], None, 2 * SHARD_TRIALS + 5)
    >>> shard_sizes(plan) == [SHARD_TRIALS, SHARD_TRIALS, 5]
    True
    """
    full, rest = divmod(plan.trials, shard_trials)
    return [shard_trials] * full + ([rest] if rest else [])


def shard_seed(suite_seed: int, case_id: str, index: int) -> int:
    """The seed of one shard's drafts, request seeds and positions: (suite seed, case, index) alone."""
    return stats.case_seed(suite_seed, case_id, "shard", index)


def _sample_drafts(rng: np.random.Generator, rows: np.ndarray, n: int) -> np.ndarray:
    """``[n, K]`` draft ids, column j drawn from ``rows[j]`` (``[K, V]``) by inverse CDF."""
    K, V = rows.shape
    out = np.empty((n, K), dtype=np.int64)
    for j in range(K):
        cum = np.cumsum(rows[j])
        out[:, j] = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), V - 1)
    return out


def _floats_per_trial(built: Built) -> int:
    return built.target_logits.size + (0 if built.case.point else built.draft_rows.size)


def _tiles(built: Built, dtype_name: str, n: int) -> tuple:
    """The parts of ``n`` trials' batch that every call of a case repeats, built once and read-only.

    At a real vocabulary the logits and draft rows are nearly all of what
    crosses the protocol (``n × (rows + B + K) × V`` floats); tiling them anew
    for every call would cost more than many devices' step. Returns
    ``(num_draft_tokens [n·B], draft_probs [n·K, V] | None, target_logits
    [n·(K+B), V], temperature [n·B], top_k [n·B], top_p [n·B])``.
    """
    cache = built.__dict__.setdefault("_tiles", {})  # at most two sizes: the full call and a shard's last one
    if (dtype_name, n) in cache:
        return cache[(dtype_name, n)]
    dtype = np.dtype(dtype_name)
    parts = (np.tile(built.num_draft_tokens, n),
             None if built.case.point else np.tile(built.draft_rows.astype(dtype), (n, 1)),
             np.tile(built.target_logits.astype(dtype), (n, 1)),
             np.tile(built.temperature, n), np.tile(built.top_k, n), np.tile(built.top_p, n))
    for a in parts:  # shared by every call of the case: nothing may write them (nor what they view)
        while isinstance(a, np.ndarray):
            a.flags.writeable = False
            a = a.base
    if len(cache) >= 2:
        cache.pop(next(iter(cache)))
    cache[(dtype_name, n)] = parts
    return parts


def _trial_batch(built: Built, drafts: list, rng: np.random.Generator, n: int, dtype) -> VerifyBatch:
    """``n`` copies of the template, request-major inside a trial, each request with its own seed and position."""
    B = len(built.num_draft_tokens)
    ids = np.concatenate([d for d in drafts], axis=1) if drafts else np.zeros((n, 0), np.int64)
    k, draft_probs, logits, temperature, top_k, top_p = _tiles(built, np.dtype(dtype).name, n)
    return VerifyBatch(
        num_draft_tokens=k, draft_token_ids=ids.reshape(-1), draft_probs=draft_probs, target_logits=logits,
        temperature=temperature, top_k=top_k, top_p=top_p,
        seeds=rng.integers(0, 2**64, size=n * B, dtype=np.uint64),
        positions=rng.integers(0, 2**31, size=n * B, dtype=np.int64),
        sampler=None if built.sampler is None else built.sampler.tiled(n),
    )


def template_batch(built: Built, dtype) -> VerifyBatch:
    """One trial's batch (draft ids: each row's most likely token), the template ``verify_repeated`` tiles."""
    cache = built.__dict__.setdefault("_template", {})
    name = np.dtype(dtype).name
    if name not in cache:
        ids = np.argmax(built.draft_rows, axis=1).astype(np.int64)
        for i, r in enumerate(built.case.requests):
            if r.placeholder:
                ids[built.draft_row(i, 0): built.draft_row(i, 0) + r.k] = PLACEHOLDER_TOKEN_ID
        cache[name] = VerifyBatch(built.num_draft_tokens, ids,
                                  None if built.case.point else built.draft_rows.astype(dtype),
                                  built.target_logits.astype(dtype), built.temperature, built.top_k, built.top_p,
                                  np.zeros(len(built.num_draft_tokens), np.uint64),
                                  np.zeros(len(built.num_draft_tokens), np.int64))
    return cache[name]


def _verify_repeated(device, built: Built, drafts: list, rng: np.random.Generator, n: int, dtype):
    """The ``n`` trials through ``device.verify_repeated``: the draws of ``_trial_batch``, the same result as
    ``verify``, but only ids, seeds and positions cross the protocol per call (the rows once, as the template)."""
    B = len(built.num_draft_tokens)
    ids = np.concatenate(drafts, axis=1).reshape(-1) if drafts else np.zeros(0, np.int64)
    seeds = rng.integers(0, 2**64, size=n * B, dtype=np.uint64)       # drawn as _trial_batch draws them
    positions = rng.integers(0, 2**31, size=n * B, dtype=np.int64)
    template = template_batch(built, dtype)
    try:
        return frozen_call(lambda template, draft_token_ids, seeds, positions: device.verify_repeated(
            template, n, draft_token_ids, seeds, positions),
            {"template": template, "draft_token_ids": ids, "seeds": seeds, "positions": positions})
    except UnsupportedCall as e:  # judged on the template: V, K, dtype and modes are the call's, B is never declared
        raise Refusal(e, template, None, what=f"verify_repeated of this template tiled {n} times") from e


REPEATED_CALL_FACTOR = 16
"""``verify_repeated`` calls hold this many times the trials of a ``verify`` call: their rows are tiled on the
device, so the host memory bound ``MAX_FLOATS_PER_CALL`` does not apply (at V = 128256: 400 trials, ~1.2 GB)."""


def run_shard(device, plan: CasePlan, suite_seed: int, index: int, shard_trials: int = SHARD_TRIALS,
              repeated: bool = False) -> Tally:
    """Shard ``index`` of a case through ``device``: its trials in calls of at most ``MAX_FLOATS_PER_CALL``.

    Everything drawn here comes from ``shard_seed(suite_seed, case, index)``,
    so the shard's counts depend on nothing else (not on which worker runs it).
    ``repeated``: call the device's optional ``verify_repeated`` (the sign-off
    profile at a real vocabulary, where each trial's rows are megabytes).

    A refusal (``UnsupportedCall``) is raised as ``_common.Refusal`` carrying the call; the call is
    never retried smaller. The case was asked only because the declaration covers its V, K, dtype
    and modes, and batch size is never a declared limit, so a refusal here contradicts the
    declaration: ``statistical_group`` records it as a ``fail`` (``_common.refused``). A device with
    a batch limit of its own splits the call itself.
    """
    repeated = repeated and hasattr(device, "verify_repeated") and plan.built.sampler is None  # §12 rows: verify
    built = plan.built
    trials = shard_sizes(plan, shard_trials)[index]
    rng = np.random.default_rng(shard_seed(suite_seed, plan.case.id, index))
    dtype = np.float32 if "float32" in device.capabilities.dtypes else np.float64
    chunk = max(1, min(trials, MAX_FLOATS_PER_CALL // _floats_per_trial(built)
                       * (REPEATED_CALL_FACTOR if repeated else 1)))
    t = Tally()
    done = 0
    while done < trials:
        n = min(chunk, trials - done)
        drafts = [np.full((n, r.k), PLACEHOLDER_TOKEN_ID, np.int64) if r.placeholder else
                  _sample_drafts(rng, built.draft_rows[built.draft_row(i, 0): built.draft_row(i, 0) + r.k], n)
                  for i, r in enumerate(built.case.requests)]
        if repeated:
            out = _verify_repeated(device, built, drafts, rng, n, dtype)
            tally_chunk(t, built, drafts, out, n)
            done += n
            continue
        batch = _trial_batch(built, drafts, rng, n, dtype)
        out = ask(device, batch)
        tally_chunk(t, built, drafts, out, n)
        done += n
    t.n = done
    return t


def run_trials(device, plan: CasePlan, suite_seed: int) -> Tally:
    """Every shard of the case, in this process, in order: the in-process campaign."""
    return Tally.merged(run_shard(device, plan, suite_seed, s) for s in range(len(shard_sizes(plan))))
