"""SPEC §6's 16-bit logits in tree steps (§11): the placed noise sits beside each node's boundary, the torch device
(widening to float32) passes ``L1-16bit/tree/<dtype>``, the tree step's 16-bit mutant fails it, and a device that
cannot be given placed noise is told why."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.registry import load
from reference.tree import children_of
from specsim.conformance.checks.chain.placed import NEAR, placed_tree_noise, reference_rows
from specsim.conformance.checks.sampler.sixteen_bit import TREE_QUICK_REQUESTS, tree_check
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.judge.compare import TOLERANCE
from specsim.mutants.zoo import make_mutant
from specsim.testing.trees import TreeSpec, random_tree_batch, random_tree_noise, reference_tree_step

TOL = TOLERANCE["float16"]


def _tree_batch(dtype: str, **spec):
    rng = np.random.default_rng(5)
    batch = random_tree_batch(rng, TreeSpec(batch=64, max_nodes=8, vocab_size=64, dtype=dtype, greedy_fraction=0.0,
                                            masked_fraction=0.0, **spec))
    return rng, batch, random_tree_noise(rng, batch)


def _first_siblings(batch):
    """``(node, target row)`` of each slot's first child: its boundary is ``t(x)/d(x)`` on the untouched row."""
    cu = batch.request_offsets()
    for i in range(batch.batch_size):
        for slot, kids in enumerate(children_of(batch.parents[cu[i]:cu[i + 1]].tolist())):
            if kids:
                yield int(cu[i]) + kids[0], int(cu[i]) + i + slot


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sixteen_bit_trees_pair_float32_draft_rows(dtype):
    _, batch, _ = _tree_batch(dtype)
    assert batch.target_logits.dtype.itemsize == 2 and batch.draft_probs.dtype == np.float32


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_torch_tree_step_widens_sixteen_bit_logits_to_float32(dtype):
    """16-bit logits are exact float32 values: the torch device's tree step must not tell the two apart."""
    torch_device = load("torch")
    for scheme, drafting in (("rrs", "with_replacement"), ("rrs", "top"), ("sglang", "top")):
        rng = np.random.default_rng(11)
        batch = random_tree_batch(rng, TreeSpec(batch=48, max_nodes=8, vocab_size=64, dtype=dtype, scheme=scheme,
                                                drafting=drafting))
        noise = placed_tree_noise(rng, batch, random_tree_noise(rng, batch), TOL)
        wide = replace(batch, target_logits=np.asarray(batch.target_logits, np.float32))
        low, high = torch_device.verify_tree(batch, noise), torch_device.verify_tree(wide, noise)
        assert np.array_equal(low.output_token_ids, high.output_token_ids) and \
            np.array_equal(low.accepted_nodes, high.accepted_nodes)


def test_placed_tree_coins_sit_between_the_tolerance_and_sixteen_bit_rounding():
    rng, batch, noise = _tree_batch("bfloat16")
    placed = placed_tree_noise(rng, batch, noise, TOL)
    rows, ids = reference_rows(batch), batch.draft_token_ids
    distances = []
    for node, row in _first_siblings(batch):
        x = int(ids[node])
        if x >= 0 and placed.uniforms[node] != noise.uniforms[node]:
            distances.append(abs(placed.uniforms[node] / (rows[row, x] / batch.draft_probs[node, x]) - 1))
    assert len(distances) > 50
    assert min(distances) >= NEAR[0] * TOL * 0.99 and max(distances) <= NEAR[1] * TOL * 1.01
    assert np.all((placed.uniforms >= 0) & (placed.uniforms < 1)) and np.all(placed.exponentials > 0)
    step = reference_tree_step(batch, placed)
    assert np.sum(placed.exponentials != noise.exponentials) > 20       # races placed on the reference's paths
    assert step.num_accepted.shape == (batch.batch_size,)


def test_the_torch_device_passes_and_the_tree_sixteen_bit_mutant_fails():
    torch_device = load("torch")
    mutant = make_mutant(torch_device, "tree-softmax-in-16-bit")
    for dtype in ("float16", "bfloat16"):
        good = tree_check(torch_device, seed=0, dtype=dtype, requests=TREE_QUICK_REQUESTS)
        assert good.status == "pass" and good.extra["placed_coins"] > 100 and good.extra["placed_races"] > 50, \
            good.detail
        bad = tree_check(mutant, seed=0, dtype=dtype, requests=TREE_QUICK_REQUESTS)
        assert bad.status == "fail" and bad.extra["differing_requests"] > 0, bad.detail
    assert introduced_in("L1-16bit/tree/float16") == "1.2"


class _ChainsOnly:
    """The torch device with its trees hidden."""

    name = "chains-only"

    def __init__(self, inner):
        self.inner = inner
        self.capabilities = replace(inner.capabilities, tree_schemes=())

    def verify(self, batch, noise=None):
        return self.inner.verify(batch, noise)


def test_a_device_that_cannot_take_placed_tree_noise_is_told_why():
    torch_device = load("torch")
    black_box = tree_check(BlackBox(torch_device), seed=0, dtype="float16")
    assert black_box.status == "not_supported" and "injected noise" in black_box.detail
    chains = tree_check(_ChainsOnly(torch_device), seed=0, dtype="float16")
    assert chains.status == "not_supported" and "tree_schemes" in chains.detail
    greedy = replace(torch_device.capabilities, tree_schemes=("greedy",))
    only_greedy = type("GreedyTrees", (), {"name": "greedy-trees", "capabilities": greedy,
                                           "verify_tree": torch_device.verify_tree})()
    result = tree_check(only_greedy, seed=0, dtype="bfloat16")
    assert result.status == "not_supported" and "only greedy trees" in result.detail
