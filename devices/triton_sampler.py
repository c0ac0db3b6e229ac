"""SPEC §12 on the Triton device: each target row's logits after bans, penalties and bias.

Row ``r`` (request ``i``, position ``j``) reads its logits through the sampler of its
*output so far* (``output_token_ids[i]`` + drafts ``0 .. j−1``). Almost every entry of a
row is only banned or biased; the history-dependent rules (penalties, bad words,
min_tokens) touch a few tokens per row. So the parameters are split:

* **dense** — ``token_mask [rows, V]`` (bool: 1 byte an entry, a quarter of a float32 row),
  ``allowed [batch, V]`` (bool) and ``logit_bias [batch, V]``: read alongside the row by
  ``process_kernel``, grid ``(batch, max_k + 1, chunks)``, which writes every processed row
  in one pass over the target rows (bans → ``-inf``, ``z + bias``);
* **sparse** — ``row_edits`` (host, numpy): one record ``(row, request, token, count,
  seen, ban)`` per token a row's history touches: the counts of the output so far, the
  prompt ∪ output so far for the repetition penalty, a bad word's last token where the
  output so far ends with the rest of the word, the stop ids while the output is shorter
  than min_tokens. ``edit_kernel`` recomputes each edited entry from the original logit
  and bias in the profile's order (``canonical``: penalties then bias; ``vllm``: bias then
  penalties) and writes it over the dense pass's value.

The plain step (``devices.triton_device.verify_tensors``) then runs on the processed rows;
top-k, top-p and min_p are each row's cut (``filter_cuts``: float64 decisions on the top-k
candidates), which the step's kernels read the rows through. That is the device's path when a
request also uses top-k, top-p or min_p. Otherwise the processed rows are never written: the fused
path (``fused_inputs``, ``fused_stats``) applies the same rules inside the step's own loads, from
bit-packed masks and the same records. Either way a row every ban leaves empty is refused
(``raise_if_empty``, SPEC §12.4). Without §12 parameters none of this runs.

Worked example (V = 4, one request, drafts [2, 2], presence 1): rows 0, 1, 2 see outputs
[], [2], [2, 2]; ``row_edits`` gives rows 1 and 2 one record each for token 2 (count 1, 2),
so token 2's logit becomes ``z − 1`` there and stays ``z`` in row 0.

>>> from devices.protocol import SamplerParams
>>> e = row_edits(SamplerParams(presence_penalty=np.ones(1)), np.array([2]), np.array([2, 2]))
>>> [(int(r), int(t), float(c)) for r, t, c in zip(e["row"], e["token"], e["count"])]
[(1, 2, 1.0), (2, 2, 2.0)]
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import triton
import triton.language as tl

from devices.protocol import InvalidInput

EDIT_BLOCK = 128


def _ids(lists, i: int) -> list:
    """Request ``i``'s id list of a per-request tuple (None: empty)."""
    return [] if lists is None or lists[i] is None else [int(t) for t in lists[i]]


def _banned(history: list, words: list, stops: list, min_tokens: int) -> set:
    """The tokens a row bans from its output so far: completed bad words, stop ids while short."""
    ban = {w[-1] for w in words if len(w) == 1 or history[len(history) - len(w) + 1:] == w[:-1]}
    return ban | set(stops) if len(history) < min_tokens else ban


