"""L1-trees' constructed patterns (SPEC §11): the sibling layouts where tree verifiers break.

A random tree batch holds a placeholder among siblings, a duplicate or a
particular sibling order only now and then, and its random coins land where a
wrong rule shows only now and then: a bug that shows for one of them is caught
at one suite seed and missed at the next. Each pattern here is one small tree
(V = 5, depth ≤ 4) built around one layout SPEC §11 names:

* placeholders **before, between and after** real siblings (§11.1: never
  accepted, the residual untouched, the coin unread; sglang adds nothing to
  the running sum ``A``);
* **duplicate** siblings (rrs: the second copy meets the residual the first
  left; sglang: ``t(x)`` counted twice);
* rows drawn **with and without replacement**, and **point proposals**;
* **leaves at every depth** (1 to 4), each reachable;
* an **empty request beside a big one** in the same batch.

With injected noise the pattern is sent many times at once, each copy a
*probe* whose noise is placed from the reference's exact law of that very
tree (``reference.tree.level``): for every sibling a step can try, one coin
just below its acceptance threshold and one just above it (rrs: the
sibling's own ``a_k``; sglang: the level's one coin at each cumulative bound;
relative distance δ ∈ [10⁻⁴, 10⁻³]); a sibling that can never be accepted
(a placeholder, ``r(x) = 0``) gets the coin 0. Wherever a step stops, one
probe per token of the residual makes that token win the race by a relative
δ (``E(v) = r(v)·(1 + δ·rank)``), and tokens outside the residual get a tiny
``E`` so that any mass a wrong residual puts there wins. So every
acceptance threshold that moves by more than δ, and every residual whose
ratios move by more than δ·V, changes some probe's tokens — at every suite
seed; the seed only relabels the vocabulary and draws δ, the ranks and the
unread coins. Greedy patterns (T = 0) need no noise: one probe per choice of
argmax at every reachable node (each sibling's token, token 0, and a token
outside the siblings).

A device that takes no injected noise is held to each pattern's exact law
instead (``tree_pattern_cases.step_law``): the pattern repeated ``n`` times
under distinct seeds, exact support, and per request whose law has more than
one outcome a goodness-of-fit test of the run's statistical plan
(``stats.plan.run_plan``, group ``L1-trees``: ``ctx.alpha_family`` split evenly
over every statistical test of the run, each run at a tenth of its share);
each check states its detectable TV. The patterns themselves, their rows as
sent and their laws are ``tree_pattern_cases``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID as PH
from devices.protocol import Noise, TreeBatch
from reference.tree import children_of, level
from specsim.judge import stats
from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.plan import run_plan
from specsim.conformance.cases.tree_patterns import (PATTERNS, V, Pattern, PatternTree, as_sent, law_seed,
                                                    law_test_name, laws, pattern_dtype, pattern_lacking, samples,
                                                    seeded_trees)
from specsim.testing.seeds import case_seed
from specsim.testing.trees import compare_tree, reference_tree_step

DELTA = (1e-4, 1e-3)
"""The relative distance of a probe's coin from its threshold (and of the race's runner-up), drawn per probe."""
TINY_E = 1e-12
"""``E(v)`` of the tokens outside a probe's residual: any mass a wrong residual puts there wins the race."""


def batch_of(trees: list[PatternTree], scheme: str, dtype: str, logits: list | None = None) -> TreeBatch:
    """The requests ``trees`` as one batch (``logits``: per request ``[N + 1, V]``, default log target)."""
    greedy = scheme == "greedy"
    with np.errstate(divide="ignore"):
        rows = logits if logits is not None else [np.log(np.array(t.target, np.float64)) for t in trees]
    point = all(t.draft is None for t in trees)
    n = len(trees)
    return TreeBatch(
        num_nodes=np.array([len(t.parents) for t in trees], np.int64),
        parents=np.array([p for t in trees for p in t.parents], np.int64),
        draft_token_ids=np.array([x for t in trees for x in t.tokens], np.int64),
        draft_probs=None if point else np.array([r for t in trees for r in t.draft], np.float64).reshape(-1, V)
        .astype(dtype),
        target_logits=np.concatenate(rows).astype(dtype), temperature=np.full(n, 0.0 if greedy else 1.0),
        top_k=np.zeros(n, np.int64), top_p=np.ones(n), seeds=np.arange(1, 2 * n, 2, dtype=np.uint64),
        positions=np.zeros(n, np.int64), scheme="rrs" if greedy else scheme)



