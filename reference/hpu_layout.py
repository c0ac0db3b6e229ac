"""HPU-style decode input layout (seed 000), one request and one slot at a time.

vllm-gaudi's ``prepare_decodes_input`` with spec decode lays every decode out
as ``[padded_batch, K + 1]``: column 0 holds the request's newest token (not
yet in the KV cache), columns ``1..K_i`` its drafts, the rest padding. This is
the statement ``devices.hpu_device.prepare_decode_inputs`` is held to.

* the newest token of a request with ``seq_len`` tokens sits at position
  ``seq_len − 1``; draft ``j`` at ``seq_len + j``;
* slot of position ``p``: ``block_table[i, p // block_size]·block_size + p % block_size``;
* padding (slots past ``K_i``, rows past the batch): token 0, position 0,
  slot ``PADDING_SLOT_ID`` (nothing written); a position ``≥ max_model_len``
  also gets ``PADDING_SLOT_ID``;
* ``logits_indices``: the flat index (``row·(K + 1) + column``) of every real
  slot, in SPEC §1's target-row order (request i's drafts, then its bonus row).

>>> lay = decode_layout([7, 8], [1, 2, 3], [2, 1], [5, 9], [[0, 1, 4], [2, 3, 5]], block_size=4,
...                     max_model_len=9, padded_batch=4, k_pad=2)
>>> lay["input_ids"].tolist()[:2], lay["positions"].tolist()[:2]
([[7, 1, 2], [8, 3, 0]], [[4, 5, 6], [8, 9, 0]])
>>> lay["slot_mapping"].tolist()[:2], lay["logits_indices"].tolist()    # position 9 >= max_model_len: -1
([[4, 5, 6], [20, -1, -1]], [0, 1, 2, 3, 4])
"""

from __future__ import annotations

import numpy as np

PADDING_SLOT_ID = -1


def decode_layout(last_token_ids, draft_token_ids, num_draft_tokens, seq_lens, block_table, *, block_size: int,
                  max_model_len: int, padded_batch: int, k_pad: int) -> dict[str, np.ndarray]:
    """``input_ids``, ``positions``, ``slot_mapping`` ``[padded_batch, k_pad + 1]`` and
    ``logits_indices [num_tokens + batch]`` (see the module docstring).

    ``last_token_ids [B]``, ``draft_token_ids [Σ K_i]`` (SPEC §1 order),
    ``num_draft_tokens [B]``, ``seq_lens [B]``, ``block_table [B, max_blocks]``.
    """
    num_draft_tokens = [int(k) for k in num_draft_tokens]
    batch = len(num_draft_tokens)
    if batch > padded_batch or max(num_draft_tokens, default=0) > k_pad:
        raise ValueError(f"padded_batch, k_pad: a batch of {batch} with K up to {max(num_draft_tokens, default=0)} "
                         f"does not fit [{padded_batch}, {k_pad} + 1]")
    input_ids = np.zeros((padded_batch, k_pad + 1), np.int64)
    positions = np.zeros((padded_batch, k_pad + 1), np.int64)
    slot_mapping = np.full((padded_batch, k_pad + 1), PADDING_SLOT_ID, np.int64)
    logits_indices = []
    start = 0
    for i, k in enumerate(num_draft_tokens):
        drafts = list(draft_token_ids[start:start + k])
        start += k
        for j, token in enumerate([last_token_ids[i]] + drafts):
            pos = int(seq_lens[i]) - 1 + j
            input_ids[i, j], positions[i, j] = int(token), pos
            if pos < max_model_len:
                slot_mapping[i, j] = int(block_table[i][pos // block_size]) * block_size + pos % block_size
            logits_indices.append(i * (k_pad + 1) + j)
    return dict(input_ids=input_ids, positions=positions, slot_mapping=slot_mapping,
                logits_indices=np.array(logits_indices, np.int64))


__all__ = ["decode_layout", "PADDING_SLOT_ID"]
