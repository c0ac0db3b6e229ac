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

**Extending the pipeline** (SPEC §12: penalties, bias, masks, min-p): add the
parameter as a field of ``SamplingRows`` (default None = off; ``take`` expands
every field to rows for free), write the rule as one more small function
``(z, rows) -> z`` on logits or ``(probs, rows) -> probs`` on probabilities,
and call it at its place in ``target_probs``. Every device picks it up.

**Dtype policy** (justified against SPEC §9). Rows are computed in the dtype
of the logits — the dtype the device declares and is judged at (§9's float32
tolerance is 1e-4 relative; float32's softmax and temperature are accurate to
a few ulp, 1e-6 relative at most, well inside it). Every quantity that
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

import torch

from devices.protocol import PLACEHOLDER_TOKEN_ID

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
    - ``top_p``: float in (0, 1], 1 = off.

    New parameters (SPEC §12) are new fields with default None.
    """

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor

    def take(self, index: torch.Tensor) -> "SamplingRows":
        """The parameters of rows ``index`` (e.g. a request's per-draft rows); None fields stay None."""
        return SamplingRows(*(None if field is None else field[index] for field in self))


def safe_temperature(temperature: torch.Tensor) -> torch.Tensor:
    """``[B]``: greedy requests (T = 0) get 1, so that every row divides by a positive T."""
    return torch.where(temperature == 0, torch.ones_like(temperature), temperature)


def scale_by_temperature(logits: torch.Tensor, temperature: torch.Tensor) -> torch.Tensor:
    """§2.1: ``z = logits / T``, in the logits' dtype. ``logits [..., V]``, ``temperature [...]``."""
    return logits / temperature.to(logits.dtype).unsqueeze(-1)


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
                 decision_dtype: torch.dtype = DECISION_DTYPE) -> torch.Tensor:
    """SPEC §2 for rows of logits ``[..., V]`` → ``target_probs`` in the logits' dtype.

    ``rows``: ``SamplingRows`` shaped like ``logits[..., 0]``. ``use_top_k``/
    ``use_top_p`` False skip a filter no row uses (both False: no sort — a
    host-side graph choice on static-shape hardware, never a device branch).

    >>> rows = SamplingRows(torch.ones(1), torch.zeros(1, dtype=torch.int64), torch.tensor([0.7]))
    >>> target_probs(torch.log(torch.tensor([[0.5, 0.3, 0.2]], dtype=torch.float64)), rows).round(decimals=4).tolist()
    [[0.625, 0.375, 0.0]]
    """
    z = scale_by_temperature(logits, rows.temperature)
    if not (use_top_k or use_top_p):
        return softmax(z)
    sorted_z, order = sort_descending(z)
    if use_top_k:
        z = z.masked_fill(~top_k_kept(z, sorted_z, rows.top_k), -torch.inf)
    probs = softmax(z)
    if use_top_p:
        probs = renormalise_kept(probs, top_p_kept(probs, order, rows.top_p, decision_dtype), rows.top_p)
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


__all__ = ["DECISION_DTYPE", "RaggedLayout", "ragged_layout", "target_row_requests", "per_request", "output_width",
           "SamplingRows", "safe_temperature", "scale_by_temperature", "sort_descending", "top_k_kept", "softmax",
           "top_p_kept", "renormalise_kept", "target_probs", "filter_kept", "uses_top_k", "uses_top_p",
           "greedy_argmax", "draft_probabilities", "coin_accepts", "accepts", "first_rejection",
           "residual_weights", "race", "emitted_rows"]
