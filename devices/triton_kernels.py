"""Triton kernels for one verification step (SPEC §3–§5), in four launches.

The plan reads each target row once, and only ONE draft row and ONE more
target row per request — fewer bytes than "every target and draft row once":

1. ``row_stats_kernel``, grid ``(rows, chunks)``: for every target row, the
   online softmax statistics of ``z / T`` (max, sum of ``exp``) and the raw
   argmax (greedy), per vocabulary chunk.
2. ``accept_kernel``, grid ``(batch,)``: combines the chunk statistics, then
   walks the request's drafts with gathers only — acceptance needs
   ``t(x_j) = exp((z[x_j] − max)/T) / sum`` and ``d(x_j)``, never a whole row.
   It writes the accepted drafts, ``num_accepted``, the greedy token, and the
   one row each random request emits from (its rejection row or bonus row).
3. ``race_kernel``, grid ``(batch, chunks)``: the exponential race of §3 over
   that one row, fused with the residual ``max(t − d, 0)`` (or ``t`` with the
   draft masked, for point proposals) and with the noise: injected
   ``[batch, V]`` exponentials, or Philox words made in registers (§5.2), so
   no ``[rows, V]`` noise is ever materialised. It also races plain ``t`` for
   the empty-residual fallback of §4, at no extra bytes.
4. ``finalize_kernel``, grid ``(batch,)``: reduces the chunk winners.

Offsets are 64-bit wherever ``row × V`` can pass 2**31 (vLLM bug #14 of
research/vllm.md). Compute is in the input's dtype (``FP64`` constexpr).

Keyed noise, bit for bit SPEC §5.2: key ``(seed lo32, seed hi32)``, counter
``(n // 4, position, purpose, column)``, word ``n % 4``. ``tl.philox`` splits a
uint64 seed exactly that way.
"""

from __future__ import annotations

import triton
import triton.language as tl

