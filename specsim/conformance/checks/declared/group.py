"""Every declared limit at its value, with the law checked, in every noise mode the device declares.

A declaration (``Capabilities``) is a promise up to its limits: ``max_vocab_size``, ``max_k``,
``max_tree_nodes`` (with ``max_k`` as the depth), and any batch size. These groups call the device
at those values — not only at the core's minimum, and not only for the form of the output:

* **Sizes from the declaration** (``declared_sizes``): V at the core's 262144 and at the declared
  ``max_vocab_size`` (capped where one request's float rows would pass ``CALL_BYTES``; the check's
  detail and ``extra["declared"]`` then say the V checked and why); K at the core's 8 and at the
  declared ``max_k`` (its batch holding a request at each ``K_LADDER`` value between); for each
  declared tree scheme a tree of ``max_tree_nodes`` nodes at depth ``max_k`` (both capped at
  ``TREE_CAP``); and batches of ``BATCH_SIZES`` requests, each side of the sizes where kernels
  switch paths.
* ``L1-declared`` — token for token against ``reference`` (``specsim.judge.compare``, SPEC §9's
  near-tie allowances), in each declared noise mode: ``injected`` (given noise, SPEC §5.1) and
  ``keyed`` (``rng == "philox"``, noise None: the reference's keyed streams, SPEC §5.2). Checks
  ``L1/declared/<mode>/{vocab-V<V>, K<K>, batch-B<B>, tree-<scheme>-N<N>-D<D>}``, and SPEC §4's empty residual
  at each checked V and K (SPEC 1.5: ``empty-residual-V<V>``, ``empty-residual-K<K>``) and at every position of each
  checked K (SPEC 1.7: ``empty-residual-positions-K<K>``, past 64 each side of every power of two; SPEC 1.8:
  ``empty-residual-between-K<K>``, the positions between, every one below 512 and past it each side of every
  multiple of 64).
* ``L3-declared`` — a device drawing its own randomness (``rng`` "seeded" or "philox", with or
  without injected noise), mode ``device-rng``:

  - ``L3/declared/support/...``: **exact support**, no statistics. The target rows put their mass
    on a few ids spread over the whole vocabulary (``spread_ids``: the last ids, each side of
    2^15, 2^16, 2^17, 2^18, the middle, the first), no two neighbours in one request, every id the
    dominant one of some request; drafts inside and outside the support; sampled, greedy, top-k and
    top-p requests. Every emitted sequence must have positive probability under the request's exact
    law (``edge_laws.request_law``, SPEC §2–§4), so a token from a wrong row, a wrong offset or a
    truncated index lands outside the support and fails. Trees: one-hot rows down the deepest
    path, so the walk is certain and only the leaf's token is drawn (from a few ids).
  - ``L3/declared/support/empty-residual-positions-K<K>`` (SPEC 1.7) and ``-between-K<K>`` (SPEC 1.8): the
    positions requests above, 8 runs each under distinct seeds, held to their exact support.
  - ``L3/declared/law/vocab-V<V>`` and ``.../K<K>``: **goodness of fit** of one few-id request,
    repeated ``n`` times under distinct seeds, against its exact law (7 and 5 sequences), at each
    declared V and at the declared ``max_k``. Each is one test of the run's statistical plan
    (``stat_plan``: its α share of ``ctx.alpha_family``, n and detectable TV listed in
    ``conformance.json``; ``declared_cases.law_tests`` enumerates them).

The sizes and the requests come from ``declared_cases``. Every law-checking result carries
``extra["scope"] = {"mode", "V", "K", "batch", "tree_nodes"}`` (``K``: the largest K, or the tree
depth; ``tree_nodes``: the largest tree, 0 for chains), so a verdict can state the largest size
checked per noise mode.

``ctx.quick`` shrinks sample counts and the batch sweep, never the declared limits: V, K and trees
are checked at their declared values in a quick run too. SPEC 1.15's every declared variant at those limits
(``variants``) is not asked with ``--quick``.

Cost, CPU seconds on one core (torch device on the CPU, ``torch.set_num_threads(1)``), on a 2-core AMD EPYC:
``L1-declared`` 37.2 s (SPEC 1.5's, 1.7's and 1.8's empty residuals at V and K included; 1.15's 240 variant limits
about 29 s of it) and ``L3-declared`` 15.9 s at full size (``LAW_SAMPLES`` = 240 requests at V = 262144; the same
wall), 4.7 s and 5.8 s with ``--quick``; peak memory 1.8 GB. Measured with
``python -m specsim.conformance.checks.declared.group [--quick]``, which prints each group's wall and CPU time. A
larger declared vocabulary costs in proportion to V.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from devices.protocol import Noise, TreeBatch
from specsim.conformance.core.calls import Malformed, formed, malformed_result, missing
from specsim.conformance.cases.edges import show_law
from specsim.conformance.cases.declared import (CALL_BYTES, DEVICE_RNG, INJECTED, KEYED, SMALL_V, LawCase, Limit, Req,
                                                assemble, batch_sizes, case_law, cast_logits, deep_requests,
                                                between_positions, empty_positions, k_limits,
                                                law_cases, logits_dtype, per_call, random_requests, request_laws,
                                                scope, support_requests, tree_limits, vocab_limits)
from specsim.conformance.checks.declared.shared import (VARIANT_TREES, call_formed, deep_noise, first_failure,
                                                        formed_tree, l1_chain, outside_support, support_chain,
                                                        tree_result, variant_chain, variant_tree_spec, with_scope)
from specsim.conformance.checks.declared.variants import variant_limit_checks
from specsim.conformance.core.results import CheckResult
from specsim.testing.edges import EDGES, after_certain, band_at_position, make_batch
from specsim.testing.embed import embed_at, spread_ids as spread_ids_at
from specsim.testing.seeds import case_seed


# --------------------------------------------------------------------------- trees at the declared limits

def _layered(nodes: int, depth: int):
    from specsim.testing.trees import deepest_path, layered_parents
    parents = layered_parents(nodes, depth)
    return parents, deepest_path(parents)


def certain_tree(scheme: str, nodes: int, depth: int, V: int, dtype: str, seed: int) -> tuple[TreeBatch, list, list]:
    """One request's tree of ``nodes`` nodes at depth ``depth`` whose walk is certain: each row on the deepest
    path is one-hot on the path's next token (its earlier siblings carry other tokens: rejected with certainty),
    the leaf's row holds three ids. (batch, path nodes, the leaf row's ids). ``scheme`` ``"greedy"``: T = 0."""
    from reference.tree import children_of
    rng = np.random.default_rng(seed)
    parents, path = _layered(nodes, depth)
    tokens = rng.integers(0, V, nodes)
    kids = children_of(parents.tolist())
    logits = rng.normal(0.0, 1.0, (nodes + 1, V))
    for node in path:
        slot = int(parents[node]) + 1
        for sib in kids[slot]:
            if sib != node and tokens[sib] == tokens[node]:
                tokens[sib] = (tokens[node] + 1 + rng.integers(0, V - 1)) % V
        logits[slot] = -np.inf
        logits[slot, tokens[node]] = 0.0
    leaf = path[-1] + 1 if path else 0
    support3 = [V - 1, V // 2, 1]
    logits[leaf] = -np.inf
    logits[leaf, support3] = [1.0, 0.5, 0.0]
    greedy = scheme == "greedy"
    batch = TreeBatch(np.array([nodes], np.int64), parents.astype(np.int64), tokens.astype(np.int64), None,
                      cast_logits(logits, dtype), np.array([0.0 if greedy else 1.0]), np.zeros(1, np.int64), np.ones(1),
                      np.array([seed % 2**63 | 1], np.uint64), np.array([5], np.int64),
                      scheme="rrs" if greedy else scheme)
    return batch, path, support3


def steered_tree(scheme: str, nodes: int, depth: int, V: int, dtype: str, rng) -> tuple[TreeBatch, Noise]:
    """A tree of ``nodes`` nodes at depth ``depth`` with random rows, steered down its deepest path by its
    injected coins (``tree_assembly.assemble``): the law's coins and races at every depth."""
    from specsim.conformance.cases.tree_assembly import Request, assemble as assemble_trees
    from specsim.testing.engine_trees import EngineTree
    parents, path = _layered(nodes, depth)
    tree = EngineTree(parents, rng.integers(0, V, nodes).astype(np.int64), None, path)
    return assemble_trees(rng, [Request(tree, scheme == "greedy", scheme != "greedy")], V,
                          "rrs" if scheme == "greedy" else scheme, "point", dtype)


