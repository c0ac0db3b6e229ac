"""Tree verification (SPEC §11), ``L2-trees``: contracts — the coins a step reads (§11.5: changing any other
coin changes nothing), a chain tree equal to the chain step, ``UnsupportedCall`` for an undeclared scheme; for a
device drawing its own randomness, determinism and batch invariance (Philox: against the reference;
``"seeded"``: against its own answers, with seed and position sensitivity).

A device without ``verify_tree`` (or declaring no tree scheme) gets one ``not_supported`` result.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.protocol import Noise, TreeBatch
from reference.tree import children_of
from specsim.conformance.core.calls import MutatedInput, Refusal, ask, call, tree_device
from specsim.conformance.core.results import CheckResult
from specsim.testing.seeds import case_seed
from specsim.testing.trees import (TreeSpec, compare_tree, random_tree_batch, random_tree_noise,
                                   reference_tree_step, select_tree_requests, tree_batch_of, tree_shape)


def coins_read(batch: TreeBatch, result) -> np.ndarray:
    """``[num_nodes_total]`` bool: the coins SPEC §11.5 says the step read, on the reference's path."""
    read = np.zeros(int(batch.num_nodes.sum()), bool)
    cu = batch.request_offsets()
    for i in range(batch.batch_size):
        if batch.temperature[i] == 0:
            continue
        kids = children_of(batch.parents[cu[i]:cu[i + 1]].tolist())
        path = [int(n) for n in result.accepted_nodes[i] if n >= 0]
        for depth, slot in enumerate([0] + [n + 1 for n in path]):
            siblings = kids[slot]
            if not siblings:
                continue
            if batch.scheme == "sglang":
                read[cu[i] + siblings[0]] = True
                continue
            upto = siblings.index(path[depth]) + 1 if depth < len(path) else len(siblings)
            read[cu[i] + np.array(siblings[:upto])] = True
    return read


def _contract(name: str, ok: bool, detail: str, seed: int) -> CheckResult:
    return CheckResult(name, "L2", "pass" if ok else "fail", detail, seed=seed)


