"""PTD input preparation as one Triton kernel (seed 002), held to ``reference/ptd.py``.

Grid ``(cdiv(total, BLOCK),)`` where ``total`` is the last output query start
location (the host's CPU copy): rows past ``total`` are masked off, so a
buffer is never written past its live rows — vLLM PR #32628 launched
``num_actual_tokens + B·draft_len`` rows, more than ``total`` when tokens
were rejected, and filled the excess with request 0's garbage slots.

Each program finds its rows' request by counting ``out_qsl[r + 1] <= row``
over a ``[BLOCK, BATCH_BLOCK]`` tile (the PR looped over the batch), then copies a kept row or
lays out a mask row. Every load address is clamped into the buffer with
``tl.where`` **before** the load — Triton-Ascend does not honour non-static
load masks (docs/bugs.md #13), so a masked-off lane must still point
inside the buffer; a mask row never reads ``qsl − 1``. Positions at or past
``max_model_len`` get ``PADDING_SLOT_ID`` and are held at ``max_model_len − 1``
(never wrapped to 0).

Runs on CUDA, or in the CPU interpreter with ``TRITON_INTERPRET=1`` set before
triton is imported.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from devices.ptd import allocate_buffers

PADDING_SLOT_ID = tl.constexpr(-1)


@triton.jit
def ptd_prepare_kernel(token_ids_ptr, positions_ptr, slot_mapping_ptr, qsl_ptr, out_qsl_ptr, kept_ptr,
                       last_pos_ptr, block_table_ptr,
                       out_token_ids_ptr, out_positions_ptr, out_slot_mapping_ptr, out_is_mask_ptr, out_source_ptr,
                       total, batch, num_input_rows, max_blocks, block_size, max_model_len, mask_token_id,
                       BLOCK: tl.constexpr, BATCH_BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = pid * BLOCK + tl.arange(0, BLOCK)
    live = row < total
    # The request of each row: how many requests end at or before it, over a [BLOCK, BATCH_BLOCK] tile.
    r = tl.arange(0, BATCH_BLOCK)
    ends = tl.load(out_qsl_ptr + 1 + tl.minimum(r, batch - 1))      # address clamped, not masked
    ends = tl.where(r < batch, ends, total)                          # past the batch: never <= a live row
    request = tl.sum((ends[None, :] <= row[:, None]).to(tl.int64), axis=1)
    request = tl.where(live, tl.minimum(request, batch - 1), 0)   # in range even for dead lanes
    start = tl.load(out_qsl_ptr + request)
    local = row - start
    kept = tl.load(kept_ptr + request)
    verified = local < kept
    source = tl.load(qsl_ptr + request) + local
    source = tl.where(verified & live, source, 0)                    # clamp before the load, never qsl - 1
    source = tl.minimum(source, num_input_rows - 1)
    pos = tl.load(last_pos_ptr + request) + 1 + (local - kept)
    inside = pos < max_model_len
    safe_pos = tl.where(inside & (pos >= 0), pos, 0)
    block_index = tl.minimum(safe_pos // block_size, max_blocks - 1)
    block = tl.load(block_table_ptr + request.to(tl.int64) * max_blocks + block_index)
    mask_slot = tl.where(inside, block * block_size + safe_pos % block_size, PADDING_SLOT_ID)
    in_token = tl.load(token_ids_ptr + source)
    in_pos = tl.load(positions_ptr + source)
    in_slot = tl.load(slot_mapping_ptr + source)
    tl.store(out_token_ids_ptr + row, tl.where(verified, in_token, mask_token_id), mask=live)
    tl.store(out_positions_ptr + row, tl.where(verified, in_pos, tl.where(inside, pos, max_model_len - 1)), mask=live)
    tl.store(out_slot_mapping_ptr + row, tl.where(verified, in_slot, mask_slot), mask=live)
    tl.store(out_is_mask_ptr + row, (~verified).to(tl.int8), mask=live)
    tl.store(out_source_ptr + row, tl.where(verified, source, -1), mask=live)


def prepare_ptd_inputs_triton(token_ids, positions, slot_mapping, query_start_loc, num_rejected, block_table, *,
                              block_size: int, max_model_len: int, draft_len: int, mask_token_id: int,
                              total: int, cap_drafts: bool = True, out: dict | None = None,
                              block: int = 128) -> dict:
    """The Triton layout; same arguments as ``devices.ptd.prepare_ptd_inputs_torch`` (``total`` required:
    the host's ``cpu_query_start_loc(...)[-1]``). Returns the buffers plus ``query_start_loc`` and ``total``."""
    from devices.ptd import check_buffer_rows, device_query_start_loc
    kept, num_mask, last_pos, out_qsl = device_query_start_loc(
        query_start_loc, num_rejected, positions, draft_len=draft_len, max_model_len=max_model_len,
        cap_drafts=cap_drafts)
    device = token_ids.device
    if out is None:
        out = allocate_buffers(total, device)
    rows = check_buffer_rows(out, total)
    is_mask = torch.zeros(rows, dtype=torch.int8, device=device)
    is_mask.copy_(out["is_mask"].to(torch.int8))
    batch = int(query_start_loc.shape[0] - 1)
    grid = (max(triton.cdiv(total, block), 1),)
    ptd_prepare_kernel[grid](token_ids, positions, slot_mapping, query_start_loc, out_qsl, kept, last_pos,
                             block_table.contiguous(), out["token_ids"], out["positions"], out["slot_mapping"],
                             is_mask, out["source_index"], total, batch, token_ids.shape[0], block_table.shape[1],
                             block_size, max_model_len, mask_token_id, BLOCK=block,
                             BATCH_BLOCK=triton.next_power_of_2(max(batch, 1)))
    out["is_mask"].copy_(is_mask.to(torch.bool))
    return dict(out, query_start_loc=out_qsl, num_kept=kept, num_mask=num_mask,
                last_kept_index=out_qsl[:-1] + kept - 1, total=total)


__all__ = ["ptd_prepare_kernel", "prepare_ptd_inputs_triton"]