def join_trees(a: TreeBatch, noise_a: Noise, b: TreeBatch, noise_b: Noise | None, rng) -> tuple[TreeBatch, Noise]:
    """Two one-scheme tree batches as one (``a``'s scheme), their noise joined (``noise_b`` None: fresh coins from
    ``rng``, the case's generator)."""
    nb = noise_b or Noise(rng.random(int(b.num_nodes.sum())), rng.exponential(size=(b.batch_size, b.vocab_size)))
    cat = np.concatenate
    batch = TreeBatch(cat([a.num_nodes, b.num_nodes]), cat([a.parents, b.parents]),
                      cat([a.draft_token_ids, b.draft_token_ids]), None,
                      cat([a.target_logits, b.target_logits.astype(a.target_logits.dtype)]),
                      cat([a.temperature, b.temperature]), cat([a.top_k, b.top_k]), cat([a.top_p, b.top_p]),
                      cat([a.seeds, b.seeds]), cat([a.positions, b.positions]), scheme=a.scheme)
    return batch, Noise(cat([noise_a.uniforms, nb.uniforms]), cat([noise_a.exponentials, nb.exponentials]))


# --------------------------------------------------------------------------- L1-declared

def noise_modes(caps) -> list[str]:
    """The token-for-token modes the device declares: ``injected`` and (``rng == "philox"``) ``keyed``."""
    from specsim.conformance.core.scope import declared_modes
    return [m for m in declared_modes(caps) if m in (INJECTED, KEYED)]


