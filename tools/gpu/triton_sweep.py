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
    args = ap.parse_args()
    copy_bw = bench.copy_bandwidth(torch)
    print(f"{torch.cuda.get_device_name(0)}: copy {copy_bw / 1e9:.0f} GB/s")
    nbytes = bench.floor_bytes(args.batch, args.k, args.vocab, 4, args.mode)
    sets = [bench.make_inputs(torch, args.batch, args.k, args.vocab, torch.float32, args.mode, s) for s in range(3)]
    configs = [KernelConfig(b, w, p, rb, rw) for b, w, p, rb, rw in [
        (2048, 8, 1056, None, None), (1024, 4, 1056, None, None), (4096, 8, 1056, None, None),
        (4096, 16, 1056, None, None), (2048, 8, 2112, None, None), (2048, 4, 2112, None, None),
        (8192, 16, 528, None, None), (2048, 8, 1056, 1024, 4), (2048, 8, 4224, None, None)]]
    for cfg in configs:
        call = bench._callers(torch, "triton", cfg)
        t = bench._median(bench._time(torch, lambda i: call(sets[i % 3]), 50, 5))
        ph = bench._breakdown(torch, call, sets, 20)
        print(f"{cfg}: {t * 1e3:.3f} ms, {100 * nbytes / t / copy_bw:.0f}% of floor; phases ms "
              + " ".join(f"{p * 1e3:.3f}" for p in ph), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
