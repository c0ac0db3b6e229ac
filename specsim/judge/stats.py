"""Statistics for black-box conformance: goodness of fit with a stated α and a stated power.

Every test here compares samples with a law computed *independently* (float64,
from raw logits and parameters; never from the device under test) and returns
a result object whose ``report()`` says what was tested, at which α, on how
many samples, with which seed, and what it could have detected.

The toolkit (docs/statistics.md):

* ``gof_test`` — categorical goodness of fit, Cressie–Read λ=2/3 (or G) from
  ``scipy.stats.power_divergence``, after pooling cells to expected count ≥ 20
  (a function of the known law, so the test stays valid);
* ``support_check`` — any sample on a probability-0 cell fails, exactly, no α;
* ``count_law_test`` — the law of the number of accepted drafts (SPEC §8);
* ``pit_values`` + ``dkwm_test`` — randomized PIT, then a DKW–Massart bound:
  rigorous for any vocabulary size;
* ``min_samples`` / ``min_detectable_tv`` — the planner: worst-case TV
  alternative, noncentral χ² (λ = 4nε², Cauchy–Schwarz); ``dkwm_min_samples`` /
  ``dkwm_detectable`` the same for the PIT test;
* ``Budget`` — one family false-fail rate split (Bonferroni) over the checks
  counted when the case list is built; each run at nominal α/10 for the far
  tail of the χ² approximation (measured: docs/statistics.md);
* ``case_seed`` — seeds are a hash of (suite seed, case id), never drawn
  (``specsim.testing.seeds.case_seed``, the one definition, re-exported here);
* ``holm`` — which of several checks failed, for the report (the gate is the
  same as Bonferroni's).

>>> import numpy as np
>>> target_probs = np.array([0.5, 0.25, 0.25, 0.0])
>>> counts = np.random.default_rng(case_seed(0, "doc")).multinomial(4000, target_probs)
>>> gof_test(counts, target_probs, alpha=1e-6).passed
True
>>> support_check(np.array([3, 1, 0, 1]), target_probs).passed
False
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, stats

from specsim.testing.seeds import case_seed

MIN_EXPECTED = 20.0
"""Pool cells until each has expected count ≥ 20: CR/G then stay within ≈1.4× of
nominal at 1e-6 (docs/statistics.md)."""

SAFETY = 10.0
"""Each check runs at nominal α/10, absorbing the χ² approximation's far-tail error."""

DEFAULT_BETA = 1e-3
"""Design false-pass rate (power 0.999) of the planner."""


# --------------------------------------------------------------------------- budget

@dataclass(frozen=True)
class Budget:
    """A family false-fail budget split evenly (Bonferroni) over ``checks`` statistical checks.

    ``alpha`` is each check's share; ``nominal`` is the level it is actually run
    at (``alpha / SAFETY``). Exact checks (support, greedy) spend nothing.

    >>> b = Budget(alpha_family=1e-3, checks=100)
    >>> f"{b.alpha:.0e} {b.nominal:.0e}"
    '1e-05 1e-06'
    """

    alpha_family: float
    checks: int
    safety: float = SAFETY

    def __post_init__(self):
        if not 0 < self.alpha_family < 1:
            raise ValueError(f"alpha_family: must be in (0, 1), got {self.alpha_family}")
        if self.checks < 1:
            raise ValueError(f"checks: the family must count at least one check, got {self.checks}")

    @property
    def alpha(self) -> float:
        return self.alpha_family / self.checks

    @property
    def nominal(self) -> float:
        return self.alpha / self.safety


def holm(p_values, alpha_family: float) -> list[bool]:
    """Holm's step-down rejections for ``p_values`` ``[m]`` at family level ``alpha_family``.

    Same gate as Bonferroni (something is rejected iff min p ≤ α/m) but names
    more of the failing checks.

    >>> holm([0.5, 1e-6, 2e-4], 1e-3)
    [False, True, True]
    """
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    rejected = [False] * m
    for rank, idx in enumerate(np.argsort(p, kind="stable")):
        if p[idx] > alpha_family / (m - rank):
            break
        rejected[int(idx)] = True
    return rejected