def _steered_chain(rng, K: int, V: int, caps) -> Req:
    """K drafts on random rows (each draft's logit lifted: accepted under a small coin): the law at every depth."""
    drafts = [int(x) for x in rng.integers(0, V, K)]
    supports = [list(range(V))] * (K + 1)
    levels = []
    for j in range(K + 1):
        z = rng.normal(0.0, 1.0, V)
        if j < K:
            z[drafts[j]] += 4.0
        levels.append(list(z))
    rows = [{x: 0.5} | {int(y): 0.5 / 4 for y in rng.choice([v for v in range(V) if v != x], 4, replace=False)}
            for x in drafts]
    return Req(drafts, supports, levels, rows if caps.draft_probs else None, what="random rows")


def l1_checks(device, ctx) -> list[CheckResult]:
    caps = device.capabilities
    modes = noise_modes(caps)
    if not modes:
        return [CheckResult("L1/declared", "L1", "not_supported", "device takes no injected noise and draws no keyed "
                            "Philox noise: nothing to compare token for token (L3-declared holds its law)")]
    dtype, point = logits_dtype(caps), not caps.draft_probs
    results = []
    for mode in modes:
        for lim in vocab_limits(caps):
            name = f"L1/declared/{mode}/vocab-V{lim.value}"
            said = f"V={lim.value}" + (f" (declared {lim.declared}; {lim.capped})" if lim.capped else "")
            rng = np.random.default_rng(case_seed(ctx.seed, name))
            parts = [l1_chain(device, ctx, mode, name, assemble(reqs, lim.value, dtype, point), rng, said,
                               lim.to_json()) for reqs in per_call(support_requests(lim.value, caps), lim.value)]
            results.append(first_failure(parts))
        for lim in k_limits(caps):
            name = f"L1/declared/{mode}/K{lim.value}"
            rng = np.random.default_rng(case_seed(ctx.seed, name))
            reqs = deep_requests(lim.value, caps) + [_steered_chain(rng, lim.value, SMALL_V, caps)]
            batch = assemble(reqs, SMALL_V, dtype, point)
            noise = deep_noise(rng, batch) if mode == INJECTED else None
            said = f"K={lim.value} (declared max_k {lim.declared})"
            results.append(l1_chain(device, ctx, mode, name, batch, rng, said, lim.to_json(), noise))
        for B in batch_sizes(ctx):
            name = f"L1/declared/{mode}/batch-B{B}"
            rng = np.random.default_rng(case_seed(ctx.seed, name))
            batch = assemble(random_requests(rng, B, SMALL_V, caps), SMALL_V, dtype, point)
            results.append(l1_chain(device, ctx, mode, name, batch, rng, f"B={B}"))
        results += [empty_residual_at_v(device, ctx, mode, lim, dtype) for lim in vocab_limits(caps)]
        results += [empty_residual_at_k(device, ctx, mode, lim, dtype) for lim in k_limits(caps)]
        results += [empty_residual_positions(device, ctx, mode, lim, dtype, kind)
                    for kind, lim in position_limits(caps)]
        results += [_l1_tree(device, ctx, mode, scheme) for scheme in caps.tree_schemes]
        results += variant_checks(device, ctx, mode)
        results += variant_limit_checks(device, ctx, mode)
    return results





