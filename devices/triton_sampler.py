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

The plain step (``devices.triton_device.verify_tensors``) then runs unchanged on the
processed rows; top-k, top-p and min_p are ``filter_logits``' float64 pre-pass over the
rows of the requests using them. Without §12 parameters none of this runs.

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

EDIT_BLOCK = 128


def _ids(lists, i: int) -> list:
    """Request ``i``'s id list of a per-request tuple (None: empty)."""
    return [] if lists is None or lists[i] is None else [int(t) for t in lists[i]]


def _banned(history: list, words: list, stops: list, min_tokens: int) -> set:
    """The tokens a row bans from its output so far: completed bad words, stop ids while short."""
    ban = {w[-1] for w in words if len(w) == 1 or history[len(history) - len(w) + 1:] == w[:-1]}
    return ban | set(stops) if len(history) < min_tokens else ban


def row_edits(sampler, num_draft_tokens, draft_token_ids) -> dict:
    """SPEC §12's history-dependent rules as sparse records, one per (row, token) touched.

    ``num_draft_tokens`` ``[batch]``; ``draft_token_ids`` ``[num_tokens]`` (placeholders
    skipped: rows after one are never read). Returns numpy arrays ``[E]``: ``row`` int64,
    ``request`` int32, ``token`` int64, ``count`` float64 (in the output so far), ``seen``
    int8 (prompt ∪ output so far; only with a repetition penalty), ``ban`` int8.
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
    if VLLM:
        z = z + bias
    r = tl.load(rep_ptr + i, mask=inside, other=1.0).to(dtype)
    z = tl.where(tl.load(seen_ptr + e, mask=inside, other=0) != 0, tl.where(z > 0, z / r, z * r), z)
    count = tl.load(count_ptr + e, mask=inside, other=0.0)
    z = z - (tl.load(freq_ptr + i, mask=inside, other=0.0) * count).to(dtype)
    z = z - (tl.load(pres_ptr + i, mask=inside, other=0.0) * tl.where(count > 0, 1.0, 0.0)).to(dtype)
    if not VLLM:
        z = z + bias
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
    allowed = None
    if sampler.allowed_token_ids is not None:
        allowed = np.ones((batch, vocab_size), dtype=np.int8)
        for i, ids in enumerate(sampler.allowed_token_ids):
            if ids is not None:
                allowed[i] = 0
                allowed[i, np.asarray(ids, dtype=np.int64)] = 1
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
    (float64 for float64 logits, else float32): two launches, ``process_kernel`` then
    ``edit_kernel``. ``module``: this module in the device's Triton mode; ``cu`` ``[batch + 1]``
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


__all__ = ["EDIT_BLOCK", "row_edits", "process_kernel", "edit_kernel", "SamplerInputs", "sampler_inputs",
           "process_logits"]
