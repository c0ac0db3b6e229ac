"""SPEC §2's top-k and top-p (and §12's min_p) for the Triton device, as one cut a row.

Every filter keeps a top set *by value* (ties kept): top-k keeps ``z ≥ z_(k)``, top-p and
min_p keep the probabilities at or above a cut, and probabilities rise with ``z``. So what a
row keeps is ``z ≥ τ`` for one value ``τ``, the smallest kept entry (``-inf``: every entry):
``cut_values`` returns it, and the kernels read each row through its cut (``z < τ`` is
``-inf``) — no filtered copy of the rows is written.

A row whose top-k is on needs only its ``k + 1`` largest entries (no sort of the row) and how
often its ``k``-th largest value occurs in it (``TopValues``). Top-k's set is the entries above
the ``k``-th value and every copy of it; top-p and min_p (in either order profile: min_p before
top-k keeps a top set too, so the two commute on sets) act on that set in float64 as
``devices.torch_sampling`` does on the whole row. When the ``(k+1)``-th entry is strictly below
the ``k``-th, the set is the first ``k`` candidates (``plain_kept``); when the ``k``-th value
also occurs past them, the copies past the ``k``-th candidate are one more candidate carrying
their count as a weight in every sum (``tied_kept``), so no row needs more than ``k + 1``
candidates whatever its ties. Rows with top-k off or ``k > CANDIDATES``: the whole row in
float64, as before — known on the host from ``top_k``. Nothing is read back from the device:
every size comes from the host's ``top_k`` and the logits' shape.

The decisions are the float64 ones of ``torch_sampling``; only their sums run over the
candidates instead of the row with ``-inf`` (exp of ``-inf`` adds 0), and a run of tied
copies past the candidates is added as one product, so a cut can move only where a float64
prefix sum or ratio sits within its last bits of the parameter.

>>> import torch
>>> from devices.torch_sampling import SamplingRows
>>> z = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.0]])
>>> rows = SamplingRows(torch.ones(1, dtype=torch.float64), torch.tensor([2]), torch.ones(1, dtype=torch.float64))
>>> cut_values(z, rows).tolist()     # top-2: 3 and a tie of 2s past the candidates: every 2 is kept
[2.0]
>>> kept_mask(z, rows).tolist()
[[True, False, True, True, False]]
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

from devices import torch_sampling as ts

CANDIDATES = 1024  # top-k up to this is decided on the k + 1 largest entries

TopValues = Callable[..., tuple]
"""``(logits [rows, V], row_ids [n] int64 tensor or None (every row), ks [n] int64, width) →
(values [n, width] descending, ties [n] int64)``: each row's ``width`` largest values, exact in
positions ``0 .. ks[p]``, and how many entries of the row equal ``values[p, ks[p] - 1]``, with
no host sync (``torch_top_values``; ``devices.triton_topk.top_values``). It may carry a
``decide`` attribute, a ``Decide`` on its own device (``devices.triton_device.triton_top_values``:
one Triton launch); without one the decisions are ``torch_decide``'s."""

Decide = Callable[..., tuple]
"""``(values [n, width], ties [n], ks [n], rows: SamplingRows [n], order) → (tau [n], stats [2, n])``
from ``TopValues``' results: each row's cut (it keeps ``z ≥ tau``) and ``kept_stats`` (float64 or
the compute dtype), with no host sync (``torch_decide``; ``devices.triton_topk.decide``)."""


def torch_top_values(logits, row_ids, ks, width: int):
    """``TopValues`` by ``torch.topk`` (a radix select over each row) and a count over each row."""
    rows = logits if row_ids is None else logits[row_ids]
    values = torch.topk(rows, width, dim=1).values
    kth = values.gather(1, (ks - 1).unsqueeze(1))
    return values, (rows == kth).sum(dim=1)


def to_device(array: np.ndarray, device) -> torch.Tensor:
    """A host array on ``device`` with no stream sync: on CUDA through pinned memory, copied
    asynchronously (a pageable copy makes torch wait for the stream). The pinned block is torch's
    caching host allocator's, held until the copy has run."""
    host = torch.as_tensor(np.ascontiguousarray(array))
    if torch.device(device).type != "cuda":
        return host.to(device)
    return host.pin_memory().to(device, non_blocking=True)


