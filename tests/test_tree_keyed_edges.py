"""SPEC 1.13: every §11 edge on the keyed streams, for a device drawing keyed noise.

1.0 to 1.12 held the §11 edges with injected noise alone (alone, at the ladder's sizes, among filler trees), and not at
all on a device without it. The keyed path met their rules only where random trees reach them. Here each edge runs under
a key whose coins come near its placed coins (so the rule its coins are placed for decides there too), and a keyed path
of large sglang batches keying its streams one position on (the same law, other tokens) passes every 1.12 check of
that path and fails the keyed edges at 33 requests.
"""

from __future__ import annotations

import dataclasses
import pytest
from devices.protocol import UnsupportedCall
from devices.registry import load
from specsim.conformance.checks.trees import l1
from specsim.conformance.checks.trees.l1 import EDGES, KEYED_CHECKED, edge_batch_checks, edge_mixed_checks, \
    keyed_edge, keyed_edge_checks
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from specsim.testing.seeds import case_seed
from tests.quick_runs import zoo_mutant

QUICK = Context(quick=True)
FULL = Context(quick=False)
MUTANT = "tree-keyed-sglang-position-past-32"
SGLANG = [e.name for e in EDGES if e.scheme == "sglang"]


class KeyedOnly:
    """The torch device declaring no injected noise, its own noise the keyed streams (``rng = "philox"``)."""

    def __init__(self, device):
        self.inner, self.name = device, f"{device.name} (keyed only)"
        self.capabilities = dataclasses.replace(device.capabilities, injected_noise=False)

    def verify_tree(self, batch, noise=None):
        if noise is not None:
            raise UnsupportedCall("noise: this device draws its own (keyed) noise")
        return self.inner.verify_tree(batch)


def _at_33(monkeypatch):
    """Batch sizes 1, 32 and 33 alone: the ladder's first size past 32 decides."""
    from specsim.conformance.cases import declared
    monkeypatch.setattr(declared, "edge_batch_sizes", lambda ctx: (1, 32, 33))
    monkeypatch.setattr(declared, "edge_mixed_sizes", lambda ctx: (33,))


@pytest.mark.parametrize("seed", range(8))
def test_each_edges_key_answers_as_its_placed_coins_with_coins_near_them(seed):
    for edge in EDGES:
        batch, tokens, nodes, note = keyed_edge(edge, case_seed(seed, "tree-edge-keyed", edge.name))
        assert (tokens, nodes) == (edge.expected, edge.nodes), (edge.name, note)
        assert batch.seeds is not None and batch.positions is not None and f"{KEYED_CHECKED} nearest" not in note
        if edge.scheme != "greedy":
            within = float(note.split("its coins within ")[1].split(" ")[0])
            assert within <= 0.11, (edge.name, note)   # of 4096 keys; a three-coin edge's nearest is about 0.1 off


def test_the_correct_devices_pass_every_keyed_edge(monkeypatch):
    _at_33(monkeypatch)
    for device in (load("torch"), KeyedOnly(load("torch"))):
        results = keyed_edge_checks(device, QUICK)
        assert len(results) == 2 * len(EDGES) and {r.status for r in results} == {"pass"}, \
            [(r.name, r.detail) for r in results if r.status != "pass"]
        name = "L1/trees/edge/full-width-sglang/keyed/mixed"
        among = keyed_edge_checks(device, FULL, only=name)
        assert [r.name for r in among] == [name, name.replace("/edge/", "/edge-neighbours/")]
        assert {r.status for r in among} == {"pass"}, [r.detail for r in among]


def test_a_device_without_injected_noise_now_has_its_edges_held():
    device = KeyedOnly(load("torch"))
    results = l1.tree_l1_group(device, QUICK)
    edges = {r.name for r in results if "/trees/edge" in r.name}
    assert edges == {f"L1/trees/edge/{e.name}/keyed{s}" for e in EDGES for s in ("", "/batches")}


def test_a_keyed_path_wrong_past_32_sglang_requests_passes_1_12s_checks_of_its_path_and_fails_the_keyed_edges(
        monkeypatch):
    """The random keyed trees, the ragged keyed batches (31 sglang requests) and every edge with injected noise pass;
    a keyed sglang edge fails at 33 requests. (The mutant passes every other 1.12 check too: ``specsim mutants``
    names its first killer.)"""
    _at_33(monkeypatch)
    mutant = zoo_mutant(MUTANT)
    before = l1._random_cases(mutant, QUICK, "L1/trees/keyed", injected=False) + edge_batch_checks(mutant, FULL) + \
        edge_mixed_checks(mutant, FULL)
    assert before and {r.status for r in before} == {"pass"}, [(r.name, r.detail) for r in before if r.status != "pass"]
    results = keyed_edge_checks(mutant, FULL)
    failed = [r for r in results if r.status == "fail"]
    assert failed and {r.name.split("/")[3] for r in failed} <= set(SGLANG)
    assert all("batch size 33" in r.detail for r in failed), [r.detail for r in failed]
    assert any(r.name.endswith("/keyed/batches") for r in failed)
    assert all(r.name.startswith(MUTANTS[MUTANT].killed_by) or "edge-neighbours" in r.name for r in failed)
    assert {r.status for r in results if r.name.split("/")[3] not in SGLANG} == {"pass"}


def test_quick_runs_ask_the_keyed_edges_alone_and_at_batch_sizes_not_among_fillers():
    name = "L1/trees/edge/placeholder-subtree/keyed"
    assert [r.name for r in keyed_edge_checks(load("torch"), QUICK, only=f"{name}/mixed")] == []
    assert [r.name for r in keyed_edge_checks(load("torch"), QUICK, only=name)] == [name]


def test_the_keyed_edges_are_1_13s_and_the_injected_ones_keep_their_versions():
    edge = "L1/trees/edge/full-width-rrs"
    assert {introduced_in(f"{edge}/keyed{s}") for s in ("", "/batches", "/mixed")} == {"1.13"}
    assert introduced_in("L1/trees/edge-neighbours/full-width-rrs/keyed/mixed") == "1.13"
    assert (introduced_in(edge), introduced_in(f"{edge}/batches"), introduced_in(f"{edge}/mixed")) == \
        ("1.0", "1.9", "1.11")
    assert introduced_in("L1/trees/edge-neighbours/full-width-rrs/mixed") == "1.11"