# --------------------------------------------------------------------------- every declared variant (SPEC 1.14)

def _variant_tree(rng, caps, dtype: str, form: str) -> TreeBatch:
    from specsim.testing.trees import random_tree_batch
    return random_tree_batch(rng, variant_tree_spec(caps, dtype, form, batch=VARIANT_TREES, vocab_size=SMALL_V,
                                                    max_nodes=min(8, caps.max_k, caps.tree_node_limit)))


def variant_checks(device, ctx, mode: str) -> list[CheckResult]:
    """``L1/declared/<mode>/variant/<dtype>/<kind>/<form>`` (SPEC 1.14): one call of each variant the device declares
    in ``mode`` (``scope.declared_variants``: each declared dtype, kind of call — sampled, greedy, filtered, §12,
    tree — and proposal form), token for token against the reference. A kernel variant compiled per dtype, noise
    source and path (a 16-bit §12 race on the device's own noise, say) that no other check asks is asked here: a
    variant that raises, or answers wrong, fails."""
    from specsim.conformance.core.scope import declared_variants
    caps, results = device.capabilities, []
    for variant in declared_variants(caps, mode):
        dtype, kind, form = variant.split()
        name = f"L1/declared/{mode}/variant/{dtype}/{kind}/{form}"
        seed = case_seed(ctx.seed, name)
        rng = np.random.default_rng(seed)
        said = f"the {dtype} {kind} variant with {'draft probabilities' if form == 'draft' else 'point proposals'}"
        if kind != "tree":
            results.append(l1_chain(device, ctx, mode, name, variant_chain(rng, caps, dtype, kind, form), rng, said))
            continue
        results.append(tree_result(device, ctx, mode, name, _variant_tree(rng, caps, dtype, form), rng, said))
    return results


# --------------------------------------------------------------------------- an empty residual at the declared limits

DECLARED_EMPTY_EDGES = ("empty-residual", "empty-residual-top-k-temperature", "empty-residual-top-p-temperature")
"""SPEC §4's empty-residual edges asked at each declared V (SPEC 1.5): the plain rows', and the cuts' at T ≠ 1."""


def _empty_residual_lacking(caps) -> str | None:
    return None if caps.draft_probs else ("device declares no draft probabilities: a point proposal's residual is "
                                          "never empty (SPEC §4: t with the drafted token zeroed)")


def empty_residual_at_v(device, ctx, mode: str, lim: Limit, dtype: str) -> CheckResult:
    """``L1/declared/<mode>/empty-residual-V<V>`` (SPEC 1.5): each request of ``DECLARED_EMPTY_EDGES`` (those the
    device can be asked) re-stated at the checked V, its four ids spread over the row (``embed.spread_ids``: id 0,
    tile edges, 2^15, 2^16, the last id), one request a call; its tokens against the reference's in ``mode``. A
    fallback to ``t`` that breaks only past the vocabularies L1-sizes reaches fails here."""
    name, caps = f"L1/declared/{mode}/empty-residual-V{lim.value}", device.capabilities
    why = _empty_residual_lacking(caps)
    if why:
        return CheckResult(name, "L1", "not_supported", why)
    said = f"an empty residual at V={lim.value}" + (f" (declared {lim.declared}; {lim.capped})" if lim.capped else "")
    ids, parts = spread_ids_at(lim.value, 4), []
    for edge in EDGES:
        if edge.name not in DECLARED_EMPTY_EDGES or missing(caps, edge.needs):
            continue
        for request in edge.requests:   # one a call: within CALL_BYTES at every V checked
            batch, noise = embed_at(*make_batch([request], dtype=dtype, point=False), lim.value, ids)
            parts.append(l1_chain(device, ctx, mode, name, batch, None, said, lim.to_json(), noise))
    return first_failure(parts)


