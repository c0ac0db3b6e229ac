"""L3 for trees (SPEC §11): the law of the emitted path and of the accepted length, black box.

Each case is one tree template (shape, V, scheme, drafting, sampling
parameters) whose target and drafter rows depend on the accepted prefix
(a row per prefix, drawn from the case seed). Every trial drafts its own
tree from the drafter rows (with or without replacement, or top-k), gets a
fresh seed and position, and the device verifies all trials with its own
randomness (``noise=None``). Per case:

* ``support`` (exact, no α): no emitted path outside the law's support;
* ``path``: the emitted tuple (accepted path + emitted token) against its
  exact law ``reference.tree.tree_law`` — losslessness and the scheme's
  sibling order, residual updates and thresholds, all at once;
* ``accepted``: the accepted length against ``accepted_length_law``.

**Budget.** L3-statistical and L3-trees share the L3 layer's one
``ctx.alpha_family``, split (Bonferroni) over the statistical checks of both
(``statistical.l3_shares``: 10 of 100 at the default, so every check runs at
``α/100``, nominal α/1000, ``stats.Budget``); together they false-fail at most
``alpha_family``. Trials per case come from the planner: worst-case TV
``TARGET_TV`` on the path law detected with power 1 − β.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import TreeBatch
from reference.target import target_probs
from reference.tree import accepted_length_law, tree_law
from specsim import stats
from specsim.conformance._common import ask, call
from specsim.conformance.results import CheckResult
from specsim.conformance.trees import tree_device
from specsim.testing.batches import _softmax_rows
from specsim.testing.seeds import case_seed

TARGET_TV = 0.05
QUICK_TRIALS = 2000
CHUNK = 8192


@dataclass(frozen=True)
class TreeCase:
    id: str
    parents: tuple
    V: int
    scheme: str = "rrs"
    drafting: str = "with_replacement"
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    threshold_single: float = 1.0
    threshold_acc: float = 1.0

    @property
    def needs(self) -> str:
        return self.scheme


CASES = [
    TreeCase("rrs-with-replacement", (-1, -1, 0, 1), 5),
    TreeCase("rrs-without-replacement", (-1, -1, -1, 0), 4, drafting="without_replacement"),
    TreeCase("rrs-point-top-p", (-1, -1, 0, 0), 5, drafting="top", top_p=0.9, temperature=0.8),
    TreeCase("sglang", (-1, -1, 0), 5, scheme="sglang", drafting="top"),
    TreeCase("sglang-relaxed", (-1, -1, 0), 5, scheme="sglang", drafting="top", threshold_single=0.5,
             threshold_acc=0.8),
]


class PrefixRows:
    """A case's rows per accepted prefix, drawn on first use from the case seed: raw target logits,
    target_probs (§2), and the drafter's law."""

    def __init__(self, case: TreeCase, seed: int):
        self.case, self.seed, self.logits, self.drafter = case, seed, {}, {}

    def target_logits(self, prefix: tuple) -> np.ndarray:
        if prefix not in self.logits:
            rng = np.random.default_rng(case_seed(self.seed, f"target{prefix}"))
            self.logits[prefix] = rng.normal(0.0, 1.5, self.case.V)
        return self.logits[prefix]

    def target(self, prefix: tuple) -> np.ndarray:
        c = self.case
        return target_probs(self.target_logits(prefix), c.temperature, c.top_k, c.top_p)

    def draft(self, prefix: tuple) -> np.ndarray:
        if prefix not in self.drafter:
            rng = np.random.default_rng(case_seed(self.seed, f"draft{prefix}"))
            noisy = self.target_logits(prefix) / self.case.temperature + rng.normal(0.0, 0.8, self.case.V)
            self.drafter[prefix] = _softmax_rows(noisy[None, :])[0]
        return self.drafter[prefix]


def _draw(rng, rows: np.ndarray, drafting: str, taken: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One sibling per trial from ``rows [n, V]`` given earlier siblings ``taken [n, V]`` bool:
    (tokens ``[n]``, the rows they were drawn from ``[n, V]``)."""
    if drafting == "top":     # the best token not yet taken (ties: lowest id): tree_law's sibling_draws
        score = np.where(taken, -1.0, rows)
        return np.argmax(score, axis=1), rows
    if drafting == "without_replacement":
        rows = np.where(taken, 0.0, rows)
        rows = rows / rows.sum(axis=1, keepdims=True)
    cdf = np.cumsum(rows, axis=1)
    tokens = np.minimum((cdf < rng.random(len(rows))[:, None] * cdf[:, -1:]).sum(axis=1), rows.shape[1] - 1)
    return tokens, rows


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
        for j in np.flatnonzero(parents[:k] == p):            # earlier siblings
            taken[np.arange(n), tokens[:, j]] = True
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


def laws(case: TreeCase, rows: PrefixRows) -> tuple[dict, np.ndarray]:
    """(path law ``{tuple: prob}``, accepted-length law ``[depth + 1]``), exact enumeration in float64."""
    law = tree_law(list(case.parents), rows.target, rows.draft, case.scheme, case.drafting, case.threshold_single,
                   case.threshold_acc, exact=False)
    return law, np.array(accepted_length_law(law, list(case.parents)), dtype=np.float64)


def plan(ctx) -> tuple[stats.Budget, dict]:
    """The budget over every statistical check of the case list, and each case's trial count."""
    from specsim.conformance.statistical import l3_shares
    budget = stats.Budget(ctx.alpha_family * l3_shares()[1], 2 * len(CASES))
    trials = {}
    for case in CASES:
        law, _ = laws(case, PrefixRows(case, case_seed(ctx.seed, f"L3/trees/{case.id}")))
        cells = stats.design_cells(np.array(list(law.values())), 10_000)
        trials[case.id] = QUICK_TRIALS if ctx.quick else int(np.ceil(stats.min_samples(cells, TARGET_TV, budget.nominal)))
    return budget, trials


def _run_case(device, case: TreeCase, n: int, budget: stats.Budget, ctx) -> list[CheckResult]:
    name = f"L3/trees/{case.id}"
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
        res = stats.gof_test(observed, expected, budget.nominal, what=f"{name}/{what}", seed=seed)
        results.append(CheckResult(f"{name}/{what}", "L3", "pass" if res.passed else "fail", res.report(),
                                   p_value=res.p_value, alpha=res.alpha, n=res.n, statistic=res.statistic,
                                   detectable_tv=res.detectable_tv, seed=seed, extra=res.extra()))
    return results


def tree_statistical_group(device, ctx) -> list[CheckResult]:
    """The L3-trees group (see the module docstring)."""
    why = tree_device(device)
    if why:
        return [CheckResult("L3/trees", "L3", "not_supported", why)]
    if device.capabilities.rng == "none":
        return [CheckResult("L3/trees", "L3", "not_supported", "device draws no randomness of its own (rng='none')")]
    budget, trials = plan(ctx)
    results = []
    for case in CASES:
        if case.needs not in device.capabilities.tree_schemes:
            results.append(CheckResult(f"L3/trees/{case.id}", "L3", "not_supported",
                                       f"device does not declare tree scheme {case.needs!r}"))
            continue
        results += _run_case(device, case, trials[case.id], budget, ctx)
    return results


__all__ = ["TARGET_TV", "CASES", "TreeCase", "PrefixRows", "trial_batch", "laws", "plan",
           "tree_statistical_group"]
