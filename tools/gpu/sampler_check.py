"""SPEC §12 on a GPU at engine sizes: the compiled Triton device against the torch device on CUDA.

Every §12 parameter on (``specsim.bench.workloads.sampler_params``, both order profiles), keyed
Philox noise (SPEC §5.2: same seeds, same tokens), draft probabilities and point proposals,
float32 logits. Prints, per case, the requests whose output differs (the two devices
decide top-k/top-p/min_p in float64 alike; a difference is a bug or a float32 near-tie of
the acceptance coin, shown with its request so it can be replayed) and both devices' wall
time per call through the numpy protocol (host work included: not a benchmark).

    python tools/gpu/sampler_check.py --batch 256 --k 4 --vocab 128256 [--filters off]

Without the filters the Triton device takes its fused §12 path (``verify_tensors(sampler=...)``);
with them and a quarter of the requests greedy, the processed rows and their cut (``on``); with
them on every request, none greedy, the fused path with the cut of the §12 rows (``fused``:
``triton_device.sampler_cut``).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())  # run from the repo root: its devices/ and specsim/, installed or not


def case(batch: int, k: int, vocab: int, order: str, point: bool, seed: int, filters: str = "on"):
    """A ``VerifyBatch`` with every §12 parameter on (``order``), T = 1 (a quarter greedy but with
    ``filters`` ``fused``); ``filters`` ``off``: top-k, top-p and min_p off (the Triton device's fused
    §12 path)."""
    from devices.protocol import VerifyBatch
    from specsim.bench.workloads import FILTERS, sampler_params
    rng = np.random.default_rng(seed)
    logits = (rng.standard_normal((batch * (k + 1), vocab), dtype=np.float32) * 2)
    draft = None
    ids = rng.integers(0, vocab, batch * k)
    if not point:
        d = rng.standard_normal((batch * k, vocab), dtype=np.float32) * 2
        draft = np.exp(d - d.max(1, keepdims=True))
        draft /= draft.sum(1, keepdims=True)
    temperature = np.where((np.arange(batch) % 4 == 3) & (filters != "fused"), 0.0, 1.0)
    params = dataclasses.replace(sampler_params(batch, k, vocab, ids, seed), order=order)
    on = filters != "off"
    if not on:
        params = dataclasses.replace(params, min_p=None)
    return VerifyBatch(np.full(batch, k), ids, draft, logits, temperature,
                       np.full(batch, FILTERS["top_k"] if on else 0),
                       np.full(batch, FILTERS["top_p"] if on else 1.0),
                       seeds=rng.integers(0, 2**63, batch).astype(np.uint64),
                       positions=rng.integers(0, 2**20, batch), sampler=params)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--k", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--filters", choices=["on", "off", "fused", "all"], default="all",
                   help="top-k 50 / top-p 0.9 / min_p 0.05 on with greedy requests beside (the processed path), "
                        "off (the fused path), on every request (fused, the §12 rows' cut), or all three")
    p.add_argument("--orders", nargs="+", default=["canonical", "vllm"], choices=["canonical", "vllm"])
    args = p.parse_args()
    from devices.torch_device import make_cuda_device
    from devices.triton_device import make_device
    triton_dev, torch_dev = make_device(), make_cuda_device()
    differing = 0
    cases = itertools.product(["off", "on", "fused"] if args.filters == "all" else [args.filters], args.orders,
                              (False, True), range(args.seeds))
    for filters, order, point, seed in cases:
        batch = case(args.batch, args.k, args.vocab, order, point, seed, filters)
        times, outs = [], []
        for dev in (triton_dev, torch_dev):
            dev.verify(batch)  # warm (compile) once
            t0 = time.perf_counter()
            outs.append(dev.verify(batch))
            times.append(time.perf_counter() - t0)
        a, b = outs
        bad = np.flatnonzero((a.output_token_ids != b.output_token_ids).any(1) | (a.num_accepted != b.num_accepted))
        differing += len(bad)
        print(f"filters={filters} order={order} {'point' if point else 'draft'} seed={seed} "
              f"B={args.batch} K={args.k} V={args.vocab}: {len(bad)} of {args.batch} requests differ "
              f"{bad[:8].tolist()}; accepted {a.num_accepted.mean():.2f}/req; wall triton {times[0]:.2f} s, "
              f"torch {times[1]:.2f} s", flush=True)
    print(f"total requests differing: {differing}")
    return 0 if differing == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