def empty_residual_at_k(device, ctx, mode: str, lim: Limit, dtype: str) -> CheckResult:
    """``L1/declared/<mode>/empty-residual-K<K>`` (SPEC 1.5): requests of K drafts, the first K − 1 accepted with
    certainty (one-hot target and draft rows), the last rejected with an empty residual — the tempered target of
    ``empty-residual-temperature`` and, where the device declares top-k, of ``empty-residual-top-k-temperature`` —
    so the fallback to ``t`` runs at the declared depth's last position."""
    name, caps, K = f"L1/declared/{mode}/empty-residual-K{lim.value}", device.capabilities, lim.value
    why = _empty_residual_lacking(caps)
    if why:
        return CheckResult(name, "L1", "not_supported", why)
    certain = [j % 3 for j in range(K - 1)]
    reqs = [after_certain(certain, e.requests[0])   # each edge's first request: one draft, rejected
            for e in EDGES if e.name in ("empty-residual-temperature", "empty-residual-top-k-temperature")
            and not missing(caps, e.needs)]
    batch, noise = make_batch(reqs, dtype=dtype, point=False)
    said = f"an empty residual at position K-1 of K={K} (declared max_k {lim.declared})"
    return l1_chain(device, ctx, mode, name, batch, None, said, lim.to_json(), noise)


SHOWN_RUNS = 12
"""A positions check's detail names at most this many runs of consecutive positions (then the last)."""


def _positions_said(positions: tuple, lim: Limit) -> str:
    runs, start = [], positions[0]
    for a, b in zip(positions, (*positions[1:], None)):
        if b != a + 1:
            runs.append(f"{start}" if start == a else f"{start}-{a}")
            start = b
    shown = (f"every position 0 to {positions[-1]}" if runs == [f"0-{positions[-1]}"] else
             f"positions {', '.join(runs)}" if len(runs) <= SHOWN_RUNS else
             f"{len(positions)} positions: {', '.join(runs[:SHOWN_RUNS])}, …, {runs[-1]}")
    return (f"an empty residual at {shown} of K={lim.value} (declared max_k {lim.declared}), one request of K drafts "
            f"each")


POSITION_SETS = {"positions": empty_positions, "between": between_positions}
"""The position sets an empty residual is checked at, by the name's stem (``empty-residual-<stem>-K<K>``): 1.7's
(``empty_positions``: every position below 64, past it each side of every power of two, and K − 1) and 1.8's
(``between_positions``: the rest below 512, past it each side of every multiple of 64). A set that is empty at a
K makes no check there."""


def position_limits(caps) -> list[tuple[str, Limit]]:
    """``(kind, K)`` of every positions check ``caps`` make: each of ``POSITION_SETS`` at each checked K
    (``k_limits``) where its set is not empty."""
    return [(kind, lim) for kind in POSITION_SETS for lim in k_limits(caps) if POSITION_SETS[kind](lim.value)]


def empty_residual_positions(device, ctx, mode: str, lim: Limit, dtype: str, kind: str = "positions") -> CheckResult:
    """``L1/declared/<mode>/empty-residual-<kind>-K<K>``: one request per position of ``POSITION_SETS[kind](K)``
    (SPEC 1.7's ``positions``: every position at the core's K = 8; SPEC 1.8's ``between``: the positions 1.7 leaves
    out below 512, and past it each side of every multiple of 64), each rejecting there with the empty residual of
    a tempered target (``edges.band_at_position``: the band's temperatures in turn), its tokens against the
    reference's in ``mode``. A fallback right at the first positions and the last but wrong between passes SPEC
    1.6; 1.7's check fails it; one wrong only at position 100 of 256 passes 1.7 and fails 1.8's."""
    name, caps = f"L1/declared/{mode}/empty-residual-{kind}-K{lim.value}", device.capabilities
    why = _empty_residual_lacking(caps)
    if why:
        return CheckResult(name, "L1", "not_supported", why)
    positions = POSITION_SETS[kind](lim.value)
    batch, noise = make_batch([band_at_position(j, lim.value) for j in positions], dtype=dtype, point=False)
    return l1_chain(device, ctx, mode, name, batch, None, _positions_said(positions, lim), lim.to_json(), noise)


