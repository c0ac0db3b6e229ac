"""Input rules of SPEC §6, in numpy, shared by every device.

A device calls ``validate(batch, noise)`` before touching the data; it raises
``devices.protocol.InvalidInput`` (a ``ValueError``) whose message names the
argument and the rule broken, e.g.::

    draft_probs: row 3 (request 1, draft 1) sums to 0.9000, not 1 within 1e-3

``validate`` holds the capability-independent rules; ``check_call`` is the
whole preamble of a device's ``verify``: those rules, then whether the device
*can* serve the valid call (its declared ``max_k``, ``max_vocab_size``,
dtypes: ``UnsupportedCall``). Nothing is clamped, dropped or renormalised: the
arrays are read, never changed.

>>> import numpy as np
>>> from devices.protocol import VerifyBatch
>>> batch = VerifyBatch(num_draft_tokens=np.array([1]), draft_token_ids=np.array([5]),
...                     draft_probs=None, target_logits=np.zeros((2, 4)),
...                     temperature=np.ones(1), top_k=np.zeros(1, np.int64), top_p=np.ones(1))
>>> validate(batch)
Traceback (most recent call last):
...
devices.protocol.InvalidInput: draft_token_ids: entry 0 (request 0, draft 0) is 5, outside [0, V=4) and not the placeholder -1

This module must not import ``reference``: devices are checked against it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from devices.protocol import (PLACEHOLDER_TOKEN_ID, SAMPLER_ORDERS, Capabilities, InvalidInput, Noise, TreeBatch, UnsupportedCall,
                              VerifyBatch)

SUM_TOLERANCE = 1e-3
"""A draft row must sum to 1 within this (SPEC §6); messages spell it ``1e-3``."""

FLOAT_DTYPES = ("float32", "float64")
"""The dtypes SPEC §6 accepts for ``draft_probs`` (and that devices compute in)."""

LOGIT_DTYPES = ("float16", "bfloat16") + FLOAT_DTYPES
"""The dtypes SPEC §6 accepts for ``target_logits`` (bfloat16: the ``ml_dtypes`` package's
numpy dtype, since numpy has none). A device serves those its capabilities declare."""


def draft_dtype(logits_dtype: str) -> str:
    """``draft_probs``' dtype (SPEC §6): ``target_logits``' own, or float32 with 16-bit logits.

    >>> draft_dtype("bfloat16"), draft_dtype("float64")
    ('float32', 'float64')
    """
    return logits_dtype if logits_dtype in FLOAT_DTYPES else "float32"


def validate(batch: VerifyBatch, noise: Noise | None = None,
             float_dtypes: tuple[str, ...] = LOGIT_DTYPES) -> None:
    """Raise ``InvalidInput`` if ``batch`` or ``noise`` breaks a rule of SPEC §6.

    ``float_dtypes``: the dtypes accepted for ``target_logits`` (SPEC §6's).
    Whether the device serves a valid dtype is ``check_capabilities``'
    ``UnsupportedCall``. Returns None when every rule holds.
    """
    num_draft_tokens = _check_num_draft_tokens(batch.num_draft_tokens)
    batch_size, num_tokens = len(num_draft_tokens), int(num_draft_tokens.sum())
    where = _Rows(num_draft_tokens)
    vocab_size = _check_target_logits(batch.target_logits, num_tokens, batch_size, float_dtypes, where)
    _check_draft_token_ids(batch.draft_token_ids, num_tokens, vocab_size, where)
    withdrawn = _check_withdrawn(batch.withdrawn, batch.draft_token_ids, batch.draft_probs, num_tokens, where)
    if batch.draft_probs is not None:
        _check_draft_probs(batch.draft_probs, batch.draft_token_ids, batch.target_logits,
                           num_tokens, vocab_size, where, withdrawn)
    _check_sampling_params(batch, batch_size)
    if batch.sampler is not None:
        _check_sampler(batch.sampler, batch_size, num_tokens, vocab_size)
        _check_static_bans(batch.sampler, num_draft_tokens, np.asarray(batch.draft_token_ids), vocab_size, where)
    if batch.seeds is not None:
        _check_seeds(batch.seeds, batch_size)
    if batch.positions is not None:
        _check_positions(batch.positions, batch_size)
    if noise is not None:
        _check_noise(noise, num_tokens, batch_size, vocab_size, where)


def check_call(batch: VerifyBatch, noise: Noise | None, capabilities: Capabilities) -> None:
    """The preamble of every device's ``verify``: SPEC §6's input rules first (``InvalidInput``),
    keyed noise's seeds and positions present when no noise is given, then the
    declared limits (``UnsupportedCall``, ``check_capabilities``)."""
    validate(batch, noise)
    if noise is None and (batch.seeds is None or batch.positions is None):
        missing = "seeds" if batch.seeds is None else "positions"
        raise InvalidInput(f"{missing}: required when no noise is given (the device draws "
                           "keyed Philox noise from seeds and positions, SPEC §5.2)")
    check_capabilities(batch, capabilities)
    check_modes(batch, noise, capabilities)


def check_modes(batch: VerifyBatch, noise: Noise | None, capabilities: Capabilities) -> None:
    """``UnsupportedCall`` for a valid call needing a mode ``capabilities`` declare absent
    (SPEC §10: an undeclared mode raises, it is never served silently).

    The modes are those ``specsim capabilities``' table checks both ways: greedy (some
    ``temperature == 0``), draft probabilities or point proposals, top-k (a sampled request
    with ``0 < top_k < V``), top-p (a sampled request with ``top_p < 1``), injected noise,
    withdrawn drafts (some ``withdrawn`` entry True), and drawing its own randomness
    (``noise`` None).
    """
    temperature = np.asarray(batch.temperature)
    sampled = temperature > 0
    needs = {
        "greedy": bool((~sampled).any()),
        "draft_probs": batch.draft_probs is not None,
        "point_proposals": batch.draft_probs is None,
        "top_k": bool((sampled & (np.asarray(batch.top_k) > 0) & (np.asarray(batch.top_k) < batch.vocab_size)).any()),
        "top_p": bool((sampled & (np.asarray(batch.top_p) < 1)).any()),
        "injected_noise": noise is not None,
        "withdrawn_drafts": batch.has_withdrawn(),
    }
    for mode, needed in needs.items():
        if needed and not getattr(capabilities, mode):
            raise UnsupportedCall(mode)
    if batch.sampler is not None:
        for name in batch.sampler.given():
            if name not in capabilities.sampler:
                raise UnsupportedCall(f"sampler {name}", tuple(capabilities.sampler))
        if batch.sampler.given() and batch.sampler.order not in capabilities.sampler_orders:
            raise UnsupportedCall(f"sampler order {batch.sampler.order}", tuple(capabilities.sampler_orders))
    if noise is None and capabilities.rng == "none":
        raise UnsupportedCall("rng (the device draws no randomness of its own; give noise)")


def check_repeated(batch: VerifyBatch, template: VerifyBatch) -> None:
    """The per-call rules of ``verify_repeated`` (the template itself passed ``check_call``): ``batch`` is the
    repeated call without float rows; its draft ids, seeds and positions must fit the repeated template."""
    num_tokens, batch_size = int(batch.num_draft_tokens.sum()), batch.batch_size
    where = _Rows(batch.num_draft_tokens)
    _check_draft_token_ids(batch.draft_token_ids, num_tokens, template.vocab_size, where)
    _check_withdrawn(batch.withdrawn, batch.draft_token_ids, template.draft_probs, num_tokens, where)
    if batch.seeds is None or batch.positions is None:
        raise InvalidInput("seeds: required (with positions): verify_repeated draws keyed noise")
    _check_seeds(batch.seeds, batch_size)
    _check_positions(batch.positions, batch_size)


def check_capabilities(batch: VerifyBatch, capabilities: Capabilities) -> None:
    """``UnsupportedCall`` for a valid call beyond what ``capabilities`` declare (K, V, dtype)."""
    if batch.max_k > capabilities.max_k:
        raise UnsupportedCall(f"max_k <= {capabilities.max_k}", batch.max_k)
    if batch.vocab_size > capabilities.max_vocab_size:
        raise UnsupportedCall(f"max_vocab_size <= {capabilities.max_vocab_size}", batch.vocab_size)
    if batch.target_logits.dtype.name not in capabilities.dtypes:
        raise UnsupportedCall(f"dtype in {capabilities.dtypes}", batch.target_logits.dtype.name)


def as_chain_batch(batch: TreeBatch) -> VerifyBatch:
    """A tree batch's arrays in §1's layout (nodes for drafts), for §6's shared rules (SPEC §11.6)."""
    return VerifyBatch(batch.num_nodes, batch.draft_token_ids, batch.draft_probs, batch.target_logits,
                       batch.temperature, batch.top_k, batch.top_p, batch.seeds, batch.positions)


