"""The Triton kernels ``specsim.bench.floors`` times (imported only where Triton and a CUDA GPU are there).

``empty_kernel`` stores one float: a launch that does no work, so a graph of L of them costs what L
dependent launches cost. ``read_kernel`` reads ``n`` float32 once, grid-stride over its programs, each
program summing what it read into its own slot of ``out`` (one float written per program). ``philox_kernel``
makes a request's Philox4x32-10 counters as the keyed race makes them (``tl.philox``, SPEC §5.2) and reads
nothing: the race's noise alone.
"""

import triton
import triton.language as tl


@triton.jit
def empty_kernel(out_ptr):
    # one store, so the launch is not optimised away and still touches memory once
    tl.store(out_ptr + tl.program_id(0), 0.0)


@triton.jit
def read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    stride = tl.num_programs(0) * BLOCK
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(pid * BLOCK, n, stride):
        idx = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + idx, mask=idx < n, other=0.0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def philox_kernel(seeds_ptr, out_ptr, counters, CHUNK, NCHUNK, TILES: tl.constexpr, QUADS: tl.constexpr):
    # Request program_id(0)'s Philox4x32-10 counters [chunk * CHUNK, + CHUNK) below `counters`, keyed by its
    # seed as the race keys them (tl.philox); their words XOR-folded so the compiler keeps every round.
    i = tl.program_id(0)
    chunk = tl.program_id(1)
    seed = tl.load(seeds_ptr + i).to(tl.uint64, bitcast=True)
    fold = tl.zeros([QUADS], dtype=tl.uint32)
    for tile in range(0, TILES):
        q = chunk * CHUNK + tile * QUADS + tl.arange(0, QUADS)
        qq = q.to(tl.uint32)
        zero = qq * 0
        c0, c1, c2, c3 = tl.philox(seed, qq, zero + 7, zero + 2, zero)
        fold = fold ^ tl.where(q < counters, c0 ^ c1 ^ c2 ^ c3, 0)
    tl.store(out_ptr + i * NCHUNK + chunk, tl.max(fold, axis=0))
