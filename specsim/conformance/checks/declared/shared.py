"""What ``group`` (1.5–1.14's declared checks) and ``variants`` (1.15's variant limits) both call: one call's result
with its scope, a chain or a tree judged token for token or by its exact support, a tree's form checked, a
variant's random batch and tree spec. ``variants`` does not import ``group``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from devices.protocol import Noise, TreeBatch, VerifyBatch
from specsim.conformance.cases.declared import CALL_BYTES, DEVICE_RNG, INJECTED, Req, request_laws, scope
from specsim.conformance.cases.edges import show_law
from specsim.conformance.core.calls import Malformed, call, formed
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.testing.seeds import case_seed

VARIANT_BATCH, VARIANT_V, VARIANT_TREES = 33, 257, 12
"""A variant's call: 33 requests (past a warp) at V = 257 (past a tile of 256) for chains, 12 trees at ``SMALL_V``:
the variant asked, not its sizes (the ladder's and the declared limits' checks hold those)."""


def first_failure(parts: list[CheckResult]) -> CheckResult:
    """One check made of several calls: the first that did not pass, else the last (its detail counting the calls)."""
    for r in parts:
        if r.status != "pass":
            return r
    if len(parts) > 1:
        parts[-1].detail += f" (in {len(parts)} calls, each within {CALL_BYTES >> 30} GiB of float rows)"
    return parts[-1]


def call_formed(name: str, layer: str, fn, caps):
    """``_common.call``, with a malformed output (SPEC §7) this check's failure (naming its sizes), not the group's."""
    try:
        return call(name, layer, fn, caps)
    except Malformed as e:
        return None, CheckResult(name, layer, "fail", f"malformed output (SPEC §7): {e}")


def with_scope(result: CheckResult, sc: dict, said: str, declared: dict | None = None) -> CheckResult:
    result.extra = dict(result.extra or {}) | {"scope": sc} | ({"declared": declared} if declared else {})
    if result.status != "pass":
        result.detail = f"{said}: {result.detail}"
    return result


def l1_chain(device, ctx, mode: str, name: str, batch: VerifyBatch, rng, said: str, declared=None,
              noise: Noise | None = None) -> CheckResult:
    from specsim.testing.batches import random_noise
    if mode == INJECTED and noise is None:
        noise = random_noise(rng, batch)
    seed = case_seed(ctx.seed, name)
    result = judge(name, device, batch, noise if mode == INJECTED else None, seed, note=f" ({said})")
    return with_scope(result, scope(mode, batch.vocab_size, batch.max_k, batch.batch_size), said, declared)


def deep_noise(rng, batch: VerifyBatch) -> Noise:
    """Coins below 0.05 (every draft a coin can accept is accepted), exponentials at random."""
    return Noise(rng.uniform(0.0, 0.05, int(batch.num_draft_tokens.sum())),
                 rng.exponential(size=(batch.batch_size, batch.vocab_size)) + 1e-300)


def formed_tree(device, batch: TreeBatch, noise):
    """``verify_tree`` through ``_common.ask`` (a refusal judged against the declaration), its form checked."""
    from specsim.conformance.core.calls import ask, structure_problems
    out = ask(device, batch, noise)
    problems = structure_problems(batch, out)
    if problems:
        raise Malformed(f"tree batch of {batch.batch_size}, V={batch.vocab_size}: " + "; ".join(problems))
    return out


def outside_support(batch: VerifyBatch, out, reqs: list[Req] | None) -> list[str]:
    """One line per request whose emitted sequence has probability 0 under its exact law (``reqs``: the few-id
    requests ``batch`` was assembled from, named in the line; None for random rows)."""
    problems = []
    for i, law in enumerate(request_laws(batch)):
        got = tuple(out.emitted(i))
        if got not in law:
            what = f"{reqs[i].what}, K={reqs[i].K}" if reqs else f"K={int(batch.num_draft_tokens[i])}"
            problems.append(f"request {i} ({what}) emitted {list(got)}, which its exact law "
                            f"gives probability 0; the law: {show_law(law)}")
    return problems


def support_chain(device, ctx, name: str, batch: VerifyBatch, reqs: list[Req], said: str,
                   declared=None) -> CheckResult:
    caps = device.capabilities
    sc = scope(DEVICE_RNG, batch.vocab_size, batch.max_k, batch.batch_size)
    seed = case_seed(ctx.seed, name)
    batch = dataclasses.replace(batch, seeds=np.random.default_rng(seed).integers(1, 2**63, batch.batch_size,
                                                                                  dtype=np.uint64))
    got, problem = call_formed(name, "L3", lambda: formed(device, batch), caps)
    if problem:
        return with_scope(problem, sc, said, declared)
    problems = outside_support(batch, got, reqs)
    detail = (f"{len(problems)} of {batch.batch_size} requests outside their law's support: " + "; ".join(problems[:3])
              if problems else f"{said}: every one of {batch.batch_size} requests emitted a sequence of its exact "
                               "law's support (exact, no statistics)")
    return with_scope(CheckResult(name, "L3", "fail" if problems else "pass", detail, seed=seed), sc, said, declared)


def variant_chain(rng, caps, dtype: str, kind: str, form: str, *, batch: int = VARIANT_BATCH,
                   vocab_size: int = VARIANT_V, max_k: int = 4, min_k: int = 0) -> VerifyBatch:
    """A random batch of one variant: ``batch`` requests of K in ``min_k`` … ``max_k`` (``max_k`` permitting) at V
    ``vocab_size`` (``max_vocab_size`` permitting)."""
    from specsim.testing.batches import BatchSpec, random_batch
    filtered = kind == "filtered"
    spec = BatchSpec(batch=batch, max_k=min(max_k, caps.max_k), min_k=min(min_k, caps.max_k),
                     zero_k_fraction=0.0 if min_k else 0.15, vocab_size=min(vocab_size, caps.max_vocab_size),
                     dtype=dtype, draft_probs=form == "draft", greedy_fraction=1.0 if kind == "greedy" else 0.0,
                     top_k_fraction=0.5 if filtered and caps.top_k else 0.0,
                     top_p_fraction=0.5 if filtered and caps.top_p else 0.0,
                     masked_fraction=0.0 if kind == "sampler" else 0.1, draw="inverse-cdf")
    batch = random_batch(rng, spec)
    if kind == "sampler":
        from specsim.conformance.cases.edges import sampler_lacking
        from specsim.testing.sampler_params import random_sampler
        order = caps.sampler_orders[0]
        params = tuple(p for p in caps.sampler if sampler_lacking(caps, (p,), order) is None)
        batch = dataclasses.replace(batch, sampler=random_sampler(rng, batch, params, order))
    return batch


def variant_tree_spec(caps, dtype: str, form: str, **fields):
    """The ``TreeSpec`` of a tree variant of ``dtype`` in proposal ``form``: draft probabilities with ``"rrs"``'s
    multi-draft (drawn with replacement); point proposals with ``"sglang"``, else ``"rrs"`` where declared, else
    greedy trees alone; ``fields``: the spec's other fields (batch, sizes, fractions)."""
    from specsim.testing.trees import TreeSpec
    schemes = set(caps.tree_schemes)
    if form == "draft":
        scheme, drafting, only_greedy = "rrs", "with_replacement", False
    else:
        scheme, drafting = ("sglang" if "sglang" in schemes else "rrs"), "top"
        only_greedy = not ("sglang" in schemes or ("rrs" in schemes and caps.point_proposals))
    return TreeSpec(dtype=dtype, scheme=scheme, drafting=drafting,
                    greedy_fraction=1.0 if only_greedy else 0.25 if "greedy" in schemes else 0.0,
                    top_k_fraction=0.2 if caps.top_k else 0.0, top_p_fraction=0.2 if caps.top_p else 0.0, **fields)


