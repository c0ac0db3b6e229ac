"""L1-trees at the sizes engines send (SPEC §11): trees of 64+ nodes at depth 6 at real vocabularies,
and ragged batches of trees, chains and empty requests at the size groups' batch sizes.

Kernels change path with width — sibling loops past a warp, residual passes over
many vocabulary tiles, node offsets past a block — and engines draft far
bigger trees than a random test tree (``specsim.testing.engine_trees``):

* ``L1/trees/engine/<shape>/V<V>``: one batch per engine shape at a real
  vocabulary — EAGLE-2's top-k expansion (68 nodes, rrs, point proposals) at
  V = 128256, Medusa's fixed tree (64 nodes, sglang) at V = 151936, SpecInfer's
  merged candidates (64+ nodes, rrs, rows drawn without replacement) at
  V = 32000 — each beside an empty request, a chain of 6 and (for a device
  declaring greedy) a greedy copy of the tree. The sampled tree is *steered*:
  its target rows lift one deepest path's tokens (about 0.8 of the mass), its
  coins accept them and reject their earlier siblings, so the walk goes down
  to depth 6 and emits from a leaf's row; the detail states the depth
  reached.
* ``L1/trees/ragged/B<B>``: a batch of ``B`` requests (``BATCH_SIZES`` of the
  size groups: 31, 129, 257; V = 32) mixing the three engine shapes, chains
  of 1–6, single nodes and empty requests, a quarter greedy, half of the
  sampled trees steered and half under plain random coins.

Under ``ctx.quick`` the engine shapes run at V = 96 and one ragged batch of 33.
Everything is compared token for token and node for node with ``reference.tree``:
with injected noise, and for a Philox device with its keyed noise too (up to
V = 32000, ``KEYED_V``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import Noise, TreeBatch
from specsim.conformance.core.calls import ask, call, node_limit
from specsim.conformance.core.results import CheckResult
from specsim.conformance.cases.tree_assembly import Request, assemble
from specsim.testing.engine_trees import BUILDERS, EngineTree, chain_tree
from specsim.testing.seeds import case_seed
from specsim.testing.trees import compare_tree, reference_tree_step


@dataclass(frozen=True)
class EngineCase:
    shape: str              # a key of engine_trees.BUILDERS
    V: int
    scheme: str             # the batch's scheme for its sampled requests
    drafting: str           # "point", "with" or "without" (the rows sent with the nodes)


ENGINE_CASES = (EngineCase("eagle2", 128256, "rrs", "point"), EngineCase("medusa", 151936, "sglang", "point"),
                EngineCase("specinfer", 32000, "rrs", "without"))
QUICK_V = 96
RAGGED = ((31, "sglang", "point"), (129, "rrs", "point"), (257, "rrs", "without"))
QUICK_RAGGED = ((33, "rrs", "without"),)
"""(batch size of ``sizes.BATCH_SIZES``, scheme, drafting) of each ragged batch."""
RAGGED_V = 32
KEYED_V = 32000
"""Keyed noise (SPEC §5.2, Philox devices) is checked up to this V: its node offsets are the trees', its
vocabulary-wide draws L1-sizes' business; the larger vocabularies run with injected noise only."""
DEPTH = 6
def _empty(V: int) -> EngineTree:
    return EngineTree(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((1, V)), [])


def engine_requests(rng, case: EngineCase, V: int, greedy: bool) -> list[Request]:
    """The case's batch: the steered tree, an empty request, a chain of 6 and (``greedy``) a greedy tree."""
    keep = case.drafting != "point"
    build = BUILDERS[case.shape]
    out = [Request(build(rng, V, keep_rows=keep), False, True), Request(_empty(V), False, False),
           Request(chain_tree(rng, V, DEPTH, keep_rows=keep), False, True)]
    return out + ([Request(build(rng, V, keep_rows=keep), True, False)] if greedy else [])


