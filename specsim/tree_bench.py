"""Time a tree step against chain steps on one device: ``python -m specsim.tree_bench --device triton``.

For each (batch, V) the same random logits feed three calls, end to end
through the numpy protocol (host-to-device copies included, CUDA synchronised):

* ``chain K=D``: a chain as deep as the tree (what a chain drafter of the same depth costs);
* ``chain K=N``: a chain with as many drafts as the tree has nodes (the same target rows);
* ``tree``: the tree (default depth 4, branch 2, width 2: 14 nodes), ``verify_tree``, scheme rrs,
  point proposals (EAGLE's top-k trees).

Prints a Markdown table of median milliseconds over ``--repeat`` calls after
``--warmup`` calls. docs/trees.md quotes it with the command that gave it.

``--check`` first holds the device's trees to the reference (the L1-trees and
L2-trees groups at full size, plus 27 random batches of up to V = 3000, injected
and keyed noise) and prints what disagrees: the GPU check the compiled Triton
tree kernel must pass before ``triton`` declares trees.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from devices.protocol import Noise, TreeBatch, VerifyBatch


def tree_parents(depth: int, branch: int, width: int) -> np.ndarray:
    """The shape ``TreeProposer`` drafts (branch children of the ``width`` first nodes of each level).

    >>> tree_parents(2, 2, 1).tolist()
    [-1, -1, 0, 0]
    """
    parents, frontier = [], [-1]
    for _ in range(depth):
        level = []
        for node in frontier:
            for _ in range(branch):
                parents.append(node)
                level.append(len(parents) - 1)
        frontier = level[:width]
    return np.array(parents, np.int64)


def _timed(fn, warmup: int, repeat: int) -> float:
    import torch
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def bench(device, batch: int, vocab_size: int, parents: np.ndarray, warmup: int, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    N, D = len(parents), int(np.max([0] + [_depth(parents, n) for n in range(len(parents))]))
    out = {}
    for name, k in (("chain K=D", D), ("chain K=N", N)):
        logits = rng.normal(size=(batch * (k + 1), vocab_size)).astype(np.float32)
        chain = VerifyBatch(np.full(batch, k, np.int64), rng.integers(0, vocab_size, batch * k), None, logits,
                            np.ones(batch), np.zeros(batch, np.int64), np.ones(batch))
        noise = Noise(rng.random(batch * k), rng.exponential(size=(batch, vocab_size)) + 1e-300)
        out[name] = _timed(lambda: device.verify(chain, noise), warmup, repeat)
    logits = rng.normal(size=(batch * (N + 1), vocab_size)).astype(np.float32)
    tree = TreeBatch(np.full(batch, N, np.int64), np.tile(parents, batch), rng.integers(0, vocab_size, batch * N),
                     None, logits, np.ones(batch), np.zeros(batch, np.int64), np.ones(batch))
    noise = Noise(rng.random(batch * N), rng.exponential(size=(batch, vocab_size)) + 1e-300)
    out["tree"] = _timed(lambda: device.verify_tree(tree, noise), warmup, repeat)
    return out


def _depth(parents: np.ndarray, n: int) -> int:
    return 1 if parents[n] < 0 else 1 + _depth(parents, int(parents[n]))


def check(device) -> bool:
    """The device's trees against the reference; prints every disagreement, returns True if none."""
    import dataclasses

    from specsim.conformance.runner import Context
    from specsim.conformance.trees import CASES, tree_l1_group, tree_l2_group
    from specsim.testing.trees import compare_tree, random_tree_batch, random_tree_noise, reference_tree_step
    problems = 0
    for case, spec in CASES.items():
        for seed in range(3):
            rng = np.random.default_rng(seed)
            batch = random_tree_batch(rng, dataclasses.replace(spec, vocab_size=int(rng.integers(2, 3000)), batch=16))
            noise = random_tree_noise(rng, batch)
            found = compare_tree(device.verify_tree(batch, noise), reference_tree_step(batch, noise)) + \
                compare_tree(device.verify_tree(batch), reference_tree_step(batch, None))
            problems += bool(found)
            for line in found[:2]:
                print(f"{case} seed {seed}: {line}")
    results = tree_l1_group(device, Context()) + tree_l2_group(device, Context())
    for r in results:
        if r.status != "pass":
            problems += 1
            print(f"{r.name}: {r.status}: {r.detail[:200]}")
    print(f"check: {problems} problem(s); {sum(r.status == 'pass' for r in results)} of {len(results)} tree checks pass")
    return problems == 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="triton")
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--vocab", type=int, nargs="+", default=[32000, 151936])
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--branch", type=int, default=2)
    parser.add_argument("--width", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--check", action="store_true", help="hold the device's trees to the reference first")
    a = parser.parse_args(argv)
    from devices.registry import load
    device = load(a.device)
    if device.name == "triton":   # the compiled tree kernel is opted into here (docs/trees.md: GPU check pending)
        from devices.triton_device import TritonDevice
        device = TritonDevice(device.device, device.config, trees=True)
    if a.check:
        check(device)
    parents = tree_parents(a.depth, a.branch, a.width)
    print(f"device {device.name}; tree depth {a.depth} x branch {a.branch}, width {a.width} = {len(parents)} nodes; "
          f"median ms of {a.repeat} calls (numpy in and out, host copies included)")
    print("| batch | V | chain K=D | chain K=N | tree |\n|---|---|---|---|---|")
    for batch in a.batch:
        for V in a.vocab:
            r = bench(device, batch, V, parents, a.warmup, a.repeat)
            print(f"| {batch} | {V} | {r['chain K=D']:.2f} | {r['chain K=N']:.2f} | {r['tree']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
