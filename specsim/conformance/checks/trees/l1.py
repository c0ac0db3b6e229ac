"""Tree verification (SPEC §11) checks, on every device that declares ``tree_schemes``.

* ``L1-trees``: the constructed sibling patterns of ``tree_patterns``
  (placeholders before, between and after siblings, duplicates, with and
  without replacement, point proposals, leaves at every depth, an empty
  request beside a big one), each with noise placed where a wrong rule shows,
  or held to its exact law without injected noise; random tree batches of
  every shape (random, chain, full width, binary) and drafting (with and
  without replacement, top-k, duplicate siblings, placeholders), injected and
  keyed noise, token for token and node for node against ``reference.tree``;
  trees at the declared limits (§11.1: depth ``max_k``, EAGLE-2's 64 nodes,
  ``max_tree_nodes``) with the coins steered down the deepest path through
  late siblings, where a refusal fails; the hand-built edges of §11 with their
  exact expected tokens, alone and repeated to fill a batch of each size of the
  ladder (SPEC 1.9), and on the keyed streams under a key whose coins come near
  the placed ones (SPEC 1.13); and the engine-sized trees and ragged batches of
  ``tree_sizes``.
* ``L2-trees`` (``checks.trees.l2``): the contracts of a tree step.

A device without ``verify_tree`` (or declaring no tree scheme) gets one
``not_supported`` result per group. Tree decisions are compared exactly
(SPEC §9's waivers are not yet extended to trees): cases are float64 but for
one float32 case per scheme, whose seeds are fixed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from devices.protocol import Noise, TreeBatch
from specsim.conformance.core.calls import ask, call, tree_device
from specsim.conformance.core.results import CheckResult
from specsim.conformance.checks.trees.patterns import pattern_checks, pattern_twin_checks
from specsim.conformance.checks.trees.sizes import size_checks
from specsim.testing.seeds import case_seed
from specsim.testing.trees import (TreeSpec, compare_tree, layered_parents, random_tree_batch, random_tree_noise,
                                   reference_tree_step, steer_tree, tree_batch_of)

CASES: dict[str, TreeSpec] = {
    "rrs-with-replacement": TreeSpec(),
    "rrs-without-replacement": TreeSpec(drafting="without_replacement"),
    "rrs-point": TreeSpec(drafting="top", duplicate_fraction=0.2),
    "rrs-wide": TreeSpec(shape="wide", max_nodes=8),
    "rrs-binary": TreeSpec(shape="binary", max_nodes=7),
    "greedy": TreeSpec(drafting="top", greedy_fraction=1.0, duplicate_fraction=0.2),
    "sglang": TreeSpec(scheme="sglang", drafting="top"),
    "sglang-duplicates": TreeSpec(scheme="sglang", drafting="top", duplicate_fraction=0.3),
    "sglang-relaxed": TreeSpec(scheme="sglang", drafting="top", threshold_single=0.4, threshold_acc=0.7),
}
SHAPES = [(8, "float64"), (257, "float64"), (65, "float32")]
QUICK_SHAPES = [(8, "float64")]


def _missing(device, spec: TreeSpec, V: int, dtype: str) -> str | None:
    caps = device.capabilities
    lacking = sorted(spec.schemes_needed - set(caps.tree_schemes))
    if lacking:
        return f"device does not declare tree_schemes {lacking}"
    if V > caps.max_vocab_size or dtype not in caps.dtypes:
        return f"V={V} or dtype {dtype} beyond the declared max_vocab_size/dtypes"
    return None


def _check(name: str, layer: str, device, batch: TreeBatch, noise: Noise | None, seed: int | None) -> CheckResult:
    got, problem = call(name, layer, lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    problems = compare_tree(got, reference_tree_step(batch, noise), repro=f" [case {name}, seed {seed}]")
    return CheckResult(name, layer, "fail" if problems else "pass",
                       "; ".join(problems[:3]) if problems else f"{batch.batch_size} requests agree", seed=seed)


def _random_cases(device, ctx, group: str, injected: bool) -> list[CheckResult]:
    results = []
    for case, spec in CASES.items():
        for V, dtype in QUICK_SHAPES if ctx.quick else SHAPES:
            name = f"{group}/{case}/V{V}/{dtype}"
            seed = case_seed(ctx.seed, name)
            why = _missing(device, spec, V, dtype)
            if why:
                results.append(CheckResult(name, "L1", "not_supported", why, seed=seed))
                continue
            rng = np.random.default_rng(seed)
            spec_here = replace(spec, vocab_size=V, dtype=dtype,
                                max_nodes=min(spec.max_nodes, device.capabilities.max_k))
            batch = random_tree_batch(rng, spec_here)
            results.append(_check(name, "L1", device, batch, random_tree_noise(rng, batch) if injected else None, seed))
    return results


# --- §11 edges, each with its exact expected tokens ---------------------------------------

@dataclass(frozen=True)
class TreeEdge:
    name: str
    scheme: str                 # "greedy" (T = 0) or the batch scheme
    parents: list
    ids: list
    target_probs: list          # rows [N + 1][V]: the root's, then one per node (log taken as logits)
    coins: list
    expected: list              # emitted tokens
    nodes: list                 # accepted nodes
    why: str
    threshold_single: float = 1.0
    threshold_acc: float = 1.0


HALF = [0.5, 0.5]
EDGES = [
    TreeEdge("single-node-accepted", "rrs", [-1], [0], [HALF, [0.0, 1.0]], [0.4], [0, 1], [0],
             "one node: u = 0.4 < t(0) = 0.5 accepts; its row is one-hot on 1 (the bonus)"),
    TreeEdge("single-node-rejected", "rrs", [-1], [0], [HALF, [0.0, 1.0]], [0.6], [1], [],
             "one node: u = 0.6 rejects; the residual is t with 0 zeroed"),
    TreeEdge("full-width-rrs", "rrs", [-1, -1, -1], [2, 1, 0], [[0.2, 0.3, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
             [0.99, 0.99, 0.99], [0, 2], [2],
             "siblings covering V: after rejecting 2 and 1 the residual is one-hot on 0, accepted whatever u"),
    TreeEdge("full-width-sglang", "sglang", [-1, -1, -1], [2, 1, 0], [[0.2, 0.3, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1]],
             [0.99, 0.0, 0.0], [0, 2], [2],
             "one coin 0.99 against A = 0.5, 0.8, 1.0: the third sibling (0) is accepted"),
    TreeEdge("duplicate-siblings-rrs", "rrs", [-1, -1], [0, 0], [HALF, HALF, HALF], [0.9, 0.0], [1], [],
             "the first copy of 0 rejected leaves r(0) = 0: the second is rejected even at u = 0"),
    TreeEdge("duplicate-siblings-sglang", "sglang", [-1, -1], [0, 0], [HALF, HALF, HALF], [0.7, 0.0], [0, 0], [1],
             "SGLang counts t(0) twice (A = 0.5, 1.0): coin 0.7 accepts the second copy (lossy, §11.4)"),
    TreeEdge("placeholder-sibling-rrs", "rrs", [-1, -1], [-1, 0], [HALF, HALF, HALF], [0.0, 0.4], [0, 0], [1],
             "a placeholder sibling is skipped (residual untouched, coin unread); the next meets t"),
    TreeEdge("placeholder-sibling-sglang", "sglang", [-1, -1], [-1, 1], [HALF, HALF, HALF], [0.3, 0.99], [1, 0], [1],
             "the level's coin is the first child's (0.3 < A = 0.5), even when that child is a placeholder"),
    TreeEdge("placeholder-subtree", "rrs", [-1, 0], [-1, 1], [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], [0.0, 0.0], [1], [],
             "a node under a placeholder is never reached; the root's residual emits 1"),
    TreeEdge("sglang-u0-zero-probability", "sglang", [-1, -1], [0, 1],
             [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [0.0, 0.7], [1, 2], [1],
             "coin u = 0: the first sibling (0, t = 0) is rejected, 0 < A = 0 being false (§11.4's strict form; "
             "SGLang's u <= A/a accepts it); the second (t = 0.5) is accepted and its leaf row emits 2"),
    TreeEdge("sglang-threshold-single-zero", "sglang", [-1, -1], [0, 1],
             [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], [0.99, 0.0], [1, 2], [1],
             "threshold_single = 0 accepts the first sibling the target allows (1, t = 0.5), never the "
             "zero-probability one before it (§11.4: t(x) > 0 is required)", threshold_single=0.0),
    TreeEdge("sglang-threshold-acc-zero", "sglang", [-1, -1, -1], [0, 2, 1],
             [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], [0.99, 0.0, 0.0], [2, 1], [1],
             "threshold_acc = 0: u·0 < A accepts the first sibling with A > 0 (2, after the forbidden 0), "
             "whatever the coin", threshold_acc=0.0),
    TreeEdge("greedy-first-match", "greedy", [-1, -1, 0, 1], [1, 1, 0, 1],
             [[0.2, 0.8], [0.9, 0.1], [0.1, 0.9], [0.5, 0.5], [0.5, 0.5]], [0.0] * 4, [1, 0, 0], [0, 2],
             "greedy: the first sibling matching the argmax (node 0, not its duplicate node 1) is followed"),
]


def edge_batch(edge: TreeEdge) -> tuple[TreeBatch, Noise]:
    V = len(edge.target_probs[0])
    with np.errstate(divide="ignore"):
        logits = np.log(np.array(edge.target_probs, dtype=np.float64))
    greedy = edge.scheme == "greedy"
    batch = TreeBatch(np.array([len(edge.parents)]), np.array(edge.parents, np.int64), np.array(edge.ids, np.int64),
                      None, logits, np.array([0.0 if greedy else 1.0]), np.zeros(1, np.int64), np.ones(1),
                      scheme="rrs" if greedy else edge.scheme, threshold_single=edge.threshold_single,
                      threshold_acc=edge.threshold_acc)
    return batch, Noise(np.array(edge.coins, np.float64), np.ones((1, V)))


def edge_checks(device, ctx) -> list[CheckResult]:
    results = []
    for edge in EDGES:
        name = f"L1/trees/edge/{edge.name}"
        if edge.scheme not in device.capabilities.tree_schemes:
            results.append(CheckResult(name, "L1", "not_supported", f"device does not declare tree scheme {edge.scheme!r}"))
            continue
        batch, noise = edge_batch(edge)
        results.append(_edge_alone(device, name, batch, noise, edge.expected, edge.nodes, edge.why))
    return results


def _edge_alone(device, name: str, batch: TreeBatch, noise: Noise | None, expected: list, nodes: list,
                why: str) -> CheckResult:
    """One §11 edge's one-request ``batch`` (``noise`` None: keyed), its emitted tokens and accepted nodes held to
    ``expected`` and ``nodes``."""
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    emitted, taken = got.emitted(0), [int(n) for n in np.asarray(got.accepted_nodes)[0] if n >= 0]
    ok = emitted == expected and taken == nodes
    return CheckResult(name, "L1", "pass" if ok else "fail",
                       why if ok else f"{why}: expected {expected} via {nodes}, got {emitted} via {taken}")


def edge_batch_checks(device, ctx, only: str | None = None, kind: str = "batches") -> list[CheckResult]:
    """``L1/trees/edge/<name>/batches`` (SPEC 1.9): each §11 edge (one request) repeated to fill a batch of each size
    of the ladder (``declared_cases.edge_batch_sizes``), every copy with the edge's noise, each held to the edge's
    exact tokens and accepted nodes: a tree kernel's path for a large batch that lost a sibling, threshold or placeholder
    rule the one-request call keeps fails here. With injected noise (the edges' coins are placed). ``kind="mixed"``:
    ``L1/trees/edge/<name>/mixed`` (SPEC 1.11), the edge among ``tree_filler``'s requests at each size of
    ``edge_mixed_sizes``, with ``L1/trees/edge-neighbours/<name>/mixed``, the filler rows held to the reference's
    tokens and accepted nodes (``batched.tree_among``)."""
    from specsim.conformance.cases.declared import edge_batch_sizes, edge_mixed_sizes
    from specsim.conformance.core.batched import copy_tree_answers, neighbours_of, tree_among
    results, sizes = [], (edge_mixed_sizes if kind == "mixed" else edge_batch_sizes)(ctx)
    for edge in EDGES:
        name = f"L1/trees/edge/{edge.name}/{kind}"
        if only not in (None, name, neighbours_of(name)):
            continue
        if edge.scheme not in device.capabilities.tree_schemes:
            results.append(CheckResult(name, "L1", "not_supported", f"device does not declare tree scheme {edge.scheme!r}"))
            continue
        batch, noise = edge_batch(edge)
        if kind == "mixed":
            results += tree_among(device, name, batch, noise, tree_filler(device.capabilities, ctx, edge, batch),
                                  tuple(s for s in sizes if s > 1), edge.why, edge.expected, edge.nodes)
        else:
            results.append(copy_tree_answers(device, name, batch, noise, sizes, edge.why, edge.expected, edge.nodes))
    return results


def edge_mixed_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1/trees/edge/<name>/mixed`` (SPEC 1.11): ``edge_batch_checks`` of the §11 edges among filler trees."""
    return edge_batch_checks(device, ctx, only, kind="mixed")


def _twins_asked(device, ctx, only: str | None, mode: str):
    """Per §11 edge with a ``mode`` twin asked (``only``: that check or its neighbours), (the edge, the twins' names
    to run, the ``not_supported`` results of those whose scheme the device does not declare): the twin alone,
    ``/batches`` and, but for ``--quick`` runs, ``/mixed``."""
    from specsim.conformance.core.batched import neighbours_of
    for edge in EDGES:
        base = f"L1/trees/edge/{edge.name}/{mode}"
        names = [base, f"{base}/batches"] + ([] if ctx.quick else [f"{base}/mixed"])
        wanted = [n for n in names if only in (None, n, neighbours_of(n))]
        if not wanted:
            continue
        if edge.scheme not in device.capabilities.tree_schemes:
            yield edge, [], [CheckResult(n, "L1", "not_supported", f"device does not declare tree scheme "
                                         f"{edge.scheme!r}") for n in wanted]
        else:
            yield edge, wanted, []


KEYED_TRIES = 4096
"""Keys (seed, position) drawn per §11 edge for its keyed twin (SPEC 1.13); the one nearest its placed coins is kept."""
KEYED_CHECKED = 32
"""Of those, the nearest this many are tried against the edge's own answer (``keyed_edge``)."""


def keyed_edge(edge: TreeEdge, seed: int) -> tuple[TreeBatch, list, list, str]:
    """A §11 edge on SPEC §5.2's keyed streams (SPEC 1.13): its one-request batch under the key, of ``KEYED_TRIES``
    drawn from ``seed``, whose keyed coins come nearest its placed coins (the largest difference smallest), among the
    nearest ``KEYED_CHECKED`` the first under which the reference answers as the placed coins do — so that the rule
    the edge places its coins for decides on the keyed path too. Returns (the batch, its emitted tokens, its
    accepted nodes, a note naming the key). Where none of them answers so (an emitted token the keyed race draws
    from a residual of several tokens), the nearest key, held to the reference's keyed answer, and the note says so.
    A greedy edge reads no coins: the first key."""
    from reference.rng import ACCEPT, uniform
    from specsim.engine.rng import keyed_words
    batch, _ = edge_batch(edge)
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**63, KEYED_TRIES, dtype=np.int64).astype(np.uint64)
    positions = rng.integers(0, 2**31, KEYED_TRIES, dtype=np.int64)
    if edge.scheme == "greedy":
        distance = np.zeros(KEYED_TRIES)
    else:   # each key's first coins on the ACCEPT stream, every key in one Philox call
        coins = uniform(keyed_words(seeds, positions, ACCEPT, 0, len(edge.coins))[:, 0])
        distance = np.abs(coins - np.array(edge.coins)).max(axis=1)
    nearest = np.argsort(distance, kind="stable")[:KEYED_CHECKED]
    for i in list(nearest) + [nearest[0]]:
        keyed = replace(batch, seeds=seeds[i:i + 1], positions=positions[i:i + 1])
        want = reference_tree_step(keyed, None)
        tokens = want.output_token_ids[0, : int(want.num_accepted[0]) + 1].tolist()
        nodes = [int(x) for x in want.accepted_nodes[0] if x >= 0]
        if (tokens, nodes) == (edge.expected, edge.nodes):
            break
    key = f"keyed streams at seed {int(seeds[i])}, position {int(positions[i])}"
    if edge.scheme != "greedy":
        key += f", its coins within {distance[i]:.3f} of the placed ones"
    if (tokens, nodes) != (edge.expected, edge.nodes):
        key += f", the reference's keyed answer {tokens} via {nodes} (none of the {KEYED_CHECKED} nearest keys " \
               f"answers as the placed coins do)"
    return keyed, tokens, nodes, key


