"""Keyed counter-based noise of SPEC §5.2 (Philox4x32-10) in torch integer ops.

Vectorised over any number of counters, on any torch device, and bit for bit
the reference's words: the stream ``S(seed, L, purpose, column)`` has word
``n`` = output word ``n % 4`` of Philox on counter
``(n // 4, L mod 2^32, purpose, column)`` under key ``(seed mod 2^32, seed >> 32)``.

torch has no uint32 arithmetic with a high-half multiply, so every 32-bit
word is held in an int64 tensor in ``[0, 2^32)`` and the 32×32→64 product is
assembled from two 32×16-bit products (each < 2^48, exact in int64).

Seeds are 64-bit unsigned but torch has no usable uint64: they travel as
int64 tensors holding the same bits (``np_seeds.astype(np.uint64).view(np.int64)``,
see ``seeds_to_int64``), so a seed ≥ 2^63 is a negative int64.

>>> import torch
>>> philox4x32_10(torch.zeros(1, 4, dtype=torch.int64), torch.zeros(1, 2, dtype=torch.int64))[0].tolist() == [
...     0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]   # Random123 known answer
True
>>> u, e = step_noise(torch.tensor([7]), torch.tensor([12]), torch.tensor([3]), vocab_size=5)
>>> u.shape, e.shape, u.dtype
(torch.Size([3]), torch.Size([1, 5]), torch.float64)
"""

from __future__ import annotations

import numpy as np
import torch

from devices.torch_sampling import ragged_layout

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
ROUNDS = 10
ACCEPT, RECOVER, DRAFT, ENGINE = 1, 2, 3, 4

_MASK32 = 0xFFFFFFFF
_MASK16 = 0xFFFF