def _tree_said(scheme: str, nodes: Limit, depth: Limit) -> str:
    return (f"{scheme} tree of {nodes.value} nodes at depth {depth.value} (declared max_tree_nodes {nodes.declared}, "
            f"max_k {depth.declared})")


def _l1_tree(device, ctx, mode: str, scheme: str) -> CheckResult:
    from specsim.testing.trees import compare_tree, reference_tree_step
    caps = device.capabilities
    nodes, depth = tree_limits(caps)
    name = f"L1/declared/{mode}/tree-{scheme}-N{nodes.value}-D{depth.value}"
    seed = case_seed(ctx.seed, name)
    rng = np.random.default_rng(seed)
    dtype = logits_dtype(caps)
    certain, _, _ = certain_tree(scheme, nodes.value, depth.value, SMALL_V, dtype, seed)
    steered, noise = steered_tree(scheme, nodes.value, depth.value, SMALL_V, dtype, rng)
    batch, noise = join_trees(steered, noise, certain, None, rng)
    noise = noise if mode == INJECTED else None
    said = _tree_said(scheme, nodes, depth)
    sc = scope(mode, SMALL_V, depth.value, batch.batch_size, nodes.value)
    declared = {"tree_nodes": nodes.to_json(), "depth": depth.to_json()}
    got, problem = call_formed(name, "L1", lambda: formed_tree(device, batch, noise), caps)
    if problem:
        return with_scope(problem, sc, said, declared)
    want = reference_tree_step(batch, noise)
    problems = compare_tree(got, want, repro=f" [case {name}, seed {seed}]")
    detail = "; ".join(problems[:3]) if problems else (
        f"{said}: agree; accepted {want.num_accepted.tolist()} nodes")
    return with_scope(CheckResult(name, "L1", "fail" if problems else "pass", detail, seed=seed), sc, said, declared)


def declared_exact_group(device, ctx) -> list[CheckResult]:
    """``L1-declared``: the declared sizes token for token in each declared noise mode (module docstring)."""
    try:
        return l1_checks(device, ctx)
    except Malformed as e:
        return [malformed_result("L1", e)]


# --------------------------------------------------------------------------- L3-declared: exact support

def _support_tree(device, ctx, scheme: str) -> CheckResult:
    from specsim.testing.trees import reference_tree_step
    caps = device.capabilities
    nodes, depth = tree_limits(caps)
    name = f"L3/declared/support/tree-{scheme}-N{nodes.value}-D{depth.value}"
    seed = case_seed(ctx.seed, name)
    batch, path, leaf_ids = certain_tree(scheme, nodes.value, depth.value, SMALL_V, logits_dtype(caps), seed)
    said = _tree_said(scheme, nodes, depth)
    sc = scope(DEVICE_RNG, SMALL_V, depth.value, 1, nodes.value)
    declared = {"tree_nodes": nodes.to_json(), "depth": depth.to_json()}
    rng = np.random.default_rng(seed)
    want = reference_tree_step(batch, Noise(rng.random(nodes.value), rng.exponential(size=(1, SMALL_V))))
    tokens = [int(t) for t in batch.draft_token_ids[path]]
    if want.accepted_nodes[0][:len(path)].tolist() != path:
        return CheckResult(name, "L3", "error", f"{said}: the reference does not walk the certain path "
                           f"{path[:5]}…: the check built a tree whose walk is not certain", seed=seed)
    got, problem = call_formed(name, "L3", lambda: formed_tree(device, batch, None), caps)
    if problem:
        return with_scope(problem, sc, said, declared)
    emitted, nodes_got = got.emitted(0), np.asarray(got.accepted_nodes)[0][:len(path)].tolist()
    allowed = [int(want.output_token_ids[0][len(path)])] if scheme == "greedy" else leaf_ids
    ok = emitted[:-1] == tokens and nodes_got == path and emitted[-1] in allowed
    detail = (f"{said}: accepted the certain path of {len(path)} nodes and emitted {emitted[-1]} of the leaf's "
              f"{allowed}" if ok else f"the walk is certain: nodes {path[:6]}… (tokens {tokens[:6]}…), then one of "
              f"{allowed}; got nodes {nodes_got[:6]}… and tokens {emitted[:6]}…{emitted[-1:]}")
    return with_scope(CheckResult(name, "L3", "pass" if ok else "fail", detail, seed=seed), sc, said, declared)


