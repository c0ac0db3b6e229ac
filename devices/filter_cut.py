"""SPEC §2's top-k and top-p (and §12's min_p) for the Triton device, as one cut a row.

Every filter keeps a top set *by value* (ties kept): top-k keeps ``z ≥ z_(k)``, top-p and
min_p keep the probabilities at or above a cut, and probabilities rise with ``z``. So what a
row keeps is ``z ≥ τ`` for one value ``τ``, the smallest kept entry (``-inf``: every entry):
``cut_values`` returns it, and the kernels read each row through its cut (``z < τ`` is
``-inf``) — no filtered copy of the rows is written.

A row whose top-k is on needs only its ``k + 1`` largest entries (no sort of the row): when the
``(k+1)``-th is strictly below the ``k``-th, the first ``k`` are exactly top-k's set, and top-p
and min_p (in either order profile: min_p before top-k keeps a top set too, so the two commute
on sets) act on those ``k`` in float64 as ``devices.torch_sampling`` does on the whole row. A
row whose k-th entry ties past the candidates (or has fewer than k finite entries), whose
candidates were not exact (``devices/triton_topk.py``: too many entries at its floor), top-k
off or ``k > CANDIDATES``: the whole row in float64, as before.

The decisions are the float64 ones of ``torch_sampling``; only their sums run over the
candidates instead of the row with ``-inf`` (exp of ``-inf`` adds 0), so a cut can move
only where a float64 prefix sum or ratio sits within its last bits of the parameter.

>>> import torch
>>> from devices.torch_sampling import SamplingRows
>>> z = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.0]])
>>> rows = SamplingRows(torch.ones(1, dtype=torch.float64), torch.tensor([2]), torch.ones(1, dtype=torch.float64))
>>> cut_values(z, rows).tolist()     # top-2: 3 and a tie of 2s past the candidates: the whole row decides
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
(values [n, width] descending, exact [n] bool)``: each row's ``width`` largest values, exact in
positions ``0 .. ks[p]`` where ``exact`` (``torch_top_values``; ``devices.triton_topk.top_values``)."""


def torch_top_values(logits, row_ids, ks, width: int):
    """``TopValues`` by ``torch.topk`` (a radix select over each row; always exact)."""
    rows = logits if row_ids is None else logits[row_ids]
    return torch.topk(rows, width, dim=1).values, torch.ones(rows.shape[0], dtype=torch.bool, device=logits.device)


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


def smallest_kept(values, kept):
    """``[n]``: the smallest of ``values`` ``[n, m]`` where ``kept`` (``inf`` where none is)."""
    return torch.where(kept, values, torch.full_like(values, float("inf"))).amin(dim=1)


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
    ``top_k`` on the host (numpy ``[n]``). One host-to-device copy (``index``) unless every row
    decides on candidates."""
    k = np.asarray(top_k, dtype=np.int64)
    on_candidates = (k > 0) & (k < vocab_size) & (k <= CANDIDATES)
    short = np.flatnonzero(on_candidates)
    whole = np.flatnonzero(~on_candidates)
    if not short.size:
        return CutPlan(short, whole, 0, None, None)
    every = short.size == k.size
    index = None if every else torch.as_tensor(short, device=rows.top_k.device)
    return CutPlan(short, whole, int(k[short].max()) + 1, index,
                   rows.top_k if every else rows.top_k[index])


def candidate_cut(logits, rows: ts.SamplingRows, plan: CutPlan, order: str = "canonical",
                  top_values: TopValues = torch_top_values):
    """The device half of ``cut_values``: no host sync, no copy from the host (a CUDA graph can
    hold it). Returns ``(cut [n]`` in the compute dtype, right for ``plan.short``;
    ``decided [m]`` bool: False where a ``plan.short`` row must be decided on the whole row
    after all).
    """
    cut = torch.empty(logits.shape[0], dtype=compute_dtype(logits), device=logits.device)
    if not plan.short.size:
        return cut, torch.ones(0, dtype=torch.bool, device=logits.device)
    ks, width = plan.ks, plan.width
    vals, exact = top_values(logits, plan.index, ks, width)  # descending
    kth = vals.gather(1, (ks - 1).unsqueeze(1)).squeeze(1)
    decided = exact & (vals.gather(1, ks.unsqueeze(1)).squeeze(1) < kth)  # no tie across the k-th entry
    cand = vals.masked_fill(torch.arange(width, device=logits.device).unsqueeze(0) >= ks.unsqueeze(1),
                            float("-inf"))
    tau = smallest_kept(cand, whole_row_kept(cand, rows if plan.index is None else rows.take(plan.index), order))
    if plan.index is None:
        cut.copy_(tau)
    else:
        cut[plan.index] = tau.to(cut.dtype)
    return cut, decided


def finish_cut(logits, rows: ts.SamplingRows, plan: CutPlan, cut, decided, order: str = "canonical"):
    """The host half of ``cut_values``: the one sync (``decided``), then the rows the candidates
    cannot decide, and ``plan.whole``, on their whole rows; writes them into ``cut`` and returns it."""
    whole = plan.whole
    if plan.short.size and not bool(decided.all()):
        whole = np.union1d(whole, plan.short[~decided.cpu().numpy()])
    if whole.size:
        index = torch.as_tensor(whole, device=logits.device)
        z = logits[index]
        cut[index] = smallest_kept(z.to(cut.dtype), whole_row_kept(z, rows.take(index), order))
    return cut


def cut_values(logits, rows: ts.SamplingRows, order: str = "canonical", top_k: np.ndarray | None = None,
               top_values: TopValues = torch_top_values):
    """``[n]`` in the compute dtype: each row's cut ``τ`` — the row keeps ``z ≥ τ``, exactly what
    ``whole_row_kept`` keeps (module docstring).

    ``logits`` ``[n, V]`` (any float dtype); ``rows`` ``SamplingRows`` ``[n]`` (random rows:
    temperature > 0); ``top_k``: ``rows.top_k`` on the host, numpy ``[n]`` (None: copied from
    ``rows``), which says which rows decide on candidates without a device sync;
    ``top_values``: how the candidates are found (``TopValues``). One host sync: whether any
    candidate row must be decided on the whole row after all. ``cut_plan``, then
    ``candidate_cut`` (the device work), then ``finish_cut``.
    """
    plan = cut_plan(logits.shape[1], rows, rows.top_k.cpu().numpy() if top_k is None else top_k)
    cut, decided = candidate_cut(logits, rows, plan, order, top_values)
    return finish_cut(logits, rows, plan, cut, decided, order)


def kept_mask(logits, rows: ts.SamplingRows, order: str = "canonical", top_values: TopValues = torch_top_values):
    """``[n, V]`` bool: ``logits ≥ cut_values(...)`` — what the kernels keep of each row
    (``logits`` ``[n, V]``, ``rows`` ``SamplingRows`` ``[n]``)."""
    cut = cut_values(logits, rows, order, top_values=top_values)
    return logits.to(cut.dtype) >= cut.unsqueeze(1)


__all__ = ["CANDIDATES", "TopValues", "torch_top_values", "compute_dtype", "whole_row_kept", "smallest_kept",
           "CutPlan", "cut_plan", "candidate_cut", "finish_cut", "cut_values", "kept_mask"]
