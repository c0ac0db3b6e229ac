"""L0: the reference's exact laws, by enumeration — no sampling, no false fails.

The law is exact (``Fraction``) wherever the inputs are rational; float64 with
a 1e-12 tolerance where temperature, top-k and top-p make them irrational.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reference import laws
from reference.layout import PLACEHOLDER_TOKEN_ID
from reference.target import target_probs
from reference.verify import accept, residual
from specsim.testing.strategies import rational_rows, step_tables

F = Fraction


@given(step_tables())
@example(([[F(1)], [F(1)]], [[F(1)]]))                                     # V = 1
@example(([[F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)]], [[F(1, 2), F(1, 2)]]))  # draft == target
@example(([[F(1), F(0)], [F(0), F(1)]], [[F(0), F(1)]]))                    # disjoint supports
def test_full_rejection_emits_the_target_law_exactly(tables):
    """Given the drafts before it were accepted, the token at position j follows target row j."""
    targets, drafts = tables
    law = laws.emitted_law(targets, drafts, "full", exact=True)
    assert sum(law.values()) == 1
    assert laws.lossless_error(law, targets) == 0


@given(step_tables())
def test_point_proposals_emit_the_target_law_exactly(tables):
    """Point proposals (no draft_probs) are lossless for any drafter law."""
    targets, drafts = tables
    law = laws.emitted_law(targets, drafts, "point", exact=True)
    assert sum(law.values()) == 1
    assert laws.lossless_error(law, targets) == 0


@given(step_tables(), st.sampled_from(["full", "greedy"]))
def test_withdrawing_drafts_of_target_probability_zero_is_lossless(tables, scheme):
    """SPEC §4: a withdrawn draft (rejected, residual max(t − d, 0) from its row) keeps the step lossless
    when only drafts the target gives probability 0 are withdrawn — a grammar's, under its own mask."""
    targets, drafts = tables
    withdrawn = [{v for v, t in enumerate(row) if t == 0} for row in targets[:-1]]
    law = laws.emitted_law(targets, drafts, scheme, exact=True, withdrawn=withdrawn)
    assert sum(law.values()) == 1
    assert laws.lossless_error(law, targets, greedy=scheme == "greedy") == 0


@given(step_tables())
def test_greedy_emits_the_argmax_chain(tables):
    targets, drafts = tables
    law = laws.emitted_law(targets, drafts, "greedy", exact=True)
    assert laws.lossless_error(law, targets, greedy=True) == 0


@given(step_tables())
def test_num_accepted_law_matches_the_closed_form(tables):
    """P(num_accepted = m) = (Π_{i<m} a_i)(1 − a_m), a_i = Σ min(target_i, draft_i)."""
    targets, drafts = tables
    K = len(drafts)
    law = laws.emitted_law(targets, drafts, "full", exact=True)
    a = [laws.acceptance_probability(t, d) for t, d in zip(targets, drafts)]
    assert laws.num_accepted_from_law(law, K) == laws.num_accepted_law(a)
    assert sum(len(s) * m for s, m in law.items()) == laws.expected_emitted_tokens(a)


@given(step_tables())
def test_point_acceptance_is_the_drafter_weighted_target(tables):
    targets, drafts = tables
    law = laws.emitted_law(targets, drafts, "point", exact=True)
    a = [laws.point_acceptance_probability(t, d) for t, d in zip(targets, drafts)]
    assert laws.num_accepted_from_law(law, len(drafts)) == laws.num_accepted_law(a)


@st.composite
def prefix_dependent_tables(draw):
    """Rows that depend on the drafted prefix (a real LM's do): chosen by a hash of it."""
    V, K = draw(st.integers(2, 4)), draw(st.integers(1, 3))
    pool_t = [draw(rational_rows(V)) for _ in range(3)]
    pool_d = [draw(rational_rows(V)) for _ in range(3)]
    pick = lambda pool, j: (lambda prefix: pool[(hash(prefix) + j) % len(pool)])  # noqa: E731
    return [pick(pool_t, j) for j in range(K + 1)], [pick(pool_d, j) for j in range(K)]


@given(prefix_dependent_tables(), st.sampled_from(["full", "point"]))
def test_lossless_when_rows_depend_on_the_drafted_prefix(tables, scheme):
    targets, drafts = tables
    law = laws.emitted_law(targets, drafts, scheme, exact=True)
    assert laws.lossless_error(law, targets) == 0