POSITION_RUNS, QUICK_POSITION_RUNS = 8, 4
"""Runs of each request of ``L3/declared/support/empty-residual-positions-K<K>``, each under its own seed."""


def _support_positions(device, ctx, lim: Limit, dtype: str, kind: str = "positions") -> CheckResult:
    """``L3/declared/support/empty-residual-<kind>-K<K>`` (SPEC 1.7, ``between`` 1.8): ``empty_residual_positions``'
    requests for a device drawing its own randomness, each run ``POSITION_RUNS`` times under distinct seeds in one
    call; every emitted sequence must lie in its request's exact support (a fallback to token 0, the rejected draft,
    or to an earlier row's one-hot 0 does not)."""
    name, caps = f"L3/declared/support/empty-residual-{kind}-K{lim.value}", device.capabilities
    why = _empty_residual_lacking(caps)
    if why:
        return CheckResult(name, "L3", "not_supported", why)
    positions = POSITION_SETS[kind](lim.value)
    runs = QUICK_POSITION_RUNS if ctx.quick else POSITION_RUNS
    requests = [band_at_position(j, lim.value) for j in positions]
    laws = request_laws(make_batch(requests, dtype=dtype, point=False)[0])
    batch, _ = make_batch(requests * runs, dtype=dtype, point=False)
    seed = case_seed(ctx.seed, name)
    batch = dataclasses.replace(batch, seeds=np.random.default_rng(seed).integers(1, 2**63, batch.batch_size,
                                                                                  dtype=np.uint64))
    said = _positions_said(positions, lim) + f", {runs} runs each"
    sc = scope(DEVICE_RNG, batch.vocab_size, batch.max_k, batch.batch_size)
    got, problem = call_formed(name, "L3", lambda: formed(device, batch), caps)
    if problem:
        return with_scope(problem, sc, said, lim.to_json())
    problems = []
    for i in range(batch.batch_size):
        j, law, emitted = positions[i % len(positions)], laws[i % len(positions)], tuple(got.emitted(i))
        if emitted not in law:
            problems.append(f"the request rejecting at position {j} (run {i // len(positions)}) emitted "
                            f"{list(emitted[-3:])} at positions {max(0, len(emitted) - 3)} on, which its exact law "
                            f"gives probability 0; the law: {show_law(law)}")
    detail = (f"{len(problems)} of {batch.batch_size} runs outside their law's support: " + "; ".join(problems[:3])
              if problems else f"{said}: every run emitted a sequence of its exact law's support (exact, no "
                               "statistics)")
    return with_scope(CheckResult(name, "L3", "fail" if problems else "pass", detail, seed=seed), sc, said,
                       lim.to_json())


def support_checks(device, ctx) -> list[CheckResult]:
    caps = device.capabilities
    dtype, point = logits_dtype(caps), not caps.draft_probs
    results = []
    for lim in vocab_limits(caps):
        said = f"V={lim.value}" + (f" (declared {lim.declared}; {lim.capped})" if lim.capped else "")
        name = f"L3/declared/support/vocab-V{lim.value}"
        results.append(first_failure([
            support_chain(device, ctx, name, assemble(reqs, lim.value, dtype, point), reqs, said, lim.to_json())
            for reqs in per_call(support_requests(lim.value, caps), lim.value)]))
    for lim in k_limits(caps):
        reqs = deep_requests(lim.value, caps)
        results.append(support_chain(device, ctx, f"L3/declared/support/K{lim.value}",
                                      assemble(reqs, SMALL_V, dtype, point), reqs,
                                      f"K={lim.value} (declared max_k {lim.declared})", lim.to_json()))
        results += [_support_positions(device, ctx, at, dtype, kind) for kind, at in position_limits(caps)
                    if at.value == lim.value]
    for B in batch_sizes(ctx):
        name = f"L3/declared/support/batch-B{B}"
        reqs = random_requests(np.random.default_rng(case_seed(ctx.seed, name)), B, SMALL_V, caps)
        results.append(support_chain(device, ctx, name, assemble(reqs, SMALL_V, dtype, point), reqs, f"B={B}"))
    results += [_support_tree(device, ctx, scheme) for scheme in caps.tree_schemes]
    return results + variant_limit_checks(device, ctx, DEVICE_RNG)


