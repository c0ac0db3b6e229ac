"""Launch-shape and noise-mode sweep of the Triton device at the anchor size (device machine).

    PYTHONUNBUFFERED=1 python3 tools/gpu/triton_sweep.py [--batch 256 --k 4 --vocab 128256]

For each variant: median CUDA-graph replay time with draft probs, % of the
floor (specsim/commands/bench.py's inputs and method), and each kernel's
device time from torch.profiler. The "injected" variant reads given
exponentials instead of making Philox words: the race kernel's time with and
without in-register noise says how much of it is arithmetic.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.getcwd())

from devices.triton_device import KernelConfig, verify_tensors  # noqa: E402
from specsim.commands import bench  # noqa: E402


def add_injected_noise(x: dict) -> None:
    """Uniforms ``[num_tokens]`` float64 and exponentials ``[batch, V]`` for the injected variant."""
    g = torch.Generator(device="cuda").manual_seed(1)
    x["uniforms"] = torch.rand(x["draft_token_ids"].shape[0], device="cuda", dtype=torch.float64, generator=g)
    x["exponentials"] = torch.empty_like(x["target_logits"][: x["cu"].shape[0] - 1]).exponential_(
        generator=g) + 1e-30


def injected_caller(config):
    def call(x):
        return verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"],
                              x["temperature"].to(x["target_logits"].dtype), max_k=x["max_k"],
                              uniforms=x["uniforms"], exponentials=x["exponentials"], config=config)
    return call


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
    for x in sets:
        add_injected_noise(x)
    d = KernelConfig()
    variants = [("default", d, None), ("join", KernelConfig(join=True), None), ("injected noise", d, "injected"),
                ("race 1024x4", KernelConfig(race_block=1024, race_warps=4), None),
                ("race 4096x16", KernelConfig(race_block=4096, race_warps=16), None),
                ("programs 2112", KernelConfig(programs=2112), None),
                ("stats 4096x16", KernelConfig(block=4096, num_warps=16, race_block=2048, race_warps=8), None)]
    for label, cfg, kind in variants:
        call = injected_caller(cfg) if kind else bench._callers(torch, "triton", cfg)
        graphs = bench._graphs(torch, call, sets)
        t = bench._median(bench._time(torch, lambda i: graphs[i % 3].replay(), 50, 5))
        ph = bench.kernel_times(torch, call, sets)
        print(f"{label:<16} {t * 1e3:.3f} ms graph, {100 * nbytes / t / copy_bw:.0f}% of floor; device ms: "
              + ", ".join(f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
