"""A case's verdicts from its merged tally: each statistical check at its α in the run's plan.

``case_results`` turns a case's ``Tally`` into its checks (per request: each tested
position's law, the accepted-count law, the exact rules, or the greedy path);
``case_verdicts`` notes trials, time and shards on them; ``mark_holm`` marks the
group's Holm step-down for the report; ``not_supported`` and ``NO_RANDOMNESS``
are the checks a device's capabilities rule out.
"""

from __future__ import annotations

import math

import numpy as np

from reference.laws import num_accepted_law
from specsim.judge import stats
from specsim.conformance.cases.chain import Case
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.shards import SHARD_TRIALS, shard_sizes
from specsim.conformance.stats.l3_design import CasePlan, Plan, case_missing, tested_positions
from specsim.conformance.stats.tally import Tally


def _stat_result(name: str, res, plan: Plan, seed: int, design_tv: float | None, extra: dict) -> CheckResult:
    detectable = getattr(res, "detectable_tv", None)
    if detectable is None:
        detectable = getattr(res, "detectable_ks", None)
    return CheckResult(
        name=name, layer="L3", status="pass" if res.passed else "fail", detail=res.report(),
        p_value=float(res.p_value), alpha=plan.alpha(name), n=int(res.n),
        statistic=float(getattr(res, "statistic", getattr(res, "ks", 0.0))),
        detectable_tv=None if detectable is None or not math.isfinite(detectable) else float(detectable),
        seed=seed, extra={"alpha_share": plan.shares[name], "family_tests": plan.family_tests,
                          "alpha_family": plan.alpha_family, "design_detectable": design_tv, **extra})


def case_results(cp: CasePlan, tally: Tally, plan: Plan, seed: int) -> list[CheckResult]:
    """A case's checks from its merged tally, each statistical one at its α in ``plan``."""
    built, case = cp.built, cp.case
    out = []
    pit_rng = np.random.default_rng(seed ^ 0x5EED)
    for i, r in enumerate(case.requests):
        bad = tally.describe(i)
        if r.temperature == 0:
            out.append(CheckResult(f"L3/{case.id}/r{i}/greedy-exact", "L3", "fail" if bad else "pass",
                                   "; ".join(bad[:3]) if bad else f"{tally.n} trials on the argmax path",
                                   n=tally.n, seed=seed))
            continue
        support_bad = []
        for j in range(r.k + 1):
            row = built.target[built.target_row(i, j)]
            counts = tally.counts.get((i, j), np.zeros(len(row)))
            sup = stats.support_check(counts, row, what=f"pos{j}", seed=seed)
            if not sup.passed:
                support_bad.append(sup.report())
            name = f"L3/{case.id}/r{i}/pos{j}" + ("-bonus" if j == r.k else "")
            if j not in tested_positions(r):  # unreachable: any token here is an exact failure (above)
                continue
            if case.pit:
                tokens = np.repeat(np.arange(len(row)), np.asarray(counts, np.int64))  # by id: order-free
                tokens = tokens[row[tokens] > 0]  # support failures are counted exactly above
                res = stats.dkwm_test(stats.pit_values(tokens, row, pit_rng), plan.alpha(name), what=name, seed=seed)
                out.append(_stat_result(name, res, plan, seed, cp.design_tv.get(name),
                                        {"test": "randomized PIT + DKWM", "detectable_metric": "PIT KS distance"}))
            else:
                res = stats.gof_test(counts, row, plan.alpha(name), what=name, seed=seed)
                out.append(_stat_result(name, res, plan, seed, cp.design_tv.get(name),
                                        {"test": "pooled Cressie-Read 2/3", **res.extra()}))
        if r.k:
            law = np.array(num_accepted_law(built.acceptance[i]), dtype=np.float64)
            counts = tally.accepted.get(i, np.zeros(r.k + 1))
            sup = stats.support_check(counts, law, what="num_accepted", seed=seed)
            if not sup.passed:
                support_bad.append(sup.report())
            name = f"L3/{case.id}/r{i}/accepted"
            res = stats.gof_test(counts, law, plan.alpha(name), what=name, seed=seed)
            out.append(_stat_result(name, res, plan, seed, None,
                                    {"test": "accepted-count law, pooled Cressie-Read 2/3",
                                     "expected_law": law.tolist(), "observed": np.asarray(counts).tolist(),
                                     **res.extra()}))
        problems = bad + support_bad
        out.append(CheckResult(f"L3/{case.id}/r{i}/exact", "L3", "fail" if problems else "pass",
                               "; ".join(problems[:3]) if problems else
                               f"support, token range, accepted = drafts, padding: all hold over {tally.n} trials",
                               n=tally.n, seed=seed))
    return out


def _missing(device, case: Case) -> list[str]:
    return case_missing(device.capabilities, case)


NO_RANDOMNESS = CheckResult("L3/statistical", "L3", "not_supported",
                            "the device cannot draw its own randomness (capabilities.rng = 'none')")


def not_supported(device, cp: CasePlan) -> list[CheckResult]:
    """The case's checks as ``not_supported`` if the device's capabilities lack what it needs; else []."""
    missing = _missing(device, cp.case)
    return [CheckResult(n, "L3", "not_supported", f"needs {', '.join(missing)}") for n in cp.checks] if missing else []


def case_verdicts(cp: CasePlan, tally: Tally, plan: Plan, suite_seed: int, seconds: float,
                  shard_trials: int = SHARD_TRIALS) -> list[CheckResult]:
    """A case's checks from its merged tally (``case_results``), with its trials, time and size noted."""
    found = case_results(cp, tally, plan, stats.case_seed(suite_seed, cp.case.id))
    for r in found:
        r.extra.setdefault("trials", tally.n)
        r.extra.setdefault("case_seconds", round(seconds, 2))
        r.extra.setdefault("quick", plan.quick)
        r.extra.setdefault("shards", len(shard_sizes(cp, shard_trials)))
    return found


def mark_holm(results: list[CheckResult], plan: Plan) -> None:
    """For the report: Holm's step-down at the level of the group's checks together (same gate as
    Bonferroni, names more failures)."""
    measured = [r for r in results if r.p_value is not None]
    if measured:
        rejected = stats.holm([r.p_value for r in measured], plan.holm_alpha)
        for r, rej in zip(measured, rejected):
            r.extra["holm_rejected"] = bool(rej)