LAW_CALL_BYTES = CALL_BYTES // 4
"""The float rows of one call of a goodness-of-fit test: a device's working copies are a few times its inputs."""


def _rows_per_call(case: LawCase, caps) -> int:
    """Requests per call so that one call's float rows stay within ``LAW_CALL_BYTES``."""
    K = case.req.K
    per_request = case.V * ((K + 1) * 4 + (K * 4 if caps.draft_probs else 0))
    return max(1, LAW_CALL_BYTES // per_request)


def _law_check(device, ctx, case: LawCase, plan) -> CheckResult:
    from specsim.judge import stats
    caps = device.capabilities
    seed = case_seed(ctx.seed, case.check)
    sc = scope(DEVICE_RNG, case.V, case.K, min(case.n, _rows_per_call(case, caps)))
    said = case.what + (f" (declared {case.declared['declared']}; {case.declared['capped']})"
                        if case.declared.get("capped") else "")
    law = case_law(case, caps)
    seeds = np.random.default_rng(seed).integers(1, 2**63, case.n, dtype=np.uint64)
    size = _rows_per_call(case, caps)
    seen: Counter = Counter()
    for start in range(0, case.n, size):
        chunk = seeds[start:start + size]
        batch = assemble([case.req] * len(chunk), case.V, logits_dtype(caps), not caps.draft_probs, seeds=chunk)
        got, problem = call_formed(case.check, "L3", lambda b=batch: formed(device, b), caps)
        if problem:
            return with_scope(problem, sc, said, case.declared)
        seen.update(tuple(got.emitted(i)) for i in range(batch.batch_size))
    alpha = plan.alpha(case.check)
    outside = {k: c for k, c in seen.items() if k not in law}
    if outside:
        return with_scope(CheckResult(case.check, "L3", "fail", f"emitted {sorted(outside)[:3]} "
                                       f"({sum(outside.values())} of {case.n} samples), which the exact law gives "
                                       f"probability 0; the law: {show_law(law)}", n=case.n, seed=seed),
                           sc, said, case.declared)
    keys = sorted(law)
    result = stats.gof_test(np.array([seen.get(k, 0) for k in keys]), np.array([law[k] for k in keys]), alpha,
                            what=case.check, seed=seed)
    detail = (f"{said}: {result.report()}; exact support over {case.n} samples; the law: {show_law(law)}")
    out = CheckResult(case.check, "L3", "pass" if result.passed else "fail", detail, p_value=result.p_value,
                      alpha=alpha, n=case.n, statistic=result.statistic, detectable_tv=result.detectable_tv, seed=seed,
                      extra={"alpha_share": plan.test(case.check).alpha_share})
    return with_scope(out, sc, said, case.declared)


def declared_law_group(device, ctx) -> list[CheckResult]:
    """``L3-declared``: exact support at every declared size, then each declared V's and ``max_k``'s law
    (module docstring). A device without its own randomness: one ``not_supported``."""
    caps = device.capabilities
    if caps.rng == "none":
        return [CheckResult("L3/declared", "L3", "not_supported", "device draws no randomness of its own "
                            "(L1-declared checks its declared sizes token for token)")]
    from specsim.conformance.stats.plan import run_plan
    plan = run_plan(caps, ctx)
    try:
        results = support_checks(device, ctx)
        return results + [_law_check(device, ctx, case, plan) for case in law_cases(caps, ctx.quick)]
    except Malformed as e:
        return [malformed_result("L3", e)]


def main(argv=None) -> int:
    """``python -m specsim.conformance.checks.declared.group [--device torch] [--quick] [--threads 1]``: both groups, timed."""
    from specsim.conformance.core.timing import timed_main
    return timed_main("python -m specsim.conformance.checks.declared.group", main.__doc__,
                      {"L1-declared": declared_exact_group, "L3-declared": declared_law_group}, argv)


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["LAW_CALL_BYTES", "certain_tree", "steered_tree", "join_trees", "noise_modes", "l1_checks",
           "empty_residual_at_v", "empty_residual_at_k", "empty_residual_positions", "POSITION_SETS",
           "position_limits", "declared_exact_group",
           "outside_support", "support_checks",
           "declared_law_group"]