# --- probes: noise where a wrong rule shows ------------------------------------------------------

def _delta(rng) -> float:
    return float(rng.uniform(*DELTA))


def _stops(t: PatternTree, scheme: str, rng):
    """Every way a step through ``t`` can end, with coins that straddle each threshold on the way:
    yields ``(coins {node: u}, residual [V])``."""
    kids = children_of(t.parents)

    def visit(slot: int, coins: dict):
        siblings, target = kids[slot], list(t.target[slot])
        tokens = [t.tokens[n] for n in siblings]
        rows = None if t.draft is None else [list(t.draft[n]) for n in siblings]
        p_accept, p_none, residual = level(scheme, target, tokens, rows)
        if scheme == "rrs":
            _refuse_near_ties(target, tokens, rows, slot)
        _refuse_near_zero(residual, slot)
        if scheme == "rrs":
            yield from _rrs_level(visit, siblings, tokens, p_accept, p_none, residual, coins, rng)
        else:
            yield from _sglang_level(visit, siblings, tokens, p_accept, residual, coins, rng)

    yield from visit(0, {})


def _refuse_near_zero(residual, slot: int) -> None:
    small = [r for r in residual if 0 < r < 1e-6]
    if small:
        raise ValueError(f"pattern rows: the residual at slot {slot} has a positive entry {small[0]:.3g} < 1e-6; "
                         "a device's rounding could make it 0 (choose rows without near-coincidences)")


def _refuse_near_ties(target, tokens, rows, slot: int) -> None:
    """Each rrs sibling's ``r − d`` must be exactly 0 only where both are 0, and otherwise at least 10⁻⁶
    away from 0: a device's rounding of a near-tie would flip ``max(r − d, 0)`` between 0 and positive."""
    for k, x in enumerate(tokens):
        if x == PH:
            continue
        r = level("rrs", target, tokens[:k], None if rows is None else rows[:k])[2]
        d = [float(v == x) for v in range(len(r))] if rows is None else rows[k]
        close = [v for v in range(len(r)) if abs(r[v] - d[v]) < 1e-6 and (r[v] > 0 or d[v] > 0)]
        if close:
            raise ValueError(f"pattern rows: at slot {slot}, sibling {k}'s residual and draft row nearly tie at "
                             f"token {close[0]} ({r[close[0]]:.6g} vs {d[close[0]]:.6g}); a device's rounding could "
                             "flip max(r - d, 0) there (choose rows without near-coincidences)")


def _rrs_level(visit, siblings, tokens, p_accept, p_none, residual, coins, rng):
    """rrs: sibling k's own coin, once just below ``a_k`` (then down its subtree) and once just above."""
    reach, before = 1.0, {}
    for k, node in enumerate(siblings):
        if reach <= 0:
            return
        a = p_accept[k] / reach
        reach -= p_accept[k]
        if tokens[k] == PH or a <= 0:
            before[node] = 0.0            # never accepted, whatever the coin: the coin 0 shows a rule that would
            continue
        yield from visit(node + 1, {**coins, **before, node: a * (1 - _delta(rng))})
        if a >= 1 - 1e-9:
            return                        # always accepted: the later siblings are unreachable
        before[node] = a + (1 - a) * _delta(rng)
    if p_none > 0:
        yield {**coins, **before}, residual


def _sglang_level(visit, siblings, tokens, p_accept, residual, coins, rng):
    """sglang: the level's one coin (its first child's) just below and just above every cumulative bound;
    the other siblings' coins 0 (unread)."""
    bounds = np.cumsum(p_accept).tolist() if len(siblings) else []
    inner = sorted({b for b in bounds if 1e-9 < b < 1 - 1e-9})
    candidates = [x for b in inner for x in (b * (1 - _delta(rng)), b + (1 - b) * _delta(rng))] or [float(rng.random())]
    for u in candidates:
        here = {**coins, **{n: 0.0 for n in siblings}}
        if siblings:
            here[siblings[0]] = u
        k = next((k for k, b in enumerate(bounds) if u < b), None)
        if k is None:
            yield here, residual
        else:
            yield from visit(siblings[k] + 1, here)


