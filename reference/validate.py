"""SPEC §6: the input rules. Every violation raises ``InvalidInput`` naming the argument.

Devices implement the same rules independently (``devices/_validate.py``):
the duplication is deliberate, since a device may not import the reference
that judges it.

>>> check_step(np.array([1]), np.array([5]), None, np.zeros((2, 4)), np.ones(1), np.zeros(1, int), np.ones(1))
Traceback (most recent call last):
...
reference.validate.InvalidInput: draft_token_ids: id 5 at index 0 is outside [0, 4) and is not the placeholder -1
"""

from __future__ import annotations

import numpy as np

from reference.layout import PLACEHOLDER_TOKEN_ID, offsets

PROB_SUM_ATOL = 1e-3
FLOAT_DTYPES = ("float32", "float64")
LOGIT_DTYPES = ("float16", "bfloat16") + FLOAT_DTYPES  # bfloat16: the ml_dtypes package's numpy dtype


def draft_dtype(logits_dtype: str) -> str:
    """``draft_probs``' dtype: ``target_logits``' own, float32 with 16-bit logits (SPEC §6)."""
    return logits_dtype if logits_dtype in FLOAT_DTYPES else "float32"


class InvalidInput(ValueError):
    """Input that breaks SPEC §6; the message names the argument and the rule."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InvalidInput(message)


def _int_array(name: str, a, shape: tuple) -> np.ndarray:
    a = np.asarray(a)
    _require(a.dtype.kind in "iu", f"{name}: must be an integer array, got dtype {a.dtype}")
    _require(a.shape == shape, f"{name}: shape must be {shape}, got {a.shape}")
    return a


def _float_array(name: str, a, shape: tuple, dtypes: tuple = FLOAT_DTYPES) -> np.ndarray:
    a = np.asarray(a)
    _require(a.dtype.name in dtypes, f"{name}: dtype must be one of {', '.join(dtypes)}, got {a.dtype}")
    _require(a.shape == shape, f"{name}: shape must be {shape}, got {a.shape}")
    return a


def _real_array(name: str, a, shape: tuple) -> np.ndarray:
    """A per-request parameter: any real dtype (ints and floats), as float64."""
    a = np.asarray(a)
    _require(a.dtype.kind in "iuf", f"{name}: must be real numbers, got dtype {a.dtype}")
    _require(a.shape == shape, f"{name}: shape must be {shape}, got {a.shape}")
    return a.astype(np.float64)


def check_step(num_draft_tokens, draft_token_ids, draft_probs, target_logits,
               temperature, top_k, top_p, seeds=None, positions=None) -> None:
    """Raise ``InvalidInput`` for the first rule of SPEC §6 the step breaks."""
    k = np.asarray(num_draft_tokens)
    _require(k.ndim == 1, f"num_draft_tokens: must be 1-D [batch], got shape {k.shape}")
    _require(k.size >= 1, "num_draft_tokens: the batch is empty; a step needs at least one request")
    _require(k.dtype.kind in "iu", f"num_draft_tokens: must be integers, got dtype {k.dtype}")
    _require(bool((k >= 0).all()), f"num_draft_tokens: must be >= 0, got {k.tolist()}")
    batch, num_tokens = k.size, int(k.sum())
    logits = np.asarray(target_logits)
    _require(logits.ndim == 2 and logits.shape[1] >= 1,
             f"target_logits: must be 2-D [num_tokens + batch, V] with V >= 1, got shape {logits.shape}")
    V = logits.shape[1]
    given = _float_array("target_logits", logits, (num_tokens + batch, V), LOGIT_DTYPES)
    logits = given.astype(np.float64, copy=False)  # 16-bit values up-cast exactly
    _require(not np.isnan(logits).any(), "target_logits: contains NaN")
    _require(not np.isposinf(logits).any(), "target_logits: contains +inf")
    dead = np.flatnonzero(~np.isfinite(logits).any(axis=1))
    _require(dead.size == 0, f"target_logits: row {dead[:1].tolist()} has no finite value (every token masked)")
    ids = _int_array("draft_token_ids", draft_token_ids, (num_tokens,))
    bad = np.flatnonzero(((ids < 0) | (ids >= V)) & (ids != PLACEHOLDER_TOKEN_ID))
    _require(bad.size == 0, f"draft_token_ids: id {ids[bad[:1]].tolist()[0] if bad.size else ''} at index "
                            f"{bad[:1].tolist()[0] if bad.size else ''} is outside [0, {V}) and is not the placeholder -1")
    if draft_probs is not None:
        probs = _float_array("draft_probs", draft_probs, (num_tokens, V))
        want = draft_dtype(given.dtype.name)
        _require(probs.dtype.name == want, f"draft_probs: dtype must be {want} with {given.dtype} target_logits, "
                                           f"got {probs.dtype}")
        _check_draft_rows(probs[ids != PLACEHOLDER_TOKEN_ID], np.flatnonzero(ids != PLACEHOLDER_TOKEN_ID), k)
    t = _real_array("temperature", temperature, (batch,))
    _require(bool(np.isfinite(t).all() and (t >= 0).all()), f"temperature: must be finite and >= 0, got {t.tolist()}")
    tk = _int_array("top_k", top_k, (batch,))
    _require(bool((tk >= 0).all()), f"top_k: must be >= 0 (0 = off), got {tk.tolist()}")
    tp = _real_array("top_p", top_p, (batch,))
    _require(bool(((tp > 0) & (tp <= 1)).all()), f"top_p: must be in (0, 1] (1 = off), got {tp.tolist()}")
    if seeds is not None:
        s = _int_array("seeds", seeds, (batch,))
        _require(bool((s >= 0).all()), f"seeds: must be in [0, 2**64), got {s.tolist()}")
    if positions is not None:
        L = _int_array("positions", positions, (batch,))
        _require(bool(((L >= 0) & (L < 2**32)).all()), f"positions: must be in [0, 2**32), got {L.tolist()}")


def _check_draft_rows(rows: np.ndarray, row_ids: np.ndarray, num_draft_tokens: np.ndarray) -> None:
    cu = offsets(num_draft_tokens)
    where = lambda r: f"row {r} (request {int(np.searchsorted(cu, r, side='right') - 1)})"  # noqa: E731
    bad = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    _require(bad.size == 0, f"draft_probs: {where(row_ids[bad[0]]) if bad.size else ''} is not finite")
    bad = np.flatnonzero((rows < 0).any(axis=1))
    _require(bad.size == 0, f"draft_probs: {where(row_ids[bad[0]]) if bad.size else ''} has a negative entry")
    sums = rows.sum(axis=1, dtype=np.float64)
    bad = np.flatnonzero(np.abs(sums - 1) > PROB_SUM_ATOL)
    _require(bad.size == 0, f"draft_probs: {where(row_ids[bad[0]]) if bad.size else ''} sums to "
                            f"{sums[bad[0]] if bad.size else 0:.6f}, not 1 within {PROB_SUM_ATOL}")


SAMPLER_ORDERS = ("canonical", "vllm")
"""SPEC §12's order profiles (``reference.sampler.ORDERS`` names the same)."""

