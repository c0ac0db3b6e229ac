"""L3 for trees (SPEC §11): the law of the emitted path and of the accepted length, black box.

Each case of ``tree_cases.CASES`` is one tree template (shape, V, scheme,
drafting, sampling parameters) whose target and drafter rows depend on the
accepted prefix (a row per prefix, drawn from the case seed). Every trial
drafts its own tree from the drafter rows (with or without replacement, or
top-k), gets a fresh seed and position, and the device verifies all trials
with its own randomness (``noise=None``). Per case:

* ``support`` (exact, no α): no emitted path outside the law's support;
* ``path``: the emitted tuple (accepted path + emitted token) against its
  exact law ``reference.tree.tree_law`` — losslessness and the scheme's
  sibling order, residual updates and thresholds, all at once;
* ``accepted``: the accepted length against ``accepted_length_law``.

**Budget.** ``path`` and ``accepted`` are tests of the run's statistical plan
(``stats.plan.run_plan``: ``ctx.alpha_family`` split evenly over every
statistical test of the run, L3-statistical's and the edges' included, each run
at a tenth of its share). Trials per case come from the plan
(``stats.plan.tree_trials``): worst-case TV ``tree_cases.TARGET_TV`` (0.03; a
case may set its own ``target_tv``) on the path law detected with power 1 − β
at that α, the pooled cells counted at the planned trials
(``stats.plan.design_trials``): a path law off by TV 0.047, as siblings verified
with their parent's row though drafted without replacement can be
(docs/bugs.md C10), is detected with power 0.999.
``python -m specsim.conformance.checks.trees.statistical [seed ...]`` prints each
case's trials and detectable TVs from the plan.
"""

from __future__ import annotations

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, TreeBatch
from specsim.judge import stats
from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.plan import StatPlan, run_plan
from specsim.conformance.cases.trees import (CASES, PrefixRows, TreeCase,
                                            case_name, laws)
from specsim.conformance.core.calls import tree_device
from specsim.testing.seeds import case_seed

CHUNK = 8192


