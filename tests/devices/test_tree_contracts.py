"""SPEC §11's contracts that a tree device could break and still pass the random cases: its declared
limits (depth ``max_k``, ``max_tree_nodes``), the §11.6 input rules, a seeded device's randomness, the
sglang edges at u = 0 and zero thresholds. Each vendor-like bad device (``tests.fixtures.
tree_vendor_devices``) fails a named check; the torch device passes them all."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from devices.validate import check_tree_call
from devices.protocol import Capabilities, InvalidInput, Noise, UnsupportedCall
from devices.torch_device import CAPABILITIES, TorchDevice, make_cpu_device
from specsim.conformance.checks.interface.capabilities import ROWS, capabilities_group, check_row
from specsim.conformance.checks.interface.input_rules import input_rules_group
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.trees.l1 import EDGES, edge_checks, edge_batch, limit_batch, limit_shapes, tree_l1_group
from specsim.conformance.checks.trees.l2 import tree_l2_group
from specsim.testing.bad_inputs import TREE_BAD_INPUTS, good_tree_batch
from specsim.testing.trees import deepest_path, layered_parents, reference_tree_step
from tests.fixtures import tree_vendor_devices as vendor

QUICK = Context(quick=True)


def _statuses(results) -> dict[str, str]:
    return {r.name: r.status for r in results}


def _failed(results) -> set[str]:
    return {r.name for r in results if r.status == "fail"}


# --- the declaration: max_k bounds the depth, max_tree_nodes the nodes -------------------------

def _chain(n: int):
    batch, _ = good_tree_batch()
    return replace(batch, num_nodes=np.array([n]), parents=np.arange(n) - 1, draft_token_ids=np.zeros(n, np.int64),
                   draft_probs=None, target_logits=np.zeros((n + 1, 4)), temperature=np.ones(1),
                   top_k=np.zeros(1, np.int64), top_p=np.ones(1), seeds=np.ones(1, np.uint64),
                   positions=np.zeros(1, np.int64))


def test_max_tree_nodes_bounds_nodes_and_max_k_the_depth():
    caps = replace(CAPABILITIES, max_k=4, max_tree_nodes=6)
    wide = replace(_chain(6), parents=np.full(6, -1))
    assert check_tree_call(wide, None, caps).max() == 1                        # 6 nodes at depth 1: served
    with pytest.raises(UnsupportedCall, match="max_tree_nodes <= 6"):
        check_tree_call(replace(_chain(7), parents=np.full(7, -1)), None, caps)
    check_tree_call(_chain(4), None, caps)
    with pytest.raises(UnsupportedCall, match="max_k <= 4"):
        check_tree_call(_chain(5), None, caps)


@pytest.mark.parametrize("value", [0, -3, 2.5, True])
def test_max_tree_nodes_must_be_a_positive_integer(value):
    with pytest.raises(InvalidInput, match="capabilities.max_tree_nodes"):
        Capabilities(injected_noise=True, rng="none", max_vocab_size=8, max_tree_nodes=value)


def test_capabilities_json_carries_max_tree_nodes():
    assert CAPABILITIES.to_json()["max_tree_nodes"] == 1024
    undeclared = Capabilities(injected_noise=True, rng="none", max_vocab_size=8)
    assert undeclared.to_json()["max_tree_nodes"] is None and undeclared.tree_node_limit == 64   # a default is no declaration


def test_tree_errors_name_num_nodes_not_the_chain_argument():
    batch, noise = good_tree_batch()
    for verify in (make_cpu_device().verify_tree, lambda b, n: reference_tree_step(b, n)):
        with pytest.raises(ValueError, match=r"^num_nodes: "):
            verify(replace(batch, num_nodes=np.array([4, -1])), noise)
    with pytest.raises(ValueError, match=r"^draft_token_ids: length must be num_nodes_total = sum\(num_nodes\)"):
        make_cpu_device().verify_tree(replace(batch, draft_token_ids=np.array([3, 1])), noise)


# --- the capabilities group probes trees at the limits and one past them -----------------------

def test_capabilities_probe_the_tree_limits_both_ways_on_torch():
    results = _statuses(capabilities_group(make_cpu_device(), None))
    for row in ("tree-max_k", "tree-max_k+1", "tree-max_tree_nodes", "tree-max_tree_nodes+1"):
        assert results[f"capabilities/{row}"] == "pass", row


def test_a_device_refusing_wide_trees_inside_its_declaration_fails_the_node_limit_row():
    results = {r.name: r for r in capabilities_group(vendor.NarrowTreeDevice(), None)}
    assert results["capabilities/tree-max_tree_nodes"].status == "fail"
    assert "raised UnsupportedCall" in results["capabilities/tree-max_tree_nodes"].detail


def test_a_device_serving_past_its_node_limit_fails_the_limit_plus_one_row():
    device = vendor._Wrapper(max_tree_nodes=16)        # declares 16; its torch device serves 1024
    device.verify_tree = device.inner.verify_tree
    row = next(r for r in ROWS if r.name == "tree-max_tree_nodes+1")
    result = check_row(device, row)
    assert result.status == "fail" and "answered the call instead of raising UnsupportedCall" in result.detail


def test_a_truncated_output_row_is_malformed():
    """A device answering a depth-D tree in a row narrower than D + 1 fails the depth row."""
    class Narrow(vendor._Wrapper):
        def verify_tree(self, batch, noise=None):
            out = self.inner.verify_tree(batch, noise)
            return type(out)(out.output_token_ids[:, :5], np.minimum(out.num_accepted, 4), out.accepted_nodes[:, :4])
    result = check_row(Narrow(), next(r for r in ROWS if r.name == "tree-max_k"))
    assert result.status == "fail" and "D + 1 = 257" in result.detail


def test_a_depth_past_max_k_that_also_breaks_the_node_limit_is_not_attributed():
    device = TorchDevice(capabilities=replace(CAPABILITIES, max_k=16, max_tree_nodes=16))
    result = check_row(device, next(r for r in ROWS if r.name == "tree-max_k+1"))
    assert result.status == "not_supported" and "cannot be attributed to the depth" in result.detail


# --- L1-trees: trees at the declared depth and size, exactly ----------------------------------

def test_steering_reaches_the_deepest_path_through_a_late_sibling():
    """The limit cases' power: every steered request of every scheme accepts its whole deepest path,
    whose first node is the root's tenth child in the 64-node tree (a device trying 8 siblings misses it)."""
    caps = CAPABILITIES
    shapes = limit_shapes(caps)
    assert deepest_path(shapes["nodes-64"])[0] == 9 and len(shapes["nodes-64"]) == 64
    assert deepest_path(shapes["depth-256"]) and len(deepest_path(shapes["depth-256"])) == 256
    for name, parents in shapes.items():
        for variant in (("rrs", "rrs", "with_replacement"), ("rrs-point", "rrs", "top"), ("sglang", "sglang", "top")):
            batch, noise = limit_batch(np.random.default_rng(7), parents, variant, caps, injected=True)
            want = reference_tree_step(batch, noise)
            assert want.num_accepted[:3].tolist() == [len(deepest_path(parents))] * 3, (name, variant)