def row_edits(sampler, num_draft_tokens, draft_token_ids, with_drafts: bool = False) -> dict:
    """SPEC §12's history-dependent rules as sparse records, one per (row, token) touched.

    ``num_draft_tokens`` ``[batch]``; ``draft_token_ids`` ``[num_tokens]`` (placeholders
    skipped: rows after one are never read). Returns numpy arrays ``[E]``, sorted by row then
    token: ``row`` int64, ``request`` int32, ``token`` int64, ``count`` float64 (in the output
    so far), ``seen`` int8 (prompt ∪ output so far; only with a repetition penalty), ``ban`` int8.
    ``with_drafts``: row ``j`` also holds a record for draft ``j`` (the fused step reads the
    drafts' processed logits from the records: ``fused_inputs``).
    """
    rep = sampler.repetition_penalty is not None
    counting = rep or sampler.frequency_penalty is not None or sampler.presence_penalty is not None
    records, row, start = [], 0, 0
    for i, k in enumerate(np.asarray(num_draft_tokens, dtype=np.int64)):
        history = _ids(sampler.output_token_ids, i)
        prompt = set(_ids(sampler.prompt_token_ids, i)) if rep else set()
        words = [[int(t) for t in w] for w in (() if sampler.bad_words is None else sampler.bad_words[i])]
        stops = _ids(sampler.stop_token_ids, i)
        least = 0 if sampler.min_tokens is None else int(sampler.min_tokens[i])
        drafts = [int(t) for t in draft_token_ids[start: start + k]]
        counts = Counter(history)
        for j in range(k + 1):
            ban = _banned(history, words, stops, least)
            touched = (set(counts) | prompt if counting else set()) | ban
            if with_drafts and j < k and drafts[j] >= 0:
                touched.add(drafts[j])
            records += [(row, i, t, counts.get(t, 0), t in prompt or t in counts, t in ban) for t in sorted(touched)]
            if j < k and drafts[j] >= 0:
                history.append(drafts[j])
                counts[drafts[j]] += 1
            row += 1
        start += k
    cols = list(zip(*records)) or [()] * 6
    dtypes = (np.int64, np.int32, np.int64, np.float64, np.int8, np.int8)
    return {name: np.asarray(c, dtype=dt) for name, c, dt in zip(("row", "request", "token", "count", "seen", "ban"),
                                                                   cols, dtypes)}


@triton.jit
def process_kernel(logits_ptr, out_ptr, cu_ptr, mask_ptr, allowed_ptr, bias_ptr, V, CHUNK,
                   TILES: tl.constexpr, BLOCK: tl.constexpr, HAS_MASK: tl.constexpr, HAS_ALLOWED: tl.constexpr,
                   HAS_BIAS: tl.constexpr, FP64: tl.constexpr):
    """Request i's row j, one vocabulary chunk: ``out = banned ? -inf : z + bias`` (the dense part).

    ``logits_ptr``, ``out_ptr`` ``[rows, V]`` (out in the compute dtype); ``mask_ptr``
    ``[rows, V]`` and ``allowed_ptr`` ``[batch, V]`` bool as int8 (True: allowed);
    ``bias_ptr`` ``[batch, V]`` in the compute dtype. Each row is read once.
    """
    i = tl.program_id(0)
    j = tl.program_id(1)
    chunk = tl.program_id(2)
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    if j <= k:
        dtype = tl.float64 if FP64 else tl.float32
        row = (start + i + j).to(tl.int64) * V
        req = i.to(tl.int64) * V
        lanes = tl.arange(0, BLOCK)
        hi = tl.minimum(chunk * CHUNK + CHUNK, V)
        for tile in range(0, TILES):
            cols = chunk * CHUNK + tile * BLOCK + lanes
            inside = cols < hi
            z = tl.load(logits_ptr + row + cols, mask=inside, other=0.0).to(dtype)
            if HAS_BIAS:
                z = z + tl.load(bias_ptr + req + cols, mask=inside, other=0.0)
            if HAS_MASK:
                z = tl.where(tl.load(mask_ptr + row + cols, mask=inside, other=1) != 0, z, float("-inf"))
            if HAS_ALLOWED:
                z = tl.where(tl.load(allowed_ptr + req + cols, mask=inside, other=1) != 0, z, float("-inf"))
            tl.store(out_ptr + row + cols, z, mask=inside)


@triton.jit
def edited_logit(z, bias, r, freq, pres, count, seen, VLLM: tl.constexpr):
    """One edited entry from its original logit ``z`` (compute dtype): repetition ``r`` where
    ``seen`` (``z/r`` above 0, ``z·r`` otherwise), then ``− freq·count`` and ``− pres·[count > 0]``
    (formed in float64: ``freq``, ``pres``, ``count`` float64, as the torch device forms them);
    ``bias`` before (``VLLM``) or after the penalties. Bans are the caller's."""
    if VLLM:
        z = z + bias
    z = tl.where(seen, tl.where(z > 0, z / r, z * r), z)
    z = z - (freq * count).to(z.dtype)
    z = z - (pres * tl.where(count > 0, 1.0, 0.0)).to(z.dtype)
    if not VLLM:
        z = z + bias
    return z