def compute_dtype(logits) -> torch.dtype:
    """The dtype the kernels compute in (and the cut is given in): float64 for float64 logits, else float32."""
    return torch.float64 if logits.dtype == torch.float64 else torch.float32


def whole_row_kept(logits, rows: ts.SamplingRows, order: str = "canonical"):
    """``[n, V]`` bool: what §2 (and min_p where ``rows.min_p`` is given) keeps of ``logits``
    ``[n, V]``, decided in float64 on whole rows (``filter_kept``; with min_p, a positive
    ``target_probs`` in the ``order`` profile). ``rows``: ``SamplingRows`` ``[n]``."""
    wide = logits.double()
    if rows.min_p is None:
        return ts.filter_kept(ts.scale_by_temperature(wide, rows.temperature), rows)
    return ts.target_probs(wide, rows, order=order) > 0


plain_kept = whole_row_kept
"""What a row keeps of its candidates ``[n, width]`` when they hold its whole top-k set (``-inf`` past it)."""


def _weighted_softmax(z, weight):
    """``[n, m]`` float64: each candidate's probability when candidate ``i`` stands for
    ``weight[:, i]`` equal entries (``z``, ``weight`` ``[n, m]``; weight 0 adds nothing)."""
    e = torch.exp(z - z.amax(dim=-1, keepdim=True))
    return e / (e * weight).sum(dim=-1, keepdim=True)


def _weighted_top_p(probs, weight, real, top_p):
    """``torch_sampling.top_p_kept`` on descending candidates ``probs`` ``[n, m]`` whose weights
    ``weight`` ``[n, m]`` count the entries each stands for: ``probs ≥ τ``, τ at the first prefix
    sum ``≥ top_p`` (capped at the last candidate). ``real``: the candidates in the set."""
    cumulative = (probs * weight).cumsum(dim=-1)
    at = (cumulative < top_p.to(torch.float64).unsqueeze(-1)).sum(dim=-1).clamp(max=probs.shape[-1] - 1)
    tau = probs.gather(-1, at.unsqueeze(-1))
    return real & ((top_p >= 1).unsqueeze(-1) | (probs >= tau))


def _weighted_renormalise(probs, weight, kept, keep_all):
    """Zero what a filter dropped and renormalise (weights counted); rows ``keep_all`` untouched."""
    kept_probs = torch.where(kept, probs, torch.zeros_like(probs))
    return torch.where(keep_all.unsqueeze(-1), probs, kept_probs / (kept_probs * weight).sum(dim=-1, keepdim=True))


def tied_kept(candidates, weight, rows: ts.SamplingRows, order: str = "canonical"):
    """``[n, m]`` bool: what top-p (and min_p in the ``order`` profile) keep of a top-k set given as
    descending ``candidates`` ``[n, m]`` (``-inf`` past it), candidate ``i`` standing for
    ``weight[:, i]`` entries of that value (``[n, m]`` int, 0 past the set) — the float64 rungs of
    ``torch_sampling.filter_kept`` and ``target_probs`` with every sum counting the weights.
    ``rows``: ``SamplingRows`` ``[n]``. The top-k set is given, so top-k keeps it whole; in the
    vllm order min_p cuts a top set first, which top-k then keeps whole or cuts to the same set."""
    real = weight > 0
    w = weight.to(torch.float64)
    z = ts.scale_by_temperature(candidates.double(), rows.temperature)
    if rows.min_p is not None and order == "vllm":
        z = z.masked_fill(~ts.min_p_kept(_weighted_softmax(z, w), rows.min_p), -torch.inf)
    probs = _weighted_softmax(z, w)
    kept = _weighted_top_p(probs, w, real, rows.top_p)
    if rows.min_p is None:
        return kept
    probs = _weighted_renormalise(probs, w, kept, rows.top_p >= 1)
    if order == "canonical":
        probs = _weighted_renormalise(probs, w, ts.min_p_kept(probs, rows.min_p), rows.min_p <= 0)
    return real & (probs > 0)


def smallest_kept(values, kept):
    """``[n]``: the smallest of ``values`` ``[n, m]`` where ``kept`` (``inf`` where none is)."""
    return torch.where(kept, values, torch.full_like(values, float("inf"))).amin(dim=1)


