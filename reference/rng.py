"""Keyed counter-based randomness (SPEC §5.2): Philox4x32-10 in numpy.

A stream is a pure function of ``(seed, position, purpose, column)``, so a
request's noise never depends on its batch row, the batch size, or how many
draws came before — the property that makes seeded outputs batch- and
preemption-invariant.

>>> philox4x32_10(np.zeros((1, 4), np.uint32), np.zeros((1, 2), np.uint32))[0].tolist() == [
...     0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]     # Random123 known answer
True
>>> stream_words(seed=7, position=12, purpose=ACCEPT, column=0, n=3).shape
(3,)
"""

from __future__ import annotations

import numpy as np

M0, M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
W0, W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
ROUNDS = 10

ACCEPT, RECOVER, DRAFT, ENGINE = 1, 2, 3, 4
PURPOSES = {"accept": ACCEPT, "recover": RECOVER, "draft": DRAFT, "engine": ENGINE}

_LO = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


def _mulhilo(m: np.uint64, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    product = m * x.astype(np.uint64)  # < 2^64: exact in uint64
    return (product >> _32).astype(np.uint32), (product & _LO).astype(np.uint32)


def philox4x32_10(counter: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Philox4x32-10 of ``counter`` ``[n, 4]`` uint32 under ``key`` ``[n, 2]`` uint32 → ``[n, 4]`` uint32."""
    c0, c1, c2, c3 = (counter[:, i].astype(np.uint32) for i in range(4))
    k0, k1 = key[:, 0].astype(np.uint32), key[:, 1].astype(np.uint32)
    with np.errstate(over="ignore"):
        for r in range(ROUNDS):
            if r:
                k0, k1 = k0 + W0, k1 + W1  # wraps mod 2^32
            hi0, lo0 = _mulhilo(M0, c0)
            hi1, lo1 = _mulhilo(M1, c2)
            c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return np.stack([c0, c1, c2, c3], axis=1)


def seed_key(seed: int) -> tuple[int, int]:
    """Split a 64-bit request seed into the Philox key ``(lo32, hi32)``.

    >>> seed_key(2**32 + 5)
    (5, 1)
    """
    seed = int(seed)
    if not 0 <= seed < 2**64:
        raise ValueError(f"seed: must be in [0, 2**64), got {seed}")
    return seed & 0xFFFFFFFF, seed >> 32


def stream_words(seed: int, position: int, purpose: int, column: int, n: int) -> np.ndarray:
    """The first ``n`` words of stream ``S(seed, position, purpose, column)`` → ``[n]`` uint32: word ``k`` is
    output word ``k % 4`` of Philox on counter ``(k // 4, position mod 2^32, purpose, column)``."""
    return streams_words([seed], [position], purpose, [n], column)


def streams_words(seeds, positions, purpose: int, counts, column: int = 0) -> np.ndarray:
    """``stream_words(seeds[i], positions[i], purpose, column, counts[i])`` for each i, concatenated: one Philox call."""
    blocks = (np.asarray(counts, np.int64).reshape(-1) + 3) // 4
    first, row = np.repeat(np.cumsum(blocks) - blocks, blocks), np.repeat(np.arange(len(blocks)), blocks)  # per row
    counter = np.zeros((len(row), 4), np.uint32)
    counter[:, 0] = (np.arange(len(row)) - first).astype(np.uint32)
    counter[:, 1] = np.array([int(L) & 0xFFFFFFFF for L in positions], np.uint32)[row]
    counter[:, 2], counter[:, 3] = purpose, column
    words = philox4x32_10(counter, np.array([seed_key(s) for s in seeds], np.uint32).reshape(-1, 2)[row]).reshape(-1)
    return words[np.arange(len(words)) - 4 * np.repeat(first, 4) < np.repeat(np.asarray(counts).reshape(-1)[row], 4)]


def uniform(words: np.ndarray) -> np.ndarray:
    """``(x + 1/2)·2^-32`` in float64: exact, strictly inside (0, 1).

    >>> uniform(np.array([0, 2**32 - 1], np.uint32)).tolist() == [2.0**-33, 1 - 2.0**-33]
    True
    """
    return (words.astype(np.float64) + 0.5) * 2.0**-32


def exponential(words: np.ndarray) -> np.ndarray:
    """``-log(uniform(x))``: Exp(1) noise, finite and > 0."""
    return -np.log(uniform(words))


def step_noise(seeds, positions, num_draft_tokens, vocab_size: int):
    """The noise of SPEC §5.1 drawn from the keyed streams of §5.2.

    Returns ``(uniforms [num_tokens], exponentials [batch, V])`` float64.
    Greedy requests simply never read theirs.
    """
    return (uniform(streams_words(seeds, positions, ACCEPT, num_draft_tokens)), exponential(
        streams_words(seeds, positions, RECOVER, [vocab_size] * len(num_draft_tokens))).reshape(-1, vocab_size))