@triton.jit
def edit_kernel(logits_ptr, out_ptr, mask_ptr, allowed_ptr, bias_ptr, rep_ptr, freq_ptr, pres_ptr,
                row_ptr, req_ptr, tok_ptr, count_ptr, seen_ptr, ban_ptr, E, V, BLOCK: tl.constexpr,
                HAS_MASK: tl.constexpr, HAS_ALLOWED: tl.constexpr, HAS_BIAS: tl.constexpr, VLLM: tl.constexpr,
                FP64: tl.constexpr):
    """Records ``[E]`` (``row_edits``) over ``process_kernel``'s output: each entry recomputed
    from its original logit — repetition (``z/r`` above 0, ``z·r`` otherwise, where seen), then
    ``− f·count`` and ``− p·[count > 0]`` (formed in float64, as the torch device), bias before
    (``VLLM``) or after, ``-inf`` where banned. ``rep/freq/pres_ptr`` ``[batch]`` float64."""
    dtype = tl.float64 if FP64 else tl.float32
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = e < E
    row = tl.load(row_ptr + e, mask=inside, other=0)
    i = tl.load(req_ptr + e, mask=inside, other=0)
    tok = tl.load(tok_ptr + e, mask=inside, other=0)
    at = row * V + tok
    at_req = i.to(tl.int64) * V + tok
    z = tl.load(logits_ptr + at, mask=inside, other=0.0).to(dtype)
    bias = tl.zeros([BLOCK], dtype)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + at_req, mask=inside, other=0.0)
    z = edited_logit(z, bias, tl.load(rep_ptr + i, mask=inside, other=1.0).to(dtype),
                     tl.load(freq_ptr + i, mask=inside, other=0.0), tl.load(pres_ptr + i, mask=inside, other=0.0),
                     tl.load(count_ptr + e, mask=inside, other=0.0), tl.load(seen_ptr + e, mask=inside, other=0) != 0,
                     VLLM)
    ban = tl.load(ban_ptr + e, mask=inside, other=0) != 0
    if HAS_MASK:
        ban = ban | (tl.load(mask_ptr + at, mask=inside, other=1) == 0)
    if HAS_ALLOWED:
        ban = ban | (tl.load(allowed_ptr + at_req, mask=inside, other=1) == 0)
    tl.store(out_ptr + at, tl.where(ban, float("-inf"), z), mask=inside)


class SamplerInputs(NamedTuple):
    """SPEC §12 prepared for the kernels, on the device (``sampler_inputs`` builds it; None: off).

    ``token_mask [rows, V]`` and ``allowed [batch, V]`` int8 (1: allowed); ``logit_bias
    [batch, V]`` in the compute dtype; ``repetition/frequency/presence [batch]`` float64 (1, 0, 0
    where off); ``edits``: ``row_edits``' arrays as tensors; ``order`` the profile; ``min_p``
    ``[batch]`` float64 numpy (host: which requests the float64 pre-pass filters) or None.
    """

    order: str
    token_mask: object
    allowed: object
    logit_bias: object
    repetition: object
    frequency: object
    presence: object
    edits: dict
    min_p: np.ndarray | None


def sampler_inputs(sampler, num_draft_tokens, draft_token_ids, vocab_size: int, device, dtype) -> SamplerInputs:
    """``devices.protocol.SamplerParams`` (numpy) → ``SamplerInputs`` on ``device`` (host work:
    ``row_edits`` and the dense rows; an engine keeps these across steps)."""
    import torch
    batch = len(num_draft_tokens)
    on = lambda a, dt: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)  # noqa: E731
    allowed = allowed_mask(sampler, batch, vocab_size)
    per_request = lambda v, off: on(np.full(batch, off) if v is None else np.asarray(v), torch.float64)  # noqa: E731
    edits = {name: on(a, getattr(torch, str(a.dtype))) for name, a in
             row_edits(sampler, num_draft_tokens, draft_token_ids).items()}
    return SamplerInputs(
        sampler.order, None if sampler.token_mask is None else on(sampler.token_mask, torch.int8),
        None if allowed is None else on(allowed, torch.int8),
        None if sampler.logit_bias is None else on(sampler.logit_bias, dtype),
        per_request(sampler.repetition_penalty, 1.0), per_request(sampler.frequency_penalty, 0.0),
        per_request(sampler.presence_penalty, 0.0), edits,
        None if sampler.min_p is None else np.asarray(sampler.min_p, dtype=np.float64))


