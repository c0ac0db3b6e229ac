"""Time a tree step against chain steps on one device: ``python -m specsim.bench.trees --device triton``.

For each (batch, V) the same random logits feed three calls, end to end
through the numpy protocol (host-to-device copies included, CUDA synchronised):

* ``chain K=D``: a chain as deep as the tree (what a chain drafter of the same depth costs);
* ``chain K=N``: a chain with as many drafts as the tree has nodes (the same target rows);
* ``tree``: the tree (default depth 4, branch 2, width 2: 14 nodes), ``verify_tree``, scheme rrs,
  point proposals (EAGLE's top-k trees).

Prints a Markdown table of median milliseconds over ``--repeat`` calls after
``--warmup`` calls; ``--record FILE`` also writes the printed tables (and the
check's outcome) as a record of ``specsim.figures.records`` for the docs.

``--check`` first holds the device's trees to the reference (the L1-trees and
L2-trees groups at full size, 27 random batches of up to V = 3000, and at every
``--batch`` × ``--vocab`` of the table three random batches — draft rows without
replacement, point proposals, sglang — each with injected and keyed noise) and
prints what disagrees: the GPU check the compiled Triton tree kernel passed
before ``triton`` declared trees (docs/trees.md).

``--kernel`` (the compiled ``triton`` device) adds a kernel-only table: device
tensors in, CUDA events around the launches alone, median of ``--repeat`` after
``--warmup``: the chain kernels (``verify_tensors``: stats + step) at K = N, the
same target rows as the tree; and ``tree_walk`` (the whole tree step: it reads only the rows
it visits) twice — on random logits (every root child rejected: the root row's statistics
and copy, a residual update of two passes over V per rejected sibling, the race) and on
logits that put the first child of every node on top (the walk goes to depth D: D + 1 rows'
statistics and copies, the race).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from devices.protocol import Noise, TreeBatch, TreeOutput, VerifyBatch
from specsim.testing.trees import reference_tree_step, select_tree_requests


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


def tree_events(fn, warmup: int, repeat: int) -> float:
    """Median ms between CUDA events recorded around ``fn()`` (device tensors in: no host copies)."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return float(np.median(times))


def first_child_on_top(tree: TreeBatch, boost: float = 30.0) -> np.ndarray:
    """``tree``'s logits with each node's first child's token raised by ``boost`` in the node's row
    (the root's row for a root child): a point-proposal rrs walk then accepts to the full depth.

    >>> t = TreeBatch(np.array([2]), np.array([-1, 0]), np.array([1, 2]), None, np.zeros((3, 3), np.float32),
    ...               np.ones(1), np.zeros(1, np.int64), np.ones(1))
    >>> first_child_on_top(t).tolist()
    [[0.0, 30.0, 0.0], [0.0, 0.0, 30.0], [0.0, 0.0, 0.0]]
    """
    logits, cu = tree.target_logits.copy(), tree.request_offsets()
    for i in range(tree.batch_size):
        seen = set()
        for n in range(int(tree.num_nodes[i])):
            parent = int(tree.parents[cu[i] + n])
            if parent not in seen:
                seen.add(parent)
                logits[cu[i] + i + 1 + parent, tree.draft_token_ids[cu[i] + n]] += boost
    return logits


def bench_kernels(device, batch: int, vocab_size: int, parents: np.ndarray, warmup: int, repeat: int) -> dict:
    """Kernel-only medians (ms) on the compiled ``triton`` device; see the module docstring."""
    import dataclasses

    import torch

    from devices.validate import check_tree_call
    from devices.triton_device import verify_tensors
    tk, N, gen = device.tree_kernels, len(parents), torch.Generator(device="cuda").manual_seed(0)
    cuda = dict(device="cuda")
    logits = torch.randn(batch * (N + 1), vocab_size, generator=gen, **cuda)
    cu = torch.arange(batch + 1, **cuda) * N
    ids = torch.randint(0, vocab_size, (batch * N,), generator=gen, **cuda)
    uniforms = torch.rand(batch * N, generator=gen, dtype=torch.float64, **cuda)
    exps = torch.empty(batch, vocab_size, **cuda).exponential_(generator=gen)
    out = {"chain K=N": tree_events(lambda: verify_tensors(
        cu, ids, None, logits, torch.ones(batch, **cuda), max_k=N, uniforms=uniforms, exponentials=exps,
        config=device.config, kernels_module=device.kernels), warmup, repeat)}
    rng = np.random.default_rng(0)
    tree = TreeBatch(np.full(batch, N, np.int64), np.tile(parents, batch), rng.integers(0, vocab_size, batch * N),
                     None, logits.cpu().numpy(), np.ones(batch), np.zeros(batch, np.int64), np.ones(batch))
    noise = Noise(uniforms.cpu().numpy(), exps.double().cpu().numpy())
    for name, t in (("tree kernel, rejected at root", tree),
                    ("tree kernel, accepted to depth", dataclasses.replace(tree, target_logits=first_child_on_top(tree)))):
        launch, (_, acc, _) = tk.tree_call(tk, t, noise, check_tree_call(t, noise, device.capabilities), "cuda")
        out[name] = tree_events(launch, warmup, repeat)
        out[name + " accepted"] = float(acc.double().mean())
    return out