def _draw(rng, rows: np.ndarray, drafting: str, taken: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sibling per trial from ``rows [n, V]`` given earlier siblings ``taken [n, V]`` bool:
    (tokens ``[n]``, the rows they were drawn from ``[n, V]``). Without replacement, a trial whose row
    has no token left drafts a placeholder (its row all zeros), as ``sibling_draws`` says."""
    if drafting == "top":     # the best token not yet taken (ties: lowest id): tree_law's sibling_draws
        score = np.where(taken, -1.0, rows)
        return np.argmax(score, axis=1), rows
    if drafting == "without_replacement":
        rows = np.where(taken, 0.0, rows)
        total = rows.sum(axis=1, keepdims=True)
        rows = np.where(total > 0, rows / np.where(total > 0, total, 1.0), 0.0)
    cdf = np.cumsum(rows, axis=1)
    tokens = np.minimum((cdf < rng.random(len(rows))[:, None] * cdf[:, -1:]).sum(axis=1), rows.shape[1] - 1)
    return np.where(cdf[:, -1] > 0, tokens, PLACEHOLDER_TOKEN_ID), rows


def trial_batch(case: TreeCase, rows: PrefixRows, n: int, rng: np.random.Generator) -> TreeBatch:
    """``n`` requests of the case's tree, each drafted afresh, with fresh seeds and positions."""
    parents, V, N = np.array(case.parents), case.V, len(case.parents)
    prefixes = [[()] * n]                                      # per slot (root, then each node): each trial's prefix
    tokens, drafts = np.zeros((n, N), np.int64), np.zeros((n, N, V))
    for k, p in enumerate(parents):
        parent = prefixes[p + 1]
        table = {q: rows.draft(q) for q in set(parent)}
        base = np.stack([table[q] for q in parent])
        taken = np.zeros((n, V), bool)
        for j in np.flatnonzero(parents[:k] == p):            # earlier siblings (placeholders take nothing)
            real = tokens[:, j] != PLACEHOLDER_TOKEN_ID
            taken[np.flatnonzero(real), tokens[real, j]] = True
        tokens[:, k], drafts[:, k] = _draw(rng, base, case.drafting, taken)
        prefixes.append([q + (int(x),) for q, x in zip(parent, tokens[:, k])])
    logits = np.stack([np.stack([rows.target_logits(q) for q in slot]) for slot in prefixes], axis=1)
    point = case.drafting == "top" or case.scheme == "sglang"
    return TreeBatch(
        num_nodes=np.full(n, N, np.int64), parents=np.tile(parents, n).astype(np.int64),
        draft_token_ids=tokens.reshape(-1), draft_probs=None if point else drafts.reshape(-1, V),
        target_logits=logits.reshape(-1, V), temperature=np.full(n, case.temperature),
        top_k=np.full(n, case.top_k, np.int64), top_p=np.full(n, case.top_p),
        seeds=rng.integers(0, 2**63, size=n, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1),
        positions=rng.integers(0, 2**20, size=n).astype(np.int64), scheme=case.scheme,
        threshold_single=case.threshold_single, threshold_acc=case.threshold_acc)


def _run_case(device, case: TreeCase, plan: StatPlan, ctx) -> list[CheckResult]:
    name = case_name(case)
    n = plan.test(f"{name}/path").n
    seed = case_seed(ctx.seed, name)
    rows = PrefixRows(case, seed)
    law, length_law = laws(case, rows)
    rng = np.random.default_rng(seed)
    paths, accepted = [], []
    for start in range(0, n, CHUNK):
        batch = trial_batch(case, rows, min(CHUNK, n - start), rng)
        out, problem = call(name, "L3", lambda: ask(device, batch, None), device.capabilities)
        if problem:
            return [problem]
        paths += [tuple(out.emitted(i)) for i in range(batch.batch_size)]
        accepted.append(np.asarray(out.num_accepted))
    cells = sorted(law)
    index = {c: k for k, c in enumerate(cells)}
    outside = sum(p not in index for p in paths)
    counts = np.bincount([index[p] for p in paths if p in index], minlength=len(cells))
    results = [CheckResult(f"{name}/support", "L3", "fail" if outside else "pass",
                           f"{outside} of {n} emitted paths have law probability 0" if outside else
                           f"all {n} emitted paths in the law's support", seed=seed)]
    for what, observed, expected in (("path", counts, np.array([law[c] for c in cells])),
                                     ("accepted", np.bincount(np.concatenate(accepted), minlength=len(length_law)),
                                      length_law)):
        test = plan.test(f"{name}/{what}")
        res = stats.gof_test(observed, expected, test.alpha, what=test.name, seed=seed)
        results.append(CheckResult(test.name, "L3", "pass" if res.passed else "fail", res.report(),
                                   p_value=res.p_value, alpha=res.alpha, n=res.n, statistic=res.statistic,
                                   detectable_tv=res.detectable_tv if np.isfinite(res.detectable_tv) else None,
                                   seed=seed, extra={**res.extra(), "alpha_share": test.alpha_share,
                                                     "alpha_family": plan.alpha_family,
                                                     "family_tests": len(plan.tests)}))
    return results


def tree_statistical_group(device, ctx) -> list[CheckResult]:
    """The L3-trees group (see the module docstring)."""
    why = tree_device(device)
    if why:
        return [CheckResult("L3/trees", "L3", "not_supported", why)]
    if device.capabilities.rng == "none":
        return [CheckResult("L3/trees", "L3", "not_supported", "device draws no randomness of its own (rng='none')")]
    plan = run_plan(device.capabilities, ctx)
    results = []
    for case in CASES:
        if case.needs not in device.capabilities.tree_schemes:
            results.append(CheckResult(f"L3/trees/{case.id}", "L3", "not_supported",
                                       f"device does not declare tree scheme {case.needs!r}"))
            continue
        results += _run_case(device, case, plan, ctx)
    return results


def design(ctx, caps=None) -> list[tuple[str, int, float, float]]:
    """Per case the run's plan sizes at this suite seed: (id, trials, design detectable TV of the path law,
    of the accepted length). ``caps``: the device's capabilities (default: the torch device's)."""
    if caps is None:
        from devices.torch_device import CAPABILITIES as caps
    plan = run_plan(caps, ctx)
    planned, out = {t.name for t in plan.of_group("L3-trees")}, []
    for case in CASES:
        path, accepted = (f"{case_name(case)}/{what}" for what in ("path", "accepted"))
        if path not in planned:
            continue
        out.append((case.id, plan.test(path).n) + tuple(plan.test(name).detectable_tv or float("nan")
                                                         for name in (path, accepted)))
    return out


__all__ = ["trial_batch", "design", "tree_statistical_group"]


if __name__ == "__main__":      # python -m specsim.conformance.checks.trees.statistical [seed ...]: each case's design
    import sys

    from specsim.conformance.core.context import Context
    for seed in [int(a) for a in sys.argv[1:]] or [0]:
        for case_id, n, path_tv, length_tv in design(Context(seed=seed)):
            print(f"seed {seed:2d}  {case_id:<30} {n:>7} trials  detectable TV: path {path_tv:.4f}, "
                  f"accepted {length_tv:.4f}")