def _tree_names(message: str) -> str:
    """A §6 message about the chain view of a tree batch, in the tree's names (SPEC §11.6: ``num_nodes``
    for ``num_draft_tokens``), so the error names the argument the caller passed."""
    return message.replace("num_draft_tokens", "num_nodes").replace("num_tokens", "num_nodes_total")


def check_tree_call(batch: TreeBatch, noise: Noise | None, capabilities: Capabilities) -> np.ndarray:
    """The preamble of every device's ``verify_tree`` (SPEC §11.6): §6's rules with nodes for
    drafts, the tree's own (``InvalidInput``), then the declared schemes, depth (``max_k``), nodes
    per request (``max_tree_nodes``), V and dtype (``UnsupportedCall``). Returns each node's depth
    ``[num_nodes_total]``."""
    chain = as_chain_batch(batch)
    try:
        validate(chain, noise)
    except InvalidInput as e:
        raise InvalidInput(_tree_names(str(e))) from None
    if noise is None and (batch.seeds is None or batch.positions is None):
        missing = "seeds" if batch.seeds is None else "positions"
        raise InvalidInput(f"{missing}: required when no noise is given (SPEC §5.2, §11.5)")
    parents = _array("parents", batch.parents, 1)
    _integer("parents", parents)
    _length("parents", parents, int(np.sum(batch.num_nodes)), "num_nodes_total")
    local = np.arange(len(parents)) - np.repeat(chain.request_offsets()[:-1], np.asarray(batch.num_nodes))
    bad = np.flatnonzero((parents < -1) | (parents >= local))
    if bad.size:
        n = int(bad[0])
        raise InvalidInput(f"parents: entry {n} (node {int(local[n])}) is {int(parents[n])}; must be -1 (the root) "
                           f"or an earlier node in [0, {int(local[n])})")
    if batch.scheme not in ("rrs", "sglang"):
        raise InvalidInput(f"scheme: must be 'rrs' or 'sglang', got {batch.scheme!r}")
    if batch.scheme == "sglang" and batch.draft_probs is not None:
        raise InvalidInput("draft_probs: the sglang scheme is target-only (SPEC §11.4); pass None")
    for name in ("threshold_single", "threshold_acc"):
        value = getattr(batch, name)
        if not 0 <= value <= 1:
            raise InvalidInput(f"{name}: must be in [0, 1] (1 = lossless), got {value}")
    missing = sorted(batch.schemes_needed() - set(capabilities.tree_schemes))
    if missing:
        raise UnsupportedCall(f"tree_schemes including {missing}", tuple(capabilities.tree_schemes))
    depths = batch.depths()
    check_capabilities(dataclasses.replace(chain, num_draft_tokens=np.array([int(depths.max(initial=0))])),
                       capabilities)
    largest = int(np.max(batch.num_nodes, initial=0))
    if largest > capabilities.tree_node_limit:
        # an undeclared limit is SPEC §11.1's default: refusing beyond it is allowed, never required
        raise UnsupportedCall(f"max_tree_nodes <= {capabilities.tree_node_limit} nodes per request", largest)
    return depths