@given(st.integers(2, 8), st.integers(0, 3), st.sampled_from([0.3, 0.7, 1.0, 1.5]), st.integers(0, 9),
       st.sampled_from([0.2, 0.5, 0.9, 1.0]), st.integers(0, 2**32 - 1), st.sampled_from(["full", "point"]))
def test_lossless_after_temperature_top_k_and_top_p(V, K, temperature, top_k, top_p, seed, scheme):
    """Rows through SPEC §2, in float64: the emitted law is the processed target law."""
    rng = np.random.default_rng(seed)
    logits = np.round(rng.normal(0, 2, size=(K + 1, V)), 1)  # rounding makes ties
    targets = [target_probs(row, temperature, top_k, top_p) for row in logits]
    drafts = [rng.dirichlet(np.ones(V) * 0.5) for _ in range(K)]
    law = laws.emitted_law(targets, drafts, scheme)
    assert abs(sum(law.values()) - 1) < 1e-12
    assert laws.lossless_error(law, targets) < 1e-12


@given(st.lists(st.sampled_from([-np.inf, -1.0, 0.0, 0.5, 2.0, 2.0]), min_size=2, max_size=9).filter(
    lambda z: np.isfinite(z).any()), st.integers(0, 10), st.sampled_from([0.1, 0.5, 0.75, 1.0]),
    st.sampled_from([0.5, 1.0, 2.0]), st.randoms(use_true_random=False))
def test_target_processing_is_permutation_equivariant_and_minimal(z, top_k, top_p, temperature, rnd):
    """SPEC §2 decides by value, never by sort order: permuting the vocabulary permutes the
    result. Top-k keeps ≥ k tokens (all ties), top-p keeps mass ≥ p and no smaller tie-closed set does."""
    z = np.array(z)
    probs = target_probs(z, temperature, top_k, top_p)
    perm = list(range(len(z)))
    rnd.shuffle(perm)
    assert np.allclose(target_probs(z[perm], temperature, top_k, top_p), probs[perm], atol=1e-15)
    kept = probs > 0
    finite = np.isfinite(z)
    if 0 < top_k < len(z) and top_p == 1.0:
        assert kept.sum() >= min(top_k, finite.sum())
        assert z[kept].min() >= z[finite & ~kept].max(initial=-np.inf)
    if top_k == 0 and top_p < 1.0:
        base = target_probs(z, temperature)
        assert base[kept].sum() >= top_p - 1e-12
        smallest = base[kept].min()
        assert base[kept & (base > smallest)].sum() < top_p + 1e-12  # dropping the cut's tie group falls short


@given(rational_rows(4), rational_rows(4), st.integers(-1, 3), st.booleans())
def test_verify_rungs_agree_with_the_enumeration(target, draft, x, point):
    """The sampler (``reference.verify``) and the enumeration (``reference.laws``) are two
    implementations of SPEC §3; their acceptance probability and residual law agree."""
    t = np.array([float(v) for v in target])
    d = None if point else np.array([float(v) for v in draft])
    w = residual(x, t, d)
    if x == PLACEHOLDER_TOKEN_ID:
        assert np.array_equal(w, t)
        assert accept(x, t, d, 0.0) == (False, float("inf"))
        return
    # P(u < ratio) for u ~ U[0, 1): the sampler accepts iff u < ratio.
    accepted_at_zero = accept(x, t, d, 0.0)[0]
    if d is not None and d[x] == 0:
        assert not accepted_at_zero
        return
    a, rejected_law = laws._emission("point" if point else "full", x,
                                     [float(v) for v in target], [float(v) for v in draft])
    assert accepted_at_zero == (a > 0)
    if a < 1 and w.sum() > 0:
        assert np.allclose(w / w.sum(), rejected_law, atol=1e-15)


@pytest.mark.parametrize("a,K", [(0.0, 3), (0.5, 1), (0.8, 4), (1.0, 2)])
def test_expected_emitted_tokens_iid_closed_form(a, K):
    expected = K + 1 if a == 1 else (1 - a ** (K + 1)) / (1 - a)
    assert laws.expected_emitted_tokens([a] * K) == pytest.approx(expected, rel=1e-15)
