"""Launch-shape and noise-mode sweep of the Triton device at one shape (on a CUDA GPU).

    PYTHONUNBUFFERED=1 python3 tools/gpu/triton_sweep.py [--batch 256 --k 4 --vocab 128256 --mode draft]
        [--dtype float32|bfloat16|float16] [--grid]

For each variant: median CUDA-graph replay time, its share of the algorithmic
floor (``specsim bench``'s inputs, floors and method), and each kernel's device
time from torch.profiler. The "injected" variant reads given exponentials
instead of making Philox words: the step kernel's time with and without
in-register noise says how much of it is arithmetic. ``--grid`` times every statistics launch shape
(block × warps × pipelining stages × programs) and every race shape instead, and names the fastest.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.getcwd())

from devices.triton_device import KernelConfig, verify_tensors  # noqa: E402
from specsim.bench import harness, workloads  # noqa: E402


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


def variants(grid: bool) -> list:
    """``(label, config, injected)`` of each launch shape to time."""
    d = KernelConfig()
    if not grid:
        out = [("default", d, False), ("no race bound", KernelConfig(bound=False), False), ("injected noise", d, True)]
        out += [(f"race {b}x{w}", KernelConfig(race_block=b, race_warps=w), False)
                for b, w in ((2048, 8), (2048, 4), (1024, 4), (1024, 2), (512, 2), (512, 4), (1024, 8))]
        return out + [(f"stats {b}x{w}", KernelConfig(block=b, num_warps=w, block16=None), False)
                      for b, w in ((2048, 4), (1024, 4), (4096, 4), (4096, 8), (8192, 8))]
    out = [(f"stats {b}x{w} stages {s} programs {p}",
            KernelConfig(block=b, num_warps=w, num_stages=s, programs=p, block16=None), False)
           for b in (1024, 2048, 4096, 8192) for w in (4, 8) for s in (None, 2, 4) for p in (2112, 4224)]
    return out + [(f"race {b}x{w}", KernelConfig(race_block=b, race_warps=w), False)
                  for b in (256, 512, 1024, 2048) for w in (1, 2, 4, 8) if b // (32 * w) >= 1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--mode", default="draft")
    ap.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"))
    ap.add_argument("--grid", action="store_true", help="every launch shape of the statistics and race passes")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    copy_bw = harness.copy_bandwidth(torch)
    print(f"{torch.cuda.get_device_name(0)}: copy {copy_bw / 1e9:.0f} GB/s; {args.batch} x {args.k} x {args.vocab}, "
          f"{args.mode}, {args.dtype}")
    logit_size = torch.empty((), dtype=dtype).element_size()
    prob_size = torch.empty((), dtype=workloads.draft_dtype(torch, dtype)).element_size()
    alg, _ = workloads.floor_bytes(args.batch, args.k, args.vocab, logit_size, prob_size, args.mode)
    sets = [workloads.make_inputs(torch, args.batch, args.k, args.vocab, dtype, args.mode, s) for s in range(3)]
    for x in sets:
        add_injected_noise(x)
    best = None
    for label, cfg, injected in variants(args.grid):
        call = caller(cfg, injected)
        try:
            graphs = harness.graphs(torch, call, sets)
        except Exception as e:  # noqa: BLE001 - a shape the compiler refuses (registers, shared memory) is said
            print(f"{label:<40} refused: {type(e).__name__}: {str(e)[:100]}", flush=True)
            continue
        t = harness.median(harness.time_calls(torch, lambda i: graphs[i % 3].replay(), 50, 5))
        ph = harness.kernel_times(torch, call, sets)
        print(f"{label:<40} {t * 1e3:.3f} ms graph, {100 * alg / t / copy_bw:.0f}% of alg floor; device ms: "
              + ", ".join(f"{n.replace('_kernel', '')} {p * 1e3:.3f}" for n, p in ph.items()), flush=True)
        if not injected and (best is None or t < best[0]):
            best = (t, label)
    print(f"fastest: {best[1]} ({best[0] * 1e3:.3f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