_ID_LISTS = ("prompt_token_ids", "output_token_ids", "allowed_token_ids", "stop_token_ids")
_PER_REQUEST_RULES = {
    "repetition_penalty": (lambda v: np.isfinite(v) & (v > 0), "finite and > 0 (it divides; 1 means off)"),
    "frequency_penalty": (np.isfinite, "finite (0 means off)"),
    "presence_penalty": (np.isfinite, "finite (0 means off)"),
    "min_p": (lambda v: (v >= 0) & (v <= 1), "in [0, 1] (0 means off)"),
}


def check_sampler(sampler: dict, batch: int, num_tokens: int, V: int) -> None:
    """SPEC §12.4 for the sampler parameters by name (``reference.verify``'s ``sampler``; None entries: off).
    Id lists hold one entry per request, each None (that request's default) or a 1-D integer array of ids
    in ``[0, V)``; ``bad_words`` holds per request None or a sequence of non-empty such arrays. The rows
    every ban empties are found where the rows are computed (``reference.sampler.process_logits``).

    >>> check_sampler({"min_p": np.array([1.5])}, 1, 0, 4)
    Traceback (most recent call last):
    ...
    reference.validate.InvalidInput: min_p: entry 0 is 1.5, must be in [0, 1] (0 means off)
    """
    order = sampler.get("order", "canonical")
    _require(order in SAMPLER_ORDERS, f"order: must be one of {SAMPLER_ORDERS}, got {order!r}")
    for name in _ID_LISTS + ("bad_words",):
        lists = sampler.get(name)
        if lists is None:
            continue
        _require(len(lists) == batch, f"{name}: must hold one entry per request ({batch}), got {len(lists)}")
        for i, entry in enumerate(lists):
            words = [] if entry is None else list(entry) if name == "bad_words" else [entry]
            for w, ids in enumerate(words):
                where = f"request {i}, word {w}" if name == "bad_words" else f"request {i}"
                ids = np.asarray(ids)
                _require(ids.ndim == 1 and (ids.size == 0 or ids.dtype.kind in "iu"),
                         f"{name}: {where} must be a 1-D integer array")
                _require(ids.size > 0 or name != "bad_words", f"{name}: {where} is empty (a bad word has a token)")
                _require(ids.size > 0 or name != "allowed_token_ids",
                         f"{name}: {where} allows no token (an empty list)")
                outside = ids[(ids < 0) | (ids >= V)]
                _require(outside.size == 0, f"{name}: {where} holds {outside[:1].tolist()[0] if outside.size else ''}, "
                                            f"outside [0, V={V})")
    if sampler.get("min_tokens") is not None:
        m = _int_array("min_tokens", sampler["min_tokens"], (batch,))
        _require(bool((m >= 0).all()), f"min_tokens: must be >= 0, got {m.tolist()}")
    if sampler.get("token_mask") is not None:
        mask = np.asarray(sampler["token_mask"])
        _require(mask.dtype == np.bool_ and mask.shape == (num_tokens + batch, V),
                 f"token_mask: must be bool of shape (num_tokens + batch, V) = {(num_tokens + batch, V)}, "
                 f"got {mask.dtype} {mask.shape}")
        empty = np.flatnonzero(~mask.any(axis=1))
        _require(empty.size == 0, f"token_mask: row {empty[:1].tolist()} allows no token")
    if sampler.get("logit_bias") is not None:
        bias = _real_array("logit_bias", sampler["logit_bias"], (batch, V))
        _require(bool(np.isfinite(bias).all()), "logit_bias: must be finite (no NaN or infinity)")
    for name, (ok, rule) in _PER_REQUEST_RULES.items():
        if sampler.get(name) is not None:
            value = _real_array(name, sampler[name], (batch,))
            bad = np.flatnonzero(~ok(value))
            _require(bad.size == 0, f"{name}: entry {bad[:1].tolist()[0] if bad.size else ''} is "
                                    f"{value[bad[0]] if bad.size else ''}, must be {rule}")


def check_noise(uniforms, exponentials, num_tokens: int, batch: int, V: int) -> None:
    """SPEC §5.1 shapes and ranges of injected noise."""
    u = _float_array("uniforms", uniforms, (num_tokens,))
    _require(bool(((u >= 0) & (u < 1)).all()), "uniforms: must lie in [0, 1)")
    e = _float_array("exponentials", exponentials, (batch, V))
    _require(bool((np.isfinite(e) & (e > 0)).all()), "exponentials: must be finite and > 0")