# --------------------------------------------------------------------------- planner

def _critical(df: int, alpha: float) -> float:
    return float(stats.chi2.isf(alpha, df))


def power_at(cells: int, n: float, tv: float, alpha: float) -> float:
    """Power of a ``cells``-cell χ²-type test against the worst-case alternative at TV ``tv``.

    χ²(alt‖target) ≥ 4·TV² (Cauchy–Schwarz), so the noncentrality is at least 4nTV².
    """
    if cells < 2:
        return 0.0
    df = cells - 1
    return float(stats.ncx2.sf(_critical(df, alpha), df, 4.0 * n * tv * tv))


def min_samples(cells: int, tv: float, alpha: float, beta: float = DEFAULT_BETA) -> float:
    """Samples a ``cells``-cell test at level ``alpha`` needs to detect any TV ≥ ``tv`` with power 1-``beta``.

    >>> round(min_samples(8, 0.02, 1e-6) / 1e3, 1)
    51.3
    """
    if cells < 2:
        return math.inf
    return float(optimize.brentq(lambda n: power_at(cells, n, tv, alpha) - (1 - beta), 1e-3, 1e14, xtol=1e-6))


def min_detectable_tv(cells: int, n: float, alpha: float, beta: float = DEFAULT_BETA) -> float:
    """The smallest worst-case TV detected with power 1-``beta`` from ``n`` samples (inverse of ``min_samples``).

    >>> round(min_detectable_tv(8, 2e5, 1e-7), 3)
    0.011
    """
    if cells < 2 or n <= 0:
        return math.inf
    if power_at(cells, n, 1.0, alpha) < 1 - beta:
        return math.inf
    return float(optimize.brentq(lambda tv: power_at(cells, n, tv, alpha) - (1 - beta), 1e-9, 1.0, xtol=1e-9))


def dkwm_epsilon(n: float, error_rate: float) -> float:
    """DKW–Massart envelope: P(sup|F_n − F| > ε) ≤ 2·exp(−2nε²) = ``error_rate``."""
    return math.sqrt(math.log(2.0 / error_rate) / (2.0 * n)) if n > 0 else math.inf


def dkwm_detectable(n: float, alpha: float, beta: float = DEFAULT_BETA) -> float:
    """Smallest KS distance (of the PIT law from uniform) detected at level ``alpha`` with power 1-``beta``."""
    return dkwm_epsilon(n, alpha) + dkwm_epsilon(n, beta)


def dkwm_min_samples(ks: float, alpha: float, beta: float = DEFAULT_BETA) -> float:
    """Samples needed so that ``dkwm_detectable(n, alpha, beta) ≤ ks``."""
    root = math.sqrt(math.log(2.0 / alpha) / 2.0) + math.sqrt(math.log(2.0 / beta) / 2.0)
    return (root / ks) ** 2


# --------------------------------------------------------------------------- pooling

def pool_cells(probs: np.ndarray, n: float, min_expected: float = MIN_EXPECTED) -> np.ndarray:
    """Label each cell of ``probs`` ``[V]`` with a pooled cell, so each pooled cell has n·mass ≥ ``min_expected``.

    Returns ``[V]`` int64 labels, ``-1`` for probability-0 cells (the support
    check owns them). Cells below the threshold merge into one tail cell; if the
    tail is still small it absorbs the smallest regular cells. Pooling uses only
    the known law, never the counts, so the test keeps its level.

    >>> pool_cells(np.array([0.5, 0.3, 0.15, 0.05, 0.0]), n=100).tolist()
    [0, 1, 2, 2, -1]
    """
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.full(probs.shape, -1, dtype=np.int64)
    positive = np.flatnonzero(probs > 0)
    if positive.size == 0:
        return labels
    order = positive[np.argsort(-probs[positive], kind="stable")]  # descending
    expected = n * probs[order]
    big = int(np.sum(expected >= min_expected))
    tail = float(expected[big:].sum())
    while big > 0 and big < order.size and tail < min_expected:  # grow the tail with the smallest big cell
        big -= 1
        tail += float(expected[big])
    labels[order[:big]] = np.arange(big)
    labels[order[big:]] = big
    return labels