def _race(residual, rng) -> list[np.ndarray]:
    """One exponentials row ``[V]`` per token of ``residual``'s support, that token winning by a relative δ."""
    support = [v for v, r in enumerate(residual) if r > 0]
    out = []
    for winner in support:
        order = [winner] + [int(v) for v in rng.permutation([v for v in support if v != winner])]
        E = np.full(len(residual), TINY_E)
        delta = _delta(rng)
        for rank, v in enumerate(order):
            E[v] = residual[v] * (1 + delta * rank)
        out.append(E)
    return out


def probes(t: PatternTree, scheme: str, rng) -> list[tuple[np.ndarray, np.ndarray]]:
    """Noise for copies of ``t`` (its rows as sent): ``[(uniforms [N], exponentials [V])]``, every threshold
    straddled and every stop's residual raced token by token. Unread coins are uniform."""
    out = []
    for coins, residual in _stops(t, scheme, rng):
        u = rng.random(len(t.parents))
        for node, c in coins.items():
            u[node] = c
        out += [(u.copy(), E) for E in _race(residual, rng)]
    return out


def greedy_probes(t: PatternTree) -> list[np.ndarray]:
    """Logits ``[N + 1, V]`` for greedy copies of ``t``: at every reachable slot, one copy per argmax choice —
    each real sibling's token, tokens 0 and V - 1, and the smallest token outside the siblings — the path to the slot
    following argmaxes set on its tokens."""
    kids = children_of(t.parents)
    with np.errstate(divide="ignore"):
        base = np.log(np.array(t.target, np.float64))
    base = np.where(np.isfinite(base), base, -30.0)
    out = []

    def argmax_at(logits, slot, token):
        logits[slot, token] = logits[slot].max() + 1.0

    def visit(slot: int, logits: np.ndarray):
        siblings = kids[slot]
        real = [t.tokens[n] for n in siblings if t.tokens[n] != PH]
        outside = next((v for v in range(V) if v not in real), None)
        for choice in dict.fromkeys(real + [0, V - 1] + ([outside] if outside is not None else [])):
            here = logits.copy()
            argmax_at(here, slot, choice)
            k = next((n for n in siblings if t.tokens[n] == choice), None)
            if k is None:
                out.append(here)
            else:
                visit(k + 1, here)

    visit(0, base)
    return out


# --- the checks ------------------------------------------------------------------------------

def probe_batch(pattern: Pattern, seed: int, dtype: str) -> tuple[TreeBatch, Noise]:
    """Every probe of the pattern's requests in one batch (the requests' probes interleaved), with its noise."""
    rng = np.random.default_rng(seed)
    trees = seeded_trees(pattern, seed)
    sent = [as_sent(t, dtype) for t in trees]
    if pattern.scheme == "greedy":
        per_tree = [[(i, logits) for logits in greedy_probes(t)] for i, t in enumerate(sent)]
    else:
        per_tree = [[(i, noise) for noise in probes(t, pattern.scheme, rng)] for i, t in enumerate(sent)]
    count = max(len(p) for p in per_tree)
    chosen = [p[k % len(p)] for k in range(count) for p in per_tree]
    if pattern.scheme == "greedy":
        batch = batch_of([trees[i] for i, _ in chosen], "greedy", dtype, logits=[x for _, x in chosen])
        return batch, Noise(rng.random(int(batch.num_nodes.sum())), np.ones((batch.batch_size, V)))
    batch = batch_of([trees[i] for i, _ in chosen], pattern.scheme, dtype)
    uniforms = np.concatenate([u for _, (u, _) in chosen])
    return batch, Noise(uniforms, np.stack([E for _, (_, E) in chosen]))


