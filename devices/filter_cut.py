"""SPEC §2's top-k and top-p (and §12's min_p) for the Triton device, from the top-k candidates.

Every filter keeps a top set *by value* (ties kept): top-k keeps ``z ≥ z_(k)``, top-p and
min_p keep the probabilities at or above a cut. So a row whose top-k is on needs only its
``k + 1`` largest entries (``torch.topk``, no sort of the row): when the ``(k+1)``-th is
strictly below the ``k``-th, the first ``k`` are exactly top-k's set, and top-p and min_p
(in either order profile: min_p before top-k keeps a top set too, so the two commute on
sets) act on those ``k`` in float64 as ``devices.torch_sampling`` does on the whole row.
The kept set is then one threshold, the smallest kept value ``τ``, and the row keeps
``z ≥ τ``. A row whose k-th entry ties past the candidates (or has fewer than k finite
entries), top-k off or ``k > CANDIDATES``: the whole row in float64, as before.

The decisions are the float64 ones of ``torch_sampling``; only their sums run over the
candidates instead of the row with ``-inf`` (exp of ``-inf`` adds 0), so a cut can move
only where a float64 prefix sum or ratio sits within its last bits of the parameter.

>>> import torch
>>> from devices.torch_sampling import SamplingRows
>>> z = torch.tensor([[3.0, 1.0, 2.0, 2.0, 0.0]])
>>> rows = SamplingRows(torch.ones(1, dtype=torch.float64), torch.tensor([2]), torch.ones(1, dtype=torch.float64))
>>> kept_mask(z, rows).tolist()      # top-2: 3 and a tie of 2s past the candidates: the whole row decides
[[True, False, True, True, False]]
"""

from __future__ import annotations

import torch

from devices import torch_sampling as ts

CANDIDATES = 1024  # top-k up to this is decided on the k + 1 largest entries


def whole_row_kept(logits, rows: ts.SamplingRows, order: str = "canonical"):
    """``[n, V]`` bool: what §2 (and min_p where ``rows.min_p`` is given) keeps of ``logits``
    ``[n, V]``, decided in float64 on whole rows (``filter_kept``; with min_p, a positive
    ``target_probs`` in the ``order`` profile). ``rows``: ``SamplingRows`` ``[n]``."""
    wide = logits.double()
    if rows.min_p is None:
        return ts.filter_kept(ts.scale_by_temperature(wide, rows.temperature), rows)
    return ts.target_probs(wide, rows, order=order) > 0


def kept_mask(logits, rows: ts.SamplingRows, order: str = "canonical"):
    """``whole_row_kept``, from the top-k candidates where they decide (module docstring).

    ``logits`` ``[n, V]`` (any float dtype: the threshold compares its own values);
    ``rows`` ``SamplingRows`` ``[n]`` (random rows: temperature > 0). Returns ``[n, V]`` bool.
    """
    n, vocab_size = logits.shape
    k = rows.top_k
    kept = torch.empty(n, vocab_size, dtype=torch.bool, device=logits.device)
    whole = torch.ones(n, dtype=torch.bool, device=logits.device)
    short = torch.nonzero((k > 0) & (k < vocab_size) & (k <= CANDIDATES)).squeeze(1)
    if short.numel():
        ks = k[short]
        width = int(ks.max()) + 1
        vals = torch.topk(_rows(logits, short), width, dim=1).values  # descending
        kth = vals.gather(1, (ks - 1).unsqueeze(1))
        clean = (vals.gather(1, ks.unsqueeze(1)) < kth).squeeze(1)  # no tie across the k-th entry
        sel = short[clean]
        if sel.numel():
            cand = vals[clean]
            past_k = torch.arange(width, device=logits.device).unsqueeze(0) >= ks[clean].unsqueeze(1)
            cand = cand.masked_fill(past_k, float("-inf"))
            cand_kept = whole_row_kept(cand, rows.take(sel), order)
            tau = torch.where(cand_kept, cand, torch.full_like(cand, float("inf"))).amin(dim=1)
            if sel.numel() == n:  # every row (the usual batch): no copies of the rows
                kept = logits >= tau.unsqueeze(1)
            else:
                kept[sel] = logits[sel] >= tau.unsqueeze(1)
            whole[sel] = False
    rest = torch.nonzero(whole).squeeze(1)
    if rest.numel():
        kept[rest] = whole_row_kept(logits[rest], rows.take(rest), order)
    return kept


def _rows(t, index):
    """``t[index]``, without a copy when ``index`` is every row in order."""
    return t if index.numel() == t.shape[0] else t[index]


__all__ = ["CANDIDATES", "whole_row_kept", "kept_mask"]