def pooled(counts: np.ndarray, probs: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pooled counts, pooled probs) by ``labels`` from ``pool_cells``; ``-1`` cells are left out."""
    cells = int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0
    keep = labels >= 0
    return (np.bincount(labels[keep], weights=np.asarray(counts, dtype=np.float64)[keep], minlength=cells),
            np.bincount(labels[keep], weights=np.asarray(probs, dtype=np.float64)[keep], minlength=cells))


def design_cells(probs: np.ndarray, n: float, min_expected: float = MIN_EXPECTED) -> int:
    """How many pooled cells a test of ``probs`` ``[V]`` on ``n`` samples will have."""
    labels = pool_cells(probs, n, min_expected)
    return int(labels.max()) + 1 if labels.size and labels.max() >= 0 else 0


# --------------------------------------------------------------------------- results

def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return f"{x:.3g}"


@dataclass
class GofResult:
    """One goodness-of-fit test. ``passed`` iff ``p_value > alpha``."""

    what: str
    statistic: float
    df: int
    p_value: float
    n: int
    alpha: float
    cells: int
    min_expected: float
    detectable_tv: float
    seed: int | None = None
    worst: list[dict] = field(default_factory=list)  # largest standardized residuals
    law: dict | None = None  # the whole pooled law (labels, observed, expected_probs) when it is small

    @property
    def passed(self) -> bool:
        return not self.p_value <= self.alpha

    def report(self) -> str:
        worst = ", ".join(f"{w['cell']}: O={w['observed']:.0f} E={w['expected']:.1f} z={w['z']:+.1f}"
                          for w in self.worst[:3])
        return (f"{self.what}: {'pass' if self.passed else 'FAIL'}  statistic={_fmt(self.statistic)} "
                f"df={self.df} n={self.n} p={_fmt(self.p_value)} alpha={_fmt(self.alpha)} "
                f"cells={self.cells} (min E {_fmt(self.min_expected)}) seed={self.seed} "
                f"detectable TV={_fmt(self.detectable_tv)}" + (f"; worst cells {worst}" if worst else ""))

    def extra(self) -> dict:
        return {"df": self.df, "cells": self.cells, "min_expected": self.min_expected, "worst": self.worst[:5],
                **(self.law or {})}


@dataclass
class SupportResult:
    """Samples on probability-0 cells: an exact failure, no α."""

    what: str
    n: int
    offending: dict  # cell -> count
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return not self.offending

    def report(self) -> str:
        if self.passed:
            return f"{self.what}: pass  no sample outside the support (n={self.n}, seed={self.seed})"
        cells = ", ".join(f"{c}×{k}" for c, k in list(self.offending.items())[:5])
        return (f"{self.what}: FAIL  {sum(self.offending.values())} of {self.n} samples on probability-0 "
                f"cells ({cells}); exact, no alpha; seed={self.seed}")


@dataclass
class DkwmResult:
    """PIT + DKW–Massart: ``p_value`` is the bound 2·exp(−2nD²), valid at every n."""

    what: str
    ks: float
    n: int
    alpha: float
    p_value: float
    detectable_ks: float
    seed: int | None = None

    @property
    def passed(self) -> bool:
        return not self.p_value <= self.alpha

    def report(self) -> str:
        return (f"{self.what}: {'pass' if self.passed else 'FAIL'}  PIT KS distance={_fmt(self.ks)} "
                f"n={self.n} p<={_fmt(self.p_value)} alpha={_fmt(self.alpha)} seed={self.seed} "
                f"detectable KS distance={_fmt(self.detectable_ks)}")


# --------------------------------------------------------------------------- tests

def support_check(counts: np.ndarray, probs: np.ndarray, *, what: str = "support", seed: int | None = None,
                  names=None) -> SupportResult:
    """Fail if any ``counts`` ``[V]`` falls on a cell with ``probs`` ``[V]`` exactly 0."""
    counts = np.asarray(counts)
    bad = np.flatnonzero((np.asarray(probs) == 0) & (counts > 0))
    label = (lambda c: names[c]) if names is not None else int
    return SupportResult(what, int(counts.sum()), {label(int(c)): int(counts[c]) for c in bad}, seed)


LAW_CELLS_RECORDED = 64
"""A goodness-of-fit result keeps its whole pooled law (for reports) up to this many cells."""


def gof_test(counts: np.ndarray, probs: np.ndarray, alpha: float, *, beta: float = DEFAULT_BETA,
             lambda_: str | float = "cressie-read", min_expected: float = MIN_EXPECTED,
             what: str = "gof", seed: int | None = None) -> GofResult:
    """Goodness of fit of ``counts`` ``[V]`` to ``probs`` ``[V]`` at level ``alpha`` (pooled CR λ=2/3 by default).

    Probability-0 cells are ignored here (``support_check`` fails them
    exactly). With fewer than two pooled cells there is nothing to test:
    p = 1, detectable TV = inf.

    >>> rng = np.random.default_rng(1)
    >>> r = gof_test(rng.multinomial(10_000, [0.7, 0.2, 0.1]), np.array([0.7, 0.2, 0.1]), 1e-6)
    >>> (r.passed, r.df, r.n)
    (True, 2, 10000)
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    if counts.shape != probs.shape:
        raise ValueError(f"counts: shape {counts.shape} must equal probs' {probs.shape}")
    n_total = int(counts.sum())
    labels = pool_cells(probs, n_total, min_expected)
    obs, mass = pooled(counts, probs, labels)
    n = float(obs.sum())  # samples on the support
    cells = len(obs)
    if cells < 2 or n == 0:
        return GofResult(what, 0.0, 0, 1.0, n_total, alpha, cells, n * float(mass.sum()), math.inf, seed)
    expected = n * mass / mass.sum()
    stat, p = stats.power_divergence(obs, expected, lambda_=lambda_)
    z = (obs - expected) / np.sqrt(expected)
    worst = []
    for c in np.argsort(-np.abs(z))[:5]:
        members = np.flatnonzero(labels == c)
        name = int(members[0]) if members.size == 1 else f"pool of {members.size}"
        worst.append({"cell": name, "observed": float(obs[c]), "expected": float(expected[c]), "z": float(z[c])})
    law = None
    if cells <= LAW_CELLS_RECORDED:  # enough for a report to plot the whole law, small enough for its JSON
        names = [int(m[0]) if m.size == 1 else f"pool of {m.size}"
                 for m in (np.flatnonzero(labels == c) for c in range(cells))]
        law = {"labels": names, "observed": obs.tolist(), "expected_probs": (mass / mass.sum()).tolist()}
    return GofResult(what, float(stat), cells - 1, float(p), n_total, alpha, cells, float(expected.min()),
                     min_detectable_tv(cells, n, alpha, beta), seed, worst, law)