def keyed_edge_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1/trees/edge/<name>/keyed``, ``.../keyed/batches`` and ``.../keyed/mixed`` (SPEC 1.13), for a device drawing
    SPEC §5.2's keyed noise (``rng = "philox"``), with or without injected noise: each §11 edge on the keyed streams
    (``keyed_edge``: a key whose coins come near the edge's placed ones), held to its answer alone, repeated to fill
    a batch of each size of the ladder (every copy the same key, so the same answer: streams are keyed by the
    request, never by its row), and, but for ``--quick`` runs, among ``tree_filler``'s requests with
    ``L1/trees/edge-neighbours/<name>/keyed/mixed`` holding the filler rows to the reference's keyed answers. A rule
    the device keeps where its coins are given and loses where it draws them (another kernel, another path) fails
    here; 1.9 to 1.11 ask the edges with injected noise alone, and not at all of a device without it."""
    from specsim.conformance.cases.declared import edge_batch_sizes, edge_mixed_sizes
    from specsim.conformance.core.batched import copy_tree_answers, tree_among
    results = []
    for edge, wanted, refused in _twins_asked(device, ctx, only, "keyed"):
        results += refused
        if not wanted:
            continue
        base = f"L1/trees/edge/{edge.name}/keyed"
        batch, tokens, nodes, key = keyed_edge(edge, case_seed(ctx.seed, "tree-edge-keyed", edge.name))
        why = f"{edge.why} ({key})"
        for name in wanted:
            if name == base:
                results.append(_edge_alone(device, name, batch, None, tokens, nodes, why))
            elif name.endswith("/batches"):
                results.append(copy_tree_answers(device, name, batch, None, edge_batch_sizes(ctx), why, tokens, nodes))
            else:
                filler, _ = tree_filler(device.capabilities, ctx, edge, batch)
                results += tree_among(device, name, batch, None, (filler, None),
                                      tuple(s for s in edge_mixed_sizes(ctx) if s > 1), why, tokens, nodes)
    return results


SEEDED_ALONE, QUICK_SEEDED_ALONE = 64, 16
"""Calls of one request each a §11 edge's ``/seeded`` check makes (SPEC 1.14), each under its own seed and position:
an answer of probability 0.05 outside the support at one request is seen with probability 0.96 (0.56 with
``--quick``)."""


def seeded_edge_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1/trees/edge/<name>/seeded``, ``.../seeded/batches`` and ``.../seeded/mixed`` (SPEC 1.14), for a device
    drawing unkeyed randomness of its own (``rng = "seeded"``), with injected noise or without: each §11 edge under
    the device's own draws, its coins unplaceable, so held to its exact law given its drafts
    (``testing.trees.request_laws``, keyed by emitted tokens and accepted nodes): alone in ``SEEDED_ALONE``
    one-request calls, repeated to fill a batch of each size of the ladder and, but for ``--quick`` runs, among
    ``tree_filler``'s requests, with ``L1/trees/edge-neighbours/<name>/seeded/mixed`` holding the filler rows to
    their own laws — every call's rows each under their own seed and position, every answer within its support.
    Exact, no α (the law itself is L3-trees' and, without injected noise, the patterns'). A rule that shows in the
    support whatever the coins — a duplicate or placeholder sibling accepted, a zero-probability sibling taken at a
    threshold of 0, a token the residual removed — fails here where the device loses it on its own draws; a rule
    that shows only under placed coins (``sglang-u0-zero-probability``'s u = 0) cannot be seen."""
    from specsim.conformance.cases.declared import edge_batch_sizes, edge_mixed_sizes
    from specsim.conformance.core.batched import copy_tree_support, tree_among
    from specsim.testing.trees import request_laws
    results, alone = [], QUICK_SEEDED_ALONE if ctx.quick else SEEDED_ALONE
    for edge, wanted, refused in _twins_asked(device, ctx, only, "seeded"):
        results += refused
        if not wanted:
            continue
        base = f"L1/trees/edge/{edge.name}/seeded"
        batch, _ = edge_batch(edge)
        (law,) = request_laws(batch)
        why = f"{edge.why} (here the coins are the device's own: held to the {len(law)} answer(s) its law allows)"
        for name in wanted:
            seed = case_seed(ctx.seed, "tree-edge-seeded", name)
            if name == base:
                results.append(copy_tree_support(device, name, batch, law, (1,) * alone, seed, why))
            elif name.endswith("/batches"):
                results.append(copy_tree_support(device, name, batch, law, edge_batch_sizes(ctx), seed, why))
            else:
                filler, _ = tree_filler(device.capabilities, ctx, edge, batch)
                results += tree_among(device, name, batch, None, (filler, None),
                                      tuple(s for s in edge_mixed_sizes(ctx) if s > 1), why, law, [], seed=seed)
    return results


def tree_filler(caps, ctx, edge: TreeEdge, batch: TreeBatch) -> tuple[TreeBatch, Noise]:
    """(``MIXED_FILLERS`` random trees, their noise) to mix with a §11 edge's one-request ``batch`` (SPEC 1.11): its
    V, logits, scheme, thresholds and point proposals, up to ``min(max_k, max_tree_nodes, 8)`` nodes of random
    shape, no placeholder drafted (siblings past V distinct tokens are placeholders of §11.1), and, of what the
    device declares, a greedy request, one cut by top-k, one by top-p and an unfiltered sampled one (requests 0 to
    3; sampled requests only where the batch's scheme is declared, else every filler greedy), so that a batch flag
    the edge's request sets alone (all greedy, all sampled, none filtered) is unset."""
    from specsim.conformance.core.batched import MIXED_FILLERS, first_four_kinds
    greedy, sampled = "greedy" in caps.tree_schemes, batch.scheme in caps.tree_schemes
    V = batch.vocab_size
    spec = TreeSpec(batch=MIXED_FILLERS, max_nodes=min(caps.max_k, caps.tree_node_limit, 8), vocab_size=V,
                    dtype=str(batch.target_logits.dtype), scheme=batch.scheme, drafting="top",
                    greedy_fraction=(0.25 if greedy else 0.0) if sampled else 1.0,
                    top_k_fraction=0.25 if caps.top_k and sampled else 0.0,
                    top_p_fraction=0.25 if caps.top_p and sampled else 0.0, placeholder_fraction=0.0,
                    threshold_single=batch.threshold_single, threshold_acc=batch.threshold_acc)
    rng = np.random.default_rng(case_seed(ctx.seed, "tree-edge-mixed", edge.name))
    filler = random_tree_batch(rng, spec)
    if sampled:
        filler = first_four_kinds(filler, greedy, caps.top_k, caps.top_p)
    return filler, random_tree_noise(rng, filler)


# --- the declared limits (SPEC §11.1): as deep and as large as declared, exactly ----------------

DEEPEST = 4096
"""A declared ``max_k`` above this is checked at this depth (the reference walks a level per node)."""
WIDE_NODES, WIDE_DEPTH = 64, 6
"""EAGLE-2's published tree (60 nodes at depth 6), rounded up: a root with 11 children."""
LARGEST = 1024
"""A declared ``max_tree_nodes`` above this is checked at this size."""
LARGEST_DEPTH = 8
LIMIT_V = 64


def limit_shapes(caps, quick: bool = False) -> dict[str, np.ndarray]:
    """Name → request-local ``parents`` of the trees at the declared limits: the deepest (depth
    ``min(max_k, max_tree_nodes)``, two chains under the root), EAGLE-2's size (64 nodes at depth 6:
    11 root children, the deep subtree under the tenth) and, but for ``quick`` runs, the largest
    (``max_tree_nodes`` at depth 8; the capabilities group calls it in every run)."""
    depth = min(caps.max_k, caps.tree_node_limit, DEEPEST)
    shapes = {f"depth-{depth}": layered_parents(min(2 * depth, caps.tree_node_limit), depth)}
    wide = min(WIDE_NODES, caps.tree_node_limit)
    shapes[f"nodes-{wide}"] = layered_parents(wide, min(WIDE_DEPTH, caps.max_k))
    most = min(caps.tree_node_limit, LARGEST)
    if most > wide and not quick:
        shapes[f"nodes-{most}"] = layered_parents(most, min(LARGEST_DEPTH, caps.max_k))
    return shapes


def _limit_variants(caps) -> list[tuple[str, str, str]]:
    """(name, scheme, drafting) of each declared scheme (rrs with rows if ``draft_probs`` is declared,
    with point proposals if ``point_proposals`` is); greedy alone if nothing else is declared."""
    variants = [(n, s, d) for n, s, d, mode in (("rrs", "rrs", "with_replacement", caps.draft_probs),
                                                ("rrs-point", "rrs", "top", caps.point_proposals),
                                                ("sglang", "sglang", "top", True)) if s in caps.tree_schemes and mode]
    return variants or ([("greedy", "rrs", "top")] if "greedy" in caps.tree_schemes else [])


def _limit_dtype(caps) -> str | None:
    """float64 where declared, else float32 (the steering computes in float64); None: neither."""
    return next((d for d in ("float64", "float32") if d in caps.dtypes), None)


def limit_batch(rng: np.random.Generator, parents: np.ndarray, variant: tuple[str, str, str], caps,
                injected: bool) -> tuple[TreeBatch, Noise]:
    """Four requests with the tree ``parents``: two sampled ones steered down the deepest path
    (``steer_tree``), a greedy one steered the same way (when greedy is declared), one left to its
    noise. Without injected noise only the greedy steering remains (the drafts are the argmax).
    Every logit finite, no top-k/top-p: a steered path is never cut by a forbidden token."""
    name, scheme, drafting = variant
    widest = int(np.bincount(parents + 1).max()) if len(parents) else 0     # top drafting: distinct siblings
    V = min(caps.max_vocab_size, max(widest, LIMIT_V))
    spec = TreeSpec(vocab_size=V, dtype=_limit_dtype(caps), scheme=scheme,
                    drafting=drafting, greedy_fraction=0.0, top_k_fraction=0.0, top_p_fraction=0.0,
                    placeholder_fraction=0.0, masked_fraction=0.0)
    batch = tree_batch_of(rng, [parents] * 4, spec)
    greedy = "greedy" in caps.tree_schemes
    sampled = name != "greedy"
    temperature = np.array([1.0, 0.7, 0.0 if greedy else 1.3, 1.0]) if sampled else np.zeros(4)
    batch = replace(batch, temperature=temperature)
    noise = random_tree_noise(rng, batch)
    steered = [i for i in range(4) if i != 3 and (injected or temperature[i] == 0)]
    batch, noise = steer_tree(batch, noise, steered)
    return batch, noise


def _limit_cases(device, ctx) -> list[CheckResult]:
    """Trees at the declared depth and size against the reference, token for token and node for node:
    a device truncating deep trees, dropping late siblings or refusing wide ones fails. One noise
    mode: injected noise steers the coins; keyed replay is held by the random cases, and without
    either only greedy requests (no coins) are exact."""
    caps = device.capabilities
    mode = ("injected" if caps.injected_noise else "keyed" if caps.rng == "philox"
            else "greedy" if "greedy" in caps.tree_schemes else None)
    if mode is None:
        return [CheckResult("L1/trees/limits", "L1", "not_supported", "no injected noise, no Philox replay and no "
                            "greedy trees: nothing at the limits can be compared exactly (L3-trees holds the law)")]
    if _limit_dtype(caps) is None:
        return [CheckResult("L1/trees/limits", "L1", "not_supported", f"declared dtypes {list(caps.dtypes)} hold "
                            "neither float64 nor float32, the dtypes the limit cases are stated in")]
    results = []
    for variant in [("greedy", "rrs", "top")] if mode == "greedy" else _limit_variants(caps):
        for shape, parents in limit_shapes(caps, ctx.quick).items():
            name = f"L1/trees/limits/{mode}/{variant[0]}/{shape}"
            seed = case_seed(ctx.seed, name)
            batch, noise = limit_batch(np.random.default_rng(seed), parents, variant, caps, mode == "injected")
            noise = noise if mode == "injected" else None
            what = f"a tree of {len(parents)} nodes at depth {int(batch.depths().max(initial=0))}"
            # a refusal of a tree inside the declared limits fails (SPEC §11.1: it must be served)
            got, problem = call(name, "L1", lambda: ask(device, batch, noise), caps)
            if problem:
                results.append(problem)
                continue
            want = reference_tree_step(batch, noise)
            problems = compare_tree(got, want, repro=f" [case {name}, seed {seed}]")
            results.append(CheckResult(name, "L1", "fail" if problems else "pass", "; ".join(problems[:3]) or
                                       f"{what}: {batch.batch_size} requests agree (deepest accepted path "
                                       f"{int(np.max(want.num_accepted))})", seed=seed))
    return results


def tree_l1_group(device, ctx) -> list[CheckResult]:
    """The constructed sibling patterns (``tree_patterns``); random trees with injected (and, for Philox
    devices, keyed) noise; trees at the declared limits; the §11 edges, in each noise mode the device declares;
    trees of engine sizes and ragged batches (``tree_sizes``); then the patterns' twins on the device's own draws
    (``pattern_twin_checks``)."""
    why = tree_device(device)
    if why:
        return [CheckResult("L1/trees", "L1", "not_supported", why)]
    results = pattern_checks(device, ctx)
    if device.capabilities.injected_noise:
        results += _random_cases(device, ctx, "L1/trees/injected", injected=True)
    if device.capabilities.rng == "philox":
        results += _random_cases(device, ctx, "L1/trees/keyed", injected=False)
    results += _limit_cases(device, ctx)
    if device.capabilities.injected_noise:   # the §11 edges place their coins: at one request, then at batch sizes
        results += edge_checks(device, ctx) + edge_batch_checks(device, ctx) + edge_mixed_checks(device, ctx)
    if device.capabilities.rng == "philox":   # and on the keyed streams, near the placed coins (SPEC 1.13)
        results += keyed_edge_checks(device, ctx)
    if device.capabilities.rng == "seeded":   # or under its own unkeyed draws, by exact support (SPEC 1.14)
        results += seeded_edge_checks(device, ctx)
    results += size_checks(device, ctx)
    return results + pattern_twin_checks(device, ctx)   # last, the patterns on the device's own draws (SPEC 1.14)


__all__ = ["CASES", "EDGES", "TreeEdge", "edge_batch", "edge_batch_checks", "edge_mixed_checks", "keyed_edge",
           "keyed_edge_checks", "seeded_edge_checks", "tree_device", "tree_filler", "tree_l1_group"]
