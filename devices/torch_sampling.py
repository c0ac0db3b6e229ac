"""One torch implementation of each SPEC sampling rule, shared by every torch-based device.

The ``torch`` device (ragged, dynamic shapes), the ``hpu`` device (static
buckets, ``torch.compile``), the ``npu`` device (fp32, Ascend's op set), the
Triton device's top-k/top-p pre-pass and the PTD drafter all call these
functions; none of them writes its own top-k, top-p, softmax, residual,
race, argmax or ragged-layout arithmetic. A platform's genuine difference is
a parameter here (``decision_dtype`` for fp32-only hardware, ``coin`` for an
exact integer coin, ``use_top_k``/``use_top_p`` for a sort-free graph), never
a copy of the rule. Shapes work on any leading dimensions: ``[rows, V]`` for
the ragged devices, ``[padded_batch, slots, V]`` for the static one.

The ladder (each rung a small named function; SPEC sections cited):

* layout (§1): ``ragged_layout`` → ``RaggedLayout`` (each draft's request,
  its index ``j`` and its target row ``cu[i] + i + j``); ``per_request``
  (a flat ``[N]`` array as dense ``[B, W]`` rows); ``output_width``;
* target processing (§2): ``scale_by_temperature`` → ``top_k_kept`` →
  ``softmax`` → ``top_p_kept`` → ``renormalise_kept``, composed by
  ``target_probs`` (and by ``filter_kept`` for a kernel that wants only the
  masks); ``SamplingRows`` carries the per-row parameters;
* acceptance (§3, §4): ``draft_probabilities`` gathers ``t(x)``, ``d(x)``,
  then ``coin_accepts`` (``u < t(x)/d(x)`` in float64); ``greedy_argmax``
  and ``first_rejection``;
* emission (§3, §4, §7): ``residual_weights``, ``race``, ``emitted_rows``.

* the whole sampler (§12): ``sampler_tensors`` (``SamplerParams`` → tensors)
  → ``process_logits`` (each row's ``draft_counts`` and history window from
  the drafts before it; ``sampler_bans`` with ``bad_word_bans``; ``penalised``;
  ``biased``; in the order profile's order) before §2, and ``min_p_kept``
  inside ``target_probs`` where the profile puts it (``SamplingRows.min_p``).

**Extending the pipeline**: add the parameter as a field of ``SamplingRows``
(default None = off; ``take`` expands every field to rows for free) or of
``SamplerTensors``, write the rule as one more small function ``(z, rows) -> z``
on logits or ``(probs, rows) -> probs`` on probabilities, and call it at its
place in ``target_probs`` or ``process_logits``. Every device picks it up.

**Dtype policy** (justified against SPEC §9). Rows are computed in the dtype
of the logits — the dtype the device declares and is judged at (§9's float32
tolerance is 1e-4 relative; float32's softmax and temperature are accurate to
a few ulp, 1e-6 relative at most, well inside it) — except 16-bit logits,
which are widened to float32 before any arithmetic (``widened``: at the
temperature and at §12's penalties and bias): SPEC §6 holds a device given
16-bit logits to float32's tolerance on every value it computes from them,
and a 16-bit softmax, quotient, residual or penalised row moves a value by
2⁻¹¹ (float16) to 2⁻⁸ (bfloat16) relative, far past it. Every quantity that
*decides* something by comparison with a threshold is formed in
``DECISION_DTYPE = float64``: the top-p prefix sums (a float32 running sum
over V = 256k probabilities can drift by up to V·2⁻²⁴ ≈ 1.6e-2 in the worst
case, far past 1e-4, and ``p`` itself is float64), the acceptance ratio and
coin (the uniform is float64, so SPEC §4's ``u`` one ulp below the ratio is
decided as the reference decides it), and the race scores. Hardware without
float64 (Ascend) passes ``decision_dtype=torch.float32`` and an exact integer
``coin`` (``devices.npu_device.coin_accepts``); §9's tolerance is then what
covers its top-p sums and race scores.

>>> rows = SamplingRows(torch.ones(1), torch.tensor([1]), torch.ones(1, dtype=torch.float64))
>>> target_probs(torch.tensor([[1., 1., 0.]]), rows).tolist()        # top-k 1 keeps both tied 1.0s
[[0.5, 0.5, 0.0]]
>>> race(torch.tensor([[0.0, 2.0, 1.0]]), torch.tensor([[1.0, 4.0, 1.0]], dtype=torch.float64)).tolist()
[2]
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

from devices.protocol import PLACEHOLDER_TOKEN_ID, InvalidInput

DECISION_DTYPE = torch.float64
"""The dtype of every threshold comparison (top-p prefix sums, the coin, the race); see the module docstring."""


# --- §1 the ragged layout ------------------------------------------------------------

class RaggedLayout(NamedTuple):
    """Where each of ``num_tokens`` flat drafts lives (SPEC §1).

    ``starts [B]`` (``cu[i]``, request i's first draft), ``request [N]``,
    ``draft_index [N]`` (``j``), ``target_row [N]`` (``cu[i] + i + j``), all int64.
    """

    starts: torch.Tensor
    request: torch.Tensor
    draft_index: torch.Tensor
    target_row: torch.Tensor


def ragged_layout(counts: torch.Tensor, total: int) -> RaggedLayout:
    """Layout of a flat ragged array: ``counts [B]`` int64 entries per request, ``total = Σ counts``.

    No host sync (``total`` is a Python int the host knows) and no
    ``repeat_interleave``: each entry finds its request by ``searchsorted``
    on the inclusive ends, an op every backend (Ascend included) has.

    >>> layout = ragged_layout(torch.tensor([2, 0, 3]), 5)
    >>> layout.request.tolist(), layout.draft_index.tolist(), layout.target_row.tolist()
    ([0, 0, 2, 2, 2], [0, 1, 0, 1, 2], [0, 1, 4, 5, 6])
    """
    ends = torch.cumsum(counts, 0)
    starts = ends - counts
    flat = torch.arange(total, device=counts.device)
    request = torch.searchsorted(ends, flat, right=True)
    return RaggedLayout(starts, request, flat - starts[request], flat + request)


def target_row_requests(num_draft_tokens: torch.Tensor, num_rows: int) -> torch.Tensor:
    """``[num_tokens + B]``: the request of each target row (request i owns ``K_i + 1`` rows, SPEC §1)."""
    return ragged_layout(num_draft_tokens + 1, num_rows).request


def per_request(flat: torch.Tensor, starts: torch.Tensor, width: int, fill: int | float) -> torch.Tensor:
    """``flat [N]`` laid out as ``[B, width]``: column ``j`` of row ``i`` is ``flat[starts[i] + j]``.

    Indices are clamped into ``[0, N)`` *before* the gather (never a negative
    or past-the-end read: docs/bugs.md #13); columns past a request's
    own count hold a neighbour's value, which callers mask. ``N = 0`` gives ``fill``.
    """
    columns = torch.arange(width, device=starts.device).unsqueeze(0)
    if flat.shape[0] == 0:
        return torch.full((starts.shape[0], width), fill, dtype=flat.dtype, device=starts.device)
    return flat[(starts.unsqueeze(1) + columns).clamp(max=flat.shape[0] - 1)]


def output_width(max_k: int) -> int:
    """Columns of ``output_token_ids`` (SPEC §7): the longest request's drafts plus its one emission."""
    return max_k + 1


# --- §2 the target distribution of a set of rows -------------------------------------

class SamplingRows(NamedTuple):
    """Per-row sampling parameters, each ``[rows]`` (or ``[B]`` before ``take``).

    - ``temperature``: float > 0 (greedy rows carry a stand-in, ``safe_temperature``);
    - ``top_k``: int64, 0 or ≥ V = off;
    - ``top_p``: float in (0, 1], 1 = off;
    - ``min_p``: float64 in [0, 1] or None (SPEC §12; 0 or None = off).

    New parameters (SPEC §12) are new fields with default None.
    """

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor | None = None

    def take(self, index: torch.Tensor) -> "SamplingRows":
        """The parameters of rows ``index`` (e.g. a request's per-draft rows); None fields stay None."""
        return SamplingRows(*(None if field is None else field[index] for field in self))


SIXTEEN_BIT = (torch.float16, torch.bfloat16)
"""Logits dtypes a device holds but never computes in (SPEC §6): ``widened`` takes them to float32."""


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype rows of ``dtype`` logits are computed in: float32 for 16-bit logits, else their own."""
    return torch.float32 if dtype in SIXTEEN_BIT else dtype


def widened(logits: torch.Tensor) -> torch.Tensor:
    """``logits [..., V]`` in ``compute_dtype``: exact (every 16-bit value is a float32 value), no copy otherwise."""
    return logits.to(compute_dtype(logits.dtype))


def safe_temperature(temperature: torch.Tensor) -> torch.Tensor:
    """``[B]``: greedy requests (T = 0) get 1, so that every row divides by a positive T."""
    return torch.where(temperature == 0, torch.ones_like(temperature), temperature)


def scale_by_temperature(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """§2.1: ``z = logits / T`` in the logits' ``compute_dtype``. ``logits [..., V]``, ``temperature [...]``."""
    z = widened(logits)
    return z / temperature.to(z.dtype).unsqueeze(-1)


def sort_descending(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One descending sort serves both filters: masking and ``exp`` are monotone, so the
    order of ``z`` also sorts the post-top-k probabilities."""
    return z.sort(dim=-1, descending=True)


def top_k_kept(z: torch.Tensor, sorted_z: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """§2.2: ``[..., V]`` bool, ``z_v >= z_(k)`` (the k-th largest, duplicates counted).

    Masking by value keeps every boundary tie; rows with ``k = 0`` or ``k >= V`` keep all.
    """
    vocab_size = z.shape[-1]
    active = ((top_k > 0) & (top_k < vocab_size)).unsqueeze(-1)
    kth = sorted_z.gather(-1, (top_k.clamp(1, vocab_size) - 1).unsqueeze(-1))
    return ~active | (z >= kth)


def softmax(z: torch.Tensor) -> torch.Tensor:
    """§2.3: softmax over the last dimension (``-inf`` → probability 0), in ``z``'s dtype."""
    return torch.softmax(z, dim=-1)


def top_p_kept(probs: torch.Tensor, order: torch.Tensor, top_p: torch.Tensor,
               decision_dtype: torch.dtype = DECISION_DTYPE) -> torch.Tensor:
    """§2.4: ``[..., V]`` bool, ``probs >= τ`` — τ the m*-th largest, m* the smallest m with ``c_m >= p``.

    Ties at the cut are all kept; if rounding leaves every ``c_m < p``, every
    token is kept (the cut is capped at the last). Rows with ``p >= 1`` keep all.
    Prefix sums in ``decision_dtype`` (see the module docstring).
    """
    vocab_size = probs.shape[-1]
    sorted_probs = probs.gather(-1, order)
    cumulative = sorted_probs.cumsum(dim=-1, dtype=decision_dtype)
    # m* - 1 = how many prefixes fall short of p.
    cut = (cumulative < top_p.to(decision_dtype).unsqueeze(-1)).sum(dim=-1).clamp(max=vocab_size - 1)
    tau = sorted_probs.gather(-1, cut.unsqueeze(-1))
    return (top_p >= 1).unsqueeze(-1) | (probs >= tau)


def renormalise_kept(probs: torch.Tensor, kept: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Zero what top-p dropped and renormalise; rows with ``p = 1`` are returned untouched
    (not re-divided by a sum that rounds to 1 ± ulp)."""
    kept_probs = torch.where(kept, probs, torch.zeros_like(probs))
    return torch.where((top_p < 1).unsqueeze(-1), kept_probs / kept_probs.sum(dim=-1, keepdim=True), probs)


def target_probs(logits: torch.Tensor, rows: SamplingRows, *, use_top_k: bool = True, use_top_p: bool = True,
                 decision_dtype: torch.dtype = DECISION_DTYPE, order: str = "canonical") -> torch.Tensor:
    """SPEC §2 for rows of logits ``[..., V]`` → ``target_probs`` in the logits' ``compute_dtype``.

    ``rows``: ``SamplingRows`` shaped like ``logits[..., 0]``. ``use_top_k``/
    ``use_top_p`` False skip a filter no row uses (both False: no sort — a
    host-side graph choice on static-shape hardware, never a device branch).
    ``rows.min_p`` (SPEC §12) acts where ``order`` puts it: after top-p
    (``"canonical"``) or before top-k (``"vllm"``).

    >>> rows = SamplingRows(torch.ones(1), torch.zeros(1, dtype=torch.int64), torch.tensor([0.7]))
    >>> target_probs(torch.log(torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)), rows).round(decimals=4).tolist()
    [[0.625, 0.375, 0.0]]
    """
    z = scale_by_temperature(logits, rows.temperature)
    if rows.min_p is not None and order == "vllm":
        z = z.masked_fill(~min_p_kept(softmax(z), rows.min_p, decision_dtype), -torch.inf)
    if not (use_top_k or use_top_p):
        probs = softmax(z)
    else:
        sorted_z, order_ids = sort_descending(z)
        if use_top_k:
            z = z.masked_fill(~top_k_kept(z, sorted_z, rows.top_k), -torch.inf)
        probs = softmax(z)
        if use_top_p:
            probs = renormalise_kept(probs, top_p_kept(probs, order_ids, rows.top_p, decision_dtype), rows.top_p)
    if rows.min_p is not None and order == "canonical":
        kept = torch.where(min_p_kept(probs, rows.min_p, decision_dtype), probs, torch.zeros_like(probs))
        probs = torch.where((rows.min_p > 0).unsqueeze(-1), kept / kept.sum(dim=-1, keepdim=True), probs)
    return probs


def filter_kept(z: torch.Tensor, rows: SamplingRows, decision_dtype: torch.dtype = DECISION_DTYPE) -> torch.Tensor:
    """``[..., V]`` bool: the tokens §2's top-k and top-p keep, for temperature-scaled ``z``.

    For a kernel that applies temperature and softmax itself and wants only
    the filters (the Triton device's pre-pass): the same rungs as ``target_probs``.
    """
    sorted_z, order = sort_descending(z)
    kept = top_k_kept(z, sorted_z, rows.top_k)
    probs = softmax(z.masked_fill(~kept, -torch.inf))
    return kept & top_p_kept(probs, order, rows.top_p, decision_dtype)


def uses_top_k(temperature, top_k, vocab_size: int):
    """``[B]`` bool (numpy or torch): a sampled request whose top-k removes something."""
    return (temperature > 0) & (top_k > 0) & (top_k < vocab_size)


def uses_top_p(temperature, top_p):
    """``[B]`` bool (numpy or torch): a sampled request with ``top_p < 1``."""
    return (temperature > 0) & (top_p < 1)


# --- §3, §4 acceptance -----------------------------------------------------------------

def greedy_argmax(logits: torch.Tensor) -> torch.Tensor:
    """§2 greedy: argmax of the raw logits ``[..., V]`` → ``[...]`` int64; ties go to the smallest id
    (``torch.argmax`` returns the first maximal index, on CPU and CUDA alike)."""
    return logits.argmax(dim=-1)


def draft_probabilities(draft_token_ids: torch.Tensor, draft_probs: torch.Tensor | None,
                        probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``t(x)``, ``d(x)`` and ``drawable`` for drafts ``[...]`` (§3, §4).

    ``probs``/``draft_probs`` ``[..., V]`` (``draft_probs`` None: point
    proposals, ``d(x) = 1``). A placeholder is never used as an index and is
    not drawable; ``d(x) = 0`` means ``x`` cannot have come from ``d``: not
    drawable, and ``d(x)`` is replaced by 1 so that nobody divides by 0.
    """
    real = draft_token_ids != PLACEHOLDER_TOKEN_ID
    safe_ids = torch.where(real, draft_token_ids, torch.zeros_like(draft_token_ids)).unsqueeze(-1)
    t_x = probs.gather(-1, safe_ids).squeeze(-1)
    if draft_probs is None:
        return t_x, torch.ones_like(t_x), real
    d_x = draft_probs.gather(-1, safe_ids).squeeze(-1)
    drawable = real & (d_x > 0)
    return t_x, torch.where(drawable, d_x, torch.ones_like(d_x)), drawable


def coin_accepts(uniforms: torch.Tensor, t_x: torch.Tensor, d_x: torch.Tensor) -> torch.Tensor:
    """§3: ``u < t(x) / d(x)``, strict, ratio formed in float64 (``uniforms`` float64)."""
    return uniforms < t_x.to(DECISION_DTYPE) / d_x.to(DECISION_DTYPE)


Coin = Callable[[object, torch.Tensor, torch.Tensor], torch.Tensor]


def accepts(draft_token_ids: torch.Tensor, draft_probs: torch.Tensor | None, probs: torch.Tensor, uniforms,
            coin: Coin = coin_accepts) -> torch.Tensor:
    """``[...]`` bool: does each sampled draft pass its coin (§3, §4)? ``coin(uniforms, t_x, d_x)``
    decides one coin per draft; a platform without float64 passes an exact integer coin."""
    t_x, d_x, drawable = draft_probabilities(draft_token_ids, draft_probs, probs)
    return drawable & coin(uniforms, t_x, d_x)


def first_rejection(accept: torch.Tensor, num_draft_tokens: torch.Tensor) -> torch.Tensor:
    """``num_accepted [B]``: the first rejected slot of ``accept [B, W]`` among a request's
    ``K_i`` real slots, or ``K_i`` if none — a masked ``amin``, no scatter with duplicate indices."""
    slots = torch.arange(accept.shape[1], device=accept.device).unsqueeze(0)
    valid = slots < num_draft_tokens.unsqueeze(1)
    rejected_at = torch.where(valid & ~accept, slots, torch.full_like(slots, accept.shape[1]))
    return torch.minimum(rejected_at.amin(dim=1), num_draft_tokens)


# --- §3, §4, §7 emission -----------------------------------------------------------------

def residual_weights(target_rows: torch.Tensor, draft_rows: torch.Tensor | None, draft_ids: torch.Tensor,
                     subtract: torch.Tensor) -> torch.Tensor:
    """The weights of the one emitted draw ``[B, V]`` (§3, §4).

    ``subtract [B]`` bool: a real rejected draft (not a placeholder, not a
    bonus row). Full: ``max(t − d, 0)``; point (``draft_rows`` None): ``t``
    with ``x`` zeroed; otherwise ``t``. An empty residual falls back to ``t``.
    """
    if draft_rows is not None:
        residual = (target_rows - draft_rows).clamp_min(0)
    else:
        safe_ids = torch.where(subtract, draft_ids, torch.zeros_like(draft_ids)).unsqueeze(1)
        residual = target_rows.scatter(1, safe_ids, 0.0)
    weights = torch.where(subtract.unsqueeze(1), residual, target_rows)
    empty = ~(weights > 0).any(dim=1, keepdim=True)
    return torch.where(empty, target_rows, weights)


def race(weights: torch.Tensor, exponentials: torch.Tensor,
         decision_dtype: torch.dtype = DECISION_DTYPE) -> torch.Tensor:
    """§3: ``argmax_v w_v / E_v`` over ``w_v > 0``, lowest id on ties → ``[B]`` int64.

    ``weights [B, V]`` ≥ 0, ``exponentials [B, V]`` > 0. Scores in
    ``decision_dtype``; excluded tokens score -1, below any ``w/E >= 0`` (even
    an underflowed one), so a zero-weight token is never drawn.
    """
    score = weights.to(decision_dtype) / exponentials.to(decision_dtype)
    score = torch.where(weights > 0, score, torch.full_like(score, -1.0))
    return score.argmax(dim=-1)


def emitted_rows(drafts: torch.Tensor, num_accepted: torch.Tensor, token: torch.Tensor) -> torch.Tensor:
    """§7: ``[B, W]`` from each request's drafts ``drafts [B, W]`` (columns ≥ K_i ignored):
    accepted drafts in columns ``< n``, the emitted ``token [B]`` at ``n``, ``-1`` after."""
    columns = torch.arange(drafts.shape[1], device=drafts.device).unsqueeze(0)
    n = num_accepted.unsqueeze(1)
    padding = torch.full_like(drafts, PLACEHOLDER_TOKEN_ID)
    return torch.where(columns < n, drafts, torch.where(columns == n, token.unsqueeze(1), padding))


# --- §12 the whole sampler: bans, penalties and bias along the drafts, min_p ---------------

SAMPLER_BAN_FILL = -2
"""Token id of "no token here" in a history window (never equal to a real id or a placeholder)."""


class SamplerTensors(NamedTuple):
    """SPEC §12's parameters as tensors (``sampler_tensors`` builds them; None: off).

    Per request (``[B, V]`` unless said): ``output_counts`` (counts of the output before this
    step), ``output_length [B]`` int64, ``prompt_seen`` bool, ``allowed`` bool, ``stop`` bool with
    ``min_tokens [B]``, ``logit_bias``, ``repetition_penalty``/``frequency_penalty``/
    ``presence_penalty``/``min_p`` ``[B]`` float64; per target row ``token_mask [rows, V]`` bool;
    bad words as ``word_prefix [B, W, L]`` (right-aligned, ``-3``: any token), ``word_last`` and
    ``word_valid`` ``[B, W]`` and ``output_tail [B, L]`` (the last L output tokens, ``-2`` before the start).
    """

    order: str = "canonical"
    output_counts: torch.Tensor | None = None
    output_length: torch.Tensor | None = None
    prompt_seen: torch.Tensor | None = None
    token_mask: torch.Tensor | None = None
    allowed: torch.Tensor | None = None
    stop: torch.Tensor | None = None
    min_tokens: torch.Tensor | None = None
    logit_bias: torch.Tensor | None = None
    repetition_penalty: torch.Tensor | None = None
    frequency_penalty: torch.Tensor | None = None
    presence_penalty: torch.Tensor | None = None
    min_p: torch.Tensor | None = None
    word_prefix: torch.Tensor | None = None
    word_last: torch.Tensor | None = None
    word_valid: torch.Tensor | None = None
    output_tail: torch.Tensor | None = None


def _id_rows(lists, batch: int, vocab_size: int, device) -> torch.Tensor:
    """``batch`` id lists (None: empty) → ``[batch, V]`` int64 counts (host marshalling, one scatter)."""
    arrays = [np.zeros(0, np.int64) if ids is None else np.asarray(ids, np.int64).reshape(-1) for ids in lists]
    request = np.repeat(np.arange(len(arrays)), [len(a) for a in arrays])
    counts = torch.zeros(batch, vocab_size, dtype=torch.int64, device=device)
    if len(request):
        ids = torch.from_numpy(np.concatenate(arrays)).to(device)
        counts.index_put_((torch.from_numpy(request).to(device), ids), torch.ones_like(ids), accumulate=True)
    return counts


def sampler_tensors(sampler, batch: int, vocab_size: int, device) -> SamplerTensors:
    """``devices.protocol.SamplerParams`` (numpy, ragged lists) → ``SamplerTensors`` on ``device``."""
    def per_request(value, dtype):
        return None if value is None else torch.tensor(np.asarray(value), dtype=dtype, device=device)

    outputs = sampler.output_token_ids or [None] * batch
    fields = dict(order=sampler.order, output_counts=_id_rows(outputs, batch, vocab_size, device),
                  output_length=torch.tensor([0 if o is None else len(o) for o in outputs], device=device),
                  token_mask=per_request(sampler.token_mask, torch.bool),
                  logit_bias=per_request(sampler.logit_bias, torch.float64),
                  min_tokens=per_request(sampler.min_tokens, torch.int64))
    for name in ("repetition_penalty", "frequency_penalty", "presence_penalty", "min_p"):
        fields[name] = per_request(getattr(sampler, name), torch.float64)
    if sampler.prompt_token_ids is not None:
        fields["prompt_seen"] = _id_rows(sampler.prompt_token_ids, batch, vocab_size, device) > 0
    if sampler.allowed_token_ids is not None:
        unrestricted = torch.tensor([ids is None for ids in sampler.allowed_token_ids], device=device)
        fields["allowed"] = (_id_rows(sampler.allowed_token_ids, batch, vocab_size, device) > 0) | unrestricted.unsqueeze(1)
    if sampler.stop_token_ids is not None:
        fields["stop"] = _id_rows(sampler.stop_token_ids, batch, vocab_size, device) > 0
    if sampler.bad_words is not None:
        fields.update(_bad_word_tensors(sampler.bad_words, outputs, device))
    return SamplerTensors(**fields)


def _bad_word_tensors(bad_words, outputs, device) -> dict:
    """Each request's bad words as right-aligned prefixes ``[B, W, L]`` (``-3``: any token), last tokens
    and validity ``[B, W]`` (W the most words of a request), and each request's last L output tokens
    ``[B, L]`` (``-2`` before the start). One scatter each, no loop over words' tokens."""
    bad_words = [() if ws is None else ws for ws in bad_words]     # a None entry: that request has none
    counts = np.array([len(ws) for ws in bad_words], np.int64)
    words = [np.asarray(w, np.int64).reshape(-1) for ws in bad_words for w in ws]
    lengths = np.array([len(w) for w in words], np.int64)
    B, W, L = len(counts), max(int(counts.max(initial=0)), 1), max(int(lengths.max(initial=0)) - 1, 1)
    request = np.repeat(np.arange(B), counts)
    slot = np.arange(len(words)) - np.repeat(np.cumsum(counts) - counts, counts)
    tokens = np.concatenate(words) if words else np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    prefix, last = np.full((B, W, L), -3, np.int64), np.zeros((B, W), np.int64)
    valid = np.zeros((B, W), bool)
    last[request, slot], valid[request, slot] = tokens[ends - 1], True
    word = np.repeat(np.arange(len(words)), lengths - 1)            # each prefix token's word
    offset = np.arange(len(word)) - np.repeat(np.cumsum(lengths - 1) - (lengths - 1), lengths - 1)
    prefix[request[word], slot[word], L - (lengths[word] - 1) + offset] = tokens[(ends - lengths)[word] + offset]
    return dict(word_prefix=torch.from_numpy(prefix).to(device), word_last=torch.from_numpy(last).to(device),
                word_valid=torch.from_numpy(valid).to(device), output_tail=_tails(outputs, L, device))


def _tails(outputs, L: int, device) -> torch.Tensor:
    """``[B, L]`` int64: each request's last ``L`` output tokens, right-aligned, ``-2`` before the start."""
    arrays = [np.zeros(0, np.int64) if o is None else np.asarray(o, np.int64).reshape(-1)[-L:] for o in outputs]
    lengths = np.array([len(a) for a in arrays], np.int64)
    tail = np.full((len(arrays), L), SAMPLER_BAN_FILL, np.int64)
    request = np.repeat(np.arange(len(arrays)), lengths)
    column = L - np.repeat(lengths, lengths) + np.arange(len(request)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    if len(request):
        tail[request, column] = np.concatenate(arrays)
    return torch.from_numpy(tail).to(device)


def row_positions(num_draft_tokens: torch.Tensor, num_rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(request [rows], position [rows])`` of each target row: request i owns rows
    ``cu[i] + i .. cu[i] + i + K_i`` at positions ``0 .. K_i`` (SPEC §1)."""
    layout = ragged_layout(num_draft_tokens + 1, num_rows)
    return layout.request, layout.draft_index


def draft_counts(draft_token_ids: torch.Tensor, layout: RaggedLayout, num_draft_tokens: torch.Tensor,
                 num_rows: int, vocab_size: int) -> torch.Tensor:
    """``[rows, V]`` int64: each target row's counts of its request's drafts ``0 .. j−1``
    (placeholders not counted). A draft adds 1 from the row after its own to its request's bonus
    row: a difference array summed down the rows, no loop over requests or positions.

    >>> ids, k = torch.tensor([2, 2, 1]), torch.tensor([2, 1])
    >>> draft_counts(ids, ragged_layout(k, 3), k, 5, 3).tolist()
    [[0, 0, 0], [0, 0, 1], [0, 0, 2], [0, 0, 0], [0, 1, 0]]
    """
    real = (draft_token_ids != PLACEHOLDER_TOKEN_ID).to(torch.int64)
    ids = draft_token_ids.clamp_min(0)
    bonus_row = layout.starts + torch.arange(num_draft_tokens.shape[0], device=ids.device) + num_draft_tokens
    delta = torch.zeros(num_rows + 1, vocab_size, dtype=torch.int64, device=ids.device)
    delta.index_put_((layout.target_row + 1, ids), real, accumulate=True)
    delta.index_put_((bonus_row[layout.request] + 1, ids), -real, accumulate=True)
    return delta.cumsum(0)[:num_rows]


def bad_word_bans(s: SamplerTensors, drafts: torch.Tensor, request: torch.Tensor, position: torch.Tensor,
                  vocab_size: int) -> torch.Tensor:
    """``[rows, V]`` bool: each bad word's last token, in the rows whose output so far ends with the
    rest of the word. ``drafts [B, W]`` (``per_request``); ``request``, ``position`` ``[rows]``.
    Each row is matched against its own request's words only (``[rows, words, L]``)."""
    L = s.output_tail.shape[1]
    history = torch.cat([s.output_tail, drafts], dim=1)          # [B, L + W]: row j reads columns j .. j+L−1
    window = history[request.unsqueeze(1), position.unsqueeze(1) + torch.arange(L, device=drafts.device)]
    prefix = s.word_prefix[request]                                # [rows, words, L]
    matched = ((prefix == -3) | (window.unsqueeze(1) == prefix)).all(dim=-1) & s.word_valid[request]
    bans = torch.zeros(len(request), vocab_size, dtype=torch.int64, device=drafts.device)
    return bans.scatter_add_(1, s.word_last[request], matched.to(torch.int64)) > 0


def sampler_bans(s: SamplerTensors, drafts: torch.Tensor, request: torch.Tensor, position: torch.Tensor,
                 vocab_size: int) -> torch.Tensor:
    """``[rows, V]`` bool: every ban of a row (mask, allowed ids, completed bad words, min_tokens)."""
    ban = torch.zeros(len(request), vocab_size, dtype=torch.bool, device=drafts.device)
    if s.token_mask is not None:
        ban |= ~s.token_mask
    if s.allowed is not None:
        ban |= ~s.allowed[request]
    if s.word_valid is not None and bool(s.word_valid.any()):
        ban |= bad_word_bans(s, drafts, request, position, vocab_size)
    if s.min_tokens is not None and s.stop is not None:
        short = s.output_length[request] + position < s.min_tokens[request]
        ban |= short.unsqueeze(1) & s.stop[request]
    return ban


def penalised(z: torch.Tensor, s: SamplerTensors, counts: torch.Tensor, request: torch.Tensor) -> torch.Tensor:
    """Repetition (prompt ∪ output so far: ``z/r`` above 0, ``z·r`` otherwise), then frequency
    (``− f·count``) and presence (``− p·[count > 0]``); ``counts [rows, V]`` the output so far's."""
    if s.repetition_penalty is not None:
        r = s.repetition_penalty[request].to(z.dtype).unsqueeze(1)
        seen = counts > 0 if s.prompt_seen is None else (counts > 0) | s.prompt_seen[request]
        z = torch.where(seen, torch.where(z > 0, z / r, z * r), z)
    if s.frequency_penalty is not None:
        z = z - (s.frequency_penalty[request].unsqueeze(1) * counts).to(z.dtype)
    if s.presence_penalty is not None:
        z = z - (s.presence_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)
    return z


def biased(z: torch.Tensor, s: SamplerTensors, request: torch.Tensor) -> torch.Tensor:
    """``z + logit_bias`` of each row's request."""
    return z if s.logit_bias is None else z + s.logit_bias[request].to(z.dtype)


def process_logits(logits: torch.Tensor, s: SamplerTensors, draft_token_ids: torch.Tensor,
                   num_draft_tokens: torch.Tensor, max_k: int) -> torch.Tensor:
    """SPEC §12 before temperature: every target row ``[rows, V]`` after bans (``-inf``), penalties
    and bias in the order of ``s.order``, each row reading the drafts before it, in the logits'
    ``compute_dtype``. Raises
    ``InvalidInput`` for a row every ban leaves empty (SPEC §12.4; one device sync, only with bans)."""
    num_rows, vocab_size = logits.shape
    logits = widened(logits)   # penalties and bias written into 16-bit logits would round them (SPEC §6)
    request, position = row_positions(num_draft_tokens, num_rows)
    layout = ragged_layout(num_draft_tokens, draft_token_ids.shape[0])
    drafts = per_request(draft_token_ids, layout.starts, max_k, SAMPLER_BAN_FILL)
    counts = s.output_counts[request] + draft_counts(draft_token_ids, layout, num_draft_tokens, num_rows, vocab_size)
    ban = sampler_bans(s, drafts, request, position, vocab_size)
    if s.order == "vllm":
        z = penalised(biased(logits, s, request), s, counts, request)
    else:
        z = biased(penalised(logits, s, counts, request), s, request)
    z = z.masked_fill(ban, -torch.inf)
    empty = ban.all(dim=1)
    if bool(empty.any()) and bool((empty := empty & rows_read(drafts, num_draft_tokens, request, position)).any()):
        r = int(empty.nonzero()[0, 0])
        raise InvalidInput(f"token_mask: row {r} (request {int(request[r])}, position {int(position[r])}) "
                           f"allows no token after every ban")
    return z


def rows_read(drafts: torch.Tensor, num_draft_tokens: torch.Tensor, request: torch.Tensor,
              position: torch.Tensor) -> torch.Tensor:
    """``[rows]`` bool: the target rows a step can read — each request's positions up to its first placeholder
    (SPEC §4: it rejects; §12.4's empty-row error concerns these rows only). ``drafts [B, W]`` (``per_request``).

    >>> k = torch.tensor([2, 1])
    >>> request, position = row_positions(k, 5)
    >>> rows_read(torch.tensor([[-1, 3], [2, 0]]), k, request, position).tolist()
    [True, False, False, True, True]
    """
    if drafts.shape[1] == 0:   # no request has a draft: every row is a bonus row, read
        return torch.ones_like(position, dtype=torch.bool)
    columns = torch.arange(drafts.shape[1], device=drafts.device).unsqueeze(0)
    placeholder = (drafts == PLACEHOLDER_TOKEN_ID) & (columns < num_draft_tokens.unsqueeze(1))
    first = torch.where(placeholder.any(dim=1), placeholder.to(torch.int64).argmax(dim=1), num_draft_tokens)
    return position <= first[request]


def min_p_kept(probs: torch.Tensor, min_p: torch.Tensor, decision_dtype: torch.dtype = DECISION_DTYPE) -> torch.Tensor:
    """§12: ``[..., V]`` bool, ``p_v >= min_p · max p`` (ties kept; ``min_p`` ``[...]``, 0 keeps all).
    Formed in ``decision_dtype``: ``min_p`` is float64 and the product decides."""
    wide = probs.to(decision_dtype)
    return wide >= min_p.to(decision_dtype).unsqueeze(-1) * wide.amax(dim=-1, keepdim=True)


__all__ = ["DECISION_DTYPE", "RaggedLayout", "ragged_layout", "target_row_requests", "per_request", "output_width",
           "SamplingRows", "SIXTEEN_BIT", "compute_dtype", "widened", "safe_temperature", "scale_by_temperature", "sort_descending", "top_k_kept", "softmax",
           "top_p_kept", "renormalise_kept", "target_probs", "filter_kept", "uses_top_k", "uses_top_p",
           "greedy_argmax", "draft_probabilities", "coin_accepts", "accepts", "first_rejection",
           "residual_weights", "race", "emitted_rows", "SamplerTensors", "sampler_tensors", "row_positions",
           "draft_counts", "bad_word_bans", "sampler_bans", "penalised", "biased", "process_logits", "rows_read",
           "min_p_kept"]