def count_law_test(num_accepted: np.ndarray, law: np.ndarray, alpha: float, **kw) -> tuple[SupportResult, GofResult]:
    """Test samples ``num_accepted`` ``[n]`` (ints in 0..K) against the exact ``law`` ``[K+1]`` (SPEC §8).

    Returns (support, gof): a count with law probability 0 is an exact failure.
    """
    law = np.asarray(law, dtype=np.float64)
    counts = np.bincount(np.asarray(num_accepted, dtype=np.int64), minlength=len(law))
    if len(counts) > len(law):
        raise ValueError(f"num_accepted: values up to {len(counts) - 1}, but the law has only {len(law)} cells")
    what = kw.pop("what", "accepted-count law")
    return (support_check(counts, law, what=what, seed=kw.get("seed")),
            gof_test(counts, law, alpha, what=what, **kw))


def sequence_law_test(sequences, law: dict, alpha: float, **kw) -> tuple[SupportResult, GofResult]:
    """Test whole generated ``sequences`` (token lists) against the exact ``law`` ``{tuple: probability}``
    (e.g. ``ToyLM.sequence_law``, ``sequence_law_given``): one cell per sequence of the law, in sorted
    order, plus one of probability 0 for every sequence outside it (an exact failure, no α).

    >>> support, gof = sequence_law_test([[1], [2], [1]], {(1,): 0.5, (2,): 0.5}, 1e-3, what="demo")
    >>> support.passed, gof.passed, sequence_law_test([[3]], {(1,): 1.0}, 1e-3)[0].offending
    (True, True, {1: 1})
    """
    cells = sorted(law)
    index = {c: i for i, c in enumerate(cells)}
    counts = np.zeros(len(cells) + 1)
    for tokens in sequences:
        counts[index.get(tuple(tokens), len(cells))] += 1  # last cell: sequences of law probability 0
    probs = np.array([law[c] for c in cells] + [0.0])
    what = kw.pop("what", "sequence law")
    return (support_check(counts, probs, what=f"{what} support", seed=kw.get("seed")),
            gof_test(counts, probs, alpha, what=what, **kw))