# --- where a flat row lives, for messages -----------------------------------

class _Rows:
    """Maps flat draft/target rows back to (request, draft) for error messages."""

    def __init__(self, num_draft_tokens: np.ndarray):
        self.num_draft_tokens = num_draft_tokens
        self.cu = np.concatenate([[0], np.cumsum(num_draft_tokens)]).astype(np.int64)

    def draft(self, row: int) -> str:
        """Draft row ``row`` → ``"request i, draft j"``."""
        i = int(np.searchsorted(self.cu, row, side="right") - 1)
        return f"request {i}, draft {row - int(self.cu[i])}"

    def target(self, row: int) -> str:
        """Target row ``row`` (request i owns ``cu[i]+i .. cu[i]+i+K_i``) → description."""
        starts = self.cu[:-1] + np.arange(len(self.num_draft_tokens))
        i = int(np.searchsorted(starts, row, side="right") - 1)
        j = row - int(starts[i])
        return f"request {i}, " + ("bonus row" if j == int(self.num_draft_tokens[i]) else f"draft {j}")


# --- the rules ----------------------------------------------------------------

def _array(name: str, value, ndim: int) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise InvalidInput(f"{name}: must be a numpy array, got {type(value).__name__}")
    if value.ndim != ndim:
        raise InvalidInput(f"{name}: must be {ndim}-D, got shape {value.shape}")
    return value