def tree_l2_group(device, ctx) -> list[CheckResult]:
    """Determinism, batch invariance, the coins read, chain = tree, UnsupportedCall for the rest."""
    why = tree_device(device)
    if why:
        return [CheckResult("L2/trees", "L2", "not_supported", why)]
    caps, results = device.capabilities, []
    for scheme in ("rrs", "sglang"):
        spec = TreeSpec(scheme=scheme, drafting="with_replacement" if scheme == "rrs" else "top", batch=8,
                        greedy_fraction=0.0, max_nodes=min(6, caps.max_k, caps.tree_node_limit))
        base = f"L2/trees/{scheme}"
        seed = case_seed(ctx.seed, base)
        if scheme not in caps.tree_schemes:
            results.append(_unsupported(device, base, spec, seed))
            continue
        rng = np.random.default_rng(seed)
        batch = random_tree_batch(rng, spec)
        if caps.injected_noise:
            noise = random_tree_noise(rng, batch)
            want = reference_tree_step(batch, noise)
            fresh = rng.random(len(noise.uniforms))
            unread = Noise(np.where(coins_read(batch, want), noise.uniforms, fresh), noise.exponentials)
            got, problem = call(base, "L2", lambda: ask(device, batch, unread), caps)
            problems = problem and [problem.detail] or compare_tree(got, want)
            results.append(_contract(f"{base}/coins-read", not problems, "; ".join(problems[:2]) or
                                     "only the coins SPEC §11.5 names are read", seed))
        if caps.rng == "philox":
            once, p1 = call(base, "L2", lambda: ask(device, batch, None), caps)
            again, p2 = call(base, "L2", lambda: ask(device, batch, None), caps)
            if p1 or p2:
                results.append(p1 or p2)
                continue
            results.append(_contract(f"{base}/keyed-determinism", not compare_tree(again, once),
                                     "the same seeds and positions replay the same step", seed))
            order = rng.permutation(batch.batch_size)[: max(1, batch.batch_size // 2)]
            sub, _ = select_tree_requests(batch, order)
            alone, p3 = call(base, "L2", lambda: ask(device, sub, None), caps)
            if p3:
                results.append(p3)
                continue
            want = reference_tree_step(batch, None)
            picked = type(want)(want.output_token_ids[order], want.num_accepted[order], want.accepted_nodes[order],
                                want.uniforms, want.exponentials)
            problems = compare_tree(_trim(alone, picked), picked)
            results.append(_contract(f"{base}/batch-invariance", not problems,
                                     "; ".join(problems[:2]) or "a request's tokens do not depend on its neighbours", seed))
        elif caps.rng == "seeded":
            results += _seeded_contracts(device, base, batch, spec, seed, ctx.seed)
    results.append(_chain_equals_tree(device, ctx))
    return results


def _paths(out) -> list[tuple]:
    """Each request's (emitted tokens, accepted nodes), without padding."""
    ids, acc, nodes = (np.asarray(out.output_token_ids), np.asarray(out.num_accepted),
                       np.asarray(out.accepted_nodes))
    return [(tuple(ids[i, : int(acc[i]) + 1].tolist()), tuple(int(n) for n in nodes[i] if n >= 0))
            for i in range(len(acc))]


def _reseed_global_rngs() -> None:
    """A device reading the global RNGs would change its answer now."""
    import random
    import sys
    random.seed(12345)
    np.random.seed(12345)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(12345)


SENSITIVITY_V = 64


def _seeded_contracts(device, base: str, batch: TreeBatch, spec: TreeSpec, seed: int,
                      suite_seed: int) -> list[CheckResult]:
    """SPEC §5.2's promise for ``rng="seeded"`` (its tokens a function of each request's seed and
    position) on trees, judged against the device's own answers: determinism, batch invariance (the
    batch reversed, every third request alone), and sensitivity to the seed and to the position."""
    caps = device.capabilities
    first, p1 = call(base, "L2", lambda: ask(device, batch, None), caps)
    if p1:
        return [p1]
    _reseed_global_rngs()
    second, p2 = call(base, "L2", lambda: ask(device, batch, None), caps)
    if p2:
        return [p2]
    results, own = [], _paths(first)
    repro = _repro(base, seed, suite_seed)
    differ = [i for i, (a, b) in enumerate(zip(own, _paths(second))) if a != b]
    results.append(_contract(f"{base}/determinism", not differ,
                             f"the same call gave different answers for requests {differ[:5]} (coins not a function "
                             f"of seed and position?){repro}" if differ else
                             "the same seeds and positions, the same step, even after re-seeding the global RNGs", seed))
    order = np.arange(batch.batch_size)[::-1]
    singles = list(range(0, batch.batch_size, 3))
    sub = lambda rows: select_tree_requests(batch, rows)[0]  # noqa: E731
    reversed_out, p3 = call(base, "L2", lambda: ask(device, sub(order), None), caps)
    alone = [call(base, "L2", lambda i=i: ask(device, sub([i]), None), caps) for i in singles]
    problem = p3 or next((p for _, p in alone if p), None)
    if problem:
        return results + [problem]
    moved = sorted({int(i) for i, path in zip(order, _paths(reversed_out)) if path != own[i]} |
                   {i for i, (out, _) in zip(singles, alone) if _paths(out)[0] != own[i]})
    results.append(_contract(f"{base}/batch-invariance", not moved,
                             f"requests {moved[:5]} changed when the batch was reversed or they ran alone (coins "
                             f"keyed by batch row?){repro}" if moved else
                             "each request's answer is the same reversed and alone", seed))
    return results + _sensitivity(device, base, spec, seed, suite_seed)


def _sensitivity(device, base: str, spec: TreeSpec, seed: int, suite_seed: int) -> list[CheckResult]:
    """Every seed (then every position) moved by one must change some request's answer. The batch's
    target rows are uniform on V = 64 and its schemes lossless, so each request's first token is
    uniform: a conforming device keeps all 8 answers with probability at most 64⁻⁸ ≈ 3.6·10⁻¹⁵."""
    caps = device.capabilities
    rng = np.random.default_rng(case_seed(seed, "sensitivity"))
    uniform = replace(spec, vocab_size=SENSITIVITY_V, logit_scale=0.0, masked_fraction=0.0, top_k_fraction=0.0,
                      top_p_fraction=0.0, placeholder_fraction=0.0, duplicate_fraction=0.0, threshold_single=1.0,
                      threshold_acc=1.0, greedy_fraction=0.0)
    batch = tree_batch_of(rng, [tree_shape(rng, int(n), "random") for n in
                                rng.integers(0, uniform.max_nodes + 1, size=8)], uniform)
    once, problem = call(base, "L2", lambda: ask(device, batch, None), caps)
    if problem:
        return [problem]
    results = []
    for what, field in (("seed", "seeds"), ("position", "positions")):
        moved = replace(batch, **{field: getattr(batch, field) + (np.uint64(1) if field == "seeds" else 1)})
        other, problem = call(base, "L2", lambda: ask(device, moved, None), caps)
        if problem:
            results.append(problem)
            continue
        same = sum(a == b for a, b in zip(_paths(once), _paths(other)))
        results.append(_contract(f"{base}/{what}-sensitivity", same < batch.batch_size,
                                 f"{batch.batch_size - same} of {batch.batch_size} requests changed when every {what} "
                                 "moved by one" + (f" — the key ignores the {what}{_repro(base, seed, suite_seed)}"
                                                   if same == batch.batch_size else ""), seed))
    return results


def _repro(base: str, seed: int, suite_seed: int) -> str:
    return f" [case {base}, case seed {seed}; specsim conform --groups L2-trees --seed {suite_seed}]"


def _trim(got, like):
    """``got`` cut to ``like``'s widths (a sub-batch may have shallower trees than the whole)."""
    width = like.output_token_ids.shape[1]
    out, nodes = np.asarray(got.output_token_ids), np.asarray(got.accepted_nodes)
    pad = lambda a, w: np.pad(a, ((0, 0), (0, max(0, w - a.shape[1]))), constant_values=-1)[:, :w]  # noqa: E731
    return type(got)(pad(out, width), got.num_accepted, pad(nodes, width - 1))


def _unsupported(device, name: str, spec: TreeSpec, seed: int) -> CheckResult:
    """An undeclared scheme must raise ``UnsupportedCall`` (SPEC §11.6)."""
    batch = random_tree_batch(np.random.default_rng(seed), spec)
    try:
        ask(device, batch, random_tree_noise(np.random.default_rng(seed), batch))
    except Refusal:
        return _contract(f"{name}/undeclared-raises", True, f"{spec.scheme!r} undeclared: UnsupportedCall", seed)
    except MutatedInput as e:
        return _contract(f"{name}/undeclared-raises", False, str(e), seed)
    except Exception as e:  # noqa: BLE001 — any other outcome is the failure being checked
        return _contract(f"{name}/undeclared-raises", False, f"raised {type(e).__name__}: {e}", seed)
    return _contract(f"{name}/undeclared-raises", False, f"{spec.scheme!r} is undeclared but the call succeeded", seed)


def _chain_equals_tree(device, ctx) -> CheckResult:
    """A chain tree gives the device's own chain step's tokens (SPEC §11.1)."""
    name = "L2/trees/chain-equals-tree"
    seed = case_seed(ctx.seed, name)
    if "rrs" not in device.capabilities.tree_schemes or not device.capabilities.injected_noise:
        return CheckResult(name, "L2", "not_supported", "needs tree scheme 'rrs' and injected noise")
    from specsim.testing.batches import BatchSpec, random_batch, random_noise
    rng = np.random.default_rng(seed)
    chain = random_batch(rng, BatchSpec(greedy_fraction=0.25, max_k=min(4, device.capabilities.max_k)))
    noise = random_noise(rng, chain)
    parents = np.concatenate([np.arange(k) - 1 for k in chain.num_draft_tokens]).astype(np.int64)
    tree = TreeBatch(chain.num_draft_tokens, parents, chain.draft_token_ids, chain.draft_probs, chain.target_logits,
                     chain.temperature, chain.top_k, chain.top_p, chain.seeds, chain.positions)
    a, p1 = call(name, "L2", lambda: ask(device, chain, noise), device.capabilities)
    b, p2 = call(name, "L2", lambda: ask(device, tree, noise), device.capabilities)
    if p1 or p2:
        return p1 or p2
    ok = np.array_equal(np.asarray(a.output_token_ids), np.asarray(b.output_token_ids))
    return _contract(name, ok, "the chain tree emits the chain step's tokens" if ok else
                     f"chain {np.asarray(a.output_token_ids).tolist()} vs tree {np.asarray(b.output_token_ids).tolist()}",
                     seed)


__all__ = ["coins_read", "tree_l2_group"]