# Globals read inside @triton.jit must be constexpr for the compiler.
ACCEPT = tl.constexpr(1)  # SPEC §5.2 purposes (devices never import reference)
RECOVER = tl.constexpr(2)
TWO_POW_M32 = tl.constexpr(2.3283064365386963e-10)  # 2**-32, exact


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
def philox_quads(seed, first, position, purpose, column, QUADS: tl.constexpr, JOIN: tl.constexpr):
    """Words ``first .. first + 4·QUADS - 1`` of S(seed, position, purpose, column) as a
    ``[QUADS, 4]`` uint32 tile (row q holds the 4 outputs of counter ``first//4 + q``).

    JOIN builds it with ``join``/``reshape``; otherwise each output is broadcast
    into its column with selects, which keeps the 4 words in one thread's registers.
    """
    q = (first // 4 + tl.arange(0, QUADS)).to(tl.uint32)
    zero = q * 0
    c0, c1, c2, c3 = tl.philox(seed, q, zero + position, zero + purpose, zero + column)
    if JOIN:
        words = tl.reshape(tl.join(tl.join(c0, c2), tl.join(c1, c3)), (QUADS, 4))
    else:
        lane = tl.arange(0, 4)[None, :]
        words = tl.where(lane == 0, c0[:, None], tl.where(lane == 1, c1[:, None],
                                                          tl.where(lane == 2, c2[:, None], c3[:, None])))
    return words


@triton.jit
def word_uniform(words):
    """``(x + 1/2)·2^-32`` in float64, exact (SPEC §5.2)."""
    return (words.to(tl.float64) + 0.5) * TWO_POW_M32


@triton.jit
def word_exponential(words, FP64: tl.constexpr):
    """Exp(1) from uint32 words: ``-log(uniform)``; in float32 the upper half goes
    through ``-log1p(-(2^32 - x - 1/2)·2^-32)`` (SPEC §5.2) so it never rounds to 0.
    log1p uses Goldberg's ``log(a)·y/(a-1)`` since tl has no log1p."""
    if FP64:
        e = -tl.log(word_uniform(words))
    else:  # one log per word: log(u) for the lower half, log(1 - y) for the upper
        low = words < 0x80000000
        u = (words.to(tl.float32) + 0.5) * TWO_POW_M32
        y = ((words ^ 0xFFFFFFFF).to(tl.float32) + 0.5) * TWO_POW_M32  # 1 - u, from the exact complement
        a = 1.0 - y
        lg = tl.log(tl.where(low, u, a))
        exact = a == 1.0  # y below half an ulp of 1: log1p(-y) = -y
        log1p_neg_y = tl.where(exact, -y, lg * (y / tl.where(exact, 1.0, 1.0 - a)))
        e = tl.where(low, -lg, -log1p_neg_y)
    return e


@triton.jit
def row_stats_kernel(logits_ptr, row_temp_ptr, stat_max_ptr, stat_sum_ptr, stat_arg_ptr,
                     V, CHUNK, NCHUNK, TILES: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr):
    """Per (target row, vocab chunk): max of raw z, sum exp((z - max)/T), first argmax.

    ``logits_ptr``: ``[rows, V]``; ``row_temp_ptr``: ``[rows]`` (0 = greedy, stats
    then use T = 1 and only the argmax is read); outputs ``[rows, NCHUNK]``.
    One exp per element: a lane-wise online softmax.
    """
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    T = tl.load(row_temp_ptr + row).to(dtype)
    inv_t = tl.where(T > 0, 1.0 / tl.where(T > 0, T, 1.0), 1.0)
    base = logits_ptr + row.to(tl.int64) * V  # 64-bit: row * V passes 2^31 at real sizes
    lo = chunk * CHUNK
    hi = lo + CHUNK
    if hi > V:
        hi = V
    lanes = tl.arange(0, BLOCK)
    # A fixed trip count (TILES = CHUNK // BLOCK) rather than range(lo, hi): only the last
    # chunk runs masked tiles, and Triton's interpreter cannot take program-id bounds.
    m = tl.full([BLOCK], float("-inf"), dtype)
    s = tl.zeros([BLOCK], dtype)
    arg = tl.zeros([BLOCK], tl.int32)
    for tile in range(0, TILES):
        off = lo + tile * BLOCK
        cols = off + lanes
        z = tl.load(base + cols, mask=cols < hi, other=float("-inf")).to(dtype)
        up = z > m
        d = tl.exp(-tl.abs(z - m) * inv_t)
        s_new = tl.where(up, s * d + 1.0, s + d)
        s = tl.where(z == float("-inf"), s, s_new)  # -inf: contributes nothing (and avoids inf - inf)
        arg = tl.where(up, cols, arg)
        m = tl.maximum(m, z)
    row_max = tl.max(m, axis=0)
    scale = tl.where(m == float("-inf"), 0.0, tl.exp((m - row_max) * inv_t))
    row_sum = tl.sum(s * scale, axis=0)
    row_arg = tl.min(tl.where(m == row_max, arg, 2147483647), axis=0)
    out = row.to(tl.int64) * NCHUNK + chunk
    tl.store(stat_max_ptr + out, row_max)
    tl.store(stat_sum_ptr + out, row_sum)
    tl.store(stat_arg_ptr + out, row_arg)


@triton.jit
def accept_kernel(cu_ptr, draft_ids_ptr, draft_probs_ptr, logits_ptr, temp_ptr, seeds_ptr, positions_ptr,
                  uniforms_ptr, stat_max_ptr, stat_sum_ptr, stat_arg_ptr,
                  out_ptr, num_accepted_ptr, emit_row_ptr, emit_draft_row_ptr, emit_excluded_ptr,
                  emit_max_ptr, emit_sum_ptr,
                  V, OUT_WIDTH, NCHUNK,
                  HAS_DRAFT: tl.constexpr, KEYED: tl.constexpr, BLOCK_K: tl.constexpr,
                  BLOCK_C: tl.constexpr, FP64: tl.constexpr):
    """One request: acceptance walk (SPEC §3, §4) from gathers; chooses the emission row.

    ``cu_ptr`` ``[batch+1]``; ``draft_ids_ptr`` ``[num_tokens]``; ``draft_probs_ptr``
    ``[num_tokens, V]`` (unused without HAS_DRAFT); ``uniforms_ptr`` ``[num_tokens]``
    float64 (unused when KEYED); stats ``[rows, NCHUNK]``; ``out_ptr``
    ``[batch, OUT_WIDTH]`` prefilled with -1; emit_* ``[batch]``.
    """
    i = tl.program_id(0)
    dtype = tl.float64 if FP64 else tl.float32
    start = tl.load(cu_ptr + i)
    k = tl.load(cu_ptr + i + 1) - start
    row0 = start + i  # target row of draft 0; row0 + k is the bonus row
    T = tl.load(temp_ptr + i).to(dtype)
    greedy = T == 0
    inv_t = tl.where(greedy, 1.0, 1.0 / tl.where(greedy, 1.0, T))

    j = tl.arange(0, BLOCK_K)
    is_row = j <= k
    is_draft = j < k
    rows = (row0 + j).to(tl.int64)
    # Combine the chunk statistics of rows row0 .. row0 + k.
    c = tl.arange(0, BLOCK_C)
    sp = rows[:, None] * NCHUNK + c[None, :]
    smask = is_row[:, None] & (c < NCHUNK)[None, :]
    cm = tl.load(stat_max_ptr + sp, mask=smask, other=float("-inf"))
    cs = tl.load(stat_sum_ptr + sp, mask=smask, other=0.0)
    ca = tl.load(stat_arg_ptr + sp, mask=smask, other=2147483647)
    row_max = tl.max(cm, axis=1)
    row_sum = tl.sum(tl.where(cm == float("-inf"), 0.0, cs * tl.exp((cm - row_max[:, None]) * inv_t)), axis=1)
    row_arg = tl.min(tl.where(cm == row_max[:, None], ca, 2147483647), axis=1)

    x = tl.load(draft_ids_ptr + start + j, mask=is_draft, other=-1)
    real = is_draft & (x >= 0)  # placeholder -1: never an index (§4)
    xs = tl.where(real, x, 0)
    if KEYED:
        seed = tl.load(seeds_ptr + i).to(tl.uint64, bitcast=True)
        pos = tl.load(positions_ptr + i).to(tl.uint32)
        q = (j // 4).to(tl.uint32)
        zero = q * 0
        w0, w1, w2, w3 = tl.philox(seed, q, zero + pos, zero + ACCEPT, zero)
        lane = j % 4
        words = tl.where(lane == 0, w0, tl.where(lane == 1, w1, tl.where(lane == 2, w2, w3)))
        u = word_uniform(words)
    else:
        u = tl.load(uniforms_ptr + start + j, mask=is_draft, other=1.0).to(tl.float64)
    zx = tl.load(logits_ptr + rows * V + xs, mask=real, other=float("-inf")).to(dtype)
    t = tl.exp((zx - row_max) * inv_t) / row_sum
    if HAS_DRAFT:
        d = tl.load(draft_probs_ptr + (start + j).to(tl.int64) * V + xs, mask=real, other=0.0).to(dtype)
        ratio = t / tl.where(d > 0, d, 1.0)
        ok_random = (d > 0) & (t > 0) & (u < ratio.to(tl.float64))
    else:
        ok_random = (t > 0) & (u < t.to(tl.float64))
    ok = real & tl.where(greedy, x == row_arg, ok_random)
    num_acc = tl.min(tl.where(is_draft & ~ok, j, k), axis=0)

    out_row = out_ptr + i.to(tl.int64) * OUT_WIDTH
    tl.store(out_row + j, x, mask=j < num_acc)
    at = j == num_acc
    x_at = tl.sum(tl.where(at & real, x, 0), axis=0)
    real_at = tl.sum(tl.where(at & real, 1, 0), axis=0) > 0
    greedy_token = tl.sum(tl.where(at, row_arg, 0), axis=0)
    tl.store(num_accepted_ptr + i, num_acc.to(tl.int64))
    tl.store(emit_row_ptr + i, (row0 + num_acc).to(tl.int64))
    if HAS_DRAFT:
        tl.store(emit_draft_row_ptr + i, tl.where(real_at, start + num_acc, -1).to(tl.int64))
        tl.store(emit_excluded_ptr + i, tl.full([], -1, tl.int64))
    else:
        tl.store(emit_draft_row_ptr + i, tl.full([], -1, tl.int64))
        tl.store(emit_excluded_ptr + i, tl.where(real_at, x_at, -1).to(tl.int64))
    tl.store(emit_max_ptr + i, tl.sum(tl.where(at, row_max, 0.0), axis=0))
    tl.store(emit_sum_ptr + i, tl.sum(tl.where(at, row_sum, 0.0), axis=0))
    if greedy:
        tl.store(out_row + num_acc, greedy_token.to(tl.int64))


@triton.jit
def race_kernel(logits_ptr, draft_probs_ptr, exponentials_ptr, temp_ptr, seeds_ptr, positions_ptr,
                emit_row_ptr, emit_draft_row_ptr, emit_excluded_ptr, emit_max_ptr, emit_sum_ptr,
                best_w_ptr, best_w_id_ptr, best_t_ptr, best_t_id_ptr,
                V, CHUNK, NCHUNK, TILES: tl.constexpr,
                HAS_DRAFT: tl.constexpr, KEYED: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr,
                JOIN: tl.constexpr = False):
    """Exponential race (SPEC §3) over one chunk of a request's emission row.

    Residual ``w = max(t − d, 0)`` (draft row given) or ``t`` with the excluded
    draft zeroed, and plain ``t`` for the §4 fallback; scores ``w / E``.
    ``exponentials_ptr`` ``[batch, V]`` (unused when KEYED). Outputs
    ``[batch, NCHUNK]``: best score (-1 if none) and its smallest id.
    """
    i = tl.program_id(0)
    chunk = tl.program_id(1)
    dtype = tl.float64 if FP64 else tl.float32
    T = tl.load(temp_ptr + i).to(dtype)
    if T > 0:
        inv_t = 1.0 / T
        row = tl.load(emit_row_ptr + i)
        draft_row = tl.load(emit_draft_row_ptr + i)
        excluded = tl.load(emit_excluded_ptr + i)
        row_max = tl.load(emit_max_ptr + i)
        inv_sum = 1.0 / tl.load(emit_sum_ptr + i)
        if KEYED:
            seed = tl.load(seeds_ptr + i).to(tl.uint64, bitcast=True)
            pos = tl.load(positions_ptr + i).to(tl.uint32)
        # Tiles are [BLOCK/4, 4]: row q holds vocabulary ids off + 4q .. off + 4q + 3, the four
        # words of one Philox counter — same memory order as a flat tile.
        QUADS: tl.constexpr = BLOCK // 4
        lanes = tl.arange(0, QUADS)[:, None] * 4 + tl.arange(0, 4)[None, :]
        lo = chunk * CHUNK
        hi = lo + CHUNK
        if hi > V:
            hi = V
        # One comparison, not `inside & (draft_row >= 0)`: a block & a scalar is an int32 mask in the
        # interpreter, which Triton >= 3.9 refuses ("mask has unsupported dtype").
        draft_hi = tl.where(draft_row >= 0, hi, lo)
        best_w = tl.full([QUADS, 4], -1.0, dtype)
        best_t = tl.full([QUADS, 4], -1.0, dtype)
        best_w_id = tl.zeros([QUADS, 4], tl.int32)
        best_t_id = tl.zeros([QUADS, 4], tl.int32)
        for tile in range(0, TILES):
            off = lo + tile * BLOCK
            cols = off + lanes
            inside = cols < hi
            z = tl.load(logits_ptr + row * V + cols, mask=inside, other=float("-inf")).to(dtype)
            t = tl.exp((z - row_max) * inv_t) * inv_sum
            if HAS_DRAFT:
                d = tl.load(draft_probs_ptr + draft_row * V + cols, mask=cols < draft_hi,
                            other=0.0).to(dtype)
                w = tl.maximum(t - d, 0.0)
            else:
                w = tl.where(cols == excluded, 0.0, t)
            if KEYED:
                e = word_exponential(philox_quads(seed, off, pos, RECOVER, 0, QUADS, JOIN), FP64)
            else:
                e = tl.load(exponentials_ptr + i.to(tl.int64) * V + cols, mask=inside, other=1.0).to(dtype)
            r = 1.0 / e  # one division for both races
            sw = tl.where(w > 0, w * r, -1.0)
            st = tl.where(t > 0, t * r, -1.0)
            up_w = sw > best_w  # strict: earlier (smaller) ids win ties within a lane
            up_t = st > best_t
            best_w = tl.where(up_w, sw, best_w)
            best_w_id = tl.where(up_w, cols, best_w_id)
            best_t = tl.where(up_t, st, best_t)
            best_t_id = tl.where(up_t, cols, best_t_id)
        best_w = tl.reshape(best_w, (BLOCK,))
        best_t = tl.reshape(best_t, (BLOCK,))
        best_w_id = tl.reshape(best_w_id, (BLOCK,))
        best_t_id = tl.reshape(best_t_id, (BLOCK,))
        bw = tl.max(best_w, axis=0)
        bt = tl.max(best_t, axis=0)
        out = i.to(tl.int64) * NCHUNK + chunk
        tl.store(best_w_ptr + out, bw)
        tl.store(best_t_ptr + out, bt)
        tl.store(best_w_id_ptr + out, tl.min(tl.where(best_w == bw, best_w_id, 2147483647), axis=0))
        tl.store(best_t_id_ptr + out, tl.min(tl.where(best_t == bt, best_t_id, 2147483647), axis=0))


@triton.jit
def finalize_kernel(temp_ptr, num_accepted_ptr, best_w_ptr, best_w_id_ptr, best_t_ptr, best_t_id_ptr,
                    out_ptr, OUT_WIDTH, NCHUNK, BLOCK_C: tl.constexpr):
    """Reduce the chunk winners of each random request and write its last token."""
    i = tl.program_id(0)
    T = tl.load(temp_ptr + i)
    if T > 0:
        c = tl.arange(0, BLOCK_C)
        inside = c < NCHUNK
        p = i.to(tl.int64) * NCHUNK + c
        bw = tl.load(best_w_ptr + p, mask=inside, other=-1.0)
        bt = tl.load(best_t_ptr + p, mask=inside, other=-1.0)
        bw_id = tl.load(best_w_id_ptr + p, mask=inside, other=2147483647)
        bt_id = tl.load(best_t_id_ptr + p, mask=inside, other=2147483647)
        top_w = tl.max(bw, axis=0)
        top_t = tl.max(bt, axis=0)
        token_w = tl.min(tl.where(bw == top_w, bw_id, 2147483647), axis=0)
        token_t = tl.min(tl.where(bt == top_t, bt_id, 2147483647), axis=0)
        token = tl.where(top_w > 0, token_w, token_t)  # empty residual: draw from t (§4)
        n = tl.load(num_accepted_ptr + i)
        tl.store(out_ptr + i.to(tl.int64) * OUT_WIDTH + n, token.to(tl.int64))


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