def _integer(name: str, value: np.ndarray) -> None:
    if value.dtype.kind not in "iu":
        raise InvalidInput(f"{name}: must have an integer dtype, got {value.dtype}")


def _float(name: str, value: np.ndarray, float_dtypes: tuple[str, ...] = FLOAT_DTYPES) -> None:
    if value.dtype.name not in float_dtypes:
        raise InvalidInput(f"{name}: dtype must be one of {', '.join(float_dtypes)}, got {value.dtype}")


def _real(name: str, value: np.ndarray) -> None:
    # Per-request parameters may be given as ints (temperature 1, top_p 1), as in the reference.
    if value.dtype.kind not in "iuf":
        raise InvalidInput(f"{name}: must hold real numbers (an int or float dtype), got {value.dtype}")


def _length(name: str, value: np.ndarray, expected: int, what: str) -> None:
    if value.shape[0] != expected:
        raise InvalidInput(f"{name}: length must be {what} = {expected}, got {value.shape[0]}")


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask.reshape(-1))[0])


def _check_num_draft_tokens(num_draft_tokens) -> np.ndarray:
    value = _array("num_draft_tokens", num_draft_tokens, 1)
    _integer("num_draft_tokens", value)
    if len(value) == 0:
        raise InvalidInput("num_draft_tokens: empty batch (batch must be >= 1)")
    if (value < 0).any():
        i = _first(value < 0)
        raise InvalidInput(f"num_draft_tokens: entry {i} is {int(value[i])}, must be >= 0")
    return value.astype(np.int64)


def _check_target_logits(target_logits, num_tokens: int, batch_size: int,
                         float_dtypes: tuple[str, ...], where: _Rows) -> int:
    value = _array("target_logits", target_logits, 2)
    _float("target_logits", value, float_dtypes)
    _length("target_logits", value, num_tokens + batch_size, "num_tokens + batch")
    value = value.astype(np.float64, copy=False) if value.dtype.name not in FLOAT_DTYPES else value  # 16-bit: exact
    vocab_size = value.shape[1]
    if vocab_size < 1:
        raise InvalidInput("target_logits: V (the last dimension) must be >= 1, got 0")
    bad = np.isnan(value) | (value == np.inf)
    if bad.any():
        row, col = divmod(_first(bad), vocab_size)
        raise InvalidInput(f"target_logits: row {row} ({where.target(row)}) column {col} is "
                           f"{value[row, col]}; logits must be finite or -inf")
    no_finite = ~np.isfinite(value).any(axis=1)
    if no_finite.any():
        row = _first(no_finite)
        raise InvalidInput(f"target_logits: row {row} ({where.target(row)}) has no finite value")
    return vocab_size


