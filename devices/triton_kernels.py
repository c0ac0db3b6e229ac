"""Triton kernels for one verification step (SPEC §3–§5): the plain step is two launches.

The plan reads each target row once, and only ONE draft row and ONE more
target row per request — the algorithmic floor of the step:

1. ``stats_kernel``, grid ``(batch, max_k + 1, chunks)``: for every target
   row of request ``i`` (program ``j`` ≤ K_i; the rest exit), per vocabulary
   chunk: a random row's online softmax statistics of ``z / T`` (max, sum of
   ``exp``), a greedy row's max and first argmax (no ``exp``). The request's
   temperature is read where it lies: no per-row copy is made on the host.
2. ``step_kernel``, grid ``(batch, chunks)``: every program of request ``i``
   combines the chunk statistics and walks the drafts with gathers only —
   acceptance needs ``t(x_j) = exp((z[x_j] − max)/T) / sum`` and ``d(x_j)``,
   never a whole row — so all of them know the one row the request emits
   from (its rejection row or bonus row). Program 0 writes the accepted
   drafts, the padding and the greedy token. Then each program runs the
   exponential race of §3 over its chunk of that row, fused with the
   residual ``max(t − d, 0)`` (or ``t`` with the draft masked, for point
   proposals) and with the noise: injected ``[batch, V]`` exponentials, or
   Philox words made in registers (§5.2), so no ``[rows, V]`` noise is ever
   materialised. With draft probabilities the race over ``t`` that §4 falls
   back to when the residual is empty runs in a second pass, only in a chunk
   whose own residual is empty (on the §12 path and through a cut, alongside:
   ``step_kernel``'s comment says why). The last program of the request to
   finish (an atomic count) reduces the chunk winners and writes the token.

With SPEC §12 fused into the step (``SAMPLER``), ``devices/triton_sampler.py``'s
statistics launches (``fused_stats``) take the place of ``stats_kernel``.

Philox words come four to a counter: a thread computes each counter once and
keeps its four words as four columns ``4q + c`` of the tile (four ``[QUADS]``
tensors), so no word is made twice and none moves between threads.

Offsets are 64-bit wherever ``row × V`` can pass 2**31 (vLLM bug #14,
docs/bugs.md). Compute is in float64 for float64 logits, else in float32
(float16 and bfloat16 logits are up-cast as they are loaded).

Keyed noise, bit for bit SPEC §5.2: key ``(seed lo32, seed hi32)``, counter
``(n // 4, position, purpose, column)``, word ``n % 4``. ``tl.philox`` splits a
uint64 seed exactly that way.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Compiled variants. Triton specialises a kernel on each pointer's 16-byte alignment and each integer's being 1 or
# a multiple of 16, and compiles once per combination (about a second on the host). The scratch views a step passes
# are slices of one allocation at offsets that follow the batch's shape, and the counts (output width, chunks) are
# small numbers: specialised on, every new shape was a compilation (3000 calls of changing shapes asked for over a
# thousand; tools/specialisations.py counts them). The kernels below name them in do_not_specialize and
# do_not_specialize_on_alignment; what they read through them is a few values a row.
# Globals read inside @triton.jit must be constexpr for the compiler.
ACCEPT = tl.constexpr(1)  # SPEC §5.2 purposes (devices never import reference)
RECOVER = tl.constexpr(2)
TWO_POW_M32 = tl.constexpr(2.3283064365386963e-10)  # 2**-32, exact
NO_ID = tl.constexpr(2147483647)
SLACK = tl.constexpr(1.0009765625)  # 1 + 2^-10: see below_bound
EDIT_SCAN = tl.constexpr(1024)  # race_edits: record ids counted a load (a row's records: one or two loads)


@triton.jit
def philox_words(seed, first, position, purpose, column, BLOCK: tl.constexpr):
    """Words ``first .. first + BLOCK - 1`` of stream S(seed, position, purpose, column).

    ``first`` is a multiple of 4; returns ``[BLOCK]`` uint32. One Philox call
    makes 4 words; ``join``/``reshape`` interleaves them in stream order.
    """
    q = (first // 4 + tl.arange(0, BLOCK // 4)).to(tl.uint32)
    zero = q * 0
    c0, c1, c2, c3 = tl.philox(seed, q, zero + position, zero + purpose, zero + column)
    return tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), (BLOCK,))


@triton.jit
def word_uniform(words):
    """``(x + 1/2)·2^-32`` in float64, exact (SPEC §5.2)."""
    return (words.to(tl.float64) + 0.5) * TWO_POW_M32


@triton.jit
def exponential_parts(words, FP64: tl.constexpr):
    """Exp(1) from uint32 words (SPEC §5.2) as a fraction ``(num, den)``, ``E = num / den``,
    so that ``E`` and ``1 / E`` each cost one division.

    ``E = -log(uniform)``; in float32 the upper half goes through
    ``-log1p(-y)``, ``y = (2^32 - x - 1/2)·2^-32`` (the exact complement), so it
    never rounds to 0: one log per word — ``log(u)`` for the lower half,
    ``log(a)``, ``a = 1 - y``, for the upper — and log1p by Goldberg's
    ``log1p(-y) = log(a)·y/(a - 1)``, exact when ``a`` rounds to 1.
    """
    if FP64:
        num = -tl.log(word_uniform(words))
        den = num * 0 + 1.0
    else:
        low = words < 0x80000000
        u = (words.to(tl.float32) + 0.5) * TWO_POW_M32
        y = ((words ^ 0xFFFFFFFF).to(tl.float32) + 0.5) * TWO_POW_M32  # 1 - u, from the exact complement
        a = 1.0 - y
        lg = tl.log(tl.where(low, u, a))
        exact = a == 1.0  # y below half an ulp of 1: log1p(-y) = -y
        num = tl.where(low, -lg, tl.where(exact, y, -lg * y))
        den = tl.where(low | exact, 1.0, 1.0 - a)
    return num, den


@triton.jit
def word_exponential(words, FP64: tl.constexpr):
    """Exp(1) from uint32 words: ``exponential_parts`` divided out."""
    num, den = exponential_parts(words, FP64)
    return num / den


@triton.jit
def keep_from(z, floor, FP64: tl.constexpr):
    """``z`` in the compute dtype where ``z ≥ floor``, ``-inf`` below: a row read through its
    top-k/top-p/min_p cut (``devices.filter_cut.cut_values``; ``floor = -inf`` keeps every entry)."""
    z = z.to(tl.float64 if FP64 else tl.float32)
    return tl.where(z >= floor, z, float("-inf"))


@triton.jit
def softmax_lanes(base, lo, hi, inv_t, floor, TILES: tl.constexpr, BLOCK: tl.constexpr, CUT: tl.constexpr,
                  FP64: tl.constexpr):
    """``(max, Σ exp((z − max)/T))`` of ``z = base[lo:hi]`` (read through the cut ``floor`` with ``CUT``): a
    lane-wise online softmax, one exp per element (the form for tiles too small to split)."""
    dtype = tl.float64 if FP64 else tl.float32
    lanes = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), dtype)
    s = tl.zeros([BLOCK], dtype)
    # A fixed trip count (TILES = CHUNK // BLOCK) rather than range(lo, hi): only the last
    # chunk runs masked tiles, and Triton's interpreter cannot take program-id bounds.
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + lanes
        z = tl.load(base + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        if CUT:
            z = keep_from(z, floor, FP64)
        up = z > m
        d = tl.exp(-tl.abs(z - m) * inv_t)
        s_new = tl.where(up, s * d + 1.0, s + d)
        s = tl.where(z == float("-inf"), s, s_new)  # -inf: contributes nothing (and avoids inf - inf)
        m = tl.maximum(m, z)
    row_max = tl.max(m, axis=0)
    scale = tl.where(m == float("-inf"), 0.0, tl.exp((m - row_max) * inv_t))
    return row_max, tl.sum(s * scale, axis=0)


@triton.jit
def softmax_tiles(base, lo, hi, T, floor, TILES: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr,
                  CUT: tl.constexpr, FP64: tl.constexpr, ROWS: tl.constexpr = False):
    """``softmax_lanes`` over tiles of ``BLOCK / SUB`` lanes of ``SUB`` entries: each lane takes the max of its
    ``SUB`` entries (held by one thread) first, then one exp per element against it and one per lane to rescale
    its sum — fewer instructions an element than the lane-wise update's compare, exp, two selects and fma.

    A tile is ``[SUB, BLOCK/SUB]`` (a lane's entries ``BLOCK/SUB`` apart), or with ``ROWS`` ``[BLOCK/SUB, SUB]``
    (a lane's entries contiguous: 16-bit logits, ``SUB`` 8, one 16-byte load a lane and its max and sum made in
    its own registers; split the other way, 16-bit tiles compiled to a loop many times slower)."""
    dtype = tl.float64 if FP64 else tl.float32
    LANES: tl.constexpr = BLOCK // SUB
    AXIS: tl.constexpr = 1 if ROWS else 0  # the axis of a lane's SUB entries
    if ROWS:
        at = tl.arange(0, LANES)[:, None] * SUB + tl.arange(0, SUB)[None, :]
    else:
        at = tl.arange(0, SUB)[:, None] * LANES + tl.arange(0, LANES)[None, :]
    if FP64:
        scale = 1.0 / T
    else:
        scale = 1.4426950408889634 / T  # log2(e)/T: exp(x/T) = exp2(x·log2(e)/T)
    m = tl.full([LANES], float("-inf"), dtype)
    s = tl.zeros([LANES], dtype)
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + at
        z = tl.load(base + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        if CUT:
            z = keep_from(z, floor, FP64)
        m_new = tl.maximum(m, tl.max(z, axis=AXIS))
        ref = tl.where(m_new == float("-inf"), 0.0, m_new) * scale  # a lane all -inf so far: exp(-inf) = 0
        if FP64:
            s = s * tl.exp(m * scale - ref) + tl.sum(tl.exp(z * scale - tl.expand_dims(ref, AXIS)), axis=AXIS)
        else:
            s = s * tl.exp2(m * scale - ref) + tl.sum(tl.exp2(z * scale - tl.expand_dims(ref, AXIS)), axis=AXIS)
        m = m_new
    row_max = tl.max(m, axis=0)
    if FP64:
        back = tl.exp((m - row_max) * scale)
    else:
        back = tl.exp2((m - row_max) * scale)
    return row_max, tl.sum(tl.where(m == float("-inf"), 0.0, s * back), axis=0)


@triton.jit
def argmax_lanes(base, lo, hi, floor, TILES: tl.constexpr, BLOCK: tl.constexpr, CUT: tl.constexpr,
                 FP64: tl.constexpr):
    """``(max, its first id)`` of ``z = base[lo:hi]`` (through the cut with ``CUT``): a greedy row's, with no
    exponential (its sum is never read)."""
    dtype = tl.float64 if FP64 else tl.float32
    lanes = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), dtype)
    arg = tl.zeros([BLOCK], tl.int32)
    for tile in range(0, TILES):
        cols = lo + tile * BLOCK + lanes
        z = tl.load(base + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        if CUT:
            z = keep_from(z, floor, FP64)
        arg = tl.where(z > m, cols, arg)
        m = tl.maximum(m, z)
    row_max = tl.max(m, axis=0)
    return row_max, tl.min(tl.where(m == row_max, arg, NO_ID), axis=0)


@triton.jit
def argmax_rows(base, lo, hi, floor, TILES: tl.constexpr, BLOCK: tl.constexpr, SUB: tl.constexpr, CUT: tl.constexpr,
                FP64: tl.constexpr):
    """``argmax_lanes`` over ``softmax_tiles``' ``ROWS`` tiles: each lane's ``SUB`` contiguous entries give their max and
    its first id in registers, which replace the lane's only where strictly greater (its earliest id on ties)."""
    dtype = tl.float64 if FP64 else tl.float32
    LANES: tl.constexpr = BLOCK // SUB
    lanes = tl.arange(0, LANES)
    at = lanes[:, None] * SUB + tl.arange(0, SUB)[None, :]
    m = tl.full([LANES], float("-inf"), dtype)
    arg = tl.zeros([LANES], tl.int32)
    for tile in range(0, TILES):
        first = lo + tile * BLOCK
        cols = first + at
        z = tl.load(base + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        if CUT:
            z = keep_from(z, floor, FP64)
        top, top_at = tl.max(z, axis=1, return_indices=True, return_indices_tie_break_left=True)
        arg = tl.where(top > m, first + lanes * SUB + top_at, arg)
        m = tl.maximum(m, top)
    row_max = tl.max(m, axis=0)
    return row_max, tl.min(tl.where(m == row_max, arg, NO_ID), axis=0)


@triton.jit(
    do_not_specialize=['NCHUNK'],
    do_not_specialize_on_alignment=['counter_ptr', 'stat_max_ptr', 'stat_sum_ptr', 'stat_arg_ptr', 'cut_ptr'],
)
def stats_kernel(logits_ptr, cu_ptr, temp_ptr, counter_ptr, stat_max_ptr, stat_sum_ptr, stat_arg_ptr,
                 V, CHUNK, NCHUNK, TILES: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr,
                 cut_ptr=None, CUT: tl.constexpr = False, SUB: tl.constexpr = 1, ROWS: tl.constexpr = False,
                 PDL: tl.constexpr = False, PDL_EARLY: tl.constexpr = False):
    """Per (request i, its row j, vocab chunk): max of raw z, and for a random row sum exp((z - max)/T),
    for a greedy row (T = 0) the first argmax.

    ``logits_ptr``: ``[rows, V]`` (any float dtype; up-cast on load); ``cu_ptr``
    ``[batch + 1]``; ``temp_ptr`` ``[batch]``; outputs ``[rows, NCHUNK]``: a random row's argmax
    and a greedy row's sum are not read (``NO_ID`` and 1 are written). One exp per element of a
    random row (``SUB`` 1: ``softmax_lanes``; else ``softmax_tiles``, tiles of ``[SUB, BLOCK/SUB]``, or with
    ``ROWS`` of ``[BLOCK/SUB, SUB]``), none of a greedy row (``argmax_lanes``; with
    ``ROWS`` ``argmax_rows``). Also zeroes ``counter_ptr`` ``[batch]``,
    which ``step_kernel`` counts finished chunks in. ``CUT``: row ``r`` is read through its cut
    ``cut_ptr[r]`` (``[rows]``, compute dtype; ``keep_from``), top-k/top-p/min_p's kept set. ``PDL``
    (programmatic dependent launch, sm_90 and later): ``step_kernel``, launched with ``launch_pdl``, may start
    once every program of this grid has written its part (``PDL_EARLY``: has started), and makes its gathers
    while the grid finishes. Early suits a grid that runs in one wave: a later wave's programs would wait behind
    step programs holding their multiprocessors.
    """
    if PDL_EARLY:
        tl.extra.cuda.gdc_launch_dependents()
    i = tl.program_id(0)
    j = tl.program_id(1)
    chunk = tl.program_id(2)
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    if (j == 0) & (chunk == 0):
        tl.store(counter_ptr + i, 0)
    if j <= k:
        dtype = tl.float64 if FP64 else tl.float32
        row = start + i + j
        T = tl.load(temp_ptr + i).to(dtype)
        base = logits_ptr + row.to(tl.int64) * V  # 64-bit: row * V passes 2^31 at real sizes
        lo = chunk * CHUNK
        hi = lo + CHUNK
        if hi > V:
            hi = V
        out = row.to(tl.int64) * NCHUNK + chunk
        if CUT:
            floor = tl.load(cut_ptr + row).to(dtype)
        else:
            floor = float("-inf")
        if T > 0:  # the request's rows share T: the branch is the program's, not a lane's
            if SUB > 1:
                row_max, total = softmax_tiles(base, lo, hi, T, floor, TILES, BLOCK, SUB, CUT, FP64, ROWS)
            else:
                row_max, total = softmax_lanes(base, lo, hi, 1.0 / T, floor, TILES, BLOCK, CUT, FP64)
            tl.store(stat_sum_ptr + out, total)
            tl.store(stat_max_ptr + out, row_max)
            tl.store(stat_arg_ptr + out, NO_ID)
        else:
            if ROWS:
                top, first = argmax_rows(base, lo, hi, floor, TILES, BLOCK, SUB, CUT, FP64)
            else:
                top, first = argmax_lanes(base, lo, hi, floor, TILES, BLOCK, CUT, FP64)
            tl.store(stat_sum_ptr + out, 1.0)
            tl.store(stat_max_ptr + out, top)
            tl.store(stat_arg_ptr + out, first)
    if PDL and not PDL_EARLY:  # this program's part is written: the step kernel may launch (it waits for the
        tl.extra.cuda.gdc_launch_dependents()  # whole grid before it reads)


@triton.jit
def race_load(logits_row, draft_row, off, hi, draft_hi, QUADS: tl.constexpr, HAS_DRAFT: tl.constexpr):
    """The tile at ``off`` as loaded, split into its four columns ``c`` — ids ``off + 4q + c``, ``q < QUADS``:
    ``(z0, z1, z2, z3, d0, d1, d2, d3)`` in the inputs' dtypes (``d`` is 0 without a draft row; past ``hi``
    nothing is read). One ``[QUADS, 4]`` load (a thread's quad is contiguous: 16-byte loads), split in
    registers, so each thread's four columns line up with the four words of its Philox counter (a strided
    load per column issued four times the load instructions for the same bytes)."""
    cols = off + tl.arange(0, QUADS)[:, None] * 4 + tl.arange(0, 4)[None, :]
    z = tl.load(logits_row + cols, mask=cols < hi, other=float("-inf"))
    z02, z13 = tl.split(tl.reshape(z, (QUADS, 2, 2)))  # column c = 2a + b: split b, then a
    z0, z2 = tl.split(z02)
    z1, z3 = tl.split(z13)
    if HAS_DRAFT:
        d = tl.load(draft_row + cols, mask=cols < draft_hi, other=0.0)
        d02, d13 = tl.split(tl.reshape(d, (QUADS, 2, 2)))
        d0, d2 = tl.split(d02)
        d1, d3 = tl.split(d13)
    else:
        d0 = 0.0
        d1 = 0.0
        d2 = 0.0
        d3 = 0.0
    return z0, z1, z2, z3, d0, d1, d2, d3


@triton.jit
def race_weights(z, d, off, c: tl.constexpr, excluded, row_max, t_scale, inv_sum,
                 QUADS: tl.constexpr, HAS_DRAFT: tl.constexpr, FP64: tl.constexpr):
    """Race weights of column ``c``: ``(cols, t, w)`` with ``w = max(t − d, 0)`` given a draft row,
    else ``t`` with ``excluded`` zeroed. For point proposals ``t`` is left unnormalised (one factor
    for the whole row). ``t_scale`` is ``1/T`` (float64) or ``log2(e)/T`` (float32, for ``exp2``).
    """
    dtype = tl.float64 if FP64 else tl.float32
    cols = off + tl.arange(0, QUADS) * 4 + c
    if FP64:
        t = tl.exp((z.to(dtype) - row_max) * t_scale)
    else:
        t = tl.exp2((z.to(dtype) - row_max) * t_scale)
    if HAS_DRAFT:
        t = t * inv_sum
        w = tl.maximum(t - d.to(dtype), 0.0)
    else:
        w = tl.where(cols == excluded, 0.0, t)
    return cols, t, w


@triton.jit
def race_update(cols, t, w, r, best_w, best_w_id, best_t, best_t_id, RACE_T: tl.constexpr):
    """Race scores ``w·r`` (``r = 1/E``) against each lane's best; strictly greater wins, so a lane
    keeps its earliest id on ties. A zero weight scores 0: it can lead a lane (whose best starts at
    -1), never the row unless every weight is 0 — an empty residual. ``RACE_T``: the plain-``t`` race
    runs alongside, for the §4 empty-residual fallback (``race_chunk``)."""
    if RACE_T:
        st = t * r
        up_t = st > best_t
        best_t = tl.where(up_t, st, best_t)
        best_t_id = tl.where(up_t, cols, best_t_id)
    sw = w * r
    up_w = sw > best_w
    best_w = tl.where(up_w, sw, best_w)
    best_w_id = tl.where(up_w, cols, best_w_id)
    return best_w, best_w_id, best_t, best_t_id


@triton.jit
def race_tile(cols0, cols1, cols2, cols3, t0, t1, t2, t3, w0, w1, w2, w3, c0, c1, c2, c3, exps_row, hi,
              best_w, best_w_id, best_t, best_t_id, RACE_T: tl.constexpr, KEYED: tl.constexpr,
              FP64: tl.constexpr):
    """``race_update`` of a tile's four columns, in id order within each lane; ``1/E`` from the
    Philox words ``c0..c3`` (KEYED) or from the injected exponentials' row."""
    best_w, best_w_id, best_t, best_t_id = race_update(cols0, t0, w0, race_inverse(c0, exps_row, cols0, hi, KEYED, FP64),
                                                       best_w, best_w_id, best_t, best_t_id, RACE_T)
    best_w, best_w_id, best_t, best_t_id = race_update(cols1, t1, w1, race_inverse(c1, exps_row, cols1, hi, KEYED, FP64),
                                                       best_w, best_w_id, best_t, best_t_id, RACE_T)
    best_w, best_w_id, best_t, best_t_id = race_update(cols2, t2, w2, race_inverse(c2, exps_row, cols2, hi, KEYED, FP64),
                                                       best_w, best_w_id, best_t, best_t_id, RACE_T)
    return race_update(cols3, t3, w3, race_inverse(c3, exps_row, cols3, hi, KEYED, FP64),
                       best_w, best_w_id, best_t, best_t_id, RACE_T)


@triton.jit
def race_inverse(words, exps_row, cols, hi, KEYED: tl.constexpr, FP64: tl.constexpr):
    """``1/E`` of one column: from its Philox words, or from the injected ``[V]`` exponentials."""
    if KEYED:
        r = inverse_exponential(words, FP64)
    else:
        r = 1.0 / tl.load(exps_row + cols, mask=cols < hi, other=1.0).to(tl.float64 if FP64 else tl.float32)
    return r


@triton.jit
def inverse_exponential(words, FP64: tl.constexpr):
    """``1/E`` of uint32 words: one division."""
    num, den = exponential_parts(words, FP64)
    return den / num


@triton.jit
def below_bound(t, w, words, bound_w, bound_t, RACE_T: tl.constexpr, FP64: tl.constexpr):
    """True where the element may still win: ``E = -log(1 - y) ≥ y`` for the complement uniform
    ``y`` of its word, so its score ``w/E`` is at most ``w/y``, and an element with
    ``w·(1 + 2^-10) ≤ best·y`` cannot beat the best score already made (the slack covers
    float rounding of ``y``, ``E`` and the score, ≤ 1e-6 relative). ``y`` here is ``complement_floor``'s,
    at most the complement uniform itself: a smaller ``y`` only keeps more elements."""
    y = complement_floor(words, FP64)
    live = w > (bound_w * (1.0 / SLACK)) * y
    if RACE_T:
        live = live | (t > (bound_t * (1.0 / SLACK)) * y)
    return live


@triton.jit
def complement_floor(words, FP64: tl.constexpr):
    """A lower bound of the complement uniform ``(2^32 - x - 1/2)·2^-32`` of uint32 words ``x``, made with
    no integer-to-float conversion (a slow instruction, one an element of every race tile): the complement's
    top bits as the mantissa of a float in ``[1, 2)``, less 1 — exact in the compute dtype. Float32 keeps the
    top 23 bits (below the uniform by less than ``2^-23``), float64 all 32 (``c·2^-32``)."""
    c = words ^ 0xFFFFFFFF
    if FP64:
        return ((c.to(tl.uint64) << 20) | 0x3FF0000000000000).to(tl.float64, bitcast=True) - 1.0
    else:
        return ((c >> 9) | 0x3F800000).to(tl.float32, bitcast=True) - 1.0


@triton.jit
def race_live(z, words, bias_row, off, c: tl.constexpr, hi, QUADS: tl.constexpr, HAS_BIAS: tl.constexpr,
              FP64: tl.constexpr):
    """SPEC §12 on column ``c`` of a race tile (ids ``off + 4q + c``): ``z + bias`` where the live
    bit is set, ``-inf`` elsewhere, in the compute dtype. ``words``: ``[QUADS]`` live words, the
    one holding each id (``off`` a multiple of 32: id ``off + 4q + c`` is bit ``4·(q % 8) + c``)."""
    dtype = tl.float64 if FP64 else tl.float32
    q = tl.arange(0, QUADS)
    z = z.to(dtype)
    if HAS_BIAS:
        cols = off + q * 4 + c
        z = z + tl.load(bias_row + cols, mask=cols < hi, other=0.0)
    return tl.where(((words >> ((q % 8) * 4 + c)) & 1) != 0, z, float("-inf"))


@triton.jit
def race_live4(z0, z1, z2, z3, live_row, bias_row, off, hi, QUADS: tl.constexpr, HAS_BIAS: tl.constexpr,
               FP64: tl.constexpr):
    """``race_live`` of a tile's four columns, their live words loaded once (one word per 8 quads)."""
    words = tl.load(live_row + off // 32 + tl.arange(0, QUADS) // 8, mask=off + tl.arange(0, QUADS) * 4 < hi, other=0)
    return (race_live(z0, words, bias_row, off, 0, hi, QUADS, HAS_BIAS, FP64),
            race_live(z1, words, bias_row, off, 1, hi, QUADS, HAS_BIAS, FP64),
            race_live(z2, words, bias_row, off, 2, hi, QUADS, HAS_BIAS, FP64),
            race_live(z3, words, bias_row, off, 3, hi, QUADS, HAS_BIAS, FP64))


@triton.jit
def race_edits(edit_start_ptr, edit_tok_ptr, edit_z_ptr, row, draft_row, exps_row, lo, hi, draft_hi, excluded,
               row_max, t_scale, inv_sum, seed, pos, floor, HAS_DRAFT: tl.constexpr, KEYED: tl.constexpr,
               EBLOCK: tl.constexpr, FP64: tl.constexpr):
    """The race (``race_weights``, ``race_inverse``) over the emission ``row``'s records whose ids
    lie in ``[lo, hi)``, read through the row's cut ``floor`` (``keep_from``; ``-inf``: none): ``(best_w, best_w_id, best_t, best_t_id)`` ``[EBLOCK]`` per lane
    (-1: none), each lane keeping its earliest id on ties, as ``race_update``. The records
    ascend by id, so those of the chunk are a run, found by counting (``EDIT_SCAN`` ids a load)."""
    dtype = tl.float64 if FP64 else tl.float32
    lanes = tl.arange(0, EBLOCK)
    best_w = tl.full([EBLOCK], -1.0, dtype)
    best_t = tl.full([EBLOCK], -1.0, dtype)
    best_w_id = tl.zeros([EBLOCK], tl.int32)
    best_t_id = tl.zeros([EBLOCK], tl.int32)
    first = tl.load(edit_start_ptr + row)
    last = tl.load(edit_start_ptr + row + 1)
    below_lo = first * 0
    below_hi = first * 0
    s0 = first
    while s0 < last:  # a loaded bound: a while loop (the interpreter's range wants constants)
        s = s0 + tl.arange(0, EDIT_SCAN)
        tok = tl.load(edit_tok_ptr + s, mask=s < last, other=2147483647)
        below_lo += tl.sum((tok < lo).to(tl.int64), axis=0)
        below_hi += tl.sum((tok < hi).to(tl.int64), axis=0)
        s0 += EDIT_SCAN
    e0 = first + below_lo
    end = first + below_hi
    while e0 < end:
        e = e0 + lanes
        tok = tl.load(edit_tok_ptr + e, mask=e < end, other=-1)
        inside = (e < end) & (tok >= lo) & (tok < hi)
        z = keep_from(tl.load(edit_z_ptr + e, mask=inside, other=float("-inf")), floor, FP64)
        if FP64:
            t = tl.exp((z - row_max) * t_scale)
        else:
            t = tl.exp2((z - row_max) * t_scale)
        if HAS_DRAFT:
            t = t * inv_sum
            d = tl.load(draft_row + tok, mask=inside & (tok < draft_hi), other=0.0).to(dtype)
            w = tl.maximum(t - d, 0.0)
        else:
            w = tl.where(tok == excluded, 0.0, t)
        if KEYED:  # the word of id tok: word tok % 4 of counter tok // 4
            q = (tl.where(inside, tok, 0) // 4).to(tl.uint32)
            zero = q * 0
            c0, c1, c2, c3 = tl.philox(seed, q, zero + pos, zero + RECOVER, zero)
            lane = tok % 4
            r = inverse_exponential(tl.where(lane == 0, c0, tl.where(lane == 1, c1, tl.where(lane == 2, c2, c3))),
                                    FP64)
        else:
            r = 1.0 / tl.load(exps_row + tok, mask=inside, other=1.0).to(dtype)
        sw = tl.where(inside, w * r, -1.0)
        up_w = sw > best_w
        best_w = tl.where(up_w, sw, best_w)
        best_w_id = tl.where(up_w, tok, best_w_id)
        if HAS_DRAFT:
            st = tl.where(inside, t * r, -1.0)
            up_t = st > best_t
            best_t = tl.where(up_t, st, best_t)
            best_t_id = tl.where(up_t, tok, best_t_id)
        e0 += EBLOCK
    return best_w, best_w_id, best_t, best_t_id


@triton.jit
def race_chunk(logits_row, draft_row, exps_row, live_row, bias_row, lo, hi, draft_hi, excluded, emit_max, t_scale,
               inv_sum, seed, pos, bias_hi, emit_floor, TILES: tl.constexpr, BLOCK: tl.constexpr,
               HAS_DRAFT: tl.constexpr, RACE_T: tl.constexpr, KEYED: tl.constexpr, BOUND: tl.constexpr,
               SAMPLER: tl.constexpr, HAS_BIAS: tl.constexpr, CUT: tl.constexpr, FP64: tl.constexpr):
    """The race (§3) over ids ``[lo, hi)`` of the emission row, tile by tile: ``(best_w, best_w_id, best_t,
    best_t_id)`` ``[BLOCK / 4]`` per lane (-1: none), ``w = max(t − d, 0)`` with ``HAS_DRAFT`` (``d`` read below
    ``draft_hi``, 0 above), else ``t`` with ``excluded`` zeroed; ``RACE_T``: the plain-``t`` race alongside.
    Keyed, with ``BOUND``, a tile none of whose elements can beat the best score so far skips its logarithms
    (``below_bound``). ``SAMPLER``/``CUT``: the rows read through SPEC §12 and the cut, as ``step_kernel`` says."""
    dtype = tl.float64 if FP64 else tl.float32
    QUADS: tl.constexpr = BLOCK // 4
    best_w = tl.full([QUADS], -1.0, dtype)
    best_t = tl.full([QUADS], -1.0, dtype)
    best_w_id = tl.zeros([QUADS], tl.int32)
    best_t_id = tl.zeros([QUADS], tl.int32)
    bound_w = tl.max(best_w, axis=0)  # the best score so far in this chunk (-1: none yet)
    bound_t = bound_w
    for tile in range(0, TILES):
        off = lo + tile * BLOCK
        z0, z1, z2, z3, d0, d1, d2, d3 = race_load(logits_row, draft_row, off, hi, draft_hi, QUADS, HAS_DRAFT)
        if CUT:
            if not SAMPLER:  # the raw rows' cut; the §12 rows' is taken after §12 (below)
                z0 = keep_from(z0, emit_floor, FP64)
                z1 = keep_from(z1, emit_floor, FP64)
                z2 = keep_from(z2, emit_floor, FP64)
                z3 = keep_from(z3, emit_floor, FP64)
        if SAMPLER:
            if KEYED and BOUND:  # the bound from z + the row's largest bias; exact values only where it keeps a tile
                # y in the compute dtype (race_live widens it first anyway): the branch below redefines y there, and
                # a compiled if must yield one type (16-bit logits: fp16 in, fp32 out fails to compile)
                y0, y1, y2, y3 = z0.to(dtype), z1.to(dtype), z2.to(dtype), z3.to(dtype)
                z0 = y0 + bias_hi
                z1 = y1 + bias_hi
                z2 = y2 + bias_hi
                z3 = y3 + bias_hi
                if CUT:  # z + bias_hi below the cut: the entry's §12 value is too, so its weight is 0
                    z0 = keep_from(z0, emit_floor, FP64)
                    z1 = keep_from(z1, emit_floor, FP64)
                    z2 = keep_from(z2, emit_floor, FP64)
                    z3 = keep_from(z3, emit_floor, FP64)
            else:
                z0, z1, z2, z3 = race_live4(z0, z1, z2, z3, live_row, bias_row, off, hi, QUADS, HAS_BIAS, FP64)
                if CUT:
                    z0 = keep_from(z0, emit_floor, FP64)
                    z1 = keep_from(z1, emit_floor, FP64)
                    z2 = keep_from(z2, emit_floor, FP64)
                    z3 = keep_from(z3, emit_floor, FP64)
        cols0, t0, w0 = race_weights(z0, d0, off, 0, excluded, emit_max, t_scale, inv_sum, QUADS, HAS_DRAFT, FP64)
        cols1, t1, w1 = race_weights(z1, d1, off, 1, excluded, emit_max, t_scale, inv_sum, QUADS, HAS_DRAFT, FP64)
        cols2, t2, w2 = race_weights(z2, d2, off, 2, excluded, emit_max, t_scale, inv_sum, QUADS, HAS_DRAFT, FP64)
        cols3, t3, w3 = race_weights(z3, d3, off, 3, excluded, emit_max, t_scale, inv_sum, QUADS, HAS_DRAFT, FP64)
        if KEYED:  # each counter once: its four words are this thread's four columns
            qq = (off // 4 + tl.arange(0, QUADS)).to(tl.uint32)
            zz = qq * 0
            c0, c1, c2, c3 = tl.philox(seed, qq, zz + pos, zz + RECOVER, zz)
            if BOUND:  # skip the logarithms of a tile none of whose elements can win (see below_bound)
                live = below_bound(t0, w0, c0, bound_w, bound_t, RACE_T, FP64) | \
                    below_bound(t1, w1, c1, bound_w, bound_t, RACE_T, FP64) | \
                    below_bound(t2, w2, c2, bound_w, bound_t, RACE_T, FP64) | \
                    below_bound(t3, w3, c3, bound_w, bound_t, RACE_T, FP64)
                go = tl.max(live.to(tl.int32), axis=0) > 0
            else:
                go = True
            if go:
                if SAMPLER:
                    if BOUND:  # the tile may hold the winner: its exact weights
                        y0, y1, y2, y3 = race_live4(y0, y1, y2, y3, live_row, bias_row, off, hi, QUADS, HAS_BIAS,
                                                    FP64)
                        if CUT:
                            y0 = keep_from(y0, emit_floor, FP64)
                            y1 = keep_from(y1, emit_floor, FP64)
                            y2 = keep_from(y2, emit_floor, FP64)
                            y3 = keep_from(y3, emit_floor, FP64)
                        cols0, t0, w0 = race_weights(y0, d0, off, 0, excluded, emit_max, t_scale, inv_sum, QUADS,
                                                     HAS_DRAFT, FP64)
                        cols1, t1, w1 = race_weights(y1, d1, off, 1, excluded, emit_max, t_scale, inv_sum, QUADS,
                                                     HAS_DRAFT, FP64)
                        cols2, t2, w2 = race_weights(y2, d2, off, 2, excluded, emit_max, t_scale, inv_sum, QUADS,
                                                     HAS_DRAFT, FP64)
                        cols3, t3, w3 = race_weights(y3, d3, off, 3, excluded, emit_max, t_scale, inv_sum, QUADS,
                                                     HAS_DRAFT, FP64)
                best_w, best_w_id, best_t, best_t_id = race_tile(
                    cols0, cols1, cols2, cols3, t0, t1, t2, t3, w0, w1, w2, w3, c0, c1, c2, c3, exps_row, hi,
                    best_w, best_w_id, best_t, best_t_id, RACE_T, KEYED, FP64)
                if BOUND:
                    bound_w = tl.max(best_w, axis=0)
                    bound_t = tl.max(best_t, axis=0)
        else:
            best_w, best_w_id, best_t, best_t_id = race_tile(
                cols0, cols1, cols2, cols3, t0, t1, t2, t3, w0, w1, w2, w3, 0, 0, 0, 0, exps_row, hi,
                best_w, best_w_id, best_t, best_t_id, RACE_T, KEYED, FP64)
    return best_w, best_w_id, best_t, best_t_id


@triton.jit(
    do_not_specialize=['OUT_WIDTH', 'STAT_NCHUNK', 'RACE_NCHUNK', 'W'],
    do_not_specialize_on_alignment=['stat_max_ptr', 'stat_sum_ptr', 'stat_arg_ptr', 'counter_ptr', 'best_w_ptr', 'best_w_id_ptr', 'best_t_ptr', 'best_t_id_ptr', 'out_ptr', 'num_accepted_ptr', 'cut_ptr', 'edit_z_ptr'],
)
def step_kernel(cu_ptr, draft_ids_ptr, draft_probs_ptr, logits_ptr, temp_ptr, seeds_ptr, positions_ptr,
                uniforms_ptr, exponentials_ptr, stat_max_ptr, stat_sum_ptr, stat_arg_ptr, counter_ptr,
                best_w_ptr, best_w_id_ptr, best_t_ptr, best_t_id_ptr, out_ptr, num_accepted_ptr,
                V, OUT_WIDTH, STAT_NCHUNK, CHUNK, RACE_NCHUNK, TILES: tl.constexpr,
                HAS_DRAFT: tl.constexpr, KEYED: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_C: tl.constexpr,
                BLOCK_R: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr, BOUND: tl.constexpr = True,
                live_ptr=None, bias_ptr=None, edit_start_ptr=None, edit_tok_ptr=None, edit_z_ptr=None,
                draft_edit_ptr=None, bias_max_ptr=None, W=1, SAMPLER: tl.constexpr = False,
                HAS_BIAS: tl.constexpr = False,
                EBLOCK: tl.constexpr = 64, cut_ptr=None, CUT: tl.constexpr = False,
                withdrawn_ptr=None, WITHDRAWN: tl.constexpr = False, PDL: tl.constexpr = False):
    """Request ``i``, race chunk ``c``: acceptance walk (SPEC §3, §4) from gathers, then the race.

    ``cu_ptr`` ``[batch+1]``; ``draft_ids_ptr`` ``[num_tokens]``; ``draft_probs_ptr``
    ``[num_tokens, V]`` (unused without HAS_DRAFT); ``uniforms_ptr`` ``[num_tokens]``
    and ``exponentials_ptr`` ``[batch, V]`` (unused when KEYED); stats
    ``[rows, STAT_NCHUNK]``; ``counter_ptr`` ``[batch]`` zeroed by ``stats_kernel``;
    ``best_*`` ``[batch, RACE_NCHUNK]``; ``out_ptr`` ``[batch, OUT_WIDTH]`` and
    ``num_accepted_ptr`` ``[batch]``: every entry written here.

    ``SAMPLER`` (SPEC §12 fused, ``devices.triton_sampler.fused_stats``): the rows are read
    through ``live_ptr`` ``[rows, W]`` int32 bits and ``bias_ptr`` ``[batch, V]`` (``HAS_BIAS``):
    ``z + bias`` where the bit is set, else ``-inf`` — with ``BOUND``, only in the tiles that the
    race bound, taken on ``z + bias_max`` (``bias_max_ptr`` ``[batch]``, each bias row's largest
    entry: an upper bound of every weight), cannot skip; the records' entries (bits cleared) come
    from ``edit_z_ptr`` ``[E]``: the drafts' through ``draft_edit_ptr`` ``[num_tokens]``, the
    emission row's (``edit_start_ptr`` ``[rows + 1]``, ``edit_tok_ptr`` ``[E]``) raced after
    the chunk's tiles. The statistics then have one more column, the records'.

    ``CUT``: every target row ``r`` is read through its cut ``cut_ptr[r]`` (``[rows]``, compute
    dtype; ``keep_from``) — the drafts' entries and the race alike, as ``stats_kernel`` read it:
    top-k/top-p/min_p without a filtered copy of the rows. With ``SAMPLER`` the cut is of the §12
    rows (``devices.triton_topk.RowsSampler``), so it is applied after §12, to the records' entries
    too; the race bound reads ``z + bias_max`` through the cut (an upper bound of the entry's §12
    value, so an entry it cuts is cut).

    ``WITHDRAWN`` (with ``HAS_DRAFT``): ``withdrawn_ptr`` ``[num_tokens]`` int8, nonzero where the
    placeholder is a withdrawn draft (SPEC §4): rejected like padding, but its race reads its draft
    row (``max(t − d, 0)``), where padding's reads none (``t``).

    ``PDL`` (the plain step only: no ``SAMPLER``, no ``CUT``, whose gathers read what earlier launches wrote;
    sm_90 and later; launched with ``launch_pdl``): the gathers of the walk — draft ids, their logits and draft
    probabilities, the coins — are made before ``gdc_wait``, while ``stats_kernel`` (launched with ``PDL``)
    still runs; everything that grid writes (statistics, the zeroed counter) is read after it.
    """
    i = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    row0 = start + i  # target row of draft 0; row0 + k is the bonus row
    T = tl.load(temp_ptr + i).to(dtype)
    greedy = T == 0
    inv_t = tl.where(greedy, 1.0, 1.0 / tl.where(greedy, 1.0, T))

    # --- the acceptance walk: every program of the request makes the same one ----------
    j = tl.arange(0, BLOCK_K)
    is_row = j <= k
    is_draft = j < k
    rows = (row0 + j).to(tl.int64)
    x = tl.load(draft_ids_ptr + start + j, mask=is_draft, other=-1)
    real = is_draft & (x >= 0)  # placeholder -1: never an index (§4)
    xs = tl.where(real, x, 0)
    if KEYED:
        seed = tl.load(seeds_ptr + i).to(tl.uint64, bitcast=True)
        pos = tl.load(positions_ptr + i).to(tl.uint32)
        q = (j // 4).to(tl.uint32)
        zero = q * 0
        a0, a1, a2, a3 = tl.philox(seed, q, zero + pos, zero + ACCEPT, zero)
        lane = j % 4
        words = tl.where(lane == 0, a0, tl.where(lane == 1, a1, tl.where(lane == 2, a2, a3)))
        u = word_uniform(words)
    else:
        seed = 0
        pos = 0
        u = tl.load(uniforms_ptr + start + j, mask=is_draft, other=1.0).to(tl.float64)
    if SAMPLER:  # a draft's entry is one of its row's records
        ex = tl.load(draft_edit_ptr + start + j, mask=real, other=0)
        zx = tl.load(edit_z_ptr + ex, mask=real, other=float("-inf")).to(dtype)
        if CUT:
            zx = keep_from(zx, tl.load(cut_ptr + rows, mask=is_row, other=float("-inf")).to(dtype), FP64)
    else:
        zx = tl.load(logits_ptr + rows * V + xs, mask=real, other=float("-inf")).to(dtype)
        if CUT:
            zx = keep_from(zx, tl.load(cut_ptr + rows, mask=is_row, other=float("-inf")).to(dtype), FP64)
    if HAS_DRAFT:
        d = tl.load(draft_probs_ptr + (start + j).to(tl.int64) * V + xs, mask=real, other=0.0).to(dtype)
    else:
        d = 0.0
    if PDL:  # everything above reads inputs only; below, what the statistics pass wrote
        tl.extra.cuda.gdc_wait()
    c = tl.arange(0, BLOCK_C)
    sp = rows[:, None] * STAT_NCHUNK + c[None, :]
    smask = is_row[:, None] & (c < STAT_NCHUNK)[None, :]
    cm = tl.load(stat_max_ptr + sp, mask=smask, other=float("-inf"))
    cs = tl.load(stat_sum_ptr + sp, mask=smask, other=0.0)
    ca = tl.load(stat_arg_ptr + sp, mask=smask, other=NO_ID)
    row_max = tl.max(cm, axis=1)
    row_sum = tl.sum(tl.where(cm == float("-inf"), 0.0, cs * tl.exp((cm - row_max[:, None]) * inv_t)), axis=1)
    row_arg = tl.min(tl.where(cm == row_max[:, None], ca, NO_ID), axis=1)

    t = tl.exp((zx - row_max) * inv_t) / row_sum
    if HAS_DRAFT:
        ratio = t / tl.where(d > 0, d, 1.0)
        ok_random = (d > 0) & (t > 0) & (u < ratio.to(tl.float64))
    else:
        ok_random = (t > 0) & (u < t.to(tl.float64))
    ok = real & tl.where(greedy, x == row_arg, ok_random)
    num_acc = tl.min(tl.where(is_draft & ~ok, j, k), axis=0)
    at = j == num_acc
    x_at = tl.sum(tl.where(at & real, x, 0), axis=0)
    real_at = tl.sum(tl.where(at & real, 1, 0), axis=0) > 0
    reads_row_at = real_at  # the emission's draft row is read: a rejected real draft's, or a withdrawn one's
    if WITHDRAWN:
        gone = tl.load(withdrawn_ptr + start + j, mask=is_draft, other=0)
        reads_row_at = real_at | (tl.sum(tl.where(at & is_draft & (gone != 0), 1, 0), axis=0) > 0)

    out_row = out_ptr + i.to(tl.int64) * OUT_WIDTH
    if chunk == 0:  # the accepted drafts and the padding; position num_acc is the emitted token's
        o = tl.arange(0, BLOCK_K)
        tl.store(out_row + o, tl.where(o < num_acc, x, -1).to(tl.int64), mask=(o < OUT_WIDTH) & (o != num_acc))
        tl.store(num_accepted_ptr + i, num_acc.to(tl.int64))
        if greedy:
            tl.store(out_row + num_acc, tl.sum(tl.where(at, row_arg, 0), axis=0).to(tl.int64))

    # --- the race over this program's chunk of the emission row ------------------------
    if T > 0:
        if FP64:
            t_scale = inv_t
        else:
            t_scale = inv_t * 1.4426950408889634  # log2(e): exp(x/T) = exp2(x·log2(e)/T)
        emit_max = tl.sum(tl.where(at, row_max, 0.0), axis=0)
        inv_sum = 1.0 / tl.sum(tl.where(at, row_sum, 0.0), axis=0)
        excluded = tl.where(real_at, x_at, -1)  # point proposals: the rejected draft's id
        logits_row = logits_ptr + (row0 + num_acc).to(tl.int64) * V
        draft_row = draft_probs_ptr + (start + num_acc).to(tl.int64) * V
        exps_row = exponentials_ptr + i.to(tl.int64) * V
        lo = chunk * CHUNK
        hi = lo + CHUNK
        if hi > V:
            hi = V
        # Padding or the bonus row has no draft row: its mask covers nothing. (One comparison,
        # not `inside & (has_row)`: a block & a scalar is an int32 mask in the interpreter, which
        # Triton >= 3.9 refuses.)
        draft_hi = tl.where(reads_row_at, hi, lo)
        if SAMPLER:
            live_row = live_ptr + (row0 + num_acc).to(tl.int64) * W
            bias_row = bias_ptr + i.to(tl.int64) * V
            if HAS_BIAS:
                bias_hi = tl.load(bias_max_ptr + i).to(dtype)  # ≥ every entry of the bias row
            else:
                bias_hi = 0.0
        else:  # not read
            live_row = logits_row
            bias_row = logits_row
            bias_hi = 0.0
        if CUT:
            emit_floor = tl.load(cut_ptr + row0 + num_acc).to(dtype)
        else:
            emit_floor = float("-inf")
        # The t race (the §4 fallback of an empty residual) runs alongside on the §12 path and through a cut,
        # where most chunks' residuals are empty (nothing kept in them). Elsewhere a chunk races w alone, and
        # races t in a second pass (no draft row read: w = max(t − 0, 0) = t, its scores bit for bit the inline
        # race's) only where its own residual is empty — wherever the row's is.
        best_w, best_w_id, best_t, best_t_id = race_chunk(
            logits_row, draft_row, exps_row, live_row, bias_row, lo, hi, draft_hi, excluded, emit_max, t_scale,
            inv_sum, seed, pos, bias_hi, emit_floor, TILES, BLOCK, HAS_DRAFT, HAS_DRAFT and (SAMPLER or CUT), KEYED,
            BOUND, SAMPLER, HAS_BIAS, CUT, FP64)
        if HAS_DRAFT and not (SAMPLER or CUT):
            if tl.max(best_w, axis=0) <= 0:
                best_t, best_t_id, _, _ = race_chunk(
                    logits_row, draft_row, exps_row, live_row, bias_row, lo, hi, lo, excluded, emit_max, t_scale,
                    inv_sum, seed, pos, bias_hi, emit_floor, TILES, BLOCK, HAS_DRAFT, False, KEYED, BOUND, SAMPLER,
                    HAS_BIAS, CUT, FP64)
        if SAMPLER:  # the emission row's records in this chunk, with their lanes' bests
            ew, ew_id, et, et_id = race_edits(
                edit_start_ptr, edit_tok_ptr, edit_z_ptr, row0 + num_acc, draft_row, exps_row, lo, hi, draft_hi,
                excluded, emit_max, t_scale, inv_sum, seed, pos, emit_floor, HAS_DRAFT, KEYED, EBLOCK, FP64)
        bw = tl.max(best_w, axis=0)
        if SAMPLER:
            bw = tl.maximum(bw, tl.max(ew, axis=0))
        bw_id = tl.min(tl.where(best_w == bw, best_w_id, NO_ID), axis=0)
        bt = tl.max(best_t, axis=0)
        if SAMPLER:
            bt = tl.maximum(bt, tl.max(et, axis=0))
        bt_id = tl.min(tl.where(best_t == bt, best_t_id, NO_ID), axis=0)
        if SAMPLER:  # equal scores: the smallest id, records or tiles
            bw_id = tl.minimum(bw_id, tl.min(tl.where(ew == bw, ew_id, NO_ID), axis=0))
            bt_id = tl.minimum(bt_id, tl.min(tl.where(et == bt, et_id, NO_ID), axis=0))
        # Publish this chunk's winners; the request's last chunk to finish (an atomic count) reduces them.
        p = i.to(tl.int64) * RACE_NCHUNK + chunk
        tl.store(best_w_ptr + p, bw)
        tl.store(best_w_id_ptr + p, bw_id)
        tl.store(best_t_ptr + p, bt)
        tl.store(best_t_id_ptr + p, bt_id)
        tl.debug_barrier()
        done = tl.atomic_add(counter_ptr + i, 1, sem="acq_rel")  # releases the stores above, acquires the others'
        if done == RACE_NCHUNK - 1:
            r = tl.arange(0, BLOCK_R)
            pr = i.to(tl.int64) * RACE_NCHUNK + r
            inside = r < RACE_NCHUNK
            cw = tl.load(best_w_ptr + pr, mask=inside, other=-1.0, cache_modifier=".cg")
            cw_id = tl.load(best_w_id_ptr + pr, mask=inside, other=NO_ID, cache_modifier=".cg")
            top_w = tl.max(cw, axis=0)
            token = tl.min(tl.where(cw == top_w, cw_id, NO_ID), axis=0)
            if HAS_DRAFT:  # empty residual: draw from t (§4)
                ct = tl.load(best_t_ptr + pr, mask=inside, other=-1.0, cache_modifier=".cg")
                ct_id = tl.load(best_t_id_ptr + pr, mask=inside, other=NO_ID, cache_modifier=".cg")
                token_t = tl.min(tl.where(ct == tl.max(ct, axis=0), ct_id, NO_ID), axis=0)
                token = tl.where(top_w > 0, token, token_t)
            else:  # empty residual: t is all on the rejected draft (§4)
                token = tl.where(top_w > 0, token, excluded)
            tl.store(out_row + num_acc, token.to(tl.int64))
            tl.store(counter_ptr + i, 0)


@triton.jit
def stream_kernel(seeds_ptr, positions_ptr, words_ptr, exps_ptr, purpose, column, N: tl.constexpr,
                  BLOCK: tl.constexpr, FP64: tl.constexpr):
    """Words ``0 .. N-1`` of S(seeds[i], positions[i], purpose, column) and their
    exponentials, for checking the in-kernel streams against the reference
    (``words_ptr`` ``[batch, N]`` int32 bits, ``exps_ptr`` ``[batch, N]``)."""
    i = tl.program_id(0)
    seed = tl.load(seeds_ptr + i).to(tl.uint64, bitcast=True)
    pos = tl.load(positions_ptr + i).to(tl.uint32)
    lanes = tl.arange(0, BLOCK)
    for tile in range(0, tl.cdiv(N, BLOCK)):
        off = tile * BLOCK
        w = philox_words(seed, off, pos, purpose, column, BLOCK)
        cols = off + lanes
        tl.store(words_ptr + i.to(tl.int64) * N + cols, w.to(tl.int32, bitcast=True), mask=cols < N)
        tl.store(exps_ptr + i.to(tl.int64) * N + cols, word_exponential(w, FP64), mask=cols < N)


@triton.jit
def exponential_kernel(words_ptr, out_ptr, N: tl.constexpr, FP64: tl.constexpr):
    """``word_exponential`` of ``N`` given words (int32 bits) → ``out_ptr`` ``[N]``: for tests."""
    cols = tl.arange(0, N)
    w = tl.load(words_ptr + cols).to(tl.uint32, bitcast=True)
    tl.store(out_ptr + cols, word_exponential(w, FP64))