def _exact(device, pattern: Pattern, ctx, dtype: str, name: str | None = None) -> CheckResult:
    """The pattern's probes (its seed is the pattern's), with their injected noise where the device takes it and
    ``name`` is the pattern's own check; greedy probes read no noise, so a twin ``name`` sends them without."""
    seed, name = case_seed(ctx.seed, pattern.check), name or pattern.check
    batch, noise = probe_batch(pattern, seed, dtype)
    injected = noise if device.capabilities.injected_noise and name == pattern.check else None
    got, problem = call(name, "L1", lambda: ask(device, batch, injected), device.capabilities)
    if problem:
        return problem
    problems = compare_tree(got, reference_tree_step(batch, injected),
                            repro=f" [specsim conform --groups L1-trees --seed {ctx.seed}]")
    design = ("one probe per argmax choice at every reachable node" if pattern.scheme == "greedy" else
              "every threshold straddled by a relative δ ≤ 1e-3, every residual raced token by token")
    detail = (f"{pattern.why}: {len(problems)} of {batch.batch_size} probes differ: " + "; ".join(problems[:3])
              if problems else f"{pattern.why} — {batch.batch_size} probes agree ({design})")
    return CheckResult(name, "L1", "fail" if problems else "pass", detail, seed=seed)


# --- without injected noise: the pattern's exact law ----------------------------------------------

def _law_check(device, pattern: Pattern, ctx, dtype: str) -> CheckResult:
    """The pattern ``n`` times under the device's own randomness: exact support, then each request's
    goodness-of-fit test at its α in the run's plan (``law_test_name``)."""
    name, seed, n = pattern.check, law_seed(pattern, ctx.seed), samples(ctx.quick)
    plan = run_plan(device.capabilities, ctx)
    trees = seeded_trees(pattern, seed)
    batch = batch_of(trees * n, pattern.scheme, dtype)
    batch = replace(batch, seeds=np.random.default_rng(seed).integers(0, 2**63, batch.batch_size, dtype=np.uint64))
    got, problem = call(name, "L1", lambda: ask(device, batch, None), device.capabilities)
    if problem:
        return problem
    emitted = [tuple(got.emitted(i)) for i in range(batch.batch_size)]
    repro = f"[specsim conform --groups L1-trees --seed {ctx.seed}]"
    worst_tv, p_min, spent = 0.0, 1.0, []
    for i, law in enumerate(laws(pattern, seed, dtype)):
        seen = Counter(emitted[i::len(trees)])
        outside = {k: c for k, c in seen.items() if k not in law}
        if outside:
            return CheckResult(name, "L1", "fail", f"{pattern.why}: request {i} emitted {sorted(outside)[:3]} "
                               f"({sum(outside.values())} of {n}), which the exact law gives probability 0 {repro}",
                               seed=seed, n=n)
        if len(law) > 1:
            test, keys = plan.test(law_test_name(pattern, i)), sorted(law)
            res = stats.gof_test(np.array([seen.get(k, 0) for k in keys]), np.array([law[k] for k in keys]),
                                 test.alpha, what=test.name, seed=seed)
            worst_tv, p_min = max(worst_tv, res.detectable_tv), min(p_min, res.p_value)
            spent.append(test)
            if not res.passed:
                return CheckResult(name, "L3", "fail", f"{pattern.why}: {res.report()} {repro}",
                                   p_value=res.p_value, alpha=test.alpha, n=n, statistic=res.statistic,
                                   detectable_tv=res.detectable_tv, seed=seed,
                                   extra={**res.extra(), "alpha_share": test.alpha_share,
                                          "alpha_family": plan.alpha_family, "family_tests": len(plan.tests)})
    if not spent:
        return CheckResult(name, "L1", "pass", f"{pattern.why} — without injected noise, exact: every one of {n} "
                           "samples in the law's support", n=n, seed=seed)
    alpha = min(t.alpha for t in spent)
    return CheckResult(name, "L3", "pass", f"{pattern.why} — without injected noise, exact support and "
                       f"{len(spent)} goodness-of-fit test(s) at α={alpha:.2e} (the run's plan), n={n}, detectable "
                       f"TV {worst_tv:.3f}, smallest p={p_min:.3g}", p_value=p_min, alpha=alpha, n=n,
                       detectable_tv=worst_tv, seed=seed,
                       extra={"alpha_share": min(t.alpha_share for t in spent), "alpha_family": plan.alpha_family,
                              "family_tests": len(plan.tests), "tests": [t.name for t in spent]})


