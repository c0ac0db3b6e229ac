"""Every declared kernel variant at every declared limit, in every noise mode the device declares (SPEC 1.15).

1.14 asked each declared variant (``scope.declared_variants``: dtype, kind of call, proposal form) once, at 33
requests and V = 257 (``group.variant_checks``); the declared limits were held in one variant per mode (the logits'
``logits_dtype``, the declared proposal form, a mix of kinds). A kernel compiled per dtype and path has its own tile
loop, index width and launch grid, so a variant can be wrong only past a size its one call did not reach. Each
variant is now asked at each limit:

* chains (kinds ``sampled``, ``greedy``, ``filtered``, ``sampler``):

  - ``V<V>``: at the declared ``max_vocab_size`` (``variant_vocab_limit``: capped at ``VARIANT_VOCAB_CAP``, 4 793 490,
    for the time some 80 variants take there; the declared V itself is checked at ``VOCAB_CAP``), the requests' mass on
    ``spread_ids(V)`` — the last ids, each side of every power of two from 2^15, the last tile's first id
    (``variant_v_requests``; §12's kind: random rows with its parameters, as many requests as one call holds, at
    most three);
  - ``K<K>``: at the declared ``max_k`` (``k_limits``' largest), every draft but the last accepted with certainty,
    and a request at each ``K_LADDER`` value between (``deep_requests``; §12's kind: random rows, every draft's
    logit lifted so that its drafts are accepted unless a parameter bans them);
  - ``B<B>``: ``LARGEST_BATCH`` (1025) requests at V = 64 (``random_requests``; §12's kind: random rows);

* trees: ``N<N>-D<D>`` (one tree of ``max_tree_nodes`` nodes at depth ``max_k``, as ``tree_limits`` caps them),
  ``V<V>`` (a tree of ``TREE_V_NODES`` nodes at ``tree_vocab_limit``) and ``B<B>`` (``LARGEST_BATCH`` trees of up to
  four nodes). Each tree's deepest path is certain (each row on it one-hot on the path's next token) and its
  leaf's row holds three ids: the walk reaches the limit's depth, and a misplaced token lands off the support.

Token for token against the reference in each token-for-token mode (``L1/declared/<mode>/variant-limit/<dtype>/
<kind>/<form>/<size>``, in ``L1-declared``); under the device's own unkeyed draws (``rng = "seeded"``), each answer
within its exact support (``L3/declared/support/variant-limit/...``, in ``L3-declared``; no α), which also asks the
device-rng variants 1.14 left unasked. Not with ``--quick`` (which keeps 1.14's one call per variant): a quick run
is never a verdict. The verdict's scope names every declared variant some limit of which no check reached
(``verdict.profiles.unreached``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, TreeBatch, VerifyBatch
from specsim.conformance.cases.declared import (CALL_BYTES, BYTES_PER_ID, DEVICE_RNG, INJECTED, LARGEST_BATCH, SMALL_V,
                                                TREE_V_NODES, Limit, as_kind, assemble, cast_logits, deep_requests,
                                                k_limits, per_call, random_requests, tree_limits,
                                                tree_vocab_limit, variant_v_requests, variant_vocab_limit)
from specsim.conformance.checks.declared.shared import (deep_noise, l1_chain, support_chain, tree_result,
                                                        variant_chain, variant_tree_spec)
from specsim.conformance.core.results import CheckResult
from specsim.testing.seeds import case_seed

LIFT = 30.0
"""How far a §12 call at the declared ``max_k`` lifts each drafted id's logit: its row then gives the draft
1 − O(e⁻³⁰) of its mass, so the walk goes deep whatever the coins (unless a parameter bans the draft)."""

B_TREE_NODES = 4
"""Nodes of each tree of a tree variant's call at ``LARGEST_BATCH`` trees."""


@dataclasses.dataclass(frozen=True)
class Call:
    """One call of a variant at a limit: its size's name part, what it says, the batch, the few-id requests it was
    assembled from (None: random rows), whether injected noise places its coins below 0.05 (``deep``: every draft
    a coin can accept is accepted), and the declaration it stands for."""

    size: str
    said: str
    batch: VerifyBatch | TreeBatch
    reqs: list | None = None
    deep: bool = False
    declared: dict | None = None


# --------------------------------------------------------------------------- chains