def _check_draft_token_ids(draft_token_ids, num_tokens: int, vocab_size: int, where: _Rows) -> None:
    value = _array("draft_token_ids", draft_token_ids, 1)
    _integer("draft_token_ids", value)
    _length("draft_token_ids", value, num_tokens, "num_tokens = sum(num_draft_tokens)")
    bad = ((value < 0) | (value >= vocab_size)) & (value != PLACEHOLDER_TOKEN_ID)
    if bad.any():
        row = _first(bad)
        raise InvalidInput(f"draft_token_ids: entry {row} ({where.draft(row)}) is {int(value[row])}, "
                           f"outside [0, V={vocab_size}) and not the placeholder {PLACEHOLDER_TOKEN_ID}")


def _check_withdrawn(withdrawn, draft_token_ids: np.ndarray, draft_probs, num_tokens: int,
                     where: _Rows) -> np.ndarray:
    """SPEC §6's rules for ``withdrawn`` (SPEC §4's withdrawn drafts): None or bool ``[num_tokens]``;
    a withdrawn draft's id is the placeholder, and its draft row is read, so ``draft_probs`` must be
    given. Returns the mask ``[num_tokens]`` (all False for None)."""
    if withdrawn is None:
        return np.zeros(num_tokens, dtype=bool)
    value = _array("withdrawn", withdrawn, 1)
    if value.dtype != np.bool_:
        raise InvalidInput(f"withdrawn: must be a bool array (True: drawn, then withdrawn), got dtype {value.dtype}")
    _length("withdrawn", value, num_tokens, "num_tokens = sum(num_draft_tokens)")
    named = value & (draft_token_ids != PLACEHOLDER_TOKEN_ID)
    if named.any():
        row = _first(named)
        raise InvalidInput(f"withdrawn: entry {row} ({where.draft(row)}) is True but its draft id is "
                           f"{int(draft_token_ids[row])}; a withdrawn draft's id is the placeholder "
                           f"{PLACEHOLDER_TOKEN_ID} (SPEC §4)")
    if value.any() and draft_probs is None:
        row = _first(value)
        raise InvalidInput(f"withdrawn: entry {row} ({where.draft(row)}) is a withdrawn draft, whose residual "
                           "is read from the draft row it was drawn from, but draft_probs is None: a point "
                           "proposal cannot be withdrawn (keep its id; SPEC §4)")
    return value


def _check_draft_probs(draft_probs, draft_token_ids: np.ndarray, target_logits: np.ndarray,
                       num_tokens: int, vocab_size: int, where: _Rows, withdrawn: np.ndarray) -> None:
    value = _array("draft_probs", draft_probs, 2)
    want = draft_dtype(target_logits.dtype.name)
    if value.dtype.name != want:
        raise InvalidInput(f"draft_probs: dtype must be {want} with {target_logits.dtype} target_logits "
                           f"(SPEC §6), got {value.dtype}")
    if value.shape != (num_tokens, vocab_size):
        raise InvalidInput(f"draft_probs: shape must be [num_tokens, V] = {(num_tokens, vocab_size)}, got {value.shape}")
    read = (draft_token_ids != PLACEHOLDER_TOKEN_ID) | withdrawn  # a padding placeholder's row is never read
    rows = value[read]
    index = np.flatnonzero(read)
    not_finite = ~np.isfinite(rows).all(axis=1)
    if not_finite.any():
        row = int(index[_first(not_finite)])
        raise InvalidInput(f"draft_probs: row {row} ({where.draft(row)}) has a non-finite entry")
    negative = (rows < 0).any(axis=1)
    if negative.any():
        row = int(index[_first(negative)])
        raise InvalidInput(f"draft_probs: row {row} ({where.draft(row)}) has a negative entry "
                           f"({float(value[row].min()):.4g})")
    sums = rows.sum(axis=1, dtype=np.float64)
    off = np.abs(sums - 1.0) > SUM_TOLERANCE
    if off.any():
        k = _first(off)
        row = int(index[k])
        raise InvalidInput(f"draft_probs: row {row} ({where.draft(row)}) sums to {sums[k]:.4f}, "
                           f"not 1 within 1e-3")


