"""The Triton kernels ``specsim.bench.floors`` times (imported only where Triton and a CUDA GPU are there).

``empty_kernel`` stores one float: a launch that does no work, so a graph of L of them costs what L
dependent launches cost. ``read_kernel`` reads ``n`` float32 once, grid-stride over its programs, each
program summing what it read into its own slot of ``out`` (one float written per program).
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