def test_torch_passes_the_limit_cases():
    results = [r for r in tree_l1_group(make_cpu_device(), QUICK) if r.name.startswith("L1/trees/limits/")]
    assert len(results) == 6 and {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results]


def test_a_device_truncating_deep_trees_fails_the_depth_cases():
    failed = _failed(tree_l1_group(vendor.TruncatingTreeDevice(), QUICK))
    assert {f"L1/trees/limits/injected/{v}/depth-256" for v in ("rrs", "rrs-point", "sglang")} <= failed
    assert {f"L1/trees/limits/injected/{v}/nodes-64" for v in ("rrs", "rrs-point", "sglang")} <= failed


def test_a_device_refusing_trees_wider_than_8_nodes_fails_though_it_raised_unsupported_call():
    results = {r.name: r for r in tree_l1_group(vendor.NarrowTreeDevice(), QUICK)}
    wide = results["L1/trees/limits/injected/rrs/nodes-64"]
    assert wide.status == "fail" and "inside its declaration" in wide.detail and "max_tree_nodes=1024" in wide.detail


def test_a_seeded_device_gets_the_limits_on_greedy_requests():
    results = [r for r in tree_l1_group(vendor.SeededTreeDevice(), QUICK) if r.name.startswith("L1/trees/limits/")]
    assert [r.name for r in results] == ["L1/trees/limits/greedy/greedy/depth-256", "L1/trees/limits/greedy/greedy/nodes-64"]
    assert {r.status for r in results} == {"pass"}