SIZE_CASES = ("rrs-without-replacement", "rrs-point", "sglang")
_SIZED: list = []      # (label, batch, noise) at the table's sizes; set before the reference pool forks
CHUNK = 4              # requests per reference job


def sized_batches(batches, vocab_sizes) -> list:
    """Random tree batches at the table's sizes: ``(label, TreeBatch, Noise)``, seeded by ``V + B``."""
    import dataclasses

    from specsim.conformance.checks.trees.l1 import CASES
    from specsim.testing.trees import random_tree_batch, random_tree_noise
    out = []
    for B in batches:
        for V in vocab_sizes:
            for case in SIZE_CASES:
                rng = np.random.default_rng(V + B)
                batch = random_tree_batch(rng, dataclasses.replace(CASES[case], vocab_size=V, batch=B))
                out.append((f"{case} batch {B} V {V} (seed {V + B})", batch, random_tree_noise(rng, batch)))
    return out


def _reference_chunk(job):
    """The reference on requests ``lo:hi`` of sized batch ``k`` (a worker reads ``_SIZED`` as forked)."""
    k, lo, hi, keyed = job
    _, batch, noise = _SIZED[k]
    sub, sub_noise = select_tree_requests(batch, range(lo, hi), noise)
    return reference_tree_step(sub, None if keyed else sub_noise)


def _compare_rows(got: TreeOutput, want, lo: int) -> list[str]:
    """``want`` (the reference on requests lo:lo+n) against those rows of the whole batch's ``got``
    (whose width may be larger: the columns past ``want``'s must be padding)."""
    from specsim.testing.trees import compare_tree
    n, W = len(want.num_accepted), want.output_token_ids.shape[1]
    tok, nodes = np.asarray(got.output_token_ids)[lo:lo + n], np.asarray(got.accepted_nodes)[lo:lo + n]
    extra = [f"request {lo + i}: output past width {W}: {tok[i, W:].tolist()}" for i in range(n)
             if (tok[i, W:] != -1).any() or (nodes[i, W - 1:] != -1).any()]
    found = compare_tree(TreeOutput(tok[:, :W], np.asarray(got.num_accepted)[lo:lo + n], nodes[:, :W - 1]), want)
    return extra + [f"rows from {lo}: {line}" for line in found]


def start_references(batches, vocab_sizes):
    """Generate the sized batches and fork a pool computing their references (before CUDA is touched).
    Returns ``(pool, {(k, lo, keyed): AsyncResult})``."""
    import multiprocessing
    import os
    _SIZED[:] = sized_batches(batches, vocab_sizes)
    jobs = [(k, lo, min(lo + CHUNK, b.batch_size), keyed) for k, (_, b, _) in enumerate(_SIZED)
            for lo in range(0, b.batch_size, CHUNK) for keyed in (False, True)]
    pool = multiprocessing.get_context("fork").Pool(max(1, (os.cpu_count() or 2) - 2))
    return pool, {(k, lo, keyed): pool.apply_async(_reference_chunk, ((k, lo, hi, keyed),))
                  for k, lo, hi, keyed in jobs}