def _check_sampling_params(batch: VerifyBatch, batch_size: int) -> None:
    temperature = _array("temperature", batch.temperature, 1)
    _real("temperature", temperature)
    _length("temperature", temperature, batch_size, "batch")
    bad = ~np.isfinite(temperature) | (temperature < 0)
    if bad.any():
        i = _first(bad)
        raise InvalidInput(f"temperature: entry {i} is {temperature[i]}, must be finite and >= 0")

    top_k = _array("top_k", batch.top_k, 1)
    _integer("top_k", top_k)
    _length("top_k", top_k, batch_size, "batch")
    if (top_k < 0).any():
        i = _first(top_k < 0)
        raise InvalidInput(f"top_k: entry {i} is {int(top_k[i])}, must be >= 0 (0 means off)")

    top_p = _array("top_p", batch.top_p, 1)
    _real("top_p", top_p)
    _length("top_p", top_p, batch_size, "batch")
    bad = ~((top_p > 0) & (top_p <= 1))  # also catches NaN
    if bad.any():
        i = _first(bad)
        raise InvalidInput(f"top_p: entry {i} is {top_p[i]}, must be in (0, 1] (1 means off)")


def _check_sampler(sampler, batch_size: int, num_tokens: int, vocab_size: int) -> None:
    """SPEC §12's input rules for ``VerifyBatch.sampler`` (shapes in ``SamplerParams``)."""
    if sampler.order not in SAMPLER_ORDERS:
        raise InvalidInput(f"order: must be one of {SAMPLER_ORDERS}, got {sampler.order!r}")
    for name in ("prompt_token_ids", "output_token_ids", "allowed_token_ids", "stop_token_ids"):
        _check_id_lists(name, getattr(sampler, name), batch_size, vocab_size, nested=False)
    _check_id_lists("bad_words", sampler.bad_words, batch_size, vocab_size, nested=True)
    if sampler.allowed_token_ids is not None:
        for i, ids in enumerate(sampler.allowed_token_ids):
            if ids is not None and len(ids) == 0:
                raise InvalidInput(f"allowed_token_ids: request {i} allows no token (an empty list)")
    if sampler.min_tokens is not None:
        min_tokens = _array("min_tokens", sampler.min_tokens, 1)
        _integer("min_tokens", min_tokens)
        _length("min_tokens", min_tokens, batch_size, "batch")
        if (min_tokens < 0).any():
            raise InvalidInput(f"min_tokens: entry {_first(min_tokens < 0)} is negative, must be >= 0")
    if sampler.token_mask is not None:
        mask = np.asarray(sampler.token_mask)
        if mask.dtype != np.bool_ or mask.shape != (num_tokens + batch_size, vocab_size):
            raise InvalidInput(f"token_mask: must be bool of shape (num_tokens + batch, V) = "
                               f"{(num_tokens + batch_size, vocab_size)}, got {mask.dtype} {mask.shape}")
        if not mask.any(axis=1).all():
            raise InvalidInput(f"token_mask: row {_first(~mask.any(axis=1))} allows no token")
    if sampler.logit_bias is not None:
        bias = _array("logit_bias", sampler.logit_bias, 2)
        _real("logit_bias", bias)
        if bias.shape != (batch_size, vocab_size):
            raise InvalidInput(f"logit_bias: shape must be (batch, V) = {(batch_size, vocab_size)}, got {bias.shape}")
        if not np.isfinite(bias).all():
            raise InvalidInput(f"logit_bias: entry {np.argwhere(~np.isfinite(bias))[0].tolist()} is not finite")
    rules = {"repetition_penalty": (lambda v: np.isfinite(v) & (v > 0), "finite and > 0 (it divides; 1 means off)"),
             "frequency_penalty": (np.isfinite, "finite (0 means off)"),
             "presence_penalty": (np.isfinite, "finite (0 means off)"),
             "min_p": (lambda v: (v >= 0) & (v <= 1), "in [0, 1] (0 means off)")}
    for name, (ok, rule) in rules.items():
        if getattr(sampler, name) is None:
            continue
        value = _array(name, getattr(sampler, name), 1)
        _real(name, value)
        _length(name, value, batch_size, "batch")
        if not ok(value).all():
            i = _first(~ok(value))
            raise InvalidInput(f"{name}: entry {i} is {value[i]}, must be {rule}")