def lifted(batch: VerifyBatch, lift: float = LIFT) -> VerifyBatch:
    """``batch`` with each drafted id's target logit raised by ``lift`` at its row (placeholders left as they are):
    a call at a large K whose drafts are accepted nearly surely."""
    logits = np.asarray(batch.target_logits).astype(np.float64)
    cu = batch.request_offsets()
    for i in range(batch.batch_size):
        for j in range(int(batch.num_draft_tokens[i])):
            x = int(batch.draft_token_ids[cu[i] + j])
            if x != PLACEHOLDER_TOKEN_ID and np.isfinite(logits[cu[i] + i + j, x]):
                logits[cu[i] + i + j, x] += lift
    return dataclasses.replace(batch, target_logits=cast_logits(logits, np.asarray(batch.target_logits).dtype.name))


def _sampler_calls(rng, caps, dtype: str, form: str, V: Limit, K: Limit) -> list[Call]:
    """§12's kind: random rows with the declared parameters (``shared.variant_chain``) at each limit."""
    at_v = max(1, min(3, CALL_BYTES // (V.value * BYTES_PER_ID)))
    return [Call(f"V{V.value}", _v_said(V), variant_chain(rng, caps, dtype, "sampler", form, batch=at_v,
                                                          vocab_size=V.value, max_k=min(2, caps.max_k)),
                 declared=V.to_json()),
            Call(f"K{K.value}", _k_said(K), lifted(variant_chain(rng, caps, dtype, "sampler", form, batch=3,
                                                                  vocab_size=SMALL_V, max_k=K.value, min_k=K.value)),
                 declared=K.to_json()),
            Call(f"B{LARGEST_BATCH}", f"B={LARGEST_BATCH}",
                 variant_chain(rng, caps, dtype, "sampler", form, batch=LARGEST_BATCH, vocab_size=SMALL_V))]


def _v_said(V: Limit) -> str:
    return f"V={V.value}" + (f" (declared {V.declared}; {V.capped})" if V.capped else f" (declared {V.declared})")


def _k_said(K: Limit) -> str:
    return f"K={K.value} (declared max_k {K.declared})" + (f"; {K.capped}" if K.capped else "")


@functools.lru_cache(maxsize=4)
def _requests(caps, seed: int) -> tuple[list, list, list]:
    """The few-id requests every chain variant of a run is asked at its limits (the same for each: the variant is
    what differs): at the declared V (as many as one call holds, the last id's first), at the declared ``max_k``,
    and ``LARGEST_BATCH`` random ones drawn under ``seed``."""
    V, K = variant_vocab_limit(caps), k_limits(caps)[-1]
    return (per_call(variant_v_requests(V.value, caps), V.value)[0], deep_requests(K.value, caps),
            random_requests(np.random.default_rng(seed), LARGEST_BATCH, SMALL_V, caps))


def chain_calls(rng, caps, dtype: str, kind: str, form: str, seed: int = 0) -> list[Call]:
    """The calls of one chain variant, one per limit (``_requests``' under ``seed``; §12's drawn from ``rng``)."""
    V, K, point = variant_vocab_limit(caps), k_limits(caps)[-1], form == "point"
    if kind == "sampler":
        return _sampler_calls(rng, caps, dtype, form, V, K)
    at_v, deep, wide = (as_kind(reqs, kind, caps) for reqs in _requests(caps, seed))
    return [Call(f"V{V.value}", _v_said(V), assemble(at_v, V.value, dtype, point), at_v, declared=V.to_json()),
            Call(f"K{K.value}", _k_said(K), assemble(deep, SMALL_V, dtype, point), deep, deep=True,
                 declared=K.to_json()),
            Call(f"B{LARGEST_BATCH}", f"B={LARGEST_BATCH}", assemble(wide, SMALL_V, dtype, point), wide)]


# --------------------------------------------------------------------------- trees

def leaf_ids(V: int) -> list[int]:
    """The three ids of a certain tree's leaf row: the last id, the middle, the second."""
    return [V - 1, V // 2, 1]


def certain_trees(rng, caps, dtype: str, form: str, shapes: list[tuple[int, int]], V: int) -> TreeBatch:
    """Trees of ``shapes`` ((nodes, depth) each, ``layered_parents``) at vocabulary V, drafted as the variant's form
    drafts (``shared.variant_tree_spec``), whose walk down each deepest path is certain: each row on
    the path one-hot on the path's next token (earlier siblings with other tokens are rejected with certainty), the
    leaf's row on ``leaf_ids(V)``."""
    from specsim.testing.trees import deepest_path, layered_parents, tree_batch_of
    spec = variant_tree_spec(caps, dtype, form, batch=len(shapes), max_nodes=max(n for n, _ in shapes), vocab_size=V,
                             placeholder_fraction=0.0, masked_fraction=0.0)
    parents = [layered_parents(n, d) for n, d in shapes]
    batch = tree_batch_of(rng, parents, spec)
    logits = np.asarray(batch.target_logits).astype(np.float64)
    cu = batch.request_offsets()
    for i, p in enumerate(parents):
        base, path = int(cu[i]) + i, deepest_path(p)
        for node in path:
            row = base + int(p[node]) + 1
            logits[row] = -np.inf
            logits[row, int(batch.draft_token_ids[cu[i] + node])] = 0.0
        leaf = base + (path[-1] + 1 if path else 0)
        logits[leaf] = -np.inf
        logits[leaf, leaf_ids(V)] = [1.0, 0.5, 0.0]
    return dataclasses.replace(batch, target_logits=cast_logits(logits, dtype))


def tree_calls(rng, caps, dtype: str, form: str) -> list[Call]:
    """The calls of one tree variant: at the declared nodes and depth, at the declared V, at ``LARGEST_BATCH`` trees."""
    nodes, depth = tree_limits(caps)
    V = tree_vocab_limit(caps)
    small = min(TREE_V_NODES, nodes.value)
    few = min(B_TREE_NODES, nodes.value)
    said = (f"a tree of {nodes.value} nodes at depth {depth.value} (declared max_tree_nodes {nodes.declared}, "
            f"max_k {depth.declared})")
    return [Call(f"N{nodes.value}-D{depth.value}", said,
                 certain_trees(rng, caps, dtype, form, [(nodes.value, depth.value)], SMALL_V),
                 declared={"tree_nodes": nodes.to_json(), "depth": depth.to_json()}),
            Call(f"V{V.value}", f"a tree of {small} nodes at {_v_said(V)}",
                 certain_trees(rng, caps, dtype, form, [(small, min(3, depth.value))], V.value),
                 declared=V.to_json()),
            Call(f"B{LARGEST_BATCH}", f"{LARGEST_BATCH} trees of up to {few} nodes",
                 certain_trees(rng, caps, dtype, form,
                               [(int(n), min(2, depth.value)) for n in rng.integers(0, few + 1, LARGEST_BATCH)],
                               SMALL_V))]


# --------------------------------------------------------------------------- the checks

def _tree_result(device, ctx, mode: str, name: str, call: Call, rng) -> CheckResult:
    return tree_result(device, ctx, mode, name, call.batch, rng, call.said, call.declared)


def _chain_result(device, ctx, mode: str, name: str, call: Call, rng) -> CheckResult:
    if mode == DEVICE_RNG:
        return support_chain(device, ctx, name, call.batch, call.reqs, call.said, call.declared)
    noise = deep_noise(rng, call.batch) if call.deep and mode == INJECTED else None
    return l1_chain(device, ctx, mode, name, call.batch, rng, call.said, call.declared, noise)


def check_name(mode: str, variant: str, size: str) -> str:
    """``L1/declared/<mode>/variant-limit/<dtype>/<kind>/<form>/<size>``, or under the device's own unkeyed draws
    ``L3/declared/support/variant-limit/...``."""
    head = "L3/declared/support" if mode == DEVICE_RNG else f"L1/declared/{mode}"
    return f"{head}/variant-limit/{variant.replace(' ', '/')}/{size}"


def variant_limit_checks(device, ctx, mode: str) -> list[CheckResult]:
    """Every declared variant in ``mode`` at each declared limit (module docstring); none with ``--quick``."""
    from specsim.conformance.core.scope import declared_variants
    caps, results = device.capabilities, []
    if ctx.quick:
        return results
    for variant in declared_variants(caps, mode):
        dtype, kind, form = variant.split()
        rng = np.random.default_rng(case_seed(ctx.seed, check_name(mode, variant, "calls")))
        calls = tree_calls(rng, caps, dtype, form) if kind == "tree" else \
            chain_calls(rng, caps, dtype, kind, form, case_seed(ctx.seed, f"variant-limit/{mode}/requests"))
        one = _tree_result if kind == "tree" else _chain_result
        results += [one(device, ctx, mode, check_name(mode, variant, call.size), call, rng) for call in calls]
    return results


__all__ = ["LIFT", "B_TREE_NODES", "Call", "lifted", "chain_calls", "leaf_ids", "certain_trees", "tree_calls", "check_name",
           "variant_limit_checks"]
