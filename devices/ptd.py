"""PTD input preparation in torch ops (seed 002), held to ``reference/ptd.py``.

One vectorised pass over the output rows; the caller preallocates the
buffers (``max_num_batched_tokens + max_num_seqs × draft_len`` rows, see
``buffer_rows``) and only rows ``< total`` are written — ``total`` is the last
output query start location, never ``num_actual_tokens + B·draft_len`` (vLLM
PR #32628's grid, too large whenever tokens were rejected).

The host passes ``total`` from its CPU copy of the query lengths
(``cpu_query_start_loc``), so the step needs no device sync; the device
computes its own ``query_start_loc`` and the two must agree (the PR's
CPU/GPU mismatch; tests/platforms/test_ptd.py checks it).

Every index is clamped into range before it is used and the value masked
after (a mask row's source index is never ``qsl − 1`` or negative).

>>> import torch
>>> out = prepare_ptd_inputs_torch(torch.tensor([5, 6, 7]), torch.tensor([3, 4, 5]), torch.tensor([3, 4, 5]),
...     torch.tensor([0, 3]), torch.tensor([1]), torch.tensor([[0, 1]]), block_size=8, max_model_len=16,
...     draft_len=2, mask_token_id=99)
>>> out["token_ids"].tolist(), out["positions"].tolist(), out["query_start_loc"].tolist()
([5, 6, 99, 99], [3, 4, 5, 6], [0, 4])
"""

from __future__ import annotations

import numpy as np
import torch

from devices.torch_sampling import ragged_layout

PADDING_SLOT_ID = -1
FIELDS = ("token_ids", "positions", "slot_mapping", "is_mask", "source_index")


def buffer_rows(max_num_batched_tokens: int, max_num_seqs: int, draft_len: int) -> int:
    """Rows the drafter's buffers need (seed 002's fix): ``8192 + 7 × 3 = 8213``."""
    return max_num_batched_tokens + max_num_seqs * draft_len


def cpu_query_start_loc(query_start_loc: np.ndarray, num_rejected: np.ndarray, last_positions: np.ndarray, *,
                        draft_len: int, max_model_len: int, cap_drafts: bool = True) -> np.ndarray:
    """The host's ``out_query_start_loc [B + 1]`` from its CPU copies (numpy), to size the launch."""
    kept = np.diff(np.asarray(query_start_loc, np.int64)) - np.asarray(num_rejected, np.int64)
    masks = np.full(len(kept), draft_len, np.int64) if not cap_drafts else \
        np.clip(max_model_len - 1 - np.asarray(last_positions, np.int64), 0, draft_len)
    return np.concatenate([[0], np.cumsum(kept + masks)]).astype(np.int64)


def check_buffer_rows(out: dict, total: int) -> int:
    """The buffers' row count; a clear error if ``total`` rows will not fit (the seed's 8213 > 8192 crash)."""
    rows = out["token_ids"].shape[0]
    if total > rows:
        raise ValueError(f"out: the drafter needs {total} rows but its buffers hold {rows}; size them "
                         "max_num_batched_tokens + max_num_seqs × draft_len (buffer_rows)")
    return rows


def allocate_buffers(rows: int, device: str | torch.device = "cpu", fill: int = 0) -> dict[str, torch.Tensor]:
    """Preallocated output buffers ``[rows]`` (``is_mask`` bool, the rest int64), filled with ``fill``."""
    out = {name: torch.full((rows,), fill, dtype=torch.int64, device=device) for name in FIELDS}
    out["is_mask"] = torch.full((rows,), bool(fill), dtype=torch.bool, device=device)
    return out


def device_query_start_loc(query_start_loc, num_rejected, positions, *, draft_len: int, max_model_len: int,
                           cap_drafts: bool = True):
    """On the device: ``kept [B]``, ``num_mask [B]``, ``last_pos [B]``, ``out_qsl [B + 1]``."""
    kept = (query_start_loc[1:] - query_start_loc[:-1]) - num_rejected
    last_input = query_start_loc[:-1] + kept - 1
    last_pos = positions[last_input]
    if cap_drafts:
        num_mask = (max_model_len - 1 - last_pos).clamp(0, draft_len)
    else:
        num_mask = torch.full_like(kept, draft_len)
    out_qsl = torch.cat([torch.zeros(1, dtype=torch.int64, device=kept.device), torch.cumsum(kept + num_mask, 0)])
    return kept, num_mask, last_pos, out_qsl


def prepare_ptd_inputs_torch(token_ids, positions, slot_mapping, query_start_loc, num_rejected, block_table, *,
                             block_size: int, max_model_len: int, draft_len: int, mask_token_id: int,
                             cap_drafts: bool = True, total: int | None = None,
                             out: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Vectorised layout of ``reference.ptd.prepare_ptd_inputs`` (same arguments, int64 tensors).

    ``total``: rows to write (the host's ``cpu_query_start_loc(...)[-1]``); None
    reads it from the device (one sync). ``out``: buffers from
    ``allocate_buffers``; a ``total`` larger than them raises ``ValueError``.
    Returns the buffers (full length) plus ``query_start_loc``, ``num_kept``,
    ``num_mask``, ``last_kept_index`` and ``total``.
    """
    device = token_ids.device
    kept, num_mask, last_pos, out_qsl = device_query_start_loc(
        query_start_loc, num_rejected, positions, draft_len=draft_len, max_model_len=max_model_len,
        cap_drafts=cap_drafts)
    if total is None:
        total = int(out_qsl[-1])
    if out is None:
        out = allocate_buffers(total, device)
    rows = check_buffer_rows(out, total)
    # Each output row's request and its index inside the request: the ragged layout of SPEC §1.
    layout = ragged_layout(kept + num_mask, total)
    request, local = layout.request, layout.draft_index
    verified = local < kept[request]
    source = (query_start_loc[request] + local).clamp(max=max(token_ids.shape[0] - 1, 0))
    pos = last_pos[request] + 1 + (local - kept[request])          # mask m = local - kept
    inside = pos < max_model_len
    safe_pos = torch.where(inside, pos, torch.zeros_like(pos)).clamp(min=0)
    block = block_table[request, (safe_pos // block_size).clamp(max=block_table.shape[1] - 1)]
    mask_slot = torch.where(inside, block * block_size + safe_pos % block_size, torch.full_like(pos, PADDING_SLOT_ID))
    out["token_ids"][:total] = torch.where(verified, token_ids[source], torch.full_like(source, mask_token_id))
    out["positions"][:total] = torch.where(verified, positions[source],
                                           torch.where(inside, pos, torch.full_like(pos, max_model_len - 1)))
    out["slot_mapping"][:total] = torch.where(verified, slot_mapping[source], mask_slot)
    out["is_mask"][:total] = ~verified
    out["source_index"][:total] = torch.where(verified, source, torch.full_like(source, -1))
    return dict(out, query_start_loc=out_qsl, num_kept=kept, num_mask=num_mask,
                last_kept_index=out_qsl[:-1] + kept - 1, total=total)


__all__ = ["prepare_ptd_inputs_torch", "device_query_start_loc", "cpu_query_start_loc", "allocate_buffers",
           "buffer_rows", "PADDING_SLOT_ID", "FIELDS"]