def _check_static_bans(sampler, num_draft_tokens: np.ndarray, draft_token_ids: np.ndarray, vocab_size: int,
                       where: "_Rows") -> None:
    """SPEC §12.4: a row the step can read (up to its request's first placeholder) whose draft-independent
    bans (mask ∧ allowed ids ∧ single-token bad words) leave no token. Bans that depend on the drafts are
    found where the row is computed."""
    if sampler.allowed_token_ids is None and sampler.bad_words is None:
        return  # the mask alone is checked row by row in _check_sampler
    allowed = np.ones((len(num_draft_tokens), vocab_size), dtype=bool)
    if sampler.allowed_token_ids is not None:   # one scatter for every request's list (no loop over requests)
        listed = [i for i, ids in enumerate(sampler.allowed_token_ids) if ids is not None]
        allowed[listed] = False
        request, ids = _flat([sampler.allowed_token_ids[i] for i in listed], listed)
        allowed[request, ids] = True
    if sampler.bad_words is not None:
        singles = [[w for w in (words or ()) if len(w) == 1] for words in sampler.bad_words]
        request, ids = _flat([np.concatenate(ws) if ws else np.zeros(0, np.int64) for ws in singles],
                             range(len(singles)))
        allowed[request, ids] = False
    rows = allowed[np.repeat(np.arange(len(num_draft_tokens)), num_draft_tokens + 1)]
    if sampler.token_mask is not None:
        rows &= np.asarray(sampler.token_mask)
    empty = ~rows.any(axis=1) & _rows_read(num_draft_tokens, draft_token_ids)
    if empty.any():
        r = _first(empty)
        raise InvalidInput(f"token_mask: row {r} ({where.target(r)}) allows no token after the mask, "
                           f"allowed_token_ids and single-token bad_words")


def _rows_read(num_draft_tokens: np.ndarray, draft_token_ids: np.ndarray) -> np.ndarray:
    """``[num_tokens + batch]`` bool: each request's target rows up to its first placeholder (the rows a step reads)."""
    k = np.asarray(num_draft_tokens, np.int64)
    cu = np.concatenate([[0], np.cumsum(k)])
    at = np.flatnonzero(np.asarray(draft_token_ids) == PLACEHOLDER_TOKEN_ID)
    owner = np.searchsorted(cu, at, side="right") - 1
    first = k.copy()
    np.minimum.at(first, owner, at - cu[owner])
    request = np.repeat(np.arange(len(k)), k + 1)
    return np.arange(int(k.sum()) + len(k)) - (cu[:-1] + np.arange(len(k)))[request] <= first[request]