def process_logits(module, target_logits, cu, max_k: int, inputs: SamplerInputs, block: int, chunk: int,
                   num_warps: int = 4):
    """Every target row ``[rows, V]`` after §12's bans, penalties and bias, in the compute dtype
    (float64 for float64 logits, else float32): ``process_kernel``, then ``edit_kernel`` where
    rows have records. ``module``: this module in the device's Triton mode; ``cu`` ``[batch + 1]``
    int64 tensor; ``chunk``: a multiple of ``block``."""
    import torch
    rows, V = target_logits.shape
    batch = cu.shape[0] - 1
    fp64 = target_logits.dtype == torch.float64
    out = torch.empty(rows, V, dtype=torch.float64 if fp64 else torch.float32, device=target_logits.device)
    dummy = out
    flags = dict(HAS_MASK=inputs.token_mask is not None, HAS_ALLOWED=inputs.allowed is not None,
                 HAS_BIAS=inputs.logit_bias is not None, FP64=fp64)
    dense = tuple(dummy if t is None else t for t in (inputs.token_mask, inputs.allowed, inputs.logit_bias))
    module.process_kernel[(batch, max_k + 1, triton.cdiv(V, chunk))](
        target_logits, out, cu, *dense, V, chunk, TILES=chunk // block, BLOCK=block, num_warps=num_warps, **flags)
    e = inputs.edits
    n = int(e["row"].shape[0])
    if n:
        module.edit_kernel[(triton.cdiv(n, EDIT_BLOCK),)](
            target_logits, out, *dense, inputs.repetition, inputs.frequency, inputs.presence, e["row"],
            e["request"], e["token"], e["count"], e["seen"], e["ban"], n, V, BLOCK=EDIT_BLOCK,
            VLLM=inputs.order == "vllm", num_warps=4, **flags)
    return out


def raise_if_empty(empty: np.ndarray, cu: np.ndarray) -> None:
    """SPEC §12.4: ``InvalidInput`` naming the first row (bool ``empty [rows]``) every ban leaves
    without a token; ``cu`` ``[batch + 1]``. Both §12 paths end here: ``process_logits``' rows,
    and the fused step's row maxima (a row with no finite chunk maximum)."""
    if empty.any():
        r = int(np.flatnonzero(empty)[0])
        i = int(np.searchsorted(cu + np.arange(len(cu)), r, side="right") - 1)
        raise InvalidInput(f"token_mask: row {r} (request {i}, position {r - cu[i] - i}) allows no token "
                           f"after every ban")


# --- the fused path: §12 inside the step's own loads (no processed rows) ------------------

NO_ID = tl.constexpr(2147483647)  # as devices.triton_kernels.NO_ID: "no argmax here"
LIVE_BLOCK = 1024  # words of a row's live bits per live_kernel program
FUSED_EDIT_BLOCK = 512  # records a step of edit_stats_kernel: few steps a row (its loads wait on each other)


class FusedSampler(NamedTuple):
    """SPEC §12 prepared for the fused step (``fused_inputs`` builds it), on the device.

    Bit-packed masks, ``W = ceil(V / 32)`` int32 words a row, bit ``v % 32`` of word
    ``v // 32`` (1: allowed): ``token_bits [rows, W]`` (None: no token mask) and
    ``allowed_bits [batch, W]`` (None: every id); ``logit_bias [batch, V]`` in the compute dtype
    (None: none); ``repetition/frequency/presence [batch]`` float64 (1, 0, 0 where off).
    The sparse records (``row_edits(..., with_drafts=True)``), sorted by row then token:
    ``edit_start [rows + 1]`` int64 (row ``r``'s are ``edit_start[r] .. edit_start[r + 1] − 1``),
    ``edit_token [E]`` int32, ``edit_code [E]`` int32 ``= count·4 + seen·2 + ban``, and
    ``draft_edit [num_tokens]`` int64, the record of draft ``n`` in its own row (−1: placeholder).
    ``num_edits`` = E (host int); ``order`` the profile; ``bias_max [batch]`` each bias row's
    largest entry (the race bound's; None without a bias); ``row_request [rows]`` int32, each row's
    request (its bias row, for the top-k candidates' sweep: ``devices.triton_topk.RowsSampler``).
    """

    order: str
    token_bits: object
    allowed_bits: object
    logit_bias: object
    repetition: object
    frequency: object
    presence: object
    edit_start: object
    edit_token: object
    edit_code: object
    draft_edit: object
    num_edits: int
    bias_max: object
    row_request: object = None


def pack_bits(mask: np.ndarray) -> np.ndarray:
    """A bool ``[n, V]`` mask as int32 words ``[n, ceil(V/32)]``, bit ``v % 32`` of word ``v // 32``.

    >>> pack_bits(np.array([[True, False, True] + [False] * 30 + [True]])).tolist()
    [[5, 2]]
    """
    mask = np.asarray(mask, dtype=bool)
    packed = np.packbits(mask, axis=1, bitorder="little")
    words = np.zeros((mask.shape[0], 4 * -(-mask.shape[1] // 32)), dtype=np.uint8)
    words[:, :packed.shape[1]] = packed
    return words.view("<i4")


def allowed_mask(sampler, batch: int, vocab_size: int) -> np.ndarray | None:
    """``allowed_token_ids`` as bool ``[batch, V]`` (None: not given)."""
    if sampler.allowed_token_ids is None:
        return None
    allowed = np.ones((batch, vocab_size), dtype=bool)
    for i, ids in enumerate(sampler.allowed_token_ids):
        if ids is not None:
            allowed[i] = False
            allowed[i, np.asarray(ids, dtype=np.int64)] = True
    return allowed


def fused_inputs(sampler, num_draft_tokens, draft_token_ids, vocab_size: int, device, dtype) -> FusedSampler:
    """``devices.protocol.SamplerParams`` (numpy) → ``FusedSampler`` on ``device`` (host work: the
    records and the packed bits; an engine keeps these across steps and gets a grammar's mask
    already packed). ``num_draft_tokens`` ``[batch]``, ``draft_token_ids`` ``[num_tokens]``."""
    import torch
    k = np.asarray(num_draft_tokens, dtype=np.int64)
    drafts = np.asarray(draft_token_ids, dtype=np.int64)
    batch, rows = len(k), int(k.sum()) + len(k)
    on = lambda a, dt: torch.as_tensor(np.ascontiguousarray(a), dtype=dt, device=device)  # noqa: E731
    e = row_edits(sampler, k, drafts, with_drafts=True)
    if e["count"].size and e["count"].max() >= 2**28:
        raise ValueError("fused_inputs: a token counted 2^28 times or more does not fit edit_code")
    keys = e["row"] * vocab_size + e["token"]
    slot_row = np.arange(len(drafts)) + np.repeat(np.arange(batch), k)  # draft n of request i: row n + i
    wanted = slot_row * vocab_size + np.maximum(drafts, 0)
    draft_edit = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    real = drafts >= 0
    assert (keys[draft_edit[real]] == wanted[real]).all(), "row_edits(with_drafts=True) holds every draft"
    draft_edit = np.where(real, draft_edit, -1)
    allowed = allowed_mask(sampler, batch, vocab_size)
    per_request = lambda v, off: on(np.full(batch, off) if v is None else np.asarray(v), torch.float64)  # noqa: E731
    bias = None if sampler.logit_bias is None else on(sampler.logit_bias, dtype)
    return FusedSampler(
        sampler.order, None if sampler.token_mask is None else on(pack_bits(sampler.token_mask), torch.int32),
        None if allowed is None else on(pack_bits(allowed), torch.int32), bias,
        per_request(sampler.repetition_penalty, 1.0), per_request(sampler.frequency_penalty, 0.0),
        per_request(sampler.presence_penalty, 0.0), on(np.searchsorted(e["row"], np.arange(rows + 1)), torch.int64),
        on(e["token"], torch.int32), on(e["count"].astype(np.int64) * 4 + e["seen"] * 2 + e["ban"], torch.int32),
        on(draft_edit, torch.int64), int(e["row"].shape[0]), None if bias is None else bias.max(dim=1).values,
        on(np.repeat(np.arange(batch), k + 1), torch.int32))


@triton.jit
def live_kernel(cu_ptr, mask_ptr, allowed_ptr, live_ptr, W, BLOCK: tl.constexpr, HAS_MASK: tl.constexpr,
                HAS_ALLOWED: tl.constexpr):
    """Request i's row j, words ``[c·BLOCK, (c+1)·BLOCK)``: ``live = token_bits & allowed_bits``
    (all ones where neither is given). ``mask_ptr``, ``live_ptr`` ``[rows, W]``, ``allowed_ptr``
    ``[batch, W]`` int32. ``edit_stats_kernel`` then clears the bits of the records' entries."""
    i = tl.program_id(0)
    j = tl.program_id(1)
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    if j <= k:
        row = (start + i + j).to(tl.int64)
        w = tl.program_id(2) * BLOCK + tl.arange(0, BLOCK)
        inside = w < W
        bits = tl.full([BLOCK], -1, tl.int32)
        if HAS_MASK:
            bits = bits & tl.load(mask_ptr + row * W + w, mask=inside, other=0)
        if HAS_ALLOWED:
            bits = bits & tl.load(allowed_ptr + i.to(tl.int64) * W + w, mask=inside, other=0)
        tl.store(live_ptr + row * W + w, bits, mask=inside)


@triton.jit(
    do_not_specialize_on_alignment=['edit_z_ptr', 'stat_max_ptr', 'stat_sum_ptr', 'stat_arg_ptr'],
)
def edit_stats_kernel(logits_ptr, cu_ptr, temp_ptr, live_ptr, bias_ptr, rep_ptr, freq_ptr, pres_ptr, start_ptr,
                      tok_ptr, code_ptr, edit_z_ptr, stat_max_ptr, stat_sum_ptr, stat_arg_ptr, V, W, STRIDE, COLUMN,
                      BLOCK: tl.constexpr, HAS_BIAS: tl.constexpr, VLLM: tl.constexpr, FP64: tl.constexpr):
    """Request i's row j: each of its records' entries (``edited_logit``, ``-inf`` where banned
    by the record or by its live bit) into ``edit_z_ptr`` ``[E]``, its live bit cleared (so that
    the dense passes skip it), and the records' softmax statistics (max, sum of
    ``exp((z − max)/T)``, first argmax) into column ``COLUMN`` of the row's ``[rows, STRIDE]``
    statistics — the chunks' statistics then cover the row with every entry counted once."""
    i = tl.program_id(0)
    j = tl.program_id(1)
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    if j <= k:
        dtype = tl.float64 if FP64 else tl.float32
        row = (start + i + j).to(tl.int64)
        T = tl.load(temp_ptr + i).to(dtype)
        inv_t = tl.where(T > 0, 1.0 / tl.where(T > 0, T, 1.0), 1.0)
        r = tl.load(rep_ptr + i).to(dtype)
        freq = tl.load(freq_ptr + i)
        pres = tl.load(pres_ptr + i)
        lanes = tl.arange(0, BLOCK)
        m = tl.full([BLOCK], float("-inf"), dtype)
        s = tl.zeros([BLOCK], dtype)
        arg = tl.zeros([BLOCK], tl.int32)
        e0 = tl.load(start_ptr + row)
        end = tl.load(start_ptr + row + 1)
        while e0 < end:  # a loaded bound: a while loop (the interpreter's range wants constants)
            e = e0 + lanes
            inside = e < end
            tok = tl.load(tok_ptr + e, mask=inside, other=0)
            code = tl.load(code_ptr + e, mask=inside, other=0)
            bit = (tl.full([BLOCK], 1, tl.uint32) << (tok % 32).to(tl.uint32)).to(tl.int32, bitcast=True)
            old = tl.atomic_and(live_ptr + row * W + tok // 32, ~bit, mask=inside)
            z = tl.load(logits_ptr + row * V + tok, mask=inside, other=0.0).to(dtype)
            bias = tl.zeros([BLOCK], dtype)
            if HAS_BIAS:
                bias = tl.load(bias_ptr + i.to(tl.int64) * V + tok, mask=inside, other=0.0)
            z = edited_logit(z, bias, r, freq, pres, (code >> 2).to(tl.float64), ((code >> 1) & 1) != 0, VLLM)
            z = tl.where(inside & ((code & 1) == 0) & ((old & bit) != 0), z, float("-inf"))
            tl.store(edit_z_ptr + e, z, mask=inside)
            up = z > m  # the records ascend by token: strictly greater keeps a lane's first argmax
            d = tl.exp(-tl.abs(z - m) * inv_t)
            s_new = tl.where(up, s * d + 1.0, s + d)
            s = tl.where(z == float("-inf"), s, s_new)
            arg = tl.where(up, tok, arg)
            m = tl.maximum(m, z)
            e0 += BLOCK
        row_max = tl.max(m, axis=0)
        scale = tl.where(m == float("-inf"), 0.0, tl.exp((m - row_max) * inv_t))
        out = row * STRIDE + COLUMN
        tl.store(stat_sum_ptr + out, tl.sum(s * scale, axis=0))
        tl.store(stat_max_ptr + out, row_max)
        tl.store(stat_arg_ptr + out, tl.min(tl.where(m == row_max, arg, NO_ID), axis=0))


@triton.jit(
    do_not_specialize_on_alignment=['counter_ptr', 'stat_max_ptr', 'stat_sum_ptr', 'stat_arg_ptr'],
)
def fused_stats_kernel(logits_ptr, cu_ptr, temp_ptr, counter_ptr, live_ptr, bias_ptr, stat_max_ptr, stat_sum_ptr,
                       stat_arg_ptr, V, W, CHUNK, STRIDE, TILES: tl.constexpr, BLOCK: tl.constexpr,
                       HAS_BIAS: tl.constexpr, FP64: tl.constexpr):
    """``devices.triton_kernels.stats_kernel`` on the §12 rows without writing them: per (row j,
    request i, chunk) — grid ``(max_k + 1, batch, chunks)``, the request's rows side by side so
    that its bias row is read from memory once — the statistics of ``z + bias`` where the live
    bit is set, ``-inf`` elsewhere (bans, and the records' entries, counted by
    ``edit_stats_kernel``). Tiles are ``[BLOCK/32, 32]``: one live word per tile line.
    ``live_ptr`` ``[rows, W]`` int32; statistics ``[rows, STRIDE]``, columns ``0 .. chunks−1``."""
    j = tl.program_id(0)
    i = tl.program_id(1)
    chunk = tl.program_id(2)
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    if (j == 0) & (chunk == 0):
        tl.store(counter_ptr + i, 0)
    if j <= k:
        dtype = tl.float64 if FP64 else tl.float32
        row = (start + i + j).to(tl.int64)
        T = tl.load(temp_ptr + i).to(dtype)
        inv_t = tl.where(T > 0, 1.0 / tl.where(T > 0, T, 1.0), 1.0)
        lo = chunk * CHUNK
        hi = tl.minimum(lo + CHUNK, V)
        LINES: tl.constexpr = BLOCK // 32
        line = tl.arange(0, LINES)
        bitpos = tl.arange(0, 32)
        m = tl.full([LINES, 32], float("-inf"), dtype)
        s = tl.zeros([LINES, 32], dtype)
        arg = tl.zeros([LINES, 32], tl.int32)
        for tile in range(0, TILES):
            first = lo + tile * BLOCK
            cols = first + line[:, None] * 32 + bitpos[None, :]
            inside = cols < hi
            z = tl.load(logits_ptr + row * V + cols, mask=inside, other=float("-inf")).to(dtype)
            if HAS_BIAS:
                z = z + tl.load(bias_ptr + i.to(tl.int64) * V + cols, mask=inside, other=0.0)
            words = tl.load(live_ptr + row * W + first // 32 + line, mask=first + line * 32 < hi, other=0)
            z = tl.where(((words[:, None] >> bitpos[None, :]) & 1) != 0, z, float("-inf"))
            up = z > m
            d = tl.exp(-tl.abs(z - m) * inv_t)
            s_new = tl.where(up, s * d + 1.0, s + d)
            s = tl.where(z == float("-inf"), s, s_new)
            arg = tl.where(up, cols, arg)
            m = tl.maximum(m, z)
        row_max = tl.max(tl.max(m, axis=1), axis=0)
        scale = tl.where(m == float("-inf"), 0.0, tl.exp((m - row_max) * inv_t))
        out = row * STRIDE + chunk
        tl.store(stat_sum_ptr + out, tl.sum(tl.sum(s * scale, axis=1), axis=0))
        tl.store(stat_max_ptr + out, row_max)
        tl.store(stat_arg_ptr + out, tl.min(tl.min(tl.where(m == row_max, arg, NO_ID), axis=1), axis=0))


def fused_prepare(module, target_logits, cu, temperature, inputs: FusedSampler, max_k: int, stats=None, out=None):
    """The fused path's first two launches: ``live_kernel`` (the packed masks combined) and
    ``edit_stats_kernel`` (the records' processed values, their live bits cleared, their statistics
    into the last column of ``stats``: ``(max, sum, arg)`` each ``[rows, columns]``; None: a
    scratch column, for a step whose statistics come from elsewhere — the filters' cut).
    ``cu`` ``[batch + 1]`` int64, ``temperature`` ``[batch]`` tensors; ``out``: the ``(live, edit_z)``
    to write (None: new; a caller replaying a CUDA graph that reads them keeps them). Returns
    ``(live [rows, W] int32, edit_z [max(E, 1)])``, which the dense passes and the step kernel read."""
    import torch
    rows, V = target_logits.shape
    batch = cu.shape[0] - 1
    W = triton.cdiv(V, 32)
    fp64 = target_logits.dtype == torch.float64
    dev = target_logits.device
    compute = torch.float64 if fp64 else torch.float32
    if out is None:
        out = (torch.empty(rows, W, dtype=torch.int32, device=dev),
               torch.empty(max(inputs.num_edits, 1), dtype=compute, device=dev))
    live, edit_z = out
    if stats is None:
        scratch = torch.empty(2, rows, 1, dtype=compute, device=dev)
        stats = (scratch[0], scratch[1], torch.empty(rows, 1, dtype=torch.int32, device=dev))
    nstat = stats[0].shape[1]
    dummy = live
    module.live_kernel[(batch, max_k + 1, triton.cdiv(W, LIVE_BLOCK))](
        cu, dummy if inputs.token_bits is None else inputs.token_bits,
        dummy if inputs.allowed_bits is None else inputs.allowed_bits, live, W, BLOCK=LIVE_BLOCK,
        HAS_MASK=inputs.token_bits is not None, HAS_ALLOWED=inputs.allowed_bits is not None, num_warps=4)
    has_bias = inputs.logit_bias is not None
    module.edit_stats_kernel[(batch, max_k + 1)](
        target_logits, cu, temperature, live, inputs.logit_bias if has_bias else target_logits, inputs.repetition,
        inputs.frequency, inputs.presence, inputs.edit_start, inputs.edit_token, inputs.edit_code, edit_z, *stats, V, W,
        nstat, nstat - 1, BLOCK=FUSED_EDIT_BLOCK, HAS_BIAS=has_bias, VLLM=inputs.order == "vllm", FP64=fp64,
        num_warps=4)
    return live, edit_z


def fused_stats(module, target_logits, cu, temperature, counter, inputs: FusedSampler, stats, max_k: int,
                chunk: int, block: int, num_warps: int):
    """Launch the fused path's statistics: ``fused_prepare`` (``live_kernel``, ``edit_stats_kernel``),
    then ``fused_stats_kernel``. ``stats``: ``(max, sum, arg)`` each ``[rows, nchunk + 1]`` (the last
    column the records'); ``counter`` ``[batch]`` is zeroed for the step kernel. Returns
    ``(live [rows, W] int32, edit_z [E])``, which the step kernel reads."""
    import torch
    V = target_logits.shape[1]
    batch = cu.shape[0] - 1
    live, edit_z = fused_prepare(module, target_logits, cu, temperature, inputs, max_k, stats)
    nstat = stats[0].shape[1]
    has_bias = inputs.logit_bias is not None
    module.fused_stats_kernel[(max_k + 1, batch, nstat - 1)](
        target_logits, cu, temperature, counter, live, inputs.logit_bias if has_bias else target_logits, *stats, V,
        live.shape[1], chunk, nstat, TILES=chunk // block, BLOCK=block, HAS_BIAS=has_bias,
        FP64=target_logits.dtype == torch.float64, num_warps=num_warps)
    return live, edit_z


__all__ = ["EDIT_BLOCK", "row_edits", "edited_logit", "process_kernel", "edit_kernel", "SamplerInputs",
           "sampler_inputs", "process_logits", "raise_if_empty", "FusedSampler", "pack_bits", "allowed_mask",
           "fused_inputs", "live_kernel", "edit_stats_kernel", "fused_stats_kernel", "fused_prepare", "fused_stats"]
