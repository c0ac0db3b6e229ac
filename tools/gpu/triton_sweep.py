"""Launch-shape sweep of the Triton device at the anchor size (run on the device machine).

    PYTHONUNBUFFERED=1 python3 tools/gpu/triton_sweep.py [--batch 256 --k 4 --vocab 128256]

For each (block, num_warps, programs): median step time with draft probs and
keyed noise, the four launches' times, and % of the measured copy bandwidth
for the floor bytes (specsim/commands/bench.py's method and inputs).
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.getcwd())

from devices.triton_device import KernelConfig  # noqa: E402
from specsim.commands import bench  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--mode", default="draft")
    ap.add_argument("--quick", action="store_true", help="only the default config, then the profile")
    args = ap.parse_args()
    copy_bw = bench.copy_bandwidth(torch)
    print(f"{torch.cuda.get_device_name(0)}: copy {copy_bw / 1e9:.0f} GB/s")
    nbytes = bench.floor_bytes(args.batch, args.k, args.vocab, 4, args.mode)
    sets = [bench.make_inputs(torch, args.batch, args.k, args.vocab, torch.float32, args.mode, s) for s in range(3)]
    configs = [KernelConfig(b, w, p, rb, rw, st, j) for b, w, p, rb, rw, st, j in [
        (2048, 8, 1056, None, None, None, False), (2048, 8, 1056, None, None, None, True),
        (2048, 8, 2112, None, None, None, False), (2048, 8, 2112, None, None, 1, False),
        (2048, 8, 2112, 1024, 4, None, False), (2048, 8, 2112, 4096, 8, None, False),
        (2048, 8, 2112, 1024, 8, None, False), (1024, 4, 4224, None, None, None, False)]]
    warm = bench._callers(torch, "triton", configs[0])  # clocks and allocator settle before the first row
    bench._time(torch, lambda i: warm(sets[i % 3]), 100, 5)
    for cfg in configs[:1] if args.quick else configs:
        call = bench._callers(torch, "triton", cfg)
        t = bench._median(bench._time(torch, lambda i: call(sets[i % 3]), 50, 5))
        print(f"{cfg}: {t * 1e3:.3f} ms, {100 * nbytes / t / copy_bw:.0f}% of floor", flush=True)
        ph = bench.kernel_times(torch, call, sets)
        print("    device ms per call: " + ", ".join(f"{n} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