def _flat(lists, requests) -> tuple[np.ndarray, np.ndarray]:
    """``(request [n], id [n])`` of every id in ``lists`` (one 1-D int array per entry of ``requests``)."""
    lengths = [len(ids) for ids in lists]
    if not sum(lengths):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.repeat(np.asarray(list(requests), np.int64), lengths), np.concatenate(lists).astype(np.int64)


def _check_id_lists(name: str, lists, batch_size: int, vocab_size: int, nested: bool) -> None:
    """``batch`` lists of token ids (``nested``: of token-id sequences), each id in ``[0, V)``."""
    if lists is None:
        return
    if len(lists) != batch_size:
        raise InvalidInput(f"{name}: must hold one entry per request ({batch_size}), got {len(lists)}")
    flat, places = [], []
    for i, entry in enumerate(lists):
        for w, ids in enumerate(([] if entry is None else entry) if nested else [entry]):   # None: the default
            if ids is None:
                continue
            ids = np.asarray(ids)
            if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu") or (nested and ids.size == 0):
                where = f"request {i}, word {w}" if nested else f"request {i}"
                raise InvalidInput(f"{name}: {where} must be a non-empty 1-D integer array" if nested else
                                   f"{name}: {where} must be a 1-D integer array")
            flat.append(ids)
            places.append((i, w))
    if not flat:
        return
    ids = np.concatenate(flat)   # one range test for every id (a batch may hold 10^5 requests)
    outside = (ids < 0) | (ids >= vocab_size)
    if outside.any():
        at = _first(outside)
        i, w = places[int(np.searchsorted(np.cumsum([len(f) for f in flat]), at, side="right"))]
        where = f"request {i}, word {w}" if nested else f"request {i}"
        raise InvalidInput(f"{name}: {where} holds {int(ids[at])}, outside [0, V={vocab_size})")


def _check_seeds(seeds, batch_size: int) -> None:
    value = _array("seeds", seeds, 1)
    _integer("seeds", value)
    _length("seeds", value, batch_size, "batch")
    if value.dtype.kind == "i" and (value < 0).any():
        i = _first(value < 0)
        raise InvalidInput(f"seeds: entry {i} is {int(value[i])}, must be in [0, 2**64)")
    # An integer dtype holds at most 64 bits, so >= 2**64 cannot occur.


def _check_positions(positions, batch_size: int) -> None:
    value = _array("positions", positions, 1)
    _integer("positions", value)
    _length("positions", value, batch_size, "batch")
    bad = (value < 0) | (value.astype(np.float64) >= 2.0**32)
    if bad.any():
        i = _first(bad)
        raise InvalidInput(f"positions: entry {i} is {int(value[i])}, must be in [0, 2**32)")


def _check_noise(noise: Noise, num_tokens: int, batch_size: int, vocab_size: int, where: _Rows) -> None:
    uniforms = _array("uniforms", noise.uniforms, 1)
    _float("uniforms", uniforms)
    _length("uniforms", uniforms, num_tokens, "num_tokens = sum(num_draft_tokens)")
    bad = ~((uniforms >= 0) & (uniforms < 1))
    if bad.any():
        row = _first(bad)
        raise InvalidInput(f"uniforms: entry {row} ({where.draft(row)}) is {uniforms[row]}, must be in [0, 1)")

    exponentials = _array("exponentials", noise.exponentials, 2)
    _float("exponentials", exponentials)
    if exponentials.shape != (batch_size, vocab_size):
        raise InvalidInput(f"exponentials: shape must be [batch, V] = {(batch_size, vocab_size)}, "
                           f"got {exponentials.shape}")
    bad = ~(np.isfinite(exponentials) & (exponentials > 0))
    if bad.any():
        i, v = divmod(_first(bad), vocab_size)
        raise InvalidInput(f"exponentials: entry [{i}, {v}] is {exponentials[i, v]}, must be finite and > 0")


__all__ = ["validate", "check_call", "check_capabilities", "draft_dtype", "SUM_TOLERANCE", "FLOAT_DTYPES",
           "LOGIT_DTYPES"]
