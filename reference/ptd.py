"""Parallel token drafting (PTD, seed 002): drafting K tokens in one pass, and its input layout.

**Drafting.** A PTD drafter proposes K tokens with ONE forward pass: after a
request's verified tokens it appends mask tokens; the row at the last
verified token predicts draft 0, the row at mask ``j`` predicts draft ``j``.
Draft ``j``'s row therefore depends on the context and ``j`` — never on the
drafts before it — so the drafts are drawn independently from their rows
(``ptd_draft_rows``). Verification is SPEC §3 unchanged, with these rows as
``draft_probs``: lossless like any drafter; only acceptance differs, and it
falls with ``j`` (seed 002's per-position table).

**Input preparation** (``prepare_ptd_inputs``). The target step's flattened
query (``query_start_loc``) ends, for request ``i``, with
``num_rejected[i]`` rejected drafts; those are dropped and ``num_mask[i]``
mask positions appended:

* output query lengths ``kept_i + num_mask_i`` with ``kept_i = query_len_i − num_rejected_i``;
  ``out_query_start_loc`` is their exclusive cumsum and the **total is its
  last entry** (vLLM PR #32628 sized its grid by ``num_actual_tokens +
  B·draft_len``, larger whenever tokens were rejected, and wrote garbage rows);
* kept rows copy the input's id, position and slot; mask ``m`` (0-based) of
  request ``i`` gets ``mask_token_id``, position ``last_pos_i + 1 + m`` and the
  slot of that position in the request's block table;
* **positions never wrap to 0** (the PR's ``where(pos >= max_model_len, 0, pos)``):
  with ``cap_drafts`` (default) ``num_mask_i = min(draft_len, max_model_len − 1 − last_pos_i)``
  (≥ 0), so every position stays below ``max_model_len``; without it every
  request gets ``draft_len`` masks (a static layout), positions past the end are
  held at ``max_model_len − 1`` and their slot is ``PADDING_SLOT_ID``;
* ``PADDING_SLOT_ID = -1`` for every position ``≥ max_model_len``: nothing is
  written to the KV cache for it;
* the buffers hold ``max_num_batched_tokens + max_num_seqs × draft_len`` rows
  (the seed's 8213 > 8192 crash: 8192 tokens + 7 requests × 3 masks); a total
  above ``buffer_size`` is refused with a clear error, never written past.

>>> out = prepare_ptd_inputs(token_ids=[5, 6, 7, 8, 9], positions=[3, 4, 5, 10, 11], slot_mapping=[3, 4, 5, 10, 11],
...     query_start_loc=[0, 3, 5], num_rejected=[1, 0], block_table=[[0, 1], [0, 1]], block_size=8,
...     max_model_len=13, draft_len=2, mask_token_id=99)
>>> out.query_start_loc.tolist(), out.token_ids.tolist(), out.positions.tolist()
([0, 4, 7], [5, 6, 99, 99, 8, 9, 99], [3, 4, 5, 6, 10, 11, 12])
>>> out.slot_mapping.tolist(), out.num_mask.tolist()
([3, 4, 5, 6, 10, 11, 12], [2, 1])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

PADDING_SLOT_ID = -1
"""Slot of a position at or beyond ``max_model_len``: the KV cache is not written."""


class PtdInputError(ValueError):
    """Bad PTD input-preparation arguments; the message names the argument and the rule."""


@dataclass(frozen=True)
class PtdInputs:
    """The drafter's one-pass input, ``N = query_start_loc[-1]`` rows.

    - ``query_start_loc [B + 1]``: exclusive cumsum of ``kept + num_mask``;
    - ``token_ids``, ``positions``, ``slot_mapping`` ``[N]`` int64;
    - ``is_mask [N]`` bool; ``source_index [N]`` int64: the input row a kept
      row copies (the hidden state to reuse), ``-1`` for a mask row;
    - ``num_kept``, ``num_mask`` ``[B]``; ``last_kept_index [B]``: the row of
      each request's last verified token (it predicts draft 0).
    """

    query_start_loc: np.ndarray
    token_ids: np.ndarray
    positions: np.ndarray
    slot_mapping: np.ndarray
    is_mask: np.ndarray
    source_index: np.ndarray
    num_kept: np.ndarray
    num_mask: np.ndarray
    last_kept_index: np.ndarray

    @property
    def total(self) -> int:
        return int(self.query_start_loc[-1])


def buffer_size(max_num_batched_tokens: int, max_num_seqs: int, draft_len: int) -> int:
    """Rows a PTD drafter's buffers need: every scheduled token plus ``draft_len`` masks per sequence.

    >>> buffer_size(8192, 7, 3)       # seed 002's crash: 8213 rows, not 8192 (nor 8192 + 7)
    8213
    """
    return max_num_batched_tokens + max_num_seqs * draft_len


def mask_counts(last_positions: np.ndarray, draft_len: int, max_model_len: int, cap_drafts: bool) -> np.ndarray:
    """``num_mask [B]``: ``draft_len``, or capped so that the last mask sits at ``max_model_len − 1``."""
    last_positions = np.asarray(last_positions, np.int64)
    if not cap_drafts:
        return np.full(len(last_positions), draft_len, np.int64)
    return np.clip(max_model_len - 1 - last_positions, 0, draft_len).astype(np.int64)


def _check(token_ids, positions, slot_mapping, query_start_loc, num_rejected, block_table, block_size,
           max_model_len, draft_len) -> None:
    n = len(token_ids)
    if len(positions) != n or len(slot_mapping) != n:
        raise PtdInputError(f"positions, slot_mapping: lengths must equal token_ids' ({n}), "
                            f"got {len(positions)} and {len(slot_mapping)}")
    if len(query_start_loc) < 2 or query_start_loc[0] != 0 or (np.diff(query_start_loc) < 1).any() \
            or query_start_loc[-1] > n:
        raise PtdInputError(f"query_start_loc: must start at 0, rise by >= 1 per request and end <= {n}, "
                            f"got {list(query_start_loc)}")
    batch = len(query_start_loc) - 1
    query_len = np.diff(query_start_loc)
    if len(num_rejected) != batch or (num_rejected < 0).any() or (num_rejected >= query_len).any():
        raise PtdInputError(f"num_rejected: need {batch} entries in [0, query_len) (one token per request is "
                            f"always verified), got {list(num_rejected)} for query lengths {list(query_len)}")
    if block_table.ndim != 2 or block_table.shape[0] != batch:
        raise PtdInputError(f"block_table: must be [batch={batch}, max_blocks], got shape {block_table.shape}")
    if block_size < 1 or max_model_len < 1 or draft_len < 0:
        raise PtdInputError(f"block_size, max_model_len >= 1 and draft_len >= 0, got {block_size}, "
                            f"{max_model_len}, {draft_len}")
    if block_table.shape[1] * block_size < max_model_len:
        raise PtdInputError(f"block_table: {block_table.shape[1]} blocks of {block_size} cannot hold "
                            f"max_model_len={max_model_len} positions")


def prepare_ptd_inputs(token_ids, positions, slot_mapping, query_start_loc, num_rejected, block_table, *,
                       block_size: int, max_model_len: int, draft_len: int, mask_token_id: int,
                       cap_drafts: bool = True, buffer_rows: int | None = None) -> PtdInputs:
    """The reference layout, one request and one row at a time (see the module docstring).

    - ``token_ids``, ``positions``, ``slot_mapping`` ``[N_in]``: the target step's flattened rows;
    - ``query_start_loc [B + 1]`` int: request ``i`` owns rows ``qsl[i] .. qsl[i+1] − 1``;
    - ``num_rejected [B]``: trailing rows of each query that were rejected;
    - ``block_table [B, max_blocks]`` int: KV blocks of each request;
    - ``buffer_rows``: the drafter's buffer size; a larger total raises ``PtdInputError``.
    """
    token_ids, positions, slot_mapping = (np.asarray(a, np.int64) for a in (token_ids, positions, slot_mapping))
    query_start_loc, num_rejected = np.asarray(query_start_loc, np.int64), np.asarray(num_rejected, np.int64)
    block_table = np.asarray(block_table, np.int64)
    _check(token_ids, positions, slot_mapping, query_start_loc, num_rejected, block_table, block_size,
           max_model_len, draft_len)
    batch = len(query_start_loc) - 1
    kept = np.diff(query_start_loc) - num_rejected
    last_input = query_start_loc[:-1] + kept - 1
    num_mask = mask_counts(positions[last_input], draft_len, max_model_len, cap_drafts)
    out_qsl = np.concatenate([[0], np.cumsum(kept + num_mask)]).astype(np.int64)
    total = int(out_qsl[-1])
    if buffer_rows is not None and total > buffer_rows:
        raise PtdInputError(f"buffer_rows: the drafter needs {total} rows but its buffers hold {buffer_rows}; "
                            "size them max_num_batched_tokens + max_num_seqs × draft_len")
    rows = []   # (token id, position, slot, is mask, source index) per output row; each request keeps >= 1
    for i in range(batch):
        rows += [(token_ids[src], positions[src], slot_mapping[src], False, src)
                 for src in range(int(query_start_loc[i]), int(query_start_loc[i]) + int(kept[i]))]
        last = int(positions[last_input[i]])
        for pos in range(last + 1, last + 1 + int(num_mask[i])):
            inside = pos < max_model_len
            slot = int(block_table[i, pos // block_size]) * block_size + pos % block_size if inside else PADDING_SLOT_ID
            rows.append((mask_token_id, pos if inside else max_model_len - 1, slot, True, -1))
    arrays = [np.array(c, dtype) for c, dtype in zip(zip(*rows), (np.int64, np.int64, np.int64, bool, np.int64))]
    return PtdInputs(out_qsl, *arrays, kept.astype(np.int64), num_mask, out_qsl[:-1] + kept - 1)


def ptd_draft_rows(row_of: Callable[[Sequence[int]], np.ndarray], context: Sequence[int], k: int,
                   mask_token_id: int) -> np.ndarray:
    """The K draft laws of one PTD pass ``[k, V]``: row ``j`` is the drafter's law after the
    context and ``j`` mask tokens — independent of the drafted tokens themselves.

    >>> rows = ptd_draft_rows(lambda ctx: np.eye(3)[len(ctx) % 3], [0, 1], 2, mask_token_id=3)
    >>> rows.tolist()     # rows depend on the context and j only
    [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]
    """
    return np.stack([np.asarray(row_of(list(context) + [mask_token_id] * j), np.float64) for j in range(k)]) \
        if k else np.zeros((0, 0))


__all__ = ["prepare_ptd_inputs", "ptd_draft_rows", "buffer_size", "mask_counts", "PtdInputs", "PtdInputError",
           "PADDING_SLOT_ID"]
