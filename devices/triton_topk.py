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
from typing import NamedTuple

import triton
import triton.language as tl

CAPACITY = 2048  # slots a row at least: 40× the ~51 entries above the floor at k = 50 on random logits
LANES = 2048  # one read: lanes a row, four entries each (8192 candidates, a select program's registers)
SWEEP_WIDTH = 257  # one read up to top-k 256: a row of random logits flags ~C(257, 4)/2048³ ≈ 2 %
MIN_BLOCK = 128  # one read: the narrowest tile a program loads


class RowsSampler(NamedTuple):
    """SPEC §12 as the one-read candidates read the rows: the fused step's inputs
    (``devices.triton_device.rows_sampler`` builds it), so the candidates are those of the
    processed rows, which are never written.

    ``live`` ``[rows, W]`` int32 bits (1: the dense entry is read; bans and the records' entries
    cleared), ``bias`` ``[batch, V]`` in the compute dtype or None, ``row_request`` ``[rows]``
    int32 (the request of each row: its bias row), ``edit_start`` ``[rows + 1]`` int64 and
    ``edit_z`` ``[E]`` (the records' processed values, ``-inf`` where banned)."""

    live: object
    bias: object
    row_request: object
    edit_start: object
    edit_z: object

    def dense_args(self) -> dict:
        """The dense part's arguments (``_sampled``), as both kernels take them."""
        return dict(live_ptr=self.live, bias_ptr=self.live if self.bias is None else self.bias,
                    req_ptr=self.row_request, W=self.live.shape[1], HAS_BIAS=self.bias is not None)

    def sweep_args(self) -> dict:
        """``lane_top_kernel``'s §12 arguments."""
        return dict(self.dense_args(), SAMPLER=True)

    def edit_args(self) -> dict:
        """``select_kernel``'s §12 arguments: the records."""
        return dict(EDITS=True, edit_start_ptr=self.edit_start, edit_z_ptr=self.edit_z)

    def row_args(self) -> dict:
        """``row_select_kernel``'s §12 arguments: the dense part's and the records."""
        return dict(self.dense_args(), **self.edit_args())


@triton.jit
def _row_of(row_ids_ptr, p, ALL_ROWS: tl.constexpr):
    """The logits row program ``p`` reads: ``p`` itself with ``ALL_ROWS``, else ``row_ids[p]`` (int64)."""
    if ALL_ROWS:
        return p.to(tl.int64)
    return tl.load(row_ids_ptr + p).to(tl.int64)