TWIN_COPIES, QUICK_TWIN_COPIES = 256, 64
"""Copies of a pattern's requests in its twin on the device's own draws (SPEC 1.14), each under its own key: a wrong
answer of probability 0.02 a copy is seen with probability 0.994 (0.73 with ``--quick``)."""


def twin_mode(caps) -> str | None:
    """The device's own randomness a pattern's twin is asked on (SPEC 1.14): ``"keyed"`` (§5.2's streams,
    ``rng = "philox"``) or, for a device taking injected noise, ``"seeded"`` (unkeyed draws: a device without
    injected noise is already held to the pattern's law on them); None: no twin."""
    if caps.rng == "philox":
        return "keyed"
    return "seeded" if caps.rng == "seeded" and caps.injected_noise else None


def _twin(device, pattern: Pattern, ctx, dtype: str, mode: str) -> CheckResult:
    """``<pattern>/keyed`` or ``<pattern>/seeded`` (SPEC 1.14): the pattern's requests ``TWIN_COPIES`` times, each
    copy under its own seed and position, on the device's own draws — keyed: every copy's tokens and accepted
    nodes the reference's on the same streams; seeded: within its exact law's support (``request_laws``, keyed by
    emitted tokens and accepted nodes). Greedy probes read no noise: sent without it, held exactly."""
    from specsim.testing.trees import request_laws
    name = f"{pattern.check}/{mode}"
    if pattern.scheme == "greedy":
        return _exact(device, pattern, ctx, dtype, name=name)
    seed, copies = case_seed(ctx.seed, pattern.check, mode), QUICK_TWIN_COPIES if ctx.quick else TWIN_COPIES
    trees = seeded_trees(pattern, seed)
    batch = batch_of(trees * copies, pattern.scheme, dtype)
    rng = np.random.default_rng(seed)
    batch = replace(batch, seeds=rng.integers(0, 2**63, batch.batch_size, dtype=np.uint64),
                    positions=rng.integers(0, 2**31, batch.batch_size, dtype=np.int64))
    got, problem = call(name, "L1", lambda: ask(device, batch, None), device.capabilities)
    if problem:
        return problem
    repro = f"[specsim conform --groups L1-trees --seed {ctx.seed}]"
    if mode == "keyed":
        problems = compare_tree(got, reference_tree_step(batch, None), repro=f" {repro}")
        return CheckResult(name, "L1", "fail" if problems else "pass",
                           f"{pattern.why}: {len(problems)} of {batch.batch_size} copies differ on the keyed streams: "
                           + "; ".join(problems[:3]) if problems else f"{pattern.why} — {batch.batch_size} copies, "
                           "each under its own key, agree with the reference's keyed tokens and accepted nodes",
                           seed=seed)
    laws_of = request_laws(batch_of(trees, pattern.scheme, dtype))   # the copies' requests, once each
    taken = [[int(x) for x in row if x >= 0] for row in np.asarray(got.accepted_nodes)]
    outside = [n for n in range(batch.batch_size)
               if laws_of[n % len(trees)].get((tuple(got.emitted(n)), tuple(taken[n])), 0) <= 0]
    if outside:
        n = outside[0]
        return CheckResult(name, "L1", "fail", f"{pattern.why}: copy {n} (request {n % len(trees)}) emitted "
                           f"{got.emitted(n)} via nodes {taken[n]} under the device's own draws, which its exact law "
                           f"gives probability 0; {len(outside)} of {batch.batch_size} copies outside the support "
                           f"{repro}", seed=seed, n=batch.batch_size)
    return CheckResult(name, "L1", "pass", f"{pattern.why} — {batch.batch_size} copies under the device's own "
                       "unkeyed draws, each its own seed and position, every one within its exact support",
                       seed=seed, n=batch.batch_size)


