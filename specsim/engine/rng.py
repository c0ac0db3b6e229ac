"""The engine's keyed randomness, on ``reference.rng``'s Philox streams (SPEC §5.2).

Two uses, both pure functions of their key — never of the batch row, the
batch size, the arrival order or a generator's state:

* **request seeds**: a request without a seed gets
  ``request_seed(engine_seed, request_id)``, two words of the ENGINE stream
  keyed by the engine seed, column = CRC-32 of the request id;
* **drafter noise**: the drafter proposing the token at position ``L + j`` in
  round ``L`` for a request with seed ``s`` races ``draft_probs / E`` with
  ``E = exponential(S(s, L, DRAFT, j))`` — vectorised over the batch here,
  word for word equal to ``reference.rng.stream_words``.

The global RNGs (``random``, numpy's, torch's) are never touched.

>>> from reference.rng import DRAFT, exponential, stream_words
>>> e = draft_exponentials(np.array([7, 9], np.uint64), np.array([12, 3]), columns=[0, 1], vocab_size=5)
>>> bool((e[1, 1] == exponential(stream_words(9, 3, DRAFT, 1, 5))).all())
True
"""

from __future__ import annotations

import zlib

import numpy as np

from reference.rng import DRAFT, ENGINE, exponential, philox4x32_10, stream_words


def request_seed(engine_seed: int, request_id: str) -> int:
    """A 64-bit seed for a request with none: depends on the engine seed and the id only.

    >>> request_seed(0, "a") == request_seed(0, "a") != request_seed(0, "b")
    True
    """
    lo, hi = stream_words(engine_seed, 0, ENGINE, zlib.crc32(str(request_id).encode()), 2)
    return int(lo) | (int(hi) << 32)


def keyed_words(seeds: np.ndarray, positions: np.ndarray, purpose: int, columns, n: int) -> np.ndarray:
    """Words ``[batch, len(columns), n]`` uint32 (one Philox call for all):
    ``[b, c]`` is ``stream_words(seeds[b], positions[b], purpose, columns[c], n)``."""
    seeds = np.asarray(seeds, np.uint64)
    columns = np.atleast_1d(np.asarray(columns, np.uint32))
    batch, width, blocks = len(seeds), len(columns), (n + 3) // 4
    counter = np.empty((batch, width, blocks, 4), np.uint32)
    counter[..., 0] = np.arange(blocks, dtype=np.uint32)
    counter[..., 1] = (np.asarray(positions, np.int64) & 0xFFFFFFFF).astype(np.uint32)[:, None, None]
    counter[..., 2] = purpose
    counter[..., 3] = columns[None, :, None]
    key = np.empty((batch, width, blocks, 2), np.uint32)
    key[..., 0] = (seeds & np.uint64(0xFFFFFFFF)).astype(np.uint32)[:, None, None]
    key[..., 1] = (seeds >> np.uint64(32)).astype(np.uint32)[:, None, None]
    out = philox4x32_10(counter.reshape(-1, 4), key.reshape(-1, 2))
    return out.reshape(batch, width, blocks * 4)[:, :, :n]


def draft_exponentials(seeds: np.ndarray, positions: np.ndarray, columns, vocab_size: int) -> np.ndarray:
    """Exp(1) noise ``[batch, len(columns), V]`` for draft ``columns`` of the rounds at ``positions`` ``[batch]``."""
    return exponential(keyed_words(seeds, positions, DRAFT, columns, vocab_size))


def race(weights: np.ndarray, exponentials: np.ndarray) -> np.ndarray:
    """Exponential race ``[rows]``: smallest id maximising ``weights / E`` over ``weights > 0``.

    ``weights`` ``[rows, V]`` ≥ 0 with a positive entry per row; ``exponentials`` ``[rows, V]`` > 0.
    """
    score = np.where(weights > 0, weights / exponentials, -1.0)
    return np.argmax(score, axis=1)  # argmax returns the first (smallest) id on ties