def check(device, refs=None, summary: bool = False):
    """The device's trees against the reference; prints every disagreement, returns True if none
    (``summary``: ``(problems, tree checks passed, tree checks)`` instead).

    ``refs``: ``start_references``' jobs, for the batches at the table's sizes (optional)."""
    import dataclasses

    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.trees.l1 import CASES, tree_l1_group
    from specsim.conformance.checks.trees.l2 import tree_l2_group
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
    for k, (label, batch, noise) in enumerate(_SIZED if refs else []):
        got = {False: device.verify_tree(batch, noise), True: device.verify_tree(batch)}
        found = [line for (j, lo, keyed), job in refs.items() if j == k
                 for line in _compare_rows(got[keyed], job.get(), lo)]
        problems += bool(found)
        print(f"{device.name}: {label}: {len(found)} mismatch(es) (injected and keyed)", flush=True)
        for line in found[:3]:
            print(f"  {line}")
    results = tree_l1_group(device, Context()) + tree_l2_group(device, Context())
    for r in results:
        if r.status != "pass":
            problems += 1
            print(f"{r.name}: {r.status}: {r.detail[:200]}")
    passed = sum(r.status == "pass" for r in results)
    print(f"check {device.name}: {problems} problem(s); {passed} of {len(results)} tree checks pass", flush=True)
    return (problems, passed, len(results)) if summary else problems == 0


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", nargs="+", default=["triton"])
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--vocab", type=int, nargs="+", default=[32000, 151936])
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--branch", type=int, default=2)
    parser.add_argument("--width", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--check", action="store_true", help="hold the device's trees to the reference first")
    parser.add_argument("--kernel", action="store_true", help="also time the kernels alone (compiled triton)")
    parser.add_argument("--record", default=None, metavar="FILE",
                        help="also write the printed tables as a record for the docs (specsim.figures.records), "
                             "e.g. docs/results/tree-bench-h100.json")
    a = parser.parse_args(argv)
    pool, refs = start_references(a.batch, a.vocab) if a.check else (None, None)
    tables, values = {}, {}
    for name in a.device:
        run_device(name, a, refs, tables, values)
    if pool is not None:
        pool.terminate()
    if a.record:
        from specsim.figures import records
        records.write(record(tables, values, records.command_line("python -m specsim.bench.trees")), a.record)
        print(f"wrote {a.record}")


E2E_COLUMNS = ("batch", "V", "chain K=D", "chain K=N", "tree")
KERNEL_COLUMNS = ("batch", "V", "chain kernels K=N", "tree kernel, rejected at root",
                  "tree kernel, accepted to depth (accepted)", "tree ÷ chain (rejected, accepted)")


def e2e_cells(batch: int, vocab_size: int, r: dict) -> list[str]:
    """A row of the end-to-end table from ``bench``'s medians (ms)."""
    return [str(batch), str(vocab_size), f"{r['chain K=D']:.2f}", f"{r['chain K=N']:.2f}", f"{r['tree']:.2f}"]


def kernel_cells(batch: int, vocab_size: int, r: dict) -> list[str]:
    """A row of the kernel-only table from ``bench_kernels``' medians (ms) and mean accepted length."""
    chain = r["chain K=N"]
    ratios = [r[k] / chain for k in ("tree kernel, rejected at root", "tree kernel, accepted to depth")]
    return [str(batch), str(vocab_size), f"{chain:.3f}", f"{r['tree kernel, rejected at root']:.3f}",
            f"{r['tree kernel, accepted to depth']:.3f} ({r['tree kernel, accepted to depth accepted']:.2f})",
            f"{ratios[0]:.2f}x, {ratios[1]:.2f}x"]


def markdown_row(cells) -> str:
    """One row as printed (and as a record's table renders it).

    >>> markdown_row(["8", "32000", "0.12"])
    '| 8 | 32000 | 0.12 |'
    """
    return "| " + " | ".join(cells) + " |"


def markdown_header(columns) -> str:
    return markdown_row(columns) + "\n|" + "---|" * len(columns)


def run_device(name: str, a, refs, tables: dict | None = None, values: dict | None = None) -> None:
    """``--check``, the end-to-end table and (``--kernel``) the kernel-only table for one device; each table
    printed goes into ``tables`` (``<name>`` and ``<name>-kernel``, ``name`` as given, as a record's tables), the check's
    outcome into ``values``."""
    from devices.registry import load
    tables = {} if tables is None else tables
    values = {} if values is None else values
    device = load(name)
    if a.check:
        problems, passed, total = check(device, refs, summary=True)
        values[f"{name}-check-problems"] = str(problems)
        values[f"{name}-tree-checks-pass"] = f"{passed} of {total}"
    parents = tree_parents(a.depth, a.branch, a.width)
    title = (f"device {device.name}; tree depth {a.depth} x branch {a.branch}, width {a.width} = {len(parents)} "
             f"nodes; median ms of {a.repeat} calls (numpy in and out, host copies included)")
    tables[name] = timed_table(title, E2E_COLUMNS, a, lambda batch, V: e2e_cells(
        batch, V, bench(device, batch, V, parents, a.warmup, a.repeat)))
    if a.kernel and device.name == "triton":
        title = (f"kernel only (device tensors in, CUDA events), median ms of {a.repeat} after {a.warmup}; "
                 f"chain at K = {len(parents)} (the tree's target rows); accepted = mean accepted length")
        print()
        tables[f"{name}-kernel"] = timed_table(title, KERNEL_COLUMNS, a, lambda batch, V: kernel_cells(
            batch, V, bench_kernels(device, batch, V, parents, a.warmup, a.repeat)))


def timed_table(title: str, columns, a, cells_of) -> dict:
    """One table over ``a.batch`` × ``a.vocab``, each row ``cells_of(batch, V)`` printed as it is measured;
    returned as a record's table."""
    print(title)
    print(markdown_header(columns))
    rows = []
    for batch in a.batch:
        for V in a.vocab:
            rows.append(cells_of(batch, V))
            print(markdown_row(rows[-1]), flush=True)
    return {"columns": list(columns), "rows": rows, "note": title}


def record(tables: dict, values: dict, command: str) -> dict:
    """The run's tables and check outcomes as a record (``specsim.figures.records``), with the hardware and
    versions it ran on."""
    import torch

    from specsim.bench.harness import environment
    from specsim.figures import records
    hardware, versions = environment(torch)
    rec = records.new_record(command, hardware=hardware, versions=versions)
    rec["tables"], rec["values"] = dict(tables), dict(values)
    return rec


if __name__ == "__main__":
    main()