def ragged_requests(rng, B: int, V: int, drafting: str, greedy: bool) -> list[Request]:
    """``B`` requests: EAGLE-2, Medusa and SpecInfer trees, chains of 1–6, single nodes, empty requests."""
    keep, out = drafting != "point", []
    kinds = ["eagle2", "medusa", "specinfer", "chain", "single", "empty"]
    for kind in rng.choice(kinds, size=B, p=[0.25, 0.15, 0.15, 0.2, 0.1, 0.15]):
        if kind in BUILDERS:
            tree = BUILDERS[kind](rng, V, keep_rows=keep)
        elif kind == "empty":
            tree = _empty(V)
        else:
            tree = chain_tree(rng, V, 1 if kind == "single" else int(rng.integers(1, DEPTH + 1)), keep_rows=keep)
        is_greedy = greedy and rng.random() < 0.25
        out.append(Request(tree, is_greedy, not is_greedy and len(tree.parents) > 0 and rng.random() < 0.5))
    return out


def _lacking(caps, scheme: str, V: int, requests: list[Request]) -> str | None:
    if scheme not in caps.tree_schemes:
        return f"device does not declare tree scheme {scheme!r}"
    if V > caps.max_vocab_size:
        return f"V={V} > declared max_vocab_size={caps.max_vocab_size}"
    if DEPTH > caps.max_k:
        return f"tree depth {DEPTH} > declared max_k={caps.max_k}"
    largest = max(len(r.tree.parents) for r in requests)
    if largest > caps.tree_node_limit:
        return f"a tree of {largest} nodes > {node_limit(caps)}"
    return None


def _check(device, name: str, batch: TreeBatch, noise: Noise | None, requests: list[Request], seed: int,
           ctx) -> CheckResult:
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    want = reference_tree_step(batch, noise)
    problems = compare_tree(got, want, repro=f" [case {name}, specsim conform --groups L1-trees --seed {ctx.seed}]")
    steered = [int(want.num_accepted[i]) for i, r in enumerate(requests) if r.steered and not r.greedy]
    nodes = int(batch.num_nodes.max(initial=0))
    said = (f"{batch.batch_size} requests (largest tree {nodes} nodes, V={batch.vocab_size}) agree; "
            f"deepest accepted path {int(want.num_accepted.max(initial=0))}"
            + (f", steered requests accepted {min(steered)}–{max(steered)} nodes" if steered else ""))
    return CheckResult(name, "L1", "fail" if problems else "pass",
                       "; ".join(problems[:3]) if problems else said, seed=seed)


def _run(device, ctx, name: str, requests_of, V: int, scheme: str, drafting: str) -> list[CheckResult]:
    caps = device.capabilities
    dtype = "float64" if "float64" in caps.dtypes else caps.dtypes[0]
    seed = case_seed(ctx.seed, name)
    rng = np.random.default_rng(seed)
    requests = requests_of(rng, "greedy" in caps.tree_schemes)
    why = _lacking(caps, scheme, V, requests)
    if why:
        return [CheckResult(name, "L1", "not_supported", why, seed=seed)]
    if not caps.injected_noise and caps.rng != "philox":
        return [CheckResult(name, "L1", "not_supported", "an exact check: needs injected noise or SPEC §5.2's keyed "
                            "Philox noise (the tree patterns' laws and L3-trees hold such a device)", seed=seed)]
    batch, noise = assemble(rng, requests, V, scheme, drafting, dtype)
    results = []
    if caps.injected_noise:
        results.append(_check(device, f"{name}/injected", batch, noise, requests, seed, ctx))
    if caps.rng == "philox" and V <= KEYED_V:
        results.append(_check(device, f"{name}/keyed", batch, None, requests, seed, ctx))
    return results


def size_checks(device, ctx) -> list[CheckResult]:
    """The engine-shaped trees at real vocabularies and the ragged batches (module docstring)."""
    results = []
    for case in ENGINE_CASES:
        V = QUICK_V if ctx.quick else case.V
        results += _run(device, ctx, f"L1/trees/engine/{case.shape}-{case.scheme}/V{V}",
                        lambda rng, greedy, c=case, v=V: engine_requests(rng, c, v, greedy), V, case.scheme,
                        case.drafting)
    for B, scheme, drafting in QUICK_RAGGED if ctx.quick else RAGGED:
        results += _run(device, ctx, f"L1/trees/ragged/B{B}-{scheme}",
                        lambda rng, greedy, b=B, d=drafting: ragged_requests(rng, b, RAGGED_V, d, greedy), RAGGED_V,
                        scheme, drafting)
    return results


__all__ = ["ENGINE_CASES", "RAGGED", "EngineCase", "Request", "assemble", "engine_requests", "ragged_requests",
           "size_checks"]
