"""L0 for trees (SPEC §11): the reference's exact tree laws, by enumeration in ``Fraction``s.

The losslessness theorem of §11.8 for every tree shape of up to 4 nodes, the
relaxations of §11.4 shown lossy by exact amounts, and the reference's tree
step equal to its chain step on chains.
"""

from __future__ import annotations

import random
from fractions import Fraction
from itertools import product

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import tree
from reference.verify import verify
from specsim.testing.strategies import rational_rows

F = Fraction
LOSSLESS = [("rrs", "with_replacement"), ("rrs", "without_replacement"), ("rrs", "top"), ("sglang", "top"),
            ("greedy", "with_replacement")]


def all_shapes(max_nodes: int):
    """Every tree of 1..max_nodes nodes in topological order (parent of node n in [-1, n)): 1+2+6+24."""
    for n in range(1, max_nodes + 1):
        yield from (list(p) for p in product(*[range(-1, k) for k in range(n)]))


def prefix_rows(seed: int, V: int):
    """A row per prefix, drawn on first use: rows that depend on the whole accepted path."""
    rng, rows = random.Random(seed), {}

    def row_of(prefix: tuple) -> list:
        if prefix not in rows:
            weights = [rng.randint(0, 3) for _ in range(V)]
            weights[rng.randrange(V)] += 1
            rows[prefix] = [F(w, sum(weights)) for w in weights]
        return rows[prefix]
    return row_of


def lossless(parents, target, scheme: str, law) -> None:
    assert sum(law.values()) == 1
    assert tree.lossless_error(law, [target] * (len(parents) + 1), greedy=scheme == "greedy") == 0


@pytest.mark.parametrize("scheme,drafting", LOSSLESS, ids=lambda x: str(x))
def test_every_tree_shape_up_to_four_nodes_is_lossless(scheme, drafting):
    """§11.8 theorem: each emitted token, given the emitted prefix, follows the target's row there."""
    for case, parents in enumerate(all_shapes(4)):
        target, drafter = prefix_rows(2 * case, 3), prefix_rows(2 * case + 1, 3)
        lossless(parents, target, scheme, tree.tree_law(parents, target, drafter, scheme, drafting))


@st.composite
def trees(draw, max_nodes: int = 5, max_v: int = 4):
    n = draw(st.integers(1, max_nodes))
    parents = [draw(st.integers(-1, k - 1)) for k in range(n)]
    V = draw(st.integers(1, max_v))
    rows = {}

    def table(kind: str):
        def row_of(prefix):
            key = (kind, prefix)
            if key not in rows:
                rows[key] = draw(rational_rows(V))
            return rows[key]
        return row_of
    return parents, table("target"), table("draft")


@given(trees(), st.sampled_from(LOSSLESS))
def test_random_trees_with_zeros_and_ties_are_lossless(case, scheme_drafting):
    parents, target, drafter = case
    scheme, drafting = scheme_drafting
    lossless(parents, target, scheme, tree.tree_law(parents, target, drafter, scheme, drafting))


def test_sglang_relaxed_thresholds_are_lossy_by_exact_amounts():
    """§11.4: threshold_acc = 3/4 makes two siblings holding 3/4 of the mass always accepted."""
    t = [F(1, 2), F(1, 4), F(1, 4)]
    row = lambda prefix: t  # noqa: E731
    law = tree.tree_law([-1, -1], row, row, "sglang", "top", threshold_acc=F(3, 4))
    assert law.get((2,), 0) == 0 and sum(m for s, m in law.items() if s[0] == 0) == F(2, 3)
    assert tree.lossless_error(law, [row] * 2) == F(1, 4)
    law = tree.tree_law([-1], row, row, "sglang", "top", threshold_single=F(1, 2))
    assert sum(m for s, m in law.items() if s[0] == 0) == 1                  # t(0) >= 1/2: always kept
    assert tree.tree_law([-1], row, row, "sglang", "top") == tree.tree_law([-1], row, row, "rrs", "top")


def test_sglang_double_counts_duplicate_siblings_and_rrs_does_not():
    """§11.4: duplicate siblings (drafting with replacement, verified target-only) over-emit."""
    t, d = [F(1, 2), F(1, 2)], [F(3, 4), F(1, 4)]
    law = tree.tree_law([-1, -1], lambda p: t, lambda p: d, "sglang", "with_replacement")
    assert sum(m for s, m in law.items() if s[0] == 0) == F(3, 4)             # not 1/2: (0, 0) counts t(0) twice
    lossless([-1, -1], lambda p: t, "rrs", tree.tree_law([-1, -1], lambda p: t, lambda p: d, "rrs",
                                                          "with_replacement"))


def test_sglang_coin_walk_matches_its_law():
    """``choose`` (one coin per level) and ``level`` (the law) agree: the share of a fine grid of
    coins accepting each sibling is its probability, to the grid's resolution."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        t = list(rng.dirichlet(np.ones(5)))
        tokens = list(rng.choice(5, size=3, replace=False))
        ts, ta = float(rng.choice([1.0, 0.3])), float(rng.choice([1.0, 0.6]))
        p_accept, p_none, _ = tree.level("sglang", t, tokens, None, ts, ta)
        grid = (np.arange(4000) + 0.5) / 4000
        picks = [tree.choose("sglang", t, tokens, None, [u, 0.0, 0.0], ts, ta) for u in grid]
        for k, pk in enumerate(p_accept):
            assert abs(np.mean([c == k for c in picks]) - pk) < 1e-3
        assert abs(np.mean([c is None for c in picks]) - p_none) < 1e-3


def test_on_a_chain_the_tree_step_is_the_chain_step():
    """§11.1: a chain is the tree [-1, 0, 1, …]; same rows, same coins, same tokens (all three modes)."""
    rng = np.random.default_rng(1)
    for trial in range(120):
        ks = rng.integers(0, 4, size=3)
        V = int(rng.integers(2, 6))
        logits = rng.normal(size=(int(ks.sum()) + 3, V))
        ids = rng.integers(0, V, int(ks.sum()))
        ids[rng.random(len(ids)) < 0.1] = -1
        draft = rng.dirichlet(np.ones(V), len(ids)) if trial % 2 else None
        T = np.where(rng.random(3) < 0.2, 0.0, 1.0)
        u, E = rng.random(len(ids)), rng.exponential(size=(3, V))
        parents = np.concatenate([np.arange(k) - 1 for k in ks]).astype(np.int64)
        chain = verify(ks, ids, draft, logits, T, np.zeros(3, int), np.ones(3), uniforms=u, exponentials=E)
        tree_step = tree.verify_tree(ks, parents, ids, draft, logits, T, np.zeros(3, int), np.ones(3),
                                     uniforms=u, exponentials=E)
        assert tree_step.output_token_ids.tolist() == chain.output_token_ids.tolist(), trial
        assert tree_step.num_accepted.tolist() == chain.num_accepted.tolist()


def test_accepted_length_law_of_one_level():
    """§11.8: given its drafts, an rrs level accepts with 1 − Π(1 − a_k)."""
    t, d = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]
    p_accept, p_none, _ = tree.level("rrs", t, [1, 1], [d, d])
    assert p_none == (1 - F(1, 2)) * 1 and sum(p_accept) == F(1, 2)           # the 2nd copy of 1 meets r(1) = 0
    law = tree.tree_law([-1, -1, 0], lambda p: t, lambda p: d, "rrs", "with_replacement")
    lengths = tree.accepted_length_law(law, [-1, -1, 0])
    assert sum(lengths) == 1 and len(lengths) == 3