class Cut(NamedTuple):
    """A step's top-k/top-p/min_p cut (``filter_cuts``, ``verify_tensors(cut=...)``).

    ``floor`` ``[rows]`` in the compute dtype: row ``r`` keeps ``z ≥ floor[r]`` (``-inf``: every
    entry). ``stats`` ``[2, rows]`` in the compute dtype, or None: where every row decided on its
    candidates, each row's largest kept ``z`` and ``Σ exp((z − max)/T)`` over what it keeps,
    summed in float64 over the candidates (``kept_stats``) — the statistics the step's first pass
    would read the rows again for, so the step skips it (None: the kernels compute them)."""

    floor: object
    stats: object = None


def kept_stats(values, weight, tau, temperature):
    """``[2, n]`` float64: the largest kept value and ``Σ exp((z − max)/T)`` over what a row keeps,
    from its descending ``values`` ``[n, m]`` (``-inf`` past them), candidate ``i`` standing for
    ``weight[:, i]`` entries; a row keeps ``values ≥ tau`` (``[n]``); ``temperature`` ``[n]`` float64."""
    z = values.double()
    top = z[:, 0]
    live = (z >= tau.double().unsqueeze(1)) & (weight > 0) & (z > float("-inf"))
    e = torch.exp((torch.where(live, z, top.unsqueeze(1)) - top.unsqueeze(1)) / temperature.unsqueeze(1))
    return torch.stack([top, (torch.where(live, e, torch.zeros_like(e)) * weight).sum(dim=1)])


class CutPlan(NamedTuple):
    """Which rows decide how (host), with the device tensors the candidates need.

    ``short`` numpy ``[m]``: rows decided on their top-k candidates; ``whole`` numpy: rows decided
    on the whole row; ``width``: ``max k + 1`` over ``short``; ``index`` ``[m]`` int64 tensor of
    ``short`` (None: every row, in order); ``ks`` ``[m]`` int64 tensor, their ``k``.
    """

    short: np.ndarray
    whole: np.ndarray
    width: int
    index: object
    ks: object


def cut_plan(vocab_size: int, rows: ts.SamplingRows, top_k: np.ndarray) -> CutPlan:
    """``CutPlan`` for ``rows`` (``SamplingRows`` ``[n]`` on the device) whose ``top_k`` is
    ``top_k`` on the host (numpy ``[n]``). One asynchronous host-to-device copy (``index``,
    ``to_device``) unless every row decides on candidates."""
    k = np.asarray(top_k, dtype=np.int64)
    on_candidates = (k > 0) & (k < vocab_size) & (k <= CANDIDATES)
    short = np.flatnonzero(on_candidates)
    whole = np.flatnonzero(~on_candidates)
    if not short.size:
        return CutPlan(short, whole, 0, None, None)
    every = short.size == k.size
    index = None if every else to_device(short, rows.top_k.device)
    return CutPlan(short, whole, int(k[short].max()) + 1, index,
                   rows.top_k if every else rows.top_k[index])


def torch_decide(vals, ties, ks, rows: ts.SamplingRows, order: str = "canonical"):
    """``Decide`` by torch: the float64 rungs of ``plain_kept`` (a row with no copies of its ``k``-th
    value past its first ``k`` candidates) and ``tied_kept`` (the copies as one weighted candidate),
    then ``smallest_kept`` and ``kept_stats``."""
    width = vals.shape[1]
    position = torch.arange(width, device=vals.device).unsqueeze(0)
    first_k = position < ks.unsqueeze(1)
    kth = vals.gather(1, (ks - 1).unsqueeze(1))
    past = ties - ((vals == kth) & first_k).sum(dim=1)  # copies of the k-th value past the first k
    plain = vals.masked_fill(~first_k, float("-inf"))
    tau = smallest_kept(plain, plain_kept(plain, rows, order))
    at_k = position == ks.unsqueeze(1)  # where vals holds the k-th value again when past > 0
    weight = torch.where(at_k, past.unsqueeze(1), first_k.to(past.dtype))
    tied = vals.masked_fill(weight == 0, float("-inf"))
    tau_tied = smallest_kept(tied, tied_kept(tied, weight, rows, order))
    tau = torch.where(past > 0, tau_tied.to(tau.dtype), tau)
    return tau, kept_stats(tied, weight, tau, rows.temperature)


