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

from typing import Callable

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


def cut_values(logits, rows: ts.SamplingRows, order: str = "canonical", top_k: np.ndarray | None = None,
               top_values: TopValues = torch_top_values):
    """``[n]`` in the compute dtype: each row's cut ``τ`` — the row keeps ``z ≥ τ``, exactly what
    ``whole_row_kept`` keeps (module docstring).

    ``logits`` ``[n, V]`` (any float dtype); ``rows`` ``SamplingRows`` ``[n]`` (random rows:
    temperature > 0); ``top_k``: ``rows.top_k`` on the host, numpy ``[n]`` (None: copied from
    ``rows``), which says which rows decide on candidates without a device sync;
    ``top_values``: how the candidates are found (``TopValues``). One host sync: whether any
    candidate row must be decided on the whole row after all.
    """
    n, vocab_size = logits.shape
    dev = logits.device
    k = np.asarray(rows.top_k.cpu() if top_k is None else top_k, dtype=np.int64)
    cut = torch.empty(n, dtype=compute_dtype(logits), device=dev)
    on_candidates = (k > 0) & (k < vocab_size) & (k <= CANDIDATES)
    short = np.flatnonzero(on_candidates)
    whole = np.flatnonzero(~on_candidates)
    if short.size:
        every = short.size == n  # the usual batch: no gathers of rows or parameters
        index = torch.as_tensor(short, device=dev)
        ks = torch.as_tensor(k[short], device=dev)
        width = int(k[short].max()) + 1
        vals, exact = top_values(logits, None if every else index, ks, width)  # descending
        kth = vals.gather(1, (ks - 1).unsqueeze(1)).squeeze(1)
        clean = exact & (vals.gather(1, ks.unsqueeze(1)).squeeze(1) < kth)  # no tie across the k-th entry
        cand = vals.masked_fill(torch.arange(width, device=dev).unsqueeze(0) >= ks.unsqueeze(1), float("-inf"))
        tau = smallest_kept(cand, whole_row_kept(cand, rows if every else rows.take(index), order))
        cut[index] = tau.to(cut.dtype)
        if not bool(clean.all()):  # the one sync: rows the candidates cannot decide
            whole = np.union1d(whole, short[~clean.cpu().numpy()])
    if whole.size:
        index = torch.as_tensor(whole, device=dev)
        z = logits[index]
        cut[index] = smallest_kept(z.to(cut.dtype), whole_row_kept(z, rows.take(index), order))
    return cut


def kept_mask(logits, rows: ts.SamplingRows, order: str = "canonical", top_values: TopValues = torch_top_values):
    """``[n, V]`` bool: ``logits ≥ cut_values(...)`` — what the kernels keep of each row
    (``logits`` ``[n, V]``, ``rows`` ``SamplingRows`` ``[n]``)."""
    cut = cut_values(logits, rows, order, top_values=top_values)
    return logits.to(cut.dtype) >= cut.unsqueeze(1)


__all__ = ["CANDIDATES", "TopValues", "torch_top_values", "compute_dtype", "whole_row_kept", "smallest_kept",
           "cut_values", "kept_mask"]
