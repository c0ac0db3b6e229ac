"""The torch device's tree verification (SPEC §11) against ``reference.tree``, its input rules,
its capability gating, and the tree conformance groups on devices with and without trees."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.protocol import Capabilities, InvalidInput, Noise, TreeBatch, UnsupportedCall
from devices.registry import load
from devices.torch_device import CAPABILITIES, TorchDevice, make_cpu_device
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.trees.statistical import tree_statistical_group
from specsim.conformance.checks.trees.l1 import CASES, tree_l1_group
from specsim.conformance.checks.trees.l2 import tree_l2_group
from specsim.testing.trees import compare_tree, random_tree_batch, random_tree_noise, reference_tree_step


@pytest.mark.parametrize("case", sorted(CASES))
def test_injected_noise_token_for_token_and_node_for_node(case):
    device = make_cpu_device()
    for seed in range(6):
        rng = np.random.default_rng(seed)
        batch = random_tree_batch(rng, replace(CASES[case], vocab_size=int(rng.integers(2, 12))))
        noise = random_tree_noise(rng, batch)
        assert not compare_tree(device.verify_tree(batch, noise), reference_tree_step(batch, noise),
                                repro=f" [case {case}, seed {seed}]")


def test_keyed_noise_matches_the_reference():
    device = make_cpu_device()
    batch = random_tree_batch(np.random.default_rng(3), CASES["rrs-without-replacement"])
    assert not compare_tree(device.verify_tree(batch), reference_tree_step(batch, None))


def _small():
    return TreeBatch(np.array([3]), np.array([-1, -1, 0]), np.array([0, 1, 2]), None, np.zeros((4, 3)),
                     np.ones(1), np.zeros(1, np.int64), np.ones(1))


@pytest.mark.parametrize("change,message", [
    (dict(parents=np.array([-1, 2, 0])), r"parents: entry 1 \(node 1\) is 2; must be -1 \(the root\) or an earlier node"),
    (dict(parents=np.array([-1, -1])), r"parents: length must be num_nodes_total = 3"),
    (dict(scheme="eagle"), r"scheme: must be 'rrs' or 'sglang'"),
    (dict(scheme="sglang", draft_probs=np.full((3, 3), 1 / 3)), r"draft_probs: the sglang scheme is target-only"),
    (dict(threshold_acc=1.5), r"threshold_acc: must be in \[0, 1\]"),
    (dict(draft_token_ids=np.array([0, 1, 7])), r"draft_token_ids: "),
])
def test_bad_tree_input_names_the_argument(change, message):
    batch = replace(_small(), **change)
    with pytest.raises(InvalidInput, match=message):
        make_cpu_device().verify_tree(batch, Noise(np.zeros(len(batch.draft_token_ids)), np.ones((1, 3))))


def test_undeclared_scheme_and_depth_beyond_max_k_raise_unsupported_call():
    device = TorchDevice(capabilities=replace(CAPABILITIES, tree_schemes=("greedy", "rrs"), max_k=1))
    noise = Noise(np.zeros(3), np.ones((1, 3)))
    with pytest.raises(UnsupportedCall, match="sglang"):
        device.verify_tree(replace(_small(), scheme="sglang"), noise)
    with pytest.raises(UnsupportedCall, match="max_k"):
        device.verify_tree(_small(), noise)


def test_tree_schemes_are_declared_from_a_closed_list():
    with pytest.raises(InvalidInput, match="capabilities.tree_schemes"):
        Capabilities(injected_noise=True, rng="none", max_vocab_size=4, tree_schemes=("beam",))


def test_tree_groups_pass_on_torch_and_are_not_supported_without_trees():
    ctx = Context(quick=True)
    results = tree_l1_group(make_cpu_device(), ctx) + tree_l2_group(make_cpu_device(), ctx)
    assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]
    for name in ("hpu", "npu"):
        device = load(name)
        assert [r.status for r in tree_l1_group(device, ctx) + tree_l2_group(device, ctx)] == ["not_supported"] * 2


def test_tree_statistics_pass_on_torch_in_quick_mode():
    from specsim.conformance.cases.trees import CASES as TREE_CASES
    results = tree_statistical_group(make_cpu_device(), Context(quick=True))
    assert len(results) == 3 * len(TREE_CASES) == 30 and {r.status for r in results} == {"pass"}, \
        [r.detail for r in results]
    assert tree_statistical_group(load("hpu"), Context(quick=True))[0].status == "not_supported"


def test_tree_bench_times_three_calls_on_torch():
    from specsim.bench.trees import bench, tree_parents
    row = bench(make_cpu_device(), 2, 50, tree_parents(2, 2, 1), warmup=0, repeat=1)
    assert set(row) == {"chain K=D", "chain K=N", "tree"} and all(v > 0 for v in row.values())


def test_tree_bench_sized_check_compares_request_by_request_and_sees_a_wrong_token():
    """The GPU check's sized batches (references in chunks of requests, compared with rows of the whole
    batch's output, padding past a chunk's width required) pass on torch and flag one changed token."""
    import dataclasses

    from specsim.bench import trees as tb
    device = make_cpu_device()
    _, batch, noise = tb.sized_batches([6], [40])[0]
    got = device.verify_tree(batch, noise)
    wants = [(lo, tb.reference_tree_step(*tb.select_tree_requests(batch, range(lo, min(lo + 4, 6)), noise)))
             for lo in (0, 4)]
    assert all(not tb._compare_rows(got, want, lo) for lo, want in wants)
    tokens = got.output_token_ids.copy()
    tokens[5, int(got.num_accepted[5])] = (tokens[5, int(got.num_accepted[5])] + 1) % 40
    assert tb._compare_rows(dataclasses.replace(got, output_token_ids=tokens), wants[1][1], 4)