def tree_result(device, ctx, mode: str, name: str, batch: TreeBatch, rng, said: str,
                declared: dict | None = None) -> CheckResult:
    """One tree call: token for token and node for node against the reference (``injected``, noise drawn from
    ``rng``; ``keyed``), or under the device's own unkeyed draws (``device-rng``, each request its own seed) every
    answer within its exact law's support (``testing.trees.request_laws``)."""
    from specsim.testing.trees import compare_tree, random_tree_noise, reference_tree_step, request_laws
    seed = case_seed(ctx.seed, name)
    layer = "L3" if mode == DEVICE_RNG else "L1"
    if mode == DEVICE_RNG:
        batch = dataclasses.replace(batch, seeds=np.random.default_rng(seed).integers(1, 2**63, batch.batch_size,
                                                                                      dtype=np.uint64))
    noise = random_tree_noise(rng, batch) if mode == INJECTED else None
    sc = scope(mode, batch.vocab_size, int(batch.depths().max(initial=0)), batch.batch_size,
               int(batch.num_nodes.max(initial=0)))
    got, problem = call_formed(name, layer, lambda: formed_tree(device, batch, noise), device.capabilities)
    if problem:
        return with_scope(problem, sc, said, declared)
    if mode == DEVICE_RNG:
        problems = []
        for i, law in enumerate(request_laws(batch)):
            key = (tuple(got.emitted(i)), tuple(int(n) for n in np.asarray(got.accepted_nodes)[i]
                                                 [:int(got.num_accepted[i])]))
            if law.get(key, 0) <= 0:
                problems.append(f"tree {i} emitted {list(key[0])} through nodes {list(key[1])}, which its exact law "
                                f"gives probability 0 [case {name}, seed {seed}]")
        ok_said = f"{said}: every one of {batch.batch_size} trees within its exact law's support (no statistics)"
    else:
        problems = compare_tree(got, reference_tree_step(batch, noise), repro=f" [case {name}, seed {seed}]")
        ok_said = f"{said}: {batch.batch_size} trees agree"
    return with_scope(CheckResult(name, layer, "fail" if problems else "pass", "; ".join(problems[:3]) or ok_said,
                                  seed=seed), sc, said, declared)


__all__ = ["VARIANT_BATCH", "VARIANT_V", "VARIANT_TREES", "first_failure", "call_formed", "with_scope", "l1_chain",
           "deep_noise", "formed_tree", "outside_support", "support_chain", "variant_chain", "variant_tree_spec",
           "tree_result"]
