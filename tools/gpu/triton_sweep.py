"""Launch-shape and noise-mode sweep of the Triton device at one shape (on a CUDA GPU).

    PYTHONUNBUFFERED=1 python3 tools/gpu/triton_sweep.py [--batch 256 --k 4 --vocab 128256 --mode draft]

For each variant: median CUDA-graph replay time, its share of the algorithmic
floor (``specsim bench``'s inputs, floors and method), and each kernel's device
time from torch.profiler. The "injected" variant reads given exponentials
instead of making Philox words: the step kernel's time with and without
in-register noise says how much of it is arithmetic.
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
    x["exponentials"] = torch.empty((x["cu"].shape[0] - 1, x["target_logits"].shape[1]), device="cuda",
                                    dtype=torch.float32).exponential_(generator=g) + 1e-30


def caller(config, injected: bool):
    def call(x):
        noise = dict(uniforms=x["uniforms"], exponentials=x["exponentials"]) if injected else \
            dict(seeds=x["seeds"], positions=x["positions"])
        return verify_tensors(x["cu"], x["draft_token_ids"], x["draft_probs"], x["target_logits"], x["temperature"],
                              max_k=x["max_k"], config=config, **noise)
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
    alg, _ = bench.floor_bytes(args.batch, args.k, args.vocab, 4, 4, args.mode)
    sets = [bench.make_inputs(torch, args.batch, args.k, args.vocab, torch.float32, args.mode, s) for s in range(3)]
    for x in sets:
        add_injected_noise(x)
    d = KernelConfig()
    variants = [("default", d, False), ("no race bound", KernelConfig(bound=False), False),
                ("no prefetch", KernelConfig(prefetch=False), False), ("injected noise", d, True)]
    variants += [(f"race {b}x{w}", KernelConfig(race_block=b, race_warps=w), False)
                 for b, w in ((2048, 8), (2048, 4), (1024, 4), (1024, 2), (512, 2), (512, 4), (1024, 8))]
    variants += [(f"stats {b}x{w}", KernelConfig(block=b, num_warps=w), False) for b, w in ((2048, 4), (1024, 4))]
    for label, cfg, injected in variants:
        call = caller(cfg, injected)
        graphs = bench._graphs(torch, call, sets)
        t = bench._median(bench._time(torch, lambda i: graphs[i % 3].replay(), 50, 5))
        ph = bench.kernel_times(torch, call, sets)
        print(f"{label:<16} {t * 1e3:.3f} ms graph, {100 * alg / t / copy_bw:.0f}% of alg floor; device ms: "
              + ", ".join(f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
