"""SPEC §6's 16-bit logits at volume (§9): ``L1-16bit``, float32's tolerance on everything computed from them.

A device given float16 or bfloat16 logits is held to float32's tolerance (``1e-4``) on every value it computes
from them: the logits are exact binary numbers, and up-casting them to float32 before any arithmetic is how to
meet it. A device that takes the softmax, divides by the temperature, forms the residual or writes penalties
back in 16 bits moves those values by 2⁻¹¹ (float16) to 2⁻⁸ (bfloat16) relative, and flips decisions that sit
that close to their boundaries. L1-injected's 16-bit cases hold a few requests and L1-volume runs float32, so
random noise rarely puts a decision there; this group does, for each 16-bit dtype the device declares:

* ``L1-16bit/chain/<dtype>``: ``CHAIN_REQUESTS`` requests of L1-volume's mix (draft probabilities and point
  proposals alternating, greedy, top-k and top-p as declared), every coin placed beside its ratio and every
  emission race beside its tie (``checks.chain.placed``);
* ``L1-16bit/sampler/<dtype>``: ``SAMPLER_REQUESTS`` requests with every §12 parameter the device declares
  (``L1-sampler/precision``'s mix), coins and races placed the same way;
* ``L1-16bit/tree/<dtype>``, where the device declares trees (SPEC §11): ``TREE_REQUESTS`` trees of every shape
  (random, chain, full width, binary) for each sampled scheme and proposal kind it declares (rrs with draft rows
  drawn with and without replacement, rrs with point proposals, sglang), each node's coin placed beside its
  boundary on the residual its earlier siblings leave and each emission race beside its tie
  (``checks.chain.placed.placed_tree_noise``).

The chain and §12 checks are judged as L1-volume is (``checks.chain.volume.volume_verdict``): a decision
contradicted beyond the tolerance fails. The tree check is judged as L1-trees is, token for token and node for
node against ``reference.tree`` (``specsim.testing.trees.compare_tree``; SPEC §9's near-tie allowances do not
extend to trees): the placed decisions sit beyond the tolerance, and a decision the placement cannot make robust
to float32's rounding keeps its random coin. Without injected noise nothing can be placed: each check is
``not_supported`` and says so.

Run it: ``python -m specsim.cli conform --device torch --groups L1-16bit``.
"""

from __future__ import annotations

import numpy as np

from specsim.conformance.checks.chain.placed import NEAR, placed_noise, placed_tree_noise
from specsim.conformance.checks.chain.volume import volume_check
from specsim.conformance.checks.sampler.precision import sampler_precision_check
from specsim.conformance.core.calls import ask, call, tree_device
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import TOLERANCE
from specsim.testing.seeds import case_seed
from specsim.testing.trees import SHAPES, TreeSpec, compare_tree, random_tree_batch, random_tree_noise, \
    reference_tree_step

SIXTEEN_BIT = ("float16", "bfloat16")
"""The logits dtypes checked here, each where the device declares it (``Capabilities.dtypes``)."""

CHAIN_REQUESTS, CHAIN_QUICK_REQUESTS = 2048, 512
SAMPLER_REQUESTS, SAMPLER_QUICK_REQUESTS = 1024, 256
"""Requests per dtype (full, ``--quick``). At suite seed 0 the torch device's 16-bit mutants contradict 86–736
placed decisions in 2048 chains (softmax, temperature, residual) and 249–369 in 2048 §12 requests (penalties);
the torch device, computing in float32, contradicts none."""

CHAIN_CHUNK = 512
"""Chain requests per call: draft probabilities and point proposals alternate call by call."""

PLACED = f"coins and races placed {NEAR[0]:g}–{NEAR[1]:g}× the tolerance from their boundaries"

TREE_REQUESTS, TREE_QUICK_REQUESTS = 384, 96
"""Trees per dtype (full, ``--quick``), spread over the declared variants and ``SHAPES``."""
TREE_BATCH, TREE_NODES, TREE_V = 24, 8, 64
"""Trees per call, nodes per tree at most (capped by ``max_k`` and ``max_tree_nodes``), vocabulary."""
TREE_VARIANTS = (("rrs-with-replacement", "rrs", "with_replacement", "draft_probs"),
                 ("rrs-without-replacement", "rrs", "without_replacement", "draft_probs"),
                 ("rrs-point", "rrs", "top", "point_proposals"),
                 ("sglang", "sglang", "top", "point_proposals"))
"""(name, scheme, drafting, the proposal kind it needs): sampled tree steps of both proposal kinds."""


def chain_check(device, *, seed: int, dtype: str, requests: int = CHAIN_REQUESTS) -> CheckResult:
    """Chains with ``dtype`` logits at volume, decisions placed by their boundaries (the module docstring)."""
    return volume_check(device, seed=seed, requests=requests, dtype=dtype, name=f"L1-16bit/chain/{dtype}",
                        place=placed_noise, note=f"; {PLACED}", chunk=CHAIN_CHUNK)


def sampler_check(device, *, seed: int, dtype: str, requests: int = SAMPLER_REQUESTS) -> CheckResult:
    """SPEC §12 with ``dtype`` logits at volume, decisions placed by their boundaries (the module docstring)."""
    return sampler_precision_check(device, seed=seed, requests=requests, name=f"L1-16bit/sampler/{dtype}",
                                   dtype=dtype, place=placed_noise, placed=PLACED)


def tree_variants(caps) -> list[tuple[str, str, str, str]]:
    """The ``TREE_VARIANTS`` whose scheme and proposal kind the device declares."""
    return [v for v in TREE_VARIANTS if v[1] in caps.tree_schemes and getattr(caps, v[3])]


