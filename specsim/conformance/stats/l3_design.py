"""L3-statistical's trial design: each case's checks (``check_names``), sized so that worst-case TV ``TARGET_TV`` at
every tested position is detected with power 1 − β at the check's α (``make_plan``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from specsim.conformance.cases.chain import CASES, Built, Case, build, capability_needs
from specsim.conformance.stats.alpha import L3, SAFETY, split
from specsim.judge import stats


TARGET_TV = 0.02
"""Every position of every non-PIT case must detect worst-case TV ≥ this (full size)."""

BETA = stats.DEFAULT_BETA
QUICK_TRIALS = 1500
PIT_TRIALS = 800
QUICK_PIT_TRIALS = 100
MAX_TRIALS = 2_000_000


@dataclass
class CasePlan:
    case: Case
    built: Built
    trials: int
    checks: list[str] = field(default_factory=list)  # statistical checks (they spend α)
    design_tv: dict = field(default_factory=dict)     # check name -> detectable TV (or PIT KS) at the design n


@dataclass
class Plan:
    """L3-statistical's cases, sized: each check's α share (``shares``; run at share / ``safety``), the
    family it belongs to (``alpha_family`` over ``family_tests`` tests), and each case's trials.
    A case without shares (the device cannot be asked it) is built but not sized (0 trials)."""

    cases: list[CasePlan]
    shares: dict
    quick: bool
    alpha_family: float
    family_tests: int
    safety: float = SAFETY

    @property
    def checks(self) -> int:
        return len(self.shares)

    def alpha(self, name: str) -> float:
        """The level check ``name`` runs at."""
        return self.shares[name] / self.safety

    @property
    def holm_alpha(self) -> float:
        """The family level of these checks together, for Holm's step-down in a report."""
        return math.fsum(self.shares.values()) / self.safety


def reach(built: Built, i: int, j: int) -> float:
    """P(request i reaches position j) = Π_{l<j} a_l."""
    return float(np.prod(built.acceptance[i][:j]))


def tested_positions(r) -> range:
    """Positions a request can reach: after a placeholder nothing is verified (SPEC §4)."""
    return range(1) if r.placeholder else range(r.k + 1)


tested_positions.__test__ = False  # a helper, not a test: pytest --doctest-modules collects test* names


def check_names(case: Case) -> list[str]:
    """The statistical checks of a case (exact checks spend no α and are not listed)."""
    names = []
    for i, r in enumerate(case.requests):
        if r.temperature == 0:
            continue
        names += [f"L3/{case.id}/r{i}/pos{j}" + ("-bonus" if j == r.k else "") for j in tested_positions(r)]
        if r.k:
            names.append(f"L3/{case.id}/r{i}/accepted")
    return names


def case_missing(caps, case: Case) -> list[str]:
    """What a device of capabilities ``caps`` lacks to be asked ``case`` ([] if nothing)."""
    lacking = [need for need in capability_needs(case) if not getattr(caps, need)]
    if case.vocab_size > caps.max_vocab_size:
        lacking.append(f"vocab {case.vocab_size} > max_vocab_size {caps.max_vocab_size}")
    if max(r.k for r in case.requests) > caps.max_k:
        lacking.append(f"K > max_k {caps.max_k}")
    lacking += [f"sampler {name}" for name in case.sampler if name not in caps.sampler]
    if case.sampler and case.order not in caps.sampler_orders:
        lacking.append(f"sampler order {case.order}")
    return lacking


def _design_trials(built: Built, alpha: float, tv: float) -> int:
    """Smallest trial count so that every position of every request detects TV ``tv`` (fixed point over pooling)."""
    trials = 1000.0
    for _ in range(8):
        need = 0.0
        for i, r in enumerate(built.case.requests):
            if r.temperature == 0:
                continue
            for j in tested_positions(r):
                p = reach(built, i, j)
                row = built.target[built.target_row(i, j)]
                if np.count_nonzero(row) == 1:
                    continue
                cells = stats.design_cells(row, trials * p)
                need = max(need, stats.min_samples(max(cells, 2), tv, alpha, BETA) / p)
        if need <= trials:
            break
        trials = need * 1.03  # margin for the binomial spread of the per-position count
    return int(math.ceil(trials / 100.0) * 100)


def _size_case(plan: CasePlan, alpha: float, quick: bool) -> None:
    """The case's trials at level ``alpha`` (its checks' smallest) and each position's detectable TV."""
    c, b = plan.case, plan.built
    if c.pit:
        trials = QUICK_PIT_TRIALS if quick else PIT_TRIALS
    else:
        trials = QUICK_TRIALS if quick else _design_trials(b, alpha, TARGET_TV)
    plan.trials = min(trials, MAX_TRIALS)
    for i, r in enumerate(c.requests):
        if r.temperature == 0:
            continue
        for j in tested_positions(r):
            n = plan.trials * reach(b, i, j)
            name = f"L3/{c.id}/r{i}/pos{j}" + ("-bonus" if j == r.k else "")
            if c.pit:
                plan.design_tv[name] = stats.dkwm_detectable(n, alpha, BETA)
                continue
            row = b.target[b.target_row(i, j)]
            if np.count_nonzero(row) == 1:  # one token: any deviation is a support failure (exact)
                plan.design_tv[name] = 0.0
            else:
                plan.design_tv[name] = stats.min_detectable_tv(stats.design_cells(row, n), n, alpha, BETA)


def design(shares: dict, quick: bool, cases, alpha_family: float, family_tests: int) -> Plan:
    plans = []
    for c in cases:
        plan = CasePlan(c, build(c), 0, check_names(c))
        if all(name in shares for name in plan.checks):
            _size_case(plan, min(shares[name] for name in plan.checks) / SAFETY, quick)
        plans.append(plan)
    if not quick:  # the design claim, asserted like TFP's experiment-design assertions
        for p in plans:
            for name, tv in p.design_tv.items():
                assert p.case.pit or tv <= TARGET_TV * 1.0001, f"{name}: design detects only TV {tv:.4f} > {TARGET_TV}"
    return Plan(plans, shares, quick, alpha_family, family_tests)


def make_plan(alpha, quick: bool, cases=CASES) -> Plan:
    """Build every case and size it at its checks' α.

    ``alpha``: the run's ``StatPlan`` (``run_plan``; each check's share from it, a case it does not
    plan — the device cannot be asked it — built but not sized), or a float: a family of its own over
    ``cases`` (a campaign's sign-off profile), split evenly over their checks (``split``).

    >>> plan = make_plan(1e-3, quick=True, cases=CASES[:2])
    >>> plan.checks, math.fsum(plan.shares.values()) == 1e-3, plan.cases[0].trials
    (15, True, 1500)
    """
    if not isinstance(alpha, (int, float)):   # a StatPlan: the plan module builds on this one, so no import back
        return design(alpha.shares(L3), quick, cases, alpha.alpha_family, len(alpha.tests))
    names = [n for c in cases for n in check_names(c)]
    return design(dict(zip(names, split(alpha, len(names)))), quick, cases, alpha, len(names))
