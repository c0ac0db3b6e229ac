"""Tree decoding on the toy models (SPEC §11): greedy equivalence, seeded replay, max_model_len."""

from __future__ import annotations

import numpy as np
import pytest

from devices.torch_device import make_cpu_device
from specsim.engine.models import ToyLM
from specsim.engine.proposers.tree import TreeProposer
from specsim.engine.tree_loop import tree_decode

TARGET = ToyLM(9, order=2, seed=5)
SHAPES = [(1, 1, 1), (3, 1, 1), (3, 2, 1), (3, 2, 2), (2, 4, 3)]


@pytest.mark.parametrize("depth,branch,width", SHAPES)
@pytest.mark.parametrize("scheme", ["rrs", "sglang"])
def test_greedy_tree_decoding_is_the_targets_argmax_chain(depth, branch, width, scheme):
    proposer = TreeProposer(TARGET.mixed(0.5, seed=6), depth=depth, branch=branch, width=width)
    for prompt in ([0], [3, 4], [8, 1, 2]):
        run = tree_decode(TARGET, proposer, make_cpu_device(), prompt, 15, temperature=0.0, scheme=scheme)
        assert run.tokens == TARGET.greedy_chain(prompt, 15)


def test_seeded_tree_decoding_replays_and_depends_on_the_seed():
    proposer = TreeProposer(TARGET.mixed(0.5, seed=6), depth=3, branch=2, width=2)
    runs = [tree_decode(TARGET, proposer, make_cpu_device(), [1, 2], 30, seed=s) for s in (7, 7, 8)]
    assert runs[0].tokens == runs[1].tokens and runs[0].tokens != runs[2].tokens


def test_trees_shrink_at_max_model_len():
    proposer = TreeProposer(TARGET.mixed(0.9, seed=6), depth=4, branch=2, width=2)
    run = tree_decode(TARGET, proposer, make_cpu_device(), [1, 2], 50, temperature=0.0, max_model_len=9)
    assert len(run.tokens) == 7 and run.tokens == TARGET.greedy_chain([1, 2], 7)


def test_proposer_layout_is_topological_with_distinct_siblings():
    parents, ids = TreeProposer(TARGET, depth=3, branch=3, width=2).propose_tree([0, 1], 1.0)
    assert len(ids) == 3 + 2 * 2 * 3 and all(p < n for n, p in enumerate(parents))
    for p in set(parents.tolist()):
        sib = ids[parents == p]
        assert len(set(sib.tolist())) == len(sib)
    with pytest.raises(ValueError, match="branch"):
        TreeProposer(TARGET, branch=10)
    assert np.array_equal(TreeProposer(TARGET, depth=2, branch=1, width=1).propose_tree([0], 0.0)[0], [-1, 0])


@pytest.mark.slow
def test_tree_decoding_draws_the_targets_whole_sequence_law():
    """Several tree steps per sequence (keyed noise at each step's position): the law of the whole
    continuation is the target's, by enumeration (``ToyLM.sequence_law``). 4000 sequences, 64 cells
    pooled to 19, α = 1e-4: detects worst-case TV 0.071 with power 0.999 (``specsim.judge.stats.min_detectable_tv``).
    Opt-in (``--run-slow``, ~40 s)."""
    from reference.target import target_probs
    from specsim.judge.stats import gof_test
    target = ToyLM(4, order=2, seed=11)
    proposer = TreeProposer(target.mixed(0.6, seed=12), depth=2, branch=2, width=1)
    law = target.sequence_law([1, 2], 3, lambda z: target_probs(z, 1.0))
    cells = sorted(law)
    index = {c: k for k, c in enumerate(cells)}
    counts = np.zeros(len(cells))
    device = make_cpu_device()
    for seed in range(4000):
        counts[index[tuple(tree_decode(target, proposer, device, [1, 2], 3, seed=seed + 1).tokens)]] += 1
    result = gof_test(counts, np.array([law[c] for c in cells]), 1e-4, what="tree whole-sequence law", seed=0)
    assert result.passed, result.report()
