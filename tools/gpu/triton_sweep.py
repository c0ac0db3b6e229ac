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
    configs = [KernelConfig(b, w, p, rb, rw, st) for b, w, p, rb, rw, st in [
        (2048, 8, 1056, None, None, None), (2048, 8, 2112, None, None, None), (2048, 8, 2112, None, None, 1),
        (2048, 8, 2112, None, None, 2), (2048, 8, 2112, None, None, 4), (1024, 4, 4224, None, None, None),
        (1024, 8, 2112, None, None, None), (2048, 16, 2112, None, None, None), (4096, 16, 2112, None, None, 2)]]
    for cfg in configs[:1] if args.quick else configs:
        call = bench._callers(torch, "triton", cfg)
        t = bench._median(bench._time(torch, lambda i: call(sets[i % 3]), 50, 5))
        ph = bench._breakdown(torch, call, sets, 20)
        print(f"{cfg}: {t * 1e3:.3f} ms, {100 * nbytes / t / copy_bw:.0f}% of floor; phases ms "
              + " ".join(f"{p * 1e3:.3f}" for p in ph), flush=True)
    kernel_times(bench._callers(torch, "triton", KernelConfig()), sets)
    return 0


def kernel_times(call, sets, reps: int = 20) -> None:
    """Per-kernel device time (torch.profiler), calls back to back as in the timed loop."""
    from torch.profiler import ProfilerActivity, profile

    for i in range(3):
        call(sets[i % len(sets)])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(reps):
            call(sets[i % len(sets)])
        torch.cuda.synchronize()
    print("per-kernel device time, default config (us per call):")
    for e in sorted(prof.key_averages(), key=lambda e: -getattr(e, "device_time_total", 0)):
        total = getattr(e, "device_time_total", 0)
        if total > 0:
            print(f"  {e.key[:60]:<60} {total / reps:9.1f}  (x{e.count // reps})")


if __name__ == "__main__":
    sys.exit(main())