def _mulhilo_split(m: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(hi, lo)`` 32-bit halves of ``m * x`` for ``m`` a 32-bit constant, ``x`` int64 in [0, 2^32).

    Never overflows: ``m*x = m*x_lo + (m*x_hi) << 16`` with ``x = x_hi·2^16 + x_lo``,
    both partial products < 2^48. The fallback when wrapping multiply is untrusted.
    """
    low_part = m * (x & _MASK16)          # < 2^48
    high_part = m * (x >> 16)             # < 2^48
    partial = low_part + ((high_part & _MASK16) << 16)  # the low 48 bits of m*x, plus a carry
    lo = partial & _MASK32
    hi = (high_part >> 16) + (partial >> 32)  # < 2^32 because m*x < 2^64
    return hi, lo


def _mulhilo_wrapping(m: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """As ``_mulhilo_split`` in 4 ops instead of 9: the int64 product wraps mod 2^64, keeping
    its 64 bits in two's complement; the arithmetic shift's sign copies are masked off."""
    product = x * m
    return (product >> 32) & _MASK32, product & _MASK32


_WRAPPING_OK: dict[str, bool] = {}


def _mulhilo_for(device: torch.device):
    """The fast multiply on devices where a known answer proves int64 products wrap, else the split."""
    kind = device.type
    if kind not in _WRAPPING_OK:
        x = torch.tensor([0xFFFFFFFF, 0x80000001, 12345], dtype=torch.int64, device=device)
        hi, lo = _mulhilo_wrapping(M0, x)
        want = [divmod(M0 * int(v), 2**32) for v in (0xFFFFFFFF, 0x80000001, 12345)]
        _WRAPPING_OK[kind] = list(zip(hi.tolist(), lo.tolist())) == want
    return _mulhilo_wrapping if _WRAPPING_OK[kind] else _mulhilo_split


def _words(value, device: torch.device) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    # A fill, not a host-to-device copy: keeps the whole step capturable in a CUDA graph.
    return torch.full((), int(value), dtype=torch.int64, device=device)


def philox_words(c0, c1, c2, c3, k0, k1, *, split: bool = False) -> tuple[torch.Tensor, ...]:
    """Philox4x32-10 on broadcastable counter words ``c0..c3`` and key words ``k0, k1``.

    Each argument is an int64 tensor (or int) of 32-bit values; shapes
    broadcast, so a per-request key ``[batch, 1]`` is bumped once per request,
    not once per word. Returns the four output words, broadcast shape.
    ``split=True`` forces the overflow-free multiply (tests use it).
    """
    device = next(v.device for v in (c0, c1, c2, c3, k0, k1) if isinstance(v, torch.Tensor))
    c0, c1, c2, c3, k0, k1 = (_words(v, device) for v in (c0, c1, c2, c3, k0, k1))
    mulhilo = _mulhilo_split if split else _mulhilo_for(device)
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & _MASK32, (k1 + W1) & _MASK32
        hi0, lo0 = mulhilo(M0, c0)
        hi1, lo1 = mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return torch.broadcast_tensors(c0, c1, c2, c3)


def philox4x32_10(counter: torch.Tensor, key: torch.Tensor, *, split: bool = False) -> torch.Tensor:
    """Philox4x32-10 of ``counter`` ``[n, 4]`` under ``key`` ``[n, 2]`` → ``[n, 4]``.

    All int64 tensors with values in ``[0, 2^32)`` (one 32-bit word each).
    """
    return torch.stack(philox_words(*counter.unbind(-1), *key.unbind(-1), split=split), dim=-1)


def seeds_to_int64(seeds) -> torch.Tensor:
    """``[batch]`` seeds in [0, 2^64) (numpy, list or tensor) → int64 tensor with the same 64 bits.

    >>> seeds_to_int64(np.array([2**64 - 1], np.uint64)).tolist()
    [-1]
    """
    if isinstance(seeds, torch.Tensor):
        if seeds.dtype == torch.int64:
            return seeds
        seeds = seeds.cpu().numpy()
    as_uint = np.asarray([int(s) for s in np.asarray(seeds).reshape(-1)], dtype=np.uint64)
    return torch.from_numpy(as_uint.view(np.int64).copy())


def seed_keys(seeds: torch.Tensor) -> torch.Tensor:
    """``[batch]`` int64 seeds (uint64 bits) → ``[batch, 2]`` Philox keys ``(lo32, hi32)``.

    An arithmetic shift of a negative int64 copies the sign bit, so the high
    word is masked back to 32 bits.
    """
    return torch.stack([seeds & _MASK32, (seeds >> 32) & _MASK32], dim=-1)


def stream_words(keys: torch.Tensor, positions: torch.Tensor, purpose: int,
                 column: torch.Tensor | int, word_index: torch.Tensor) -> torch.Tensor:
    """Words ``word_index`` of streams ``S(key, position, purpose, column)``, elementwise.

    ``keys`` ``[n, 2]``, ``positions`` ``[n]``, ``word_index`` ``[n]`` int64
    (``column`` an int or ``[n]``) → ``[n]`` int64 words in [0, 2^32).
    Each word evaluates its own Philox block; whole streams use ``block_words``.
    """
    words = philox_words(word_index >> 2, positions & _MASK32, purpose, column, keys[:, 0], keys[:, 1])
    return torch.stack(words, dim=-1).gather(-1, (word_index & 3).unsqueeze(-1)).squeeze(-1)


def block_words(keys: torch.Tensor, positions: torch.Tensor, purpose: int, column: int,
                num_words: int) -> torch.Tensor:
    """The first ``num_words`` words of each row's stream: ``keys`` ``[batch, 2]``, ``positions``
    ``[batch]`` → ``[batch, num_words]`` int64."""
    batch = keys.shape[0]
    blocks = (num_words + 3) // 4
    block = torch.arange(blocks, dtype=torch.int64, device=keys.device).unsqueeze(0)  # [1, blocks]
    words = philox_words(block, (positions & _MASK32).unsqueeze(1), purpose, column,
                         keys[:, :1], keys[:, 1:])                                   # 4 × [batch, blocks]
    return torch.stack(words, dim=-1).reshape(batch, blocks * 4)[:, :num_words]


def uniform(words: torch.Tensor) -> torch.Tensor:
    """``(x + 1/2)·2^-32`` in float64: exact, strictly inside (0, 1)."""
    return (words.to(torch.float64) + 0.5) * 2.0**-32


def exponential(words: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Exp(1) noise ``-log(uniform(x))``, finite and > 0, in ``dtype``.

    float64: ``-log(uniform)`` directly (uniform ≤ 1 - 2^-33, so never 0).
    Narrower dtypes: for ``x ≥ 2^31`` the uniform is near 1 and ``-log`` of
    its rounding could be 0, so SPEC §5.2's ``-log1p(-(2^32 - x - 1/2)·2^-32)``
    is used instead.
    """
    if dtype == torch.float64:
        return -torch.log(uniform(words))
    low = -torch.log(((words.to(torch.float64) + 0.5) * 2.0**-32).to(dtype))
    high = -torch.log1p((-((2.0**32 - 0.5) - words.to(torch.float64)) * 2.0**-32).to(dtype))
    return torch.where(words >= 2**31, high, low)


def step_noise(seeds: torch.Tensor, positions: torch.Tensor, num_draft_tokens: torch.Tensor,
               vocab_size: int, num_tokens: int | None = None,
               max_k: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The noise of SPEC §5.1 drawn from the keyed streams of §5.2, whole batch at once.

    - ``seeds``: ``[batch]`` int64 (uint64 bits, see ``seeds_to_int64``);
    - ``positions``: ``[batch]`` int64 in [0, 2^32);
    - ``num_draft_tokens``: ``[batch]`` int64;
    - ``num_tokens``, ``max_k``: its sum and max if known (each saves a device sync).

    Returns ``uniforms [num_tokens]`` float64 (``u_j`` of request i is
    ``uniforms[cu[i] + j]``, from ``S(seed_i, L_i, ACCEPT, 0)[j]``) and
    ``exponentials [batch, V]`` float64 (``S(seed_i, L_i, RECOVER, 0)[v]``),
    all on ``seeds.device``.

    Both streams come from ONE Philox evaluation over ``[batch, A + R]``
    blocks: the first ``A = ceil(max_k / 4)`` columns are ACCEPT blocks
    ``0..A-1``, the other ``R = ceil(V / 4)`` RECOVER blocks ``0..R-1``
    (one launch sequence instead of two; short requests waste < A blocks).
    """
    device = seeds.device
    if num_tokens is None:
        num_tokens = int(num_draft_tokens.sum())
    if max_k is None:
        max_k = int(num_draft_tokens.max()) if num_tokens else 0
    batch = seeds.shape[0]
    accept_blocks, recover_blocks = (max_k + 3) // 4, (vocab_size + 3) // 4
    column = torch.arange(accept_blocks + recover_blocks, dtype=torch.int64, device=device).unsqueeze(0)
    is_accept = column < accept_blocks
    block = torch.where(is_accept, column, column - accept_blocks)
    purpose = torch.where(is_accept, ACCEPT, RECOVER)
    keys = seed_keys(seeds)
    words = torch.stack(philox_words(block, (positions & _MASK32).unsqueeze(1), purpose, 0,
                                     keys[:, :1], keys[:, 1:]), dim=-1)        # [batch, A + R, 4]
    accept_words = words[:, :accept_blocks].reshape(batch, accept_blocks * 4)   # [batch, 4A]
    recover_words = words[:, accept_blocks:].reshape(batch, recover_blocks * 4)[:, :vocab_size]

    layout = ragged_layout(num_draft_tokens, num_tokens)
    uniforms = uniform(accept_words[layout.request, layout.draft_index])
    return uniforms, exponential(recover_words)


__all__ = ["philox4x32_10", "philox_words", "seeds_to_int64", "seed_keys", "stream_words", "block_words",
           "uniform", "exponential", "step_noise", "ACCEPT", "RECOVER", "DRAFT", "ENGINE"]