def _tree_unsupported(device, dtype: str) -> str | None:
    """Why the device cannot be given placed 16-bit trees (None if it can)."""
    caps = device.capabilities
    return (tree_device(device) or (None if caps.injected_noise else "device does not take injected noise: placed "
                                    "coins and races need it (SPEC §5.1)")
            or (None if tree_variants(caps) else f"device declares no sampled tree scheme with a proposal kind "
                f"(tree_schemes {list(caps.tree_schemes)}): only greedy trees, which read no coin")
            or (None if dtype in caps.dtypes and TREE_V <= caps.max_vocab_size else
                f"dtype {dtype} or V={TREE_V} beyond the declared dtypes/max_vocab_size"))


def _tree_spec(caps, variant: tuple[str, str, str, str], shape: str, dtype: str) -> TreeSpec:
    """A call's trees: ``variant`` in ``shape``, greedy, top-k and top-p requests mixed in as declared."""
    _, scheme, drafting, _ = variant
    return TreeSpec(batch=TREE_BATCH, max_nodes=min(TREE_NODES, caps.max_k, caps.tree_node_limit), vocab_size=TREE_V,
                    dtype=dtype, shape=shape, scheme=scheme, drafting=drafting,
                    greedy_fraction=0.1 if "greedy" in caps.tree_schemes else 0.0,
                    top_k_fraction=0.2 if caps.top_k else 0.0, top_p_fraction=0.2 if caps.top_p else 0.0,
                    duplicate_fraction=0.2 if drafting == "top" else 0.0)


def _placed_count(before, after) -> tuple[int, int]:
    """How many coins and exponentials the placement moved."""
    return (int(np.sum(np.asarray(before.uniforms) != np.asarray(after.uniforms))),
            int(np.sum(np.asarray(before.exponentials) != np.asarray(after.exponentials))))


def tree_check(device, *, seed: int, dtype: str, requests: int = TREE_REQUESTS) -> CheckResult:
    """Tree steps with ``dtype`` logits at volume, coins and races placed by their boundaries (the module
    docstring): ``requests`` trees in calls of ``TREE_BATCH``, cycling over the declared variants and ``SHAPES``."""
    name = f"L1-16bit/tree/{dtype}"
    check_seed = case_seed(seed, name, dtype)
    why = _tree_unsupported(device, dtype)
    if why:
        return CheckResult(name, "L1", "not_supported", why, seed=check_seed)
    caps, rng = device.capabilities, np.random.default_rng(check_seed)
    plan = [(v, s) for s in SHAPES for v in tree_variants(caps)]
    trees = coins = races = 0
    problems: list[str] = []
    for call_index in range(-(-requests // TREE_BATCH)):
        variant, shape = plan[call_index % len(plan)]
        spec = _tree_spec(caps, variant, shape, dtype)
        batch = random_tree_batch(rng, spec)
        drawn = random_tree_noise(rng, batch)
        noise = placed_tree_noise(rng, batch, drawn, TOLERANCE[dtype])
        got, problem = call(name, "L1", lambda: ask(device, batch, noise), caps)
        if problem:
            return problem
        problems += compare_tree(got, reference_tree_step(batch, noise),
                                 repro=f" [{name}, seed {check_seed}, call {call_index}: {variant[0]}, {shape}]")
        moved = _placed_count(drawn, noise)
        trees, coins, races = trees + batch.batch_size, coins + moved[0], races + moved[1]
    figure = (f"{trees} trees ({', '.join(v[0] for v in tree_variants(caps))}; shapes {', '.join(SHAPES)}), "
              f"{coins} coins and {races} races placed {NEAR[0]:g}–{NEAR[1]:g}× the tolerance from their boundaries")
    extra = {"requests": trees, "placed_coins": coins, "placed_races": races, "differing_requests": len(problems),
             "volume": {"requested": int(requests), "reached": trees}}
    if problems:
        return CheckResult(name, "L1", "fail", f"{figure}: {len(problems)} tree(s) differ from the reference, where "
                           f"a device computing in float32 agrees on every one (SPEC §6: up-cast 16-bit logits "
                           f"before any arithmetic)\n" + "\n".join(problems[:3]), seed=check_seed, n=trees,
                           extra=extra)
    return CheckResult(name, "L1", "pass", f"{figure}: every tree agrees", seed=check_seed, n=trees, extra=extra)


def sixteen_bit_group(device, ctx) -> list[CheckResult]:
    """Every check of the module docstring, for each 16-bit dtype the device declares; one ``not_supported``
    result naming the cause when it declares none."""
    declared = [d for d in SIXTEEN_BIT if d in device.capabilities.dtypes]
    if not declared:
        return [CheckResult("L1-16bit", "L1", "not_supported",
                            f"device declares no 16-bit logits dtype (dtypes {', '.join(device.capabilities.dtypes)})",
                            seed=ctx.seed)]
    chain_n = CHAIN_QUICK_REQUESTS if ctx.quick else CHAIN_REQUESTS
    sampler_n = SAMPLER_QUICK_REQUESTS if ctx.quick else SAMPLER_REQUESTS
    tree_n = TREE_QUICK_REQUESTS if ctx.quick else TREE_REQUESTS
    trees = tree_device(device) is None          # a device without trees has no tree check to report
    results = []
    for dtype in declared:
        results.append(chain_check(device, seed=ctx.seed, dtype=dtype, requests=chain_n))
        results.append(sampler_check(device, seed=ctx.seed, dtype=dtype, requests=sampler_n))
        if trees:
            results.append(tree_check(device, seed=ctx.seed, dtype=dtype, requests=tree_n))
    return results