def pattern_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """Every pattern the device's schemes allow: exact probes with injected noise (and always for greedy),
    else the pattern's law under the device's own randomness. ``only``: that one check's name.

    >>> from devices.registry import load
    >>> from specsim.conformance.core.context import Context
    >>> [r.status for r in pattern_checks(load("torch"), Context(quick=True), only="L1/trees/pattern/rrs/duplicates")]
    ['pass']
    """
    caps, results = device.capabilities, []
    dtype = pattern_dtype(caps)
    for pattern in PATTERNS:
        if only is not None and pattern.check != only:
            continue
        why = pattern_lacking(caps, pattern)
        if why:
            results.append(CheckResult(pattern.check, "L1", "not_supported", why))
        elif caps.injected_noise or pattern.scheme == "greedy":
            results.append(_exact(device, pattern, ctx, dtype))
        elif caps.rng == "none":
            results.append(CheckResult(pattern.check, "L1", "not_supported",
                                       "device takes no injected noise and draws none of its own (rng='none')"))
        else:
            results.append(_law_check(device, pattern, ctx, dtype))
    return results


def pattern_twin_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """Every pattern's twin on the device's own draws (SPEC 1.14, ``_twin``): ``<pattern>/keyed`` for a device
    drawing keyed noise, ``<pattern>/seeded`` for one taking injected noise that draws unkeyed noise too; none where
    the pattern's own check already asks those draws (``_twin_name``). ``only``: that one check's name."""
    caps, results = device.capabilities, []
    dtype = pattern_dtype(caps)
    for pattern in PATTERNS:
        twin = _twin_name(caps, pattern)
        if twin is None or only not in (None, twin):
            continue
        why = pattern_lacking(caps, pattern)
        results.append(CheckResult(twin, "L1", "not_supported", why) if why else
                       _twin(device, pattern, ctx, dtype, twin.rsplit("/", 1)[1]))
    return results


def _twin_name(caps, pattern: Pattern) -> str | None:
    """``<pattern>/<twin_mode>`` where the device's own draws are not already what the pattern's check asks (a
    greedy pattern on a device without injected noise is sent without noise there); else None."""
    mode = twin_mode(caps)
    if mode is None or (pattern.scheme == "greedy" and not caps.injected_noise):
        return None
    return f"{pattern.check}/{mode}"


def design(caps, ctx) -> list[tuple[str, int, str]]:
    """Per pattern: (check, probes sent with injected noise, what a device of capabilities ``caps`` without
    injected noise is held to — its law tests' α, n and design detectable TV from the run's plan, or
    "exact" for greedy)."""
    plan = run_plan(replace(caps, injected_noise=False), ctx)
    out = []
    for pattern in PATTERNS:
        count = probe_batch(pattern, case_seed(ctx.seed, pattern.check), "float64")[0].batch_size
        tests = [t for t in plan.tests if t.check == pattern.check]
        if pattern.scheme == "greedy" or not tests:
            out.append((pattern.check, count, "exact"))
            continue
        tvs = [t.detectable_tv for t in tests if t.detectable_tv is not None]
        out.append((pattern.check, count, f"{len(tests)} test(s), TV {max(tvs):.3f} (n={tests[0].n}, "
                                          f"α={min(t.alpha for t in tests):.2e})" if tvs else
                    f"{len(tests)} test(s), n={tests[0].n}: {tests[0].note}"))
    return out


__all__ = ["TINY_E", "batch_of", "probes", "greedy_probes", "probe_batch", "pattern_checks", "pattern_twin_checks",
           "twin_mode", "design"]


if __name__ == "__main__":      # python -m specsim.conformance.checks.trees.patterns [--quick]: the patterns' design
    import sys

    from devices.torch_device import CAPABILITIES
    from specsim.conformance.core.context import Context
    black_box = replace(CAPABILITIES, injected_noise=False, rng="seeded")
    for check, count, held in design(black_box, Context(quick="--quick" in sys.argv)):
        print(f"{check:<44} {count:>4} probes   without injected noise: {held}")