def pit_values(tokens: np.ndarray, probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT ``[n]`` of ``tokens`` ``[n]`` under ``probs`` ``[V]``: exactly U(0,1) iff tokens ~ probs.

    Tokens are ordered by descending probability (ties by id), F is the CDF in
    that order, and u = F(y⁻) + U·p(y) with U ~ U(0,1) from ``rng``.
    """
    probs = np.asarray(probs, dtype=np.float64)
    order = np.argsort(-probs, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    before = np.concatenate([[0.0], np.cumsum(probs[order])])[:-1]  # F(y-) per rank
    r = rank[np.asarray(tokens, dtype=np.int64)]
    return before[r] + rng.random(r.size) * probs[order][r]


def dkwm_test(u: np.ndarray, alpha: float, *, beta: float = DEFAULT_BETA, what: str = "PIT+DKWM",
              seed: int | None = None) -> DkwmResult:
    """Test that ``u`` ``[n]`` is U(0,1): KS distance D against the DKW–Massart bound 2·exp(−2nD²).

    Rigorous at every n (no asymptotics), so it needs no α/10 margin; it
    gets one anyway, as every check of the family does.

    >>> dkwm_test(np.random.default_rng(0).random(10_000), 1e-6).passed
    True
    """
    u = np.sort(np.asarray(u, dtype=np.float64))
    n = u.size
    if n == 0:
        return DkwmResult(what, 0.0, 0, alpha, 1.0, math.inf, seed)
    i = np.arange(1, n + 1)
    ks = float(max(np.max(i / n - u), np.max(u - (i - 1) / n)))
    p = min(1.0, 2.0 * math.exp(-2.0 * n * ks * ks))
    return DkwmResult(what, ks, n, alpha, p, dkwm_detectable(n, alpha, beta), seed)


__all__ = [
    "MIN_EXPECTED", "SAFETY", "DEFAULT_BETA", "case_seed", "Budget", "holm",
    "power_at", "min_samples", "min_detectable_tv", "dkwm_epsilon", "dkwm_detectable", "dkwm_min_samples",
    "pool_cells", "pooled", "design_cells", "GofResult", "SupportResult", "DkwmResult",
    "support_check", "gof_test", "count_law_test", "sequence_law_test", "pit_values", "dkwm_test",
]
