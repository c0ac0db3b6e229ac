"""The run's statistical plan: every statistical test a conformance run asks of a device, its α, n and power.

**One family.** A run has one false-fail budget, ``ctx.alpha_family`` (1e-3 by
default, ``specsim conform --alpha``), split evenly (Bonferroni) over every
statistical test the run's groups ask of the device; each test is charged its
share (``alpha_share``: the shares sum to ``alpha_family`` exactly in
``math.fsum``, the first test taking the rounding remainder) and is run at
``alpha = alpha_share / SAFETY`` — the margin for the far tail of the χ²
approximation (docs/statistics.md), so a correct device fails some test of the
run with probability at most ``alpha_family``. Exact checks (support, greedy,
token for token) spend nothing and are not listed.

**The tests**, enumerated from the groups' own case lists, so a case or an edge
added there is planned, budgeted and sized here with no other change:

* ``L3-statistical`` — per case of ``cases.CASES`` the device can be asked:
  ``pos{j}`` per reachable position of each sampled request, ``accepted`` per
  request with drafts (``check_names``);
* ``L3-trees`` — per case of ``tree_cases.CASES`` whose scheme the device
  declares: ``path`` and ``accepted``;
* ``L1-edges`` (no injected noise) — one goodness-of-fit test per request of a
  ``specsim.testing.edges`` edge whose exact law has more than one outcome;
* ``L1-sampler`` (no injected noise) — the same per request of each SPEC §12
  edge (``specsim.testing.sampler_edges``), per order profile;
* ``L1-trees`` (no injected noise) — the same per request of each sampled
  constructed sibling pattern (``tree_pattern_cases.law_tests``) within the
  declaration;
* ``L3-declared`` (the device's own randomness) — one goodness-of-fit test per
  declared vocabulary and at the declared ``max_k`` (``declared_cases.law_tests``).

**Coverage.** The plan holds every group's tests for the device's capabilities,
whatever ``--groups`` selects: a check's α and sample size — and so its draws —
are the same in a full run and in a ``--groups`` replay of it. A run of a subset
spends the shares of its groups' tests (``alpha_share_run`` in
``conformance.json``), never more than ``alpha_family``.

**Sizes.** L3-statistical's trial counts come from the planner (``make_plan``:
worst-case TV ``TARGET_TV`` at every position with power 1 − β at the plan's α);
L3-trees' from ``stats.min_samples`` on the path law (``tree_trials``: the case's
``target_tv``, ``tree_cases.TARGET_TV`` by default, with the pooled cells counted
at the planned trials); the edges' and the patterns' n are fixed
(``edge_laws.samples``, ``edge_laws.sampler_samples``,
``tree_pattern_cases.samples``) and their detectable TV follows from the α.

Every group computes the plan itself from the same inputs (``run_plan``; it is
deterministic and cached per process) and takes each test's α from it; the
runner writes it into ``conformance.json`` (``StatPlan.to_json``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from reference.laws import num_accepted_law
from specsim.judge import stats
from specsim.conformance.cases import declared as declared_cases
from specsim.conformance.cases import trees as tree_cases
from specsim.conformance.cases import tree_patterns as tree_pattern_cases
from specsim.conformance.core.calls import missing
from specsim.conformance.cases.chain import CASES
from specsim.conformance.cases.edges import (dtype_twins, edge_form, own_randomness_twin, request_law,
                                           sampler_edge_lacking, sampler_edge_laws, samples, sampler_samples)
from specsim.testing.edges import EDGES
from specsim.testing.sampler_edges import SAMPLER_EDGES
from specsim.testing.seeds import case_seed
from specsim.conformance.stats.alpha import (DECLARED, EDGES_GROUP, GROUPS, L3, PATTERNS, RULE, SAFETY, SAMPLER, TREES,
                                             split)
from specsim.conformance.stats.l3_design import (BETA, Plan, case_missing, check_names, design, make_plan, reach,
                                                 tested_positions)

# --------------------------------------------------------------------------- the run-wide plan

@dataclass(frozen=True)
class PlannedTest:
    """One statistical test of the run.

    ``check``: the ``CheckResult`` it decides (an edge's check holds one test per request);
    ``alpha_share``: what it is charged of ``alpha_family``; ``alpha``: the level it runs at (the
    check's ``alpha``); ``n``: its samples (expected, where a position is reached at random);
    ``detectable_tv``: the smallest worst-case TV it detects with power 1 − β at that n, or None
    (``note`` says why); ``trials``: the trials of its case, where they differ from n.
    """

    name: str
    group: str
    check: str
    alpha_share: float
    n: int | None = None
    detectable_tv: float | None = None
    note: str | None = None
    trials: int | None = None

    @property
    def alpha(self) -> float:
        return self.alpha_share / SAFETY

    def to_json(self, ran: bool | None = None) -> dict:
        out = {"name": self.name, "group": self.group, "check": self.check, "alpha_share": self.alpha_share,
               "alpha": self.alpha, "n": self.n, "detectable_tv": self.detectable_tv, "note": self.note}
        if self.trials is not None:
            out["trials"] = self.trials
        if ran is not None:
            out["ran"] = ran
        return out


@dataclass(frozen=True)
class StatPlan:
    """Every statistical test of a run (``run_plan``), in group order."""

    alpha_family: float
    seed: int
    quick: bool
    tests: tuple

    @functools.cached_property
    def _by_name(self) -> dict:
        return {t.name: t for t in self.tests}

    def test(self, name: str) -> PlannedTest:
        """The planned test ``name``; ``KeyError`` naming it if the plan has none (a group and the plan disagree)."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"stat_plan: no statistical test {name!r} in this run's plan (seed {self.seed}, "
                           f"quick={self.quick}); a group ran a test its case list does not plan") from None

    def alpha(self, name: str) -> float:
        """The level test ``name`` runs at."""
        return self.test(name).alpha

    def of_group(self, group: str) -> list[PlannedTest]:
        return [t for t in self.tests if t.group == group]

    def shares(self, group: str) -> dict:
        """Test name → α share, for the tests of ``group``."""
        return {t.name: t.alpha_share for t in self.tests if t.group == group}

    @property
    def alpha_sum(self) -> float:
        """``math.fsum`` of every share: ``alpha_family`` exactly (0 for a plan with no test)."""
        return math.fsum(t.alpha_share for t in self.tests)

    def to_json(self, groups=None) -> dict:
        """The plan for ``conformance.json``; ``groups``: the groups the run ran (each test marked ``ran``)."""
        ran = None if groups is None else set(groups)
        return {"alpha_family": self.alpha_family, "alpha_share_sum": self.alpha_sum,
                "alpha_share_run": math.fsum(t.alpha_share for t in self.tests if ran is None or t.group in ran),
                "safety": SAFETY, "rule": RULE, "tests_total": len(self.tests),
                "tests_by_group": {g: len(self.of_group(g)) for g in GROUPS},
                "tests": [t.to_json(None if ran is None else t.group in ran) for t in self.tests]}


def _l3_names(caps) -> list[str]:
    if caps.rng == "none":
        return []
    return [n for c in CASES if not case_missing(caps, c) for n in check_names(c)]


def tree_cases_asked(caps) -> list:
    """The tree cases a device of capabilities ``caps`` is asked (the L3-trees group's gating)."""
    if not caps.tree_schemes or caps.rng == "none":
        return []
    return [c for c in tree_cases.CASES if c.needs in caps.tree_schemes]


def edge_tests(caps) -> list[tuple[str, str, dict]]:
    """L1-edges' goodness-of-fit tests for a device of capabilities ``caps``: (test name, check, law) per
    request whose law has more than one outcome, of every edge the device can be asked; with injected
    noise, only a device that also draws its own unkeyed randomness (``rng = "seeded"``) has them, for its
    edges' laws under that randomness (``L1/edge/<name>/seeded``; each injected run is one exact answer)."""
    twin = own_randomness_twin(caps)
    if caps.injected_noise and twin != "seeded":
        return []
    suffix = f"/{twin}" if twin else ""
    out = []
    for edge in EDGES:
        form = edge_form(edge, caps)
        if missing(caps, form.needs):
            continue
        checks = [f"L1/edge/{edge.name}{suffix}"]
        if not caps.injected_noise:  # an injected device's dtype twins are exact answers
            checks += [f"L1/edge/{edge.name}/{d}" for d in dtype_twins(edge, caps)]
        for i, r in enumerate(form.requests):
            law = request_law(r, form.point)
            if len(law) > 1:
                out += [(f"{check}/request{i}", check, law) for check in checks]
    return out


def sampler_edge_tests(caps) -> list[tuple[str, str, dict]]:
    """L1-sampler's goodness-of-fit tests: (test name, check, law) per request with a law of more than one
    outcome, per SPEC §12 edge and order the device can be asked, and per dtype twin of each (``dtype_twins``, SPEC 1.5);
    none with injected noise."""
    if caps.injected_noise:
        return []
    out = []
    for edge in SAMPLER_EDGES:
        for order in edge.orders:
            if sampler_edge_lacking(caps, edge, order):
                continue
            base = f"L1-sampler/edge/{edge.name}/{order}"
            laws = sampler_edge_laws(edge, order)   # the twins' logits are the same values: the same laws
            for check in (base, *(f"{base}/{d}" for d in dtype_twins(edge, caps))):
                out += [(f"{check}/request{i}", check, law) for i, law in enumerate(laws) if len(law) > 1]
    return out


def pattern_tests(caps) -> list[tuple[str, str, object, int]]:
    """L1-trees' goodness-of-fit tests: (test name, check, pattern, request) per request with a law of more
    than one outcome, of each sampled constructed pattern the device can be asked (``tree_pattern_cases``);
    none with injected noise."""
    return [(name, pattern.check, pattern, i) for name, pattern, i in tree_pattern_cases.law_tests(caps)]


def _pattern_tests(names: list[str], caps, shares: dict, seed: int, quick: bool) -> list[PlannedTest]:
    """The pattern laws' tests, sized: each request's law at the run's seed and the caps' dtype, on the
    pattern's ``tree_pattern_cases.samples`` repetitions."""
    if not names:
        return []
    by_name = {name: (check, pattern, i) for name, check, pattern, i in pattern_tests(caps)}
    dtype, n, laws = tree_pattern_cases.pattern_dtype(caps), tree_pattern_cases.samples(quick), {}
    out = []
    for name in names:
        check, pattern, i = by_name[name]
        if pattern.check not in laws:
            laws[pattern.check] = tree_pattern_cases.laws(pattern, tree_pattern_cases.law_seed(pattern, seed), dtype)
        law = laws[pattern.check][i]
        out.append(_law_test(name, PATTERNS, check, shares[name], [float(law[k]) for k in sorted(law)], n))
    return out


def _undetectable(cells: int, n: int) -> str:
    """Why a goodness-of-fit test on ``cells`` pooled cells and ``n`` samples detects no TV with power 1 − β."""
    if cells < 2:
        return (f"the law pools to {cells} cell(s) at n = {n} (expected count >= {stats.MIN_EXPECTED:g} per cell): "
                "nothing a goodness-of-fit test can detect at this n")
    return f"no TV is detected with power {1 - BETA:g} at n = {n} ({cells} pooled cells)"


def _law_test(name: str, group: str, check: str, share: float, probs, n: int,
              trials: int | None = None) -> PlannedTest:
    """A goodness-of-fit test of ``probs`` ``[cells]`` on ``n`` samples: its detectable TV at the share's level."""
    cells = stats.design_cells(np.asarray(probs, dtype=np.float64), n)
    tv = stats.min_detectable_tv(cells, n, share / SAFETY, BETA)
    if math.isfinite(tv):
        return PlannedTest(name, group, check, share, n, tv, None, trials)
    return PlannedTest(name, group, check, share, n, None, _undetectable(cells, n), trials)


def l3_tests(plan: Plan) -> list[PlannedTest]:
    """The planned tests of L3-statistical's sized cases in ``plan``: α, n and detectable TV of each check."""
    shares, out = plan.shares, []
    for cp in plan.cases:
        if not all(name in shares for name in cp.checks):
            continue
        b = cp.built
        for i, r in enumerate(cp.case.requests):
            if r.temperature == 0:
                continue
            for j in tested_positions(r):
                name = f"L3/{cp.case.id}/r{i}/pos{j}" + ("-bonus" if j == r.k else "")
                n, tv = int(round(cp.trials * reach(b, i, j))), cp.design_tv[name]
                if cp.case.pit:
                    out.append(PlannedTest(name, L3, name, shares[name], n, None, "randomized PIT + DKWM: detects a "
                                           f"PIT KS distance >= {tv:.3f}, not a TV", cp.trials))
                elif tv == 0.0:
                    out.append(PlannedTest(name, L3, name, shares[name], n, 0.0, "one-token row: any other token "
                                           "is a support failure (exact)", cp.trials))
                elif not math.isfinite(tv):
                    row = b.target[b.target_row(i, j)]
                    out.append(PlannedTest(name, L3, name, shares[name], n, None,
                                           _undetectable(stats.design_cells(row, n), n), cp.trials))
                else:
                    out.append(PlannedTest(name, L3, name, shares[name], n, tv, None, cp.trials))
            if r.k:
                name = f"L3/{cp.case.id}/r{i}/accepted"
                law = np.array(num_accepted_law(b.acceptance[i]), dtype=np.float64)
                out.append(_law_test(name, L3, name, shares[name], law, cp.trials, cp.trials))
    return out


def design_trials(probs, tv: float, alpha: float) -> int:
    """Trials for a goodness-of-fit test of the law ``probs`` ``[cells]`` at level ``alpha`` to detect any
    TV ≥ ``tv`` with power 1 − β, its pooled cells counted at that very number of trials (more trials keep
    more cells apart, which costs power: a few rounds settle it).

    >>> design_trials(np.full(4, 0.25), 0.05, 1e-6) > design_trials(np.full(4, 0.25), 0.1, 1e-6)
    True
    """
    probs, n = np.asarray(probs, dtype=np.float64), 10_000.0
    for _ in range(4):
        n = stats.min_samples(max(2, stats.design_cells(probs, n)), tv, alpha)
    return int(np.ceil(n))


def tree_trials(law: dict, alpha: float, quick: bool, tv: float = tree_cases.TARGET_TV) -> int:
    """Trials of a tree case: worst-case TV ``tv`` (the case's ``target_tv``) on its path law ``law``
    detected with power 1 − β at level ``alpha`` (``design_trials``)."""
    if quick:
        return tree_cases.QUICK_TRIALS
    return design_trials(list(law.values()), tv, alpha)


def _tree_tests(shares: dict, seed: int, quick: bool) -> list[PlannedTest]:
    out = []
    for case in tree_cases.CASES:
        path, accepted = tree_cases.check_names(case)
        if path not in shares:
            continue
        rows = tree_cases.PrefixRows(case, case_seed(seed, tree_cases.case_name(case)))
        law, length_law = tree_cases.laws(case, rows)
        n = tree_trials(law, shares[path] / SAFETY, quick, case.target_tv)
        out.append(_law_test(path, TREES, path, shares[path], list(law.values()), n))
        out.append(_law_test(accepted, TREES, accepted, shares[accepted], length_law, n))
    return out


@functools.lru_cache(maxsize=8)
def _enumerate(caps) -> tuple:
    """Every statistical test's (group, name) for ``caps``, in plan order, and the edges' laws by name."""
    edges, sampler = edge_tests(caps), sampler_edge_tests(caps)
    names = [(L3, n) for n in _l3_names(caps)]
    names += [(TREES, n) for c in tree_cases_asked(caps) for n in tree_cases.check_names(c)]
    names += [(EDGES_GROUP, name) for name, _, _ in edges] + [(SAMPLER, name) for name, _, _ in sampler]
    names += [(PATTERNS, name) for name, _, _, _ in pattern_tests(caps)]
    names += [(DECLARED, case.check) for case in declared_cases.law_cases(caps, False)]
    laws = {name: (check, law) for name, check, law in edges + sampler}
    return tuple(names), laws


@functools.lru_cache(maxsize=16)
def _run_plan(caps, seed: int, alpha_family: float, quick: bool) -> StatPlan:
    names, laws = _enumerate(caps)
    shares = dict(zip((n for _, n in names), split(alpha_family, len(names)))) if names else {}
    group_of = {n: g for g, n in names}

    def of(group: str) -> dict:
        return {n: s for n, s in shares.items() if group_of[n] == group}
    l3 = of(L3)
    sized = {t.name: t for t in l3_tests(design(l3, quick, [c for c in CASES if any(n in l3 for n in check_names(c))],
                                                 alpha_family, len(names)))}
    sized.update((t.name, t) for t in _tree_tests(of(TREES), seed, quick))
    sized.update((t.name, t) for t in _pattern_tests(list(of(PATTERNS)), caps, shares, seed, quick))
    sized.update((name, _law_test(name, DECLARED, check, shares[name], law, n))
                 for name, check, law, n in declared_cases.law_tests(caps, quick))
    for name, (check, law) in laws.items():
        group = group_of[name]
        n = samples(quick) if group == EDGES_GROUP else sampler_samples(quick)
        sized[name] = _law_test(name, group, check, shares[name], [law[k] for k in sorted(law)], n)
    return StatPlan(alpha_family, seed, quick, tuple(sized[n] for _, n in names))


def family_plan(alpha_family: float, quick: bool, cases, seed: int = 0) -> StatPlan:
    """The plan of an L3 family of its own over ``cases`` (``make_plan`` with a float: a campaign's sign-off
    profile), for its ``conformance.json``."""
    return StatPlan(alpha_family, seed, quick, tuple(l3_tests(make_plan(alpha_family, quick, cases))))


def run_plan(caps, ctx) -> StatPlan:
    """The statistical plan of a run of every group on a device of capabilities ``caps`` with ``ctx``
    (``seed``, ``alpha_family``, ``quick``): what each statistical group asks, at which α, on how many
    samples, detecting which TV. Deterministic, and cached per process.

    >>> from devices.protocol import Capabilities
    >>> from specsim.conformance.core.context import Context
    >>> plan = run_plan(Capabilities(True, "philox", 1 << 18), Context(quick=True))
    >>> plan.alpha_sum == 1e-3, {t.group for t in plan.tests} == {"L3-statistical"}
    (True, True)
    """
    return _run_plan(caps, int(ctx.seed), float(ctx.alpha_family), bool(ctx.quick))


__all__ = ["SAFETY", "GROUPS", "RULE", "split", "TARGET_TV", "CasePlan", "Plan", "reach", "tested_positions",
           "check_names", "case_missing", "make_plan", "PlannedTest", "StatPlan", "l3_tests", "edge_tests",
           "sampler_edge_tests", "pattern_tests", "tree_cases_asked", "design_trials", "tree_trials", "family_plan",
           "run_plan"]


# --------------------------------------------------------------------------- command line

def summary(plan: StatPlan) -> str:
    """Per group: tests, α share and level, n and detectable TV (ranges), and the sum of the shares."""
    lines = [f"alpha_family {plan.alpha_family:g}: {len(plan.tests)} tests, shares sum to {plan.alpha_sum!r}"]
    for group in GROUPS:
        tests = plan.of_group(group)
        if not tests:
            lines.append(f"  {group}: no statistical test")
            continue
        ns = [t.n for t in tests if t.n is not None]
        tvs = [t.detectable_tv for t in tests if t.detectable_tv]
        lines.append(f"  {group}: {len(tests)} tests, share {max(t.alpha_share for t in tests):.3g}, "
                     f"α {max(t.alpha for t in tests):.3g}, n {min(ns)}–{max(ns)}"
                     + (f", detectable TV {min(tvs):.3f}–{max(tvs):.3f}" if tvs else ""))
    return "\n".join(lines)


def table(plan: StatPlan) -> str:
    """One line per test: name, group, α (level), n, detectable TV or the note saying why none."""
    rows = [f"{'test':60} {'group':15} {'alpha':>9} {'n':>7}  detectable TV"]
    for t in plan.tests:
        tv = f"{t.detectable_tv:.4f}" if t.detectable_tv is not None else "-"
        rows.append(f"{t.name:60} {t.group:15} {t.alpha:9.3g} {t.n if t.n is not None else '-':>7}  {tv}"
                    + (f"  ({t.note})" if t.note else ""))
    return "\n".join(rows)


def main(argv=None) -> int:
    """``python -m specsim.conformance.stats.plan --device torch [--black-box] [--quick]``: the run's plan."""
    import argparse
    from types import SimpleNamespace

    from devices.registry import load
    p = argparse.ArgumentParser(prog="python -m specsim.conformance.stats.plan", description=main.__doc__)
    p.add_argument("--device", default="torch")
    p.add_argument("--black-box", action="store_true",
                   help="the device's capabilities without injected noise, rng 'seeded' (specsim mutants --black-box)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=1e-3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--summary", action="store_true", help="per group only")
    args = p.parse_args(argv)
    caps = load(args.device).capabilities
    if args.black_box:
        caps = dataclasses.replace(caps, injected_noise=False, rng="seeded")
    plan = run_plan(caps, SimpleNamespace(seed=args.seed, alpha_family=args.alpha, quick=args.quick))
    print(summary(plan) if args.summary else table(plan) + "\n\n" + summary(plan))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