# --- the §11.4 edges at u = 0 and zero thresholds ---------------------------------------------

@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_every_tree_edge_is_the_reference_answer(edge):
    batch, noise = edge_batch(edge)
    want = reference_tree_step(replace(batch, temperature=np.zeros(1)) if edge.scheme == "greedy" else batch, noise)
    assert want.output_token_ids[0, : int(want.num_accepted[0]) + 1].tolist() == edge.expected
    assert [int(n) for n in want.accepted_nodes[0] if n >= 0] == edge.nodes


def test_the_inclusive_sglang_comparison_fails_the_u0_edge():
    """The mutant modelling SGLang's ``u <= A/a`` (docs/bugs.md #11) answers the u = 0 edge wrongly."""
    from specsim.mutants.zoo import MUTANTS
    mutant = MUTANTS["tree-sglang-inclusive"]
    results = {r.name: r for r in edge_checks(mutant.make(), QUICK)}
    assert results[mutant.killed_by].status == "fail"
    assert results["L1/trees/edge/sglang-threshold-single-zero"].status == "fail"
    assert _statuses(edge_checks(make_cpu_device(), QUICK))[mutant.killed_by] == "pass"


# --- input-rules: SPEC §11.6 ------------------------------------------------------------------

def test_torch_refuses_every_tree_rule_by_name():
    results = [r for r in input_rules_group(make_cpu_device(), QUICK) if r.name.startswith("input/tree")]
    assert len(results) == len(TREE_BAD_INPUTS) + 1 and {r.status for r in results} == {"pass"}, \
        [(r.name, r.detail) for r in results if r.status != "pass"]


def test_a_device_answering_sglang_with_draft_probs_fails_that_rule():
    results = {r.name: r for r in input_rules_group(vendor.SglangDraftProbsDevice(), QUICK)}
    assert results["input/tree-sglang-with-draft-probs"].status == "fail"
    assert "accepted silently" in results["input/tree-sglang-with-draft-probs"].detail


def test_a_device_without_trees_gets_one_not_supported_tree_rule():
    from devices.registry import load
    results = [r for r in input_rules_group(load("hpu"), QUICK) if r.name.startswith("input/tree")]
    assert [(r.name, r.status) for r in results] == [("input/tree", "not_supported")]


# --- L2-trees: a seeded device's randomness -----------------------------------------------------

def test_a_correct_seeded_tree_device_passes_l2_trees():
    results = tree_l2_group(vendor.SeededTreeDevice(), QUICK)
    names = _statuses(results)
    for scheme in ("rrs", "sglang"):
        for check in ("determinism", "batch-invariance", "seed-sensitivity", "position-sensitivity"):
            assert names[f"L2/trees/{scheme}/{check}"] == "pass", (scheme, check)
    assert not _failed(results)


@pytest.mark.parametrize("device,check", [
    (vendor.RowKeyedSeededTreeDevice, "batch-invariance"),
    (vendor.FreshSeededTreeDevice, "determinism"),
    (vendor.SeedBlindSeededTreeDevice, "seed-sensitivity"),
])
def test_a_seeded_device_breaking_its_promise_fails_the_named_contract(device, check):
    failed = _failed(tree_l2_group(device(), QUICK))
    assert {f"L2/trees/rrs/{check}", f"L2/trees/sglang/{check}"} <= failed


def test_layered_parents_has_the_declared_size_and_depth():
    for n, depth in [(1, 1), (7, 3), (64, 6), (1024, 8), (512, 256), (5, 9)]:
        parents = layered_parents(n, depth)
        assert len(parents) == n
        batch = replace(_chain(n), parents=parents)
        assert int(batch.depths().max()) == min(n, depth)
        check_tree_call(batch, Noise(np.zeros(n), np.ones((1, 4))), CAPABILITIES)
