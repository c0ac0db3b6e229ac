"""The ``width`` largest values of chosen rows in two passes over them (Triton), for top-k's cut.

``torch.topk`` on ``[1280, 128256]`` float32 is a radix select: several passes over every row
(one per 8-bit digit, then a gather). Top-k's cut needs only the *values* of the ``k + 1``
largest entries, and how often the ``k``-th of them occurs in the row (``devices/filter_cut.py``), so here:

1. ``group_max_kernel``, grid ``(rows, chunks)``: each lane's maximum over its chunk's tiles —
   ``G = chunks · BLOCK`` disjoint groups of ``TILES`` ids each (lane ``l`` of chunk ``c``: ids
   ``c·CHUNK + t·BLOCK + l``; strided, so neighbouring ids fall in different groups);
2. ``torch.topk`` of the ``[rows, G]`` group maxima (small): the floor ``L`` of row ``r`` is the
   ``(k_r + 1)``-th largest group maximum. The ``k_r + 1`` largest group maxima are ``k_r + 1``
   entries of the row (one per group) all ``≥ L``, so ``L ≤ z_(k_r + 1)``: every one of the row's
   ``k_r + 1`` largest entries is ``≥ L``;
3. ``compact_kernel``, grid ``(rows, chunks)``: every entry ``> L`` appended to the row's
   slots (an atomic count per row, one atomic per kept entry), the entries ``= L`` only counted.
   An entry ``> L`` lies in a group whose maximum is ``> L``, and at most ``k_r`` groups have one,
   so a row has at most ``k_r · TILES`` such entries: the slots (``max(capacity, (width - 1) · TILES)``,
   ``TILES`` kept at most ``capacity / (width - 1)``) always hold them all, whatever the row;
4. ``torch.topk`` of the slots (``-inf`` where unused), then ``L`` in the positions past the
   entries ``> L``: the row's largest values, exact in positions ``0 .. k_r`` (the row has at
   least ``k_r + 1`` entries ``≥ L``); and the row's count of its ``k_r``-th largest value (from
   the slots where it is ``> L``, else the count of ``L``).

Every size is fixed by ``width`` and the launch shape — no row is flagged, nothing is read back
to the host. On random logits the floor leaves about ``k + 1`` entries above it (``k = 50``:
~50–60 of 128256).

>>> import torch                                                   # doctest: +SKIP
>>> vals, ties = top_values(kernels, logits, None, torch.tensor([2]), 3, block=256, programs=1)  # doctest: +SKIP
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

CAPACITY = 2048  # slots a row at least: 40× the ~51 entries above the floor at k = 50 on random logits


@triton.jit
def _row_of(row_ids_ptr, p, ALL_ROWS: tl.constexpr):
    """The logits row program ``p`` reads: ``p`` itself with ``ALL_ROWS``, else ``row_ids[p]`` (int64)."""
    if ALL_ROWS:
        return p.to(tl.int64)
    return tl.load(row_ids_ptr + p).to(tl.int64)


@triton.jit
def group_max_kernel(logits_ptr, row_ids_ptr, gmax_ptr, V, CHUNK, G, TILES: tl.constexpr, BLOCK: tl.constexpr,
                     ALL_ROWS: tl.constexpr, FP64: tl.constexpr):
    """Program ``(p, chunk)``: lane ``l``'s maximum over the chunk's tiles of row ``row_ids[p]``
    (``p`` itself with ``ALL_ROWS``) → ``gmax_ptr[p, chunk·BLOCK + l]``.

    ``logits_ptr`` ``[rows, V]`` (any float dtype, up-cast exactly); ``row_ids_ptr`` ``[n]``
    int64; ``gmax_ptr`` ``[n, G]`` in the compute dtype (``-inf`` for lanes past ``V``)."""
    p = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    row = _row_of(row_ids_ptr, p, ALL_ROWS)
    lo = chunk * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    lanes = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), dtype)
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + lanes
        m = tl.maximum(m, tl.load(logits_ptr + row * V + cols, mask=cols < hi, other=float("-inf")).to(dtype))
    tl.store(gmax_ptr + p.to(tl.int64) * G + chunk * BLOCK + lanes, m)


@triton.jit
def compact_kernel(logits_ptr, row_ids_ptr, floor_ptr, count_ptr, ties_ptr, slots_ptr, V, CHUNK, CAP,
                   TILES: tl.constexpr, BLOCK: tl.constexpr, ALL_ROWS: tl.constexpr, FP64: tl.constexpr):
    """Program ``(p, chunk)``: every entry of the chunk of row ``row_ids[p]`` that is
    ``> floor_ptr[p]`` into ``slots_ptr[p, count ..]`` (``[n, CAP]``, in the compute dtype),
    ``count_ptr[p]`` (int32, zeroed by the caller) counting them; the entries ``= floor_ptr[p]``
    counted in ``ties_ptr[p]`` (int32, zeroed), not stored. ``CAP`` bounds the count (module
    docstring); past it nothing is stored. Order within the slots is arbitrary (only values matter)."""
    p = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    row = _row_of(row_ids_ptr, p, ALL_ROWS)
    floor = tl.load(floor_ptr + p).to(dtype)
    lo = chunk * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    lanes = tl.arange(0, BLOCK)
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + lanes
        inside = cols < hi
        z = tl.load(logits_ptr + row * V + cols, mask=inside, other=float("-inf")).to(dtype)
        keep = inside & (z > floor)
        # A slot per kept entry from the row's count, lane by lane: a tile keeps one or two entries
        # (51 of 128256 a row at k = 50), so a predicated atomic beats a prefix sum over the tile
        # (H100, 256 × 4 × 128256: this pass 0.383 ms with tl.cumsum, 0.262 with the atomics).
        at = tl.atomic_add(count_ptr + p + lanes * 0, tl.full([BLOCK], 1, tl.int32), mask=keep)
        tl.store(slots_ptr + p.to(tl.int64) * CAP + at, z, mask=keep & (at < CAP))
        tied = tl.sum((inside & (z == floor)).to(tl.int32), axis=0)
        tl.atomic_add(ties_ptr + p, tied, mask=tied > 0)


def _groups(vocab_size: int, rows: int, width: int, block: int, programs: int,
            max_tiles: int | None = None) -> tuple[int, int]:
    """``(chunk, chunks)`` of the two passes: about ``programs`` programs in all, at least
    ``width`` groups (``chunks · block``; one tile a chunk gives ``≥ V ≥ width`` groups), and at
    most ``max_tiles`` tiles a chunk (None: no bound)."""
    tiles = math.ceil(vocab_size / block)
    want = max(1, min(tiles, math.ceil(programs / max(rows, 1))))
    chunk = math.ceil(tiles / want) * block
    if max_tiles is not None:
        chunk = min(chunk, max(1, max_tiles) * block)
    chunks = math.ceil(vocab_size / chunk)
    if chunks * block < width:
        chunk, chunks = block, tiles
    return chunk, chunks


def top_values(module, logits, row_ids, ks, width: int, *, block: int = 2048, programs: int = 2112,
               num_warps: int = 4, capacity: int = CAPACITY):
    """The ``width`` largest values of rows ``row_ids`` of ``logits``, descending, and how often
    each row's ``ks[p]``-th largest value occurs in it (see the module docstring). No host sync.

    ``module``: this module in the caller's Triton mode; ``logits`` ``[rows, V]``;
    ``row_ids`` ``[n]`` int64 tensor, or None for every row in order; ``ks`` ``[n]`` int64,
    ``1 ≤ k < V``: row ``p``'s values are exact in positions ``0 .. ks[p]`` (its ``ks[p] + 1``
    largest); ``width`` ``> max(ks)``; ``capacity``: slots a row at least. Returns ``(values
    [n, width]`` in the compute dtype (float64 for float64 logits, else float32), ``ties [n]``
    int64: the entries of row ``p`` equal to ``values[p, ks[p] - 1]``).
    """
    import torch
    rows, V = logits.shape
    n = rows if row_ids is None else int(row_ids.shape[0])
    fp64 = logits.dtype == torch.float64
    compute = torch.float64 if fp64 else torch.float32
    dev = logits.device
    most_k = max(width - 1, 1)
    chunk, chunks = _groups(V, n, width, block, programs, max_tiles=capacity // most_k)
    tiles = chunk // block
    cap = max(capacity, most_k * tiles, width)  # ≥ the entries above any row's floor (module docstring)
    G = chunks * block
    ids = logits if row_ids is None else row_ids  # unread with ALL_ROWS
    gmax = torch.empty(n, G, dtype=compute, device=dev)
    flags = dict(TILES=tiles, BLOCK=block, ALL_ROWS=row_ids is None, FP64=fp64, num_warps=num_warps)
    module.group_max_kernel[(n, chunks)](logits, ids, gmax, V, chunk, G, **flags)
    floor = torch.topk(gmax, width, dim=1).values.gather(1, ks.unsqueeze(1)).squeeze(1)  # the (k+1)-th group max
    counts = torch.zeros(2, n, dtype=torch.int32, device=dev)  # entries above the floor, entries at it
    slots = torch.full((n, cap), float("-inf"), dtype=compute, device=dev)
    module.compact_kernel[(n, chunks)](logits, ids, floor, counts[0], counts[1], slots, V, chunk, cap, **flags)
    above = torch.topk(slots, width, dim=1).values
    at_floor = torch.arange(width, device=dev).unsqueeze(0) >= counts[0].unsqueeze(1)
    values = torch.where(at_floor, floor.unsqueeze(1), above)
    kth = values.gather(1, (ks - 1).unsqueeze(1))
    ties = torch.where(kth.squeeze(1) == floor, counts[1].to(torch.int64), (slots == kth).sum(dim=1))
    return values, ties


__all__ = ["CAPACITY", "group_max_kernel", "compact_kernel", "top_values"]