@triton.jit
def _sampled(z, row, cols, inside, live_ptr, bias_ptr, req_ptr, V, W, HAS_BIAS: tl.constexpr):
    """SPEC §12's dense part on a tile of row ``row`` (ids ``cols``, ``z`` in the compute dtype),
    as the fused step reads it (``devices/triton_sampler.py``): ``z + bias`` of the row's request
    (``req_ptr`` ``[rows]`` int32, ``bias_ptr`` ``[batch, V]``, ``HAS_BIAS``) where the live bit is
    set, ``-inf`` elsewhere (``live_ptr`` ``[rows, W]`` int32: bans, and the records' entries,
    which come from ``edit_z``)."""
    if HAS_BIAS:
        z = z + tl.load(bias_ptr + tl.load(req_ptr + row).to(tl.int64) * V + cols, mask=inside, other=0.0)
    words = tl.load(live_ptr + row * W + cols // 32, mask=inside, other=0)
    return tl.where(((words >> (cols % 32)) & 1) != 0, z, float("-inf"))


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


@triton.jit(
    do_not_specialize_on_alignment=['floor_ptr', 'count_ptr', 'ties_ptr'],
)
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


@triton.jit
def lane_top_kernel(logits_ptr, row_ids_ptr, top_ptr, V, CHUNK, G, TILES: tl.constexpr, BLOCK: tl.constexpr,
                    ALL_ROWS: tl.constexpr, FP64: tl.constexpr, live_ptr=None, bias_ptr=None, req_ptr=None, W=1,
                    SAMPLER: tl.constexpr = False, HAS_BIAS: tl.constexpr = False):
    """Program ``(p, chunk)``: lane ``l``'s four largest entries over the chunk's tiles of row
    ``row_ids[p]`` → ``top_ptr[p, m·G + chunk·BLOCK + l]``, ``m = 0 .. 3`` descending (``-inf`` where
    the lane holds fewer). One read of the row; each entry costs seven min/max in registers.

    ``logits_ptr`` ``[rows, V]``; ``row_ids_ptr`` ``[n]`` int64 (unread with ``ALL_ROWS``);
    ``top_ptr`` ``[n, 4·G]`` in the compute dtype, ``G = chunks · BLOCK``. ``SAMPLER``: the row
    as SPEC §12's dense part leaves it (``_sampled``); its records' entries are ``select_kernel``'s."""
    p = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    row = _row_of(row_ids_ptr, p, ALL_ROWS)
    lo = chunk * CHUNK
    hi = tl.minimum(lo + CHUNK, V)
    lanes = tl.arange(0, BLOCK)
    t0 = tl.full([BLOCK], float("-inf"), dtype)
    t1 = t0
    t2 = t0
    t3 = t0
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + lanes
        v = tl.load(logits_ptr + row * V + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        if SAMPLER:
            v = _sampled(v, row, cols, cols < hi, live_ptr, bias_ptr, req_ptr, V, W, HAS_BIAS)
        c0 = tl.minimum(t0, v)
        t0 = tl.maximum(t0, v)
        c1 = tl.minimum(t1, c0)
        t1 = tl.maximum(t1, c0)
        c2 = tl.minimum(t2, c1)
        t2 = tl.maximum(t2, c1)
        t3 = tl.maximum(t3, c2)
    out = top_ptr + p.to(tl.int64) * 4 * G + chunk * BLOCK + lanes
    tl.store(out, t0)
    tl.store(out + G, t1)
    tl.store(out + 2 * G, t2)
    tl.store(out + 3 * G, t3)


@triton.jit
def _order_key(x, FP64: tl.constexpr):
    """Unsigned keys ordered as the values ``x`` (no NaN; ``-0.0`` and ``0.0`` one key)."""
    x = tl.where(x == 0, 0.0, x)
    if FP64:
        b = x.to(tl.uint64, bitcast=True)
        top = tl.full(b.shape, 1, tl.uint64) << 63
    else:
        b = x.to(tl.uint32, bitcast=True)
        top = tl.full(b.shape, 1, tl.uint32) << 31
    return tl.where((b & top) != 0, b ^ (top | (top - 1)), b | top)  # negatives: every bit flipped


@triton.jit
def _kth_key(key, rank, live, FP64: tl.constexpr):
    """The ``rank``-th largest of ``key`` where ``live`` (``1 ≤ rank ≤`` their count), bit by bit
    from the top: a bit is set where the keys at or above the trial still number ``rank``."""
    ans = key.max(axis=0) * 0
    for bit in range(0, 64 if FP64 else 32):
        trial = ans | (ans * 0 + 1) << ((63 if FP64 else 31) - bit)
        ans = tl.where(tl.sum((live & (key >= trial)).to(tl.int32), axis=0) >= rank, trial, ans)
    return ans


@triton.jit
def _gather_at_least(x, key, floor_key, count_ptr, buf_row, BUF: tl.constexpr, inside=True):
    """The entries of ``x`` (where ``inside``) whose key is ``≥ floor_key`` appended to ``buf_row``
    (``[BUF]``; past it counted only), a slot each from the row's count ``count_ptr`` (an atomic: a
    handful a row)."""
    keep = inside & (key >= floor_key)
    at = tl.atomic_add(count_ptr + tl.zeros(key.shape, tl.int32), tl.full(key.shape, 1, tl.int32), mask=keep)
    tl.store(buf_row + at, x, mask=keep & (at < BUF))


@triton.jit(
    do_not_specialize=['WIDTH'],
    do_not_specialize_on_alignment=['flag_ptr', 'count_ptr'],
)
def select_kernel(top_ptr, ks_ptr, flag_ptr, vals_ptr, ties_ptr, buf_ptr, count_ptr, WIDTH, G: tl.constexpr,
                  BUF: tl.constexpr, FP64: tl.constexpr, row_ids_ptr=None, edit_start_ptr=None, edit_z_ptr=None,
                  ALL_ROWS: tl.constexpr = True, EDITS: tl.constexpr = False, EBLOCK: tl.constexpr = 128):
    """Program ``p``: from ``lane_top_kernel``'s candidates ``top_ptr[p]`` (``[4, G]``: each lane's
    four largest), the row's ``WIDTH`` largest values descending → ``vals_ptr[p]`` (``[n, WIDTH]``,
    exact in positions ``0 .. k``, ``k = ks_ptr[p]``), the count of its ``k``-th largest →
    ``ties_ptr[p]`` (int64), and ``flag_ptr[p]`` (int32) 1 where they may be wrong.

    ``F``, the ``(k+1)``-th largest lane maximum, is found bit by bit on ``_order_key`` over the
    ``G`` maxima alone (a count over the candidates a bit cost four times as much); the candidates
    ``≥ F`` — at least ``k + 1``, on random logits a few more — go to the row's scratch
    ``buf_ptr[p]`` (``[n, BUF]``; ``count_ptr[p]`` int32 counts them), which is sorted. Its top
    ``k + 1`` are the candidates' (a candidate above them is ``≥ F``), and ``L``, the ``(k+1)``-th,
    is the row's ``(k+1)``-th largest unless some lane's fourth largest is ``≥ L`` (an entry a lane
    dropped is at most its fourth) or the scratch overflowed: then the row is flagged and
    ``row_select_kernel`` redoes it on the whole row. (Redone here, in the same program, the whole-row
    code's registers cost every row: H100, 1280 rows, this kernel 0.083 ms against 0.057.)

    ``EDITS`` (SPEC §12, with ``lane_top_kernel``'s ``SAMPLER``): the row's records are candidates
    too — ``edit_z_ptr`` ``[E]`` (their processed values, ``-inf`` where banned), row ``r``'s
    ``edit_start_ptr[r] .. edit_start_ptr[r + 1] − 1`` (``[rows + 1]`` int64), ``r = row_ids[p]``
    (``p`` with ``ALL_ROWS``); those ``≥ F`` join the scratch. ``F`` stays a floor of the row's
    ``(k+1)``-th largest (the lanes alone hold ``k + 1`` entries ``≥ F``), so nothing else changes."""
    p = tl.program_id(0).to(tl.int64)
    lanes = tl.arange(0, G)
    top = top_ptr + p * 4 * G
    k = tl.load(ks_ptr + p)
    count = count_ptr + p
    tl.store(count, 0)
    tl.debug_barrier()                                # the count is zero before any lane takes a slot
    x = tl.load(top + lanes)
    key = _order_key(x, FP64)
    floor_key = _kth_key(key, k + 1, key == key, FP64)
    buf_row = buf_ptr + p * BUF
    _gather_at_least(x, key, floor_key, count, buf_row, BUF)
    for plane in range(1, 4):
        x = tl.load(top + plane * G + lanes)
        _gather_at_least(x, _order_key(x, FP64), floor_key, count, buf_row, BUF)
    if EDITS:
        row = _row_of(row_ids_ptr, p, ALL_ROWS)
        e0 = tl.load(edit_start_ptr + row)
        end = tl.load(edit_start_ptr + row + 1)
        while e0 < end:  # a loaded bound: a while loop (the interpreter's range wants constants)
            e = e0 + tl.arange(0, EBLOCK)
            xe = tl.load(edit_z_ptr + e, mask=e < end, other=float("-inf")).to(top_ptr.dtype.element_ty)
            _gather_at_least(xe, _order_key(xe, FP64), floor_key, count, buf_row, BUF, e < end)
            e0 += EBLOCK
    tl.debug_barrier()                                # every slot is stored and counted
    taken = tl.atomic_add(count, 0)
    j = tl.arange(0, BUF)
    s = tl.sort(tl.load(buf_row + j, mask=j < taken, other=float("-inf")), descending=True)
    s = tl.where(s == 0, 0.0, s)                      # -0.0 and 0.0: one value
    tl.store(vals_ptr + p * WIDTH + j, s, mask=j < WIDTH)
    floor = tl.sum(tl.where(j == k, s, 0.0), axis=0)
    kth = tl.sum(tl.where(j == k - 1, s, 0.0), axis=0)
    tl.store(ties_ptr + p, tl.sum(((j < taken) & (s == kth)).to(tl.int64), axis=0))
    dropped = tl.sum((tl.load(top + 3 * G + lanes) >= floor).to(tl.int32), axis=0) > 0
    tl.store(flag_ptr + p, (dropped | (taken > BUF)).to(tl.int32))


@triton.jit
def _sorted_out(vals_row, count_gt, floor, k, WIDTH, WP2: tl.constexpr, FP64: tl.constexpr):
    """``vals_row[0 .. count_gt)`` (written by every lane before, in any order) sorted descending,
    ``floor`` in ``[count_gt, WIDTH)``; returns the value at position ``k - 1``."""
    tl.debug_barrier()                                # every lane's compacted store is visible
    j = tl.arange(0, WP2)
    s = tl.load(vals_row + j, mask=j < count_gt, other=float("-inf")).to(tl.float64 if FP64 else tl.float32)
    s = tl.sort(s, descending=True)
    s = tl.where(j < count_gt, s, floor)
    tl.debug_barrier()                                # every lane has read before any overwrites
    tl.store(vals_row + j, s, mask=j < WIDTH)
    return tl.sum(tl.where(j == k - 1, s, 0.0), axis=0)


@triton.jit
def _whole_tile(row_ptr, row, cols, V, live_ptr, bias_ptr, req_ptr, W, SAMPLER: tl.constexpr,
                HAS_BIAS: tl.constexpr, FP64: tl.constexpr):
    """Ids ``cols`` of row ``row`` (``row_ptr`` its first entry) in the compute dtype, ``-inf`` past
    ``V``; with ``SAMPLER`` as §12's dense part leaves them (``_sampled``)."""
    z = tl.load(row_ptr + cols, mask=cols < V, other=float("-inf")).to(tl.float64 if FP64 else tl.float32)
    if SAMPLER:
        z = _sampled(z, row, cols, cols < V, live_ptr, bias_ptr, req_ptr, V, W, HAS_BIAS)
    return z


@triton.jit
def _whole_row(logits_ptr, r, p, k, vals_ptr, ties_ptr, V, WIDTH, TILES: tl.constexpr, BLOCK: tl.constexpr,
               WP2: tl.constexpr, FP64: tl.constexpr, live_ptr, bias_ptr, req_ptr, W, edit_start_ptr, edit_z_ptr,
               SAMPLER: tl.constexpr, HAS_BIAS: tl.constexpr, EBLOCK: tl.constexpr):
    """Row ``r`` of ``logits_ptr`` ``[rows, V]`` (``k`` int32) decided on the whole row, into
    ``vals_ptr[p]`` and ``ties_ptr[p]``: a count over the row a bit (``_kth_key``'s steps, each summed
    over the row's tiles), then the entries above the row's ``(k+1)``-th largest compacted and sorted,
    and a count of the ``k``-th largest. Slow (a read of the row a bit, by one program) and rare.
    ``SAMPLER``: the row as ``lane_top_kernel`` and ``select_kernel`` read it — the dense part
    (``_sampled``) and the row's records (``edit_z_ptr``). The dense part reads a record's id as
    ``-inf`` (its live bit is cleared), so in the counts a record stands for its value in place of
    that ``-inf``."""
    dtype = tl.float64 if FP64 else tl.float32
    row = logits_ptr + r * V
    lanes = tl.arange(0, BLOCK)
    elanes = tl.arange(0, EBLOCK)
    if SAMPLER:
        first = tl.load(edit_start_ptr + r)
        end = tl.load(edit_start_ptr + r + 1)
    ans = _order_key(tl.zeros([BLOCK], dtype), FP64).max(axis=0) * 0
    for bit in range(0, 64 if FP64 else 32):
        trial = ans | (ans * 0 + 1) << ((63 if FP64 else 31) - bit)
        count = 0
        for tile in range(0, TILES):
            cols = tile * BLOCK + lanes
            z = _whole_tile(row, r, cols, V, live_ptr, bias_ptr, req_ptr, W, SAMPLER, HAS_BIAS, FP64)
            count += tl.sum(((cols < V) & (_order_key(z, FP64) >= trial)).to(tl.int32), axis=0)
        if SAMPLER:  # the row's records
            e0 = first
            while e0 < end:
                e = e0 + elanes
                z = tl.load(edit_z_ptr + e, mask=e < end, other=float("-inf")).to(dtype)
                count += tl.sum(((e < end) & (_order_key(z, FP64) >= trial)).to(tl.int32), axis=0) - \
                    tl.sum(((e < end) & (_order_key(tl.full([EBLOCK], float("-inf"), dtype), FP64) >= trial))
                           .to(tl.int32), axis=0)
                e0 += EBLOCK
        ans = tl.where(count >= k + 1, trial, ans)
    floor = tl.full([], float("-inf"), dtype)
    for tile in range(0, TILES):
        cols = tile * BLOCK + lanes
        z = _whole_tile(row, r, cols, V, live_ptr, bias_ptr, req_ptr, W, SAMPLER, HAS_BIAS, FP64)
        floor = tl.maximum(floor, tl.max(tl.where((cols < V) & (_order_key(z, FP64) <= ans), z, float("-inf")),
                                         axis=0))
    if SAMPLER:  # the row's records
        e0 = first
        while e0 < end:
            e = e0 + elanes
            z = tl.load(edit_z_ptr + e, mask=e < end, other=float("-inf")).to(dtype)
            floor = tl.maximum(floor, tl.max(tl.where((e < end) & (_order_key(z, FP64) <= ans), z, float("-inf")),
                                             axis=0))
            e0 += EBLOCK
    vals_row = vals_ptr + p * WIDTH
    count_gt = 0
    for tile in range(0, TILES):
        cols = tile * BLOCK + lanes
        z = _whole_tile(row, r, cols, V, live_ptr, bias_ptr, req_ptr, W, SAMPLER, HAS_BIAS, FP64)
        gt = z > floor
        at = count_gt + tl.cumsum(gt.to(tl.int32), axis=0) - 1
        tl.store(vals_row + at, z, mask=gt & (at < WIDTH))
        count_gt += tl.sum(gt.to(tl.int32), axis=0)
    if SAMPLER:  # the row's records
        e0 = first
        while e0 < end:
            e = e0 + elanes
            z = tl.load(edit_z_ptr + e, mask=e < end, other=float("-inf")).to(dtype)
            gt = (e < end) & (z > floor)
            at = count_gt + tl.cumsum(gt.to(tl.int32), axis=0) - 1
            tl.store(vals_row + at, z, mask=gt & (at < WIDTH))
            count_gt += tl.sum(gt.to(tl.int32), axis=0)
            e0 += EBLOCK
    kth = _sorted_out(vals_row, count_gt, floor, k, WIDTH, WP2, FP64)
    ties = tl.zeros([], tl.int64)
    for tile in range(0, TILES):
        cols = tile * BLOCK + lanes
        z = _whole_tile(row, r, cols, V, live_ptr, bias_ptr, req_ptr, W, SAMPLER, HAS_BIAS, FP64)
        ties += tl.sum(((cols < V) & (z == kth)).to(tl.int64), axis=0)
    if SAMPLER:  # the row's records
        e0 = first
        while e0 < end:
            e = e0 + elanes
            z = tl.load(edit_z_ptr + e, mask=e < end, other=float("-inf")).to(dtype)
            ties += tl.sum(((e < end) & (z == kth)).to(tl.int64), axis=0) - \
                tl.where(kth == float("-inf"), tl.sum((e < end).to(tl.int64), axis=0), 0)
            e0 += EBLOCK
    tl.store(ties_ptr + p, ties)


@triton.jit(
    do_not_specialize=['WIDTH'],
    do_not_specialize_on_alignment=['flag_ptr'],
)
def row_select_kernel(logits_ptr, row_ids_ptr, ks_ptr, flag_ptr, vals_ptr, ties_ptr, V, WIDTH,
                      TILES: tl.constexpr, BLOCK: tl.constexpr, WP2: tl.constexpr, ALL_ROWS: tl.constexpr,
                      FP64: tl.constexpr, live_ptr=None, bias_ptr=None, req_ptr=None, W=1, edit_start_ptr=None,
                      edit_z_ptr=None, EDITS: tl.constexpr = False, HAS_BIAS: tl.constexpr = False,
                      EBLOCK: tl.constexpr = 128):
    """``select_kernel``'s results for the rows it flagged (``flag_ptr[p]`` 1; the rest exit at
    once), from the whole row ``row_ids[p]`` of ``logits_ptr`` ``[rows, V]`` (``_whole_row``; ``EDITS``:
    the §12 rows, as ``select_kernel`` took them). Rare: a lane holding four of the row's ``k + 1``
    largest, or a row with fewer than ``k + 1`` finite entries."""
    p = tl.program_id(0).to(tl.int64)
    if tl.load(flag_ptr + p) != 0:
        _whole_row(logits_ptr, _row_of(row_ids_ptr, p, ALL_ROWS), p, tl.load(ks_ptr + p).to(tl.int32), vals_ptr,
                   ties_ptr, V, WIDTH, TILES, BLOCK, WP2, FP64, live_ptr, bias_ptr, req_ptr, W, edit_start_ptr,
                   edit_z_ptr, EDITS, HAS_BIAS, EBLOCK)


@triton.jit
def _weighted_softmax(z, w):
    """``filter_cut._weighted_softmax`` on one row: ``exp(z − max) / Σ exp(z − max)·w`` (float64)."""
    e = tl.exp(z - tl.max(z, axis=0))
    return e / tl.sum(e * w, axis=0)


@triton.jit
def _renormalise(probs, w, kept, keep_all):
    """``filter_cut._weighted_renormalise`` on one row (``keep_all`` a scalar)."""
    kept_probs = tl.where(kept, probs, 0.0)
    return tl.where(keep_all, probs, kept_probs / tl.sum(kept_probs * w, axis=0))


@triton.jit(
    do_not_specialize=['n', 'WIDTH'],
)
def decide_kernel(vals_ptr, ties_ptr, ks_ptr, temp_ptr, top_p_ptr, min_p_ptr, cut_ptr, stats_ptr, n, WIDTH,
                  WP2: tl.constexpr, MIN_P: tl.constexpr, VLLM: tl.constexpr):
    """Program ``p``: ``filter_cut.torch_decide`` for row ``p`` in float64 — its top-k set as
    weighted candidates (the first ``k`` values, and the copies of the ``k``-th value past them as
    one candidate of that weight), min_p first in the ``VLLM`` order, top-p on the weighted prefix
    sums, min_p after in the canonical order; then the smallest kept value → ``cut_ptr[p]`` and
    ``kept_stats`` → ``stats_ptr[0, p]``, ``stats_ptr[1, p]``.

    ``vals_ptr`` ``[n, WIDTH]`` (``top_values``' values, compute dtype); ``ties_ptr``, ``ks_ptr``
    ``[n]`` int64; ``temp_ptr``, ``top_p_ptr``, ``min_p_ptr`` ``[n]`` float64 (``min_p`` read with
    ``MIN_P``); ``cut_ptr`` ``[n]``, ``stats_ptr`` ``[2, n]`` in the compute dtype."""
    p = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, WP2)
    inside = j < WIDTH
    v = tl.load(vals_ptr + p * WIDTH + j, mask=inside, other=float("-inf")).to(tl.float64)
    k = tl.load(ks_ptr + p)
    first_k = j < k
    kth = tl.sum(tl.where(j == k - 1, v, 0.0), axis=0)
    past = tl.load(ties_ptr + p) - tl.sum(((v == kth) & first_k).to(tl.int64), axis=0)
    w = tl.where(first_k, 1.0, tl.where(j == k, past.to(tl.float64), 0.0))
    real = w > 0
    tied = tl.where(real, v, float("-inf"))
    T = tl.load(temp_ptr + p)
    z = tied / T
    if MIN_P:
        min_p = tl.load(min_p_ptr + p)
        if VLLM:
            probs = _weighted_softmax(z, w)
            z = tl.where(probs >= min_p * tl.max(probs, axis=0), z, float("-inf"))
    probs = _weighted_softmax(z, w)
    top_p = tl.load(top_p_ptr + p)
    short = tl.sum((inside & (tl.cumsum(probs * w, axis=0) < top_p)).to(tl.int32), axis=0)
    tau_p = tl.sum(tl.where(j == tl.minimum(short, WIDTH - 1), probs, 0.0), axis=0)
    kept = real & (((probs * 0 + top_p) >= 1) | (probs >= tau_p))  # a tensor each side (the interpreter)
    if MIN_P:
        probs = _renormalise(probs, w, kept, top_p >= 1)
        if not VLLM:
            probs = _renormalise(probs, w, probs >= min_p * tl.max(probs, axis=0), min_p <= 0)
        kept = real & (probs > 0)
    tau = tl.min(tl.where(kept, tied, float("inf")), axis=0)
    top = tl.max(tied, axis=0)
    live = real & (tied >= tau) & (tied > float("-inf"))
    e = tl.exp((tl.where(live, tied, top) - top) / T)
    dtype = cut_ptr.dtype.element_ty
    tl.store(cut_ptr + p, tau.to(dtype))
    tl.store(stats_ptr + p, top.to(dtype))
    tl.store(stats_ptr + n + p, tl.sum(tl.where(live, e, 0.0) * w, axis=0).to(dtype))


def decide(module, values, ties, ks, rows, order: str = "canonical", *, num_warps: int = 4):
    """``filter_cut.Decide`` in one launch of ``decide_kernel`` (``module``: this module in the
    caller's Triton mode): ``(tau [n], stats [2, n])`` in ``values``' dtype. ``values`` ``[n, width]``,
    ``ties``, ``ks`` ``[n]`` int64, ``rows`` ``SamplingRows`` ``[n]`` (float64 parameters)."""
    import torch
    n, width = values.shape
    cut = torch.empty(n, dtype=values.dtype, device=values.device)
    stats = torch.empty(2, n, dtype=values.dtype, device=values.device)
    min_p = rows.top_p if rows.min_p is None else rows.min_p  # unread without MIN_P
    module.decide_kernel[(n,)](values, ties, ks, rows.temperature, rows.top_p, min_p, cut, stats, n, width,
                               WP2=triton.next_power_of_2(width), MIN_P=rows.min_p is not None,
                               VLLM=order == "vllm", num_warps=num_warps)
    return cut, stats


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


def two_pass_values(module, logits, row_ids, ks, width: int, *, block: int = 2048, programs: int = 2112,
               num_warps: int = 4, capacity: int = CAPACITY):
    """``top_values`` in two reads of each row (``group_max_kernel``, ``compact_kernel``, the module
    docstring): for any ``width``. No host sync.

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


def sweep_values(module, logits, row_ids, ks, width: int, *, lanes: int = LANES, programs: int = 2112,
                 num_warps: int = 4, select_warps: int = 4, row_block: int = 1024, sampler: RowsSampler | None = None):
    """``top_values`` in one read of each row (``lane_top_kernel``, ``select_kernel``; flagged rows
    again by ``row_select_kernel``). ``lanes``: ``G``, lanes a row (power of two; fewer for a short
    vocabulary), each keeping its four largest: ``width ≤ 4 · G``. ``sampler``: the rows as SPEC §12
    leaves them (``RowsSampler``), read from the raw ``logits``."""
    import torch
    rows, V = logits.shape
    n = rows if row_ids is None else int(row_ids.shape[0])
    fp64 = logits.dtype == torch.float64
    compute = torch.float64 if fp64 else torch.float32
    dev = logits.device
    G = min(lanes, triton.next_power_of_2(V))
    chunks = min(triton.next_power_of_2(math.ceil(programs / max(n, 1))), max(G // MIN_BLOCK, 1))
    block = G // chunks
    chunk = math.ceil(V / (chunks * block)) * block
    if width > 4 * G:
        raise ValueError(f"sweep_values: width {width} exceeds 4 · lanes = {4 * G}")
    ids = logits if row_ids is None else row_ids  # unread with ALL_ROWS
    top = torch.empty(n, 4 * G, dtype=compute, device=dev)
    module.lane_top_kernel[(n, chunks)](logits, ids, top, V, chunk, G, TILES=chunk // block, BLOCK=block,
                                        ALL_ROWS=row_ids is None, FP64=fp64, num_warps=num_warps,
                                        **({} if sampler is None else sampler.sweep_args()))
    values = torch.empty(n, width, dtype=compute, device=dev)
    ties = torch.empty(n, dtype=torch.int64, device=dev)
    flags = torch.empty(2, n, dtype=torch.int32, device=dev)  # flagged, scratch count
    buf = triton.next_power_of_2(2 * width)
    scratch = torch.empty(n, buf, dtype=compute, device=dev)
    module.select_kernel[(n,)](top, ks, flags[0], values, ties, scratch, flags[1], width, G=G, BUF=buf, FP64=fp64,
                               num_warps=select_warps, row_ids_ptr=ids, ALL_ROWS=row_ids is None,
                               **({} if sampler is None else sampler.edit_args()))
    row_block = min(row_block, triton.next_power_of_2(V))
    module.row_select_kernel[(n,)](logits, ids, ks, flags[0], values, ties, V, width, TILES=math.ceil(V / row_block),
                                   BLOCK=row_block, WP2=triton.next_power_of_2(width), ALL_ROWS=row_ids is None,
                                   FP64=fp64, **({} if sampler is None else sampler.row_args()))
    return values, ties


def top_values(module, logits, row_ids, ks, width: int, *, block: int = 2048, programs: int = 2112,
               num_warps: int = 4, capacity: int = CAPACITY, lanes: int = LANES, sampler: RowsSampler | None = None):
    """The ``width`` largest values of rows ``row_ids`` of ``logits``, descending, and how often
    each row's ``ks[p]``-th largest value occurs in it. No host sync. Up to ``SWEEP_WIDTH`` in one
    read of each row (``sweep_values``), else in two (``two_pass_values``).

    ``module``: this module in the caller's Triton mode; ``logits`` ``[rows, V]``;
    ``row_ids`` ``[n]`` int64 tensor, or None for every row in order; ``ks`` ``[n]`` int64,
    ``1 ≤ k < V``: row ``p``'s values are exact in positions ``0 .. ks[p]`` (its ``ks[p] + 1``
    largest); ``width`` ``> max(ks)``. Returns ``(values [n, width]`` in the compute dtype (float64
    for float64 logits, else float32), ``ties [n]`` int64: the entries of row ``p`` equal to
    ``values[p, ks[p] - 1]``). ``sampler``: of the rows as SPEC §12 leaves them (``RowsSampler``;
    one read only: ``width ≤ SWEEP_WIDTH``).
    """
    if width <= min(SWEEP_WIDTH, 4 * lanes):
        return sweep_values(module, logits, row_ids, ks, width, lanes=lanes, programs=programs, num_warps=num_warps,
                            sampler=sampler)
    if sampler is not None:
        raise ValueError(f"top_values: the §12 rows are read in one sweep only, up to width {SWEEP_WIDTH} "
                         f"(top-k {SWEEP_WIDTH - 1}); width {width} needs the processed rows")
    return two_pass_values(module, logits, row_ids, ks, width, block=block, programs=programs, num_warps=num_warps,
                           capacity=capacity)


__all__ = ["CAPACITY", "LANES", "SWEEP_WIDTH", "RowsSampler", "group_max_kernel", "compact_kernel", "lane_top_kernel",
           "select_kernel", "row_select_kernel", "decide_kernel", "two_pass_values", "sweep_values", "top_values", "decide"]
