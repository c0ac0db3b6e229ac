"""Launch shapes of the Triton tree walk (``devices/triton_tree.py``'s ``tree_walk``) on a CUDA GPU.

    python tools/gpu/tree_sweep.py [--batch 64 --vocab 128256 --depth 6 --branch 4 --width 3]

For each vocabulary tile × warps: the walk's median time by CUDA events (``specsim.bench.trees``'
method and trees: every root child rejected, and the first child of every node on top). Prints a Markdown table, fastest first.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--branch", type=int, default=4)
    p.add_argument("--width", type=int, default=3)
    p.add_argument("--blocks", type=int, nargs="+", default=[2048, 4096, 8192, 16384])
    p.add_argument("--warps", type=int, nargs="+", default=[8, 16, 32])
    a = p.parse_args(argv)
    import torch

    from devices.protocol import Noise, TreeBatch
    from devices.registry import load
    from devices.validate import check_tree_call
    from specsim.bench.trees import tree_events, first_child_on_top, tree_parents
    device = load("triton")
    tk = device.tree_kernels
    parents = tree_parents(a.depth, a.branch, a.width)
    N, B, V = len(parents), a.batch, a.vocab
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((B * (N + 1), V)).astype(np.float32)
    tree = TreeBatch(np.full(B, N, np.int64), np.tile(parents, B), rng.integers(0, V, B * N), None, logits,
                     np.ones(B), np.zeros(B, np.int64), np.ones(B))
    noise = Noise(rng.random(B * N), rng.exponential(size=(B, V)) + 1e-300)
    trees = {"rejected at root": tree, "accepted to depth": dataclasses.replace(tree, target_logits=first_child_on_top(tree))}
    rows = []
    for block in a.blocks:
        for warps in a.warps:
            cells = []
            for t in trees.values():
                launch, _ = tk.tree_call(tk, t, noise, check_tree_call(t, noise, device.capabilities), "cuda", block,
                                         num_warps=warps)
                cells.append(tree_events(launch, 2, 10))
            rows.append((block, warps, *cells))
            torch.cuda.empty_cache()
    print(f"tree walk, {N} nodes, batch {B}, V {V}: median ms of 10 (CUDA events)")
    print("| block | warps | " + " | ".join(trees) + " |\n|---|---|" + "---|" * len(trees))
    for r in sorted(rows, key=lambda r: max(r[2:])):
        print(f"| {r[0]} | {r[1]} | " + " | ".join(f"{c:.3f}" for c in r[2:]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
