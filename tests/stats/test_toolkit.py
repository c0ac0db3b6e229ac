"""Tests of ``specsim.judge.stats``: size (null p-values uniform), power, planner soundness, pooling, budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from specsim.judge import stats


def _row(rng, V, scale=2.0, zeros=0):
    z = rng.normal(0, scale, V)
    z[:zeros] = -np.inf
    p = np.exp(z - z.max())
    return p / p.sum()


@pytest.mark.parametrize("V,n", [(8, 2000), (64, 5000), (512, 20000)])
def test_null_p_values_are_uniform(V, n):
    """Size: on samples from the law itself, pooled CR p-values are ~U(0,1) (KS at 1e-3, 400 replicates)."""
    rng = np.random.default_rng(stats.case_seed(0, f"size-{V}"))
    probs = _row(rng, V, zeros=V // 8)
    ps = np.array([stats.gof_test(rng.multinomial(n, probs), probs, 1e-3).p_value for _ in range(400)])
    assert st.kstest(ps, "uniform").pvalue > 1e-3
    assert np.mean(ps <= 0.05) < 0.1


def test_null_pit_is_uniform_and_dkwm_conservative():
    rng = np.random.default_rng(stats.case_seed(0, "pit"))
    probs = _row(rng, 4096, scale=3.0)
    tokens = rng.choice(4096, size=20000, p=probs)
    u = stats.pit_values(tokens, probs, rng)
    assert st.kstest(u, "uniform").pvalue > 1e-3
    assert stats.dkwm_test(u, 1e-6).passed


def test_power_against_worst_case_tilt():
    """A diffuse ±2ε tilt at TV = the planner's detectable TV is detected at the design n (here: 20 of 20)."""
    rng = np.random.default_rng(stats.case_seed(0, "power"))
    V, alpha = 32, 1e-6
    probs = _row(rng, V)
    n = 30000
    tv = stats.min_detectable_tv(stats.design_cells(probs, n), n, alpha)
    order = np.argsort(rng.random(V))
    up = np.zeros(V, bool)
    up[order[np.cumsum(probs[order]) <= 0.5]] = True
    alt = probs * np.where(up, 1 + tv / probs[up].sum(), 1 - tv / probs[~up].sum())
    assert math.isclose(0.5 * np.abs(alt - probs).sum(), tv, rel_tol=1e-9)
    detected = [not stats.gof_test(rng.multinomial(n, alt), probs, alpha).passed for _ in range(20)]
    assert all(detected)


def test_power_known_bugs_large():
    """A temperature-twice row (TV ~0.1) fails CR and PIT+DKWM with 5k samples at 1e-7."""
    rng = np.random.default_rng(stats.case_seed(0, "bug"))
    z = rng.normal(0, 2, 256)
    p = np.exp(z / 0.7 - (z / 0.7).max()); p /= p.sum()
    q = np.exp(z / 0.49 - (z / 0.49).max()); q /= q.sum()
    tokens = rng.choice(256, size=5000, p=q)
    assert not stats.gof_test(np.bincount(tokens, minlength=256), p, 1e-7).passed
    assert not stats.dkwm_test(stats.pit_values(tokens, p, rng), 1e-7).passed


@pytest.mark.parametrize("cells", [2, 8, 64, 512])
@pytest.mark.parametrize("alpha", [1e-3, 1e-7])
def test_planner_sound(cells, alpha):
    """min_detectable_tv(min_samples(d)) <= d, and tight within 1%."""
    for d in (0.01, 0.02, 0.1):
        n = stats.min_samples(cells, d, alpha)
        back = stats.min_detectable_tv(cells, n, alpha)
        assert back <= d * (1 + 1e-6) and back >= d * 0.99
        assert stats.power_at(cells, n, d, alpha) >= 1 - stats.DEFAULT_BETA - 1e-6


def test_planner_matches_research_table():
    assert round(stats.min_samples(1024, 0.02, 1e-6), -3) == pytest.approx(2.56e5, rel=0.01)
    assert stats.min_detectable_tv(1024, 2e5, 1e-7) == pytest.approx(0.023, abs=5e-4)


def test_dkwm_planner_sound():
    for ks in (0.01, 0.05, 0.2):
        n = stats.dkwm_min_samples(ks, 1e-6)
        assert stats.dkwm_detectable(n, 1e-6) == pytest.approx(ks)


def test_pooling_reaches_min_expected_and_keeps_mass():
    rng = np.random.default_rng(1)
    for V, n in [(8, 100), (1024, 5000), (1024, 50)]:
        probs = _row(rng, V, zeros=3)
        labels = stats.pool_cells(probs, n)
        assert (labels[probs == 0] == -1).all() and (labels[probs > 0] >= 0).all()
        _, mass = stats.pooled(np.zeros(V), probs, labels)
        assert mass.sum() == pytest.approx(1.0)
        if len(mass) > 1:
            assert (n * mass >= stats.MIN_EXPECTED - 1e-9).all()


def test_support_check_is_exact():
    probs = np.array([0.5, 0.5, 0.0])
    assert stats.support_check(np.array([10, 10, 0]), probs).passed
    bad = stats.support_check(np.array([10, 10, 1]), probs)
    assert not bad.passed and "no alpha" in bad.report()


def test_count_law():
    law = np.array([0.2, 0.3, 0.5])
    rng = np.random.default_rng(2)
    sup, gof = stats.count_law_test(rng.choice(3, 5000, p=law), law, 1e-6)
    assert sup.passed and gof.passed
    sup, gof = stats.count_law_test(rng.choice(3, 5000, p=[0.3, 0.3, 0.4]), law, 1e-6)
    assert not gof.passed


def test_budget_holm_seed():
    b = stats.Budget(1e-3, 50)
    assert b.alpha == pytest.approx(2e-5) and b.nominal == pytest.approx(2e-6)
    with pytest.raises(ValueError, match="alpha_family"):
        stats.Budget(0.0, 3)
    assert stats.holm([1e-5, 0.2, 3e-4], 1e-3) == [True, False, True]
    assert stats.case_seed(3, "a") != stats.case_seed(3, "b")
    assert 0 <= stats.case_seed(3, "a") < 2**63


def test_report_names_every_figure():
    r = stats.gof_test(np.array([50, 30, 20]), np.array([0.5, 0.3, 0.2]), 1e-6, seed=7, what="pos0")
    text = r.report()
    for word in ("statistic=", "df=2", "n=100", "p=", "alpha=", "seed=7", "detectable TV="):
        assert word in text


@pytest.mark.parametrize("name", ["specsim.judge.stats", "specsim.conformance.cases.chain", "specsim.mutants.walk",
                                  "specsim.mutants.zoo"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0
