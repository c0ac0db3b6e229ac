"""SPEC §6: the input rules. Every violation raises ``InvalidInput`` naming the argument.

Devices implement the same rules independently (``devices/validate.py``):
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


_KIND_RULES = {"iu": "must be an integer array", "iuf": "must be real numbers"}


def _array(name: str, a, shape: tuple, dtypes: str | tuple = "iu") -> np.ndarray:
    """``a`` as an array of ``shape`` whose dtype is of the kinds ``dtypes`` (``"iu"``: integers; ``"iuf"``: real
    numbers, returned as float64) or, given a tuple, named in it."""
    a = np.asarray(a)
    if isinstance(dtypes, tuple):
        _require(a.dtype.name in dtypes, f"{name}: dtype must be one of {', '.join(dtypes)}, got {a.dtype}")
    else:
        _require(a.dtype.kind in dtypes, f"{name}: {_KIND_RULES[dtypes]}, got dtype {a.dtype}")
    _require(a.shape == shape, f"{name}: shape must be {shape}, got {a.shape}")
    return a.astype(np.float64) if dtypes == "iuf" else a


def check_step(num_draft_tokens, draft_token_ids, draft_probs, target_logits,
               temperature, top_k, top_p, seeds=None, positions=None, withdrawn=None) -> None:
    """Raise ``InvalidInput`` for the first rule of SPEC §6 the step breaks (``withdrawn``: SPEC §4's mask or None)."""
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
    given = _array("target_logits", logits, (num_tokens + batch, V), LOGIT_DTYPES)
    logits = given.astype(np.float64, copy=False)  # 16-bit values up-cast exactly
    _require(not np.isnan(logits).any(), "target_logits: contains NaN")
    _require(not np.isposinf(logits).any(), "target_logits: contains +inf")
    dead = np.flatnonzero(~np.isfinite(logits).any(axis=1))
    _require(dead.size == 0, f"target_logits: row {dead[:1].tolist()} has no finite value (every token masked)")
    ids = _array("draft_token_ids", draft_token_ids, (num_tokens,))
    bad = np.flatnonzero(((ids < 0) | (ids >= V)) & (ids != PLACEHOLDER_TOKEN_ID))
    _require(bad.size == 0, f"draft_token_ids: id {ids[bad[:1]].tolist()[0] if bad.size else ''} at index "
                            f"{bad[:1].tolist()[0] if bad.size else ''} is outside [0, {V}) and is not the placeholder -1")
    gone = np.zeros(num_tokens, bool) if withdrawn is None else np.asarray(withdrawn)
    _require(gone.dtype == np.bool_ and gone.shape == (num_tokens,),
             f"withdrawn: must be a bool array of shape {(num_tokens,)}, got {gone.dtype} {gone.shape}")
    named = np.flatnonzero(gone & (ids != PLACEHOLDER_TOKEN_ID))[:1].tolist()
    _require(not named, f"withdrawn: draft {named} is withdrawn but its id is {ids[named].tolist()}, not the placeholder -1")
    _require(draft_probs is not None or not gone.any(), "withdrawn: a withdrawn draft's residual reads its draft row, "
                                                        "but draft_probs is None (a point proposal cannot be withdrawn)")
    if draft_probs is not None:
        probs = _array("draft_probs", draft_probs, (num_tokens, V), FLOAT_DTYPES)
        want = draft_dtype(given.dtype.name)
        _require(probs.dtype.name == want, f"draft_probs: dtype must be {want} with {given.dtype} target_logits, "
                                           f"got {probs.dtype}")
        read = (ids != PLACEHOLDER_TOKEN_ID) | gone  # a padding placeholder's row is never read; a withdrawn one's is
        _check_draft_rows(probs[read], np.flatnonzero(read), k)
    t = _array("temperature", temperature, (batch,), "iuf")
    _require(bool(np.isfinite(t).all() and (t >= 0).all()), f"temperature: must be finite and >= 0, got {t.tolist()}")
    tk = _array("top_k", top_k, (batch,))
    _require(bool((tk >= 0).all()), f"top_k: must be >= 0 (0 = off), got {tk.tolist()}")
    tp = _array("top_p", top_p, (batch,), "iuf")
    _require(bool(((tp > 0) & (tp <= 1)).all()), f"top_p: must be in (0, 1] (1 = off), got {tp.tolist()}")
    if seeds is not None:
        s = _array("seeds", seeds, (batch,))
        _require(bool((s >= 0).all()), f"seeds: must be in [0, 2**64), got {s.tolist()}")
    if positions is not None:
        L = _array("positions", positions, (batch,))
        _require(bool(((L >= 0) & (L < 2**32)).all()), f"positions: must be in [0, 2**32), got {L.tolist()}")


def _check_draft_rows(rows: np.ndarray, row_ids: np.ndarray, num_draft_tokens: np.ndarray) -> None:
    """The first read draft row (``rows [n, V]``, ids ``row_ids [n]``) not finite, negative or not summing to 1."""
    with np.errstate(invalid="ignore"):   # a row that is not finite is named by the first rule
        sums = rows.sum(axis=1, dtype=np.float64)
        rules = [(~np.isfinite(rows).all(axis=1), "is not finite"), ((rows < 0).any(axis=1), "has a negative entry"),
                 (np.abs(sums - 1) > PROB_SUM_ATOL, f"sums to {{:.6f}}, not 1 within {PROB_SUM_ATOL}")]
    for bad, rule in rules:
        for r in np.flatnonzero(bad)[:1]:
            request = int(np.searchsorted(offsets(num_draft_tokens), row_ids[r], side="right") - 1)
            raise InvalidInput(f"draft_probs: row {row_ids[r]} (request {request}) {rule.format(sums[r])}")


def check_sampler(sampler: dict, batch: int, num_tokens: int, V: int) -> None:
    """SPEC §12.4 for the sampler parameters given by name (an id list's None entry: its request's default)."""
    _require(sampler.get("order", "canonical") in ("canonical", "vllm"), f"order: must be 'canonical' or 'vllm', got {sampler.get('order')!r}")
    for name in ("prompt_token_ids", "output_token_ids", "allowed_token_ids", "stop_token_ids", "bad_words"):
        lists, nonempty = sampler.get(name, ()), name in ("bad_words", "allowed_token_ids")
        _require(name not in sampler or len(lists) == batch, f"{name}: must hold one entry per request ({batch})")
        words = [(i, np.asarray(w)) for i, e in enumerate(lists) if e is not None for w in (e if name == "bad_words" else [e])]
        for i, ids in words:
            _require(ids.ndim == 1 and (ids.dtype.kind in "iu" or ids.size == 0) and ids.size >= nonempty and not (
                (ids < 0) | (ids >= V)).any(), f"{name}: request {i}: must be 1-D ids in [0, V={V}), got {ids.tolist()}")
    real = lambda v: v.dtype.kind in "iuf" and np.isfinite(v).all()  # noqa: E731
    rules = {"min_tokens": ((batch,), lambda v: v.dtype.kind in "iu" and (v >= 0).all(), "integers >= 0"),
             "token_mask": ((num_tokens + batch, V), lambda v: v.dtype == bool and v.any(1).all(), "bool, no row False"),
             "logit_bias": ((batch, V), real, "finite"), "frequency_penalty": ((batch,), real, "finite"),
             "presence_penalty": ((batch,), real, "finite"), "repetition_penalty": ((batch,), lambda v: real(v) and (
                 v > 0).all(), "finite and > 0"),
             "min_p": ((batch,), lambda v: real(v) and ((v >= 0) & (v <= 1)).all(), "in [0, 1]")}
    for name, (shape, ok, rule) in ((n, r) for n, r in rules.items() if n in sampler):
        value = np.asarray(sampler[name])
        _require(value.shape == shape and bool(ok(value)), f"{name}: must be {rule} of shape {shape}, got {value}")


def check_noise(uniforms, exponentials, num_tokens: int, batch: int, V: int) -> None:
    """SPEC §5.1 shapes and ranges of injected noise."""
    u = _array("uniforms", uniforms, (num_tokens,), FLOAT_DTYPES)
    _require(bool(((u >= 0) & (u < 1)).all()), "uniforms: must lie in [0, 1)")
    e = _array("exponentials", exponentials, (batch, V), FLOAT_DTYPES)
    _require(bool((np.isfinite(e) & (e > 0)).all()), "exponentials: must be finite and > 0")