def candidate_cut(logits, rows: ts.SamplingRows, plan: CutPlan, order: str = "canonical",
                  top_values: TopValues = torch_top_values) -> Cut:
    """The device half of ``row_cut``: no host sync, no copy from the host (a CUDA graph can
    hold it). Returns a ``Cut`` whose floor ``[n]`` is right for ``plan.short`` (``finish_cut``
    writes ``plan.whole``'s), with ``stats`` where every row is short."""
    dtype = compute_dtype(logits)
    if not plan.short.size:
        return Cut(torch.empty(logits.shape[0], dtype=dtype, device=logits.device))
    vals, ties = top_values(logits, plan.index, plan.ks, plan.width)  # descending, exact in 0 .. k
    params = rows if plan.index is None else rows.take(plan.index)
    tau, stats = getattr(top_values, "decide", torch_decide)(vals, ties, plan.ks, params, order)
    if plan.index is None:  # every row: the decisions' own tensors (no copy when already in the dtype)
        return Cut(tau.to(dtype).contiguous(), stats.to(dtype).contiguous())
    cut = torch.empty(logits.shape[0], dtype=dtype, device=logits.device)
    cut[plan.index] = tau.to(dtype)
    return Cut(cut)


def finish_cut(logits, rows: ts.SamplingRows, plan: CutPlan, cut: Cut, order: str = "canonical") -> Cut:
    """The rows ``plan.whole`` (known on the host) decided on their whole rows, written into
    ``cut.floor`` (``cut`` returned). No host sync: their index goes to the device by ``to_device``."""
    if plan.whole.size:
        index = to_device(plan.whole, logits.device)
        z = logits[index]
        cut.floor[index] = smallest_kept(z.to(cut.floor.dtype), whole_row_kept(z, rows.take(index), order))
    return cut


def row_cut(logits, rows: ts.SamplingRows, order: str = "canonical", top_k: np.ndarray | None = None,
            top_values: TopValues = torch_top_values) -> Cut:
    """Each row's ``Cut``: it keeps ``z ≥ floor``, exactly what ``whole_row_kept`` keeps (module
    docstring).

    ``logits`` ``[n, V]`` (any float dtype); ``rows`` ``SamplingRows`` ``[n]`` (random rows:
    temperature > 0); ``top_k``: ``rows.top_k`` on the host, numpy ``[n]`` (None: copied from
    ``rows``, a host sync), which says which rows decide on candidates and how many;
    ``top_values``: how the candidates are found (``TopValues``). With ``top_k`` given, no host
    sync: ``cut_plan``, then ``candidate_cut`` (the device work), then ``finish_cut``.
    """
    plan = cut_plan(logits.shape[1], rows, rows.top_k.cpu().numpy() if top_k is None else top_k)
    return finish_cut(logits, rows, plan, candidate_cut(logits, rows, plan, order, top_values), order)


def cut_values(logits, rows: ts.SamplingRows, order: str = "canonical", top_k: np.ndarray | None = None,
               top_values: TopValues = torch_top_values):
    """``[n]`` in the compute dtype: ``row_cut``'s floor (same arguments)."""
    return row_cut(logits, rows, order, top_k, top_values).floor


def kept_mask(logits, rows: ts.SamplingRows, order: str = "canonical", top_values: TopValues = torch_top_values):
    """``[n, V]`` bool: ``logits ≥ cut_values(...)`` — what the kernels keep of each row
    (``logits`` ``[n, V]``, ``rows`` ``SamplingRows`` ``[n]``)."""
    cut = cut_values(logits, rows, order, top_values=top_values)
    return logits.to(cut.dtype) >= cut.unsqueeze(1)


__all__ = ["CANDIDATES", "TopValues", "torch_top_values", "to_device", "compute_dtype", "whole_row_kept",
           "plain_kept", "tied_kept", "smallest_kept", "Cut", "kept_stats", "Decide", "torch_decide", "CutPlan",
           "cut_plan", "candidate_cut",
           "finish_cut", "row_cut", "cut_values", "kept_mask"]
