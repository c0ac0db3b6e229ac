"""SPEC 1.14: every §11 edge and sibling pattern on the device's own draws, in each noise mode it declares.

1.13 held the §11 edges with injected noise and on the keyed streams; a device drawing unkeyed randomness of its own
(``rng = "seeded"``) had no edge held on that path, and a device taking injected noise had its sibling patterns held
on the injected path alone. Here the edges under unkeyed draws are held to their exact support (alone, at the ladder's
sizes, among filler trees), and each pattern gets a twin on the device's own draws: token for token on the keyed
streams, within its exact support under unkeyed draws.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from devices.protocol import UnsupportedCall
from devices.registry import load
from specsim.conformance.checks.trees import l1, l2, patterns, statistical
from specsim.conformance.checks.trees.l1 import EDGES, edge_batch, seeded_edge_checks
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from specsim.testing.trees import drafted_law, random_tree_batch, reference_tree_step, request_laws
from tests.fixtures.tree_vendor_devices import SeededTreeDevice
from tests.quick_runs import zoo_mutant

QUICK = Context(quick=True)
FULL = Context(quick=False)
MUTANT = "tree-own-draws-threshold-acc-zero-as-off"
EDGE = "L1/trees/edge/sglang-threshold-acc-zero"


class InjectedAndSeeded:
    """Takes injected noise (``inner``'s path) and draws unkeyed noise of its own (``own``'s path) otherwise."""

    def __init__(self, inner, own=None):
        self.inner, self.own = inner, SeededTreeDevice(own or inner)
        self.name = f"{inner.name} (injected and seeded)"
        self.capabilities = dataclasses.replace(inner.capabilities, injected_noise=True, rng="seeded")

    def verify_tree(self, batch, noise=None):
        return self.inner.verify_tree(batch, noise) if noise is not None else self.own.verify_tree(batch)

    def verify(self, batch, noise=None):
        if noise is None:
            raise UnsupportedCall("this test device's chains take injected noise only")
        return self.inner.verify(batch, noise)


def _at_33(monkeypatch):
    from specsim.conformance.cases import declared
    monkeypatch.setattr(declared, "edge_batch_sizes", lambda ctx: (1, 33))
    monkeypatch.setattr(declared, "edge_mixed_sizes", lambda ctx: (33,))


@pytest.mark.parametrize("case", sorted(l1.CASES))
def test_every_reference_answer_has_positive_probability_in_its_request_law(case):
    """``request_laws`` (the support the seeded checks hold) against the reference's step on the keyed streams:
    every request's answer lies in its law, and each law sums to 1."""
    spec = dataclasses.replace(l1.CASES[case], vocab_size=6)
    for seed in range(4):
        rng = np.random.default_rng(seed)
        batch = random_tree_batch(rng, spec)
        batch = dataclasses.replace(batch, seeds=rng.integers(0, 2**63, batch.batch_size, dtype=np.uint64),
                                    positions=rng.integers(0, 2**31, batch.batch_size))
        want, laws = reference_tree_step(batch, None), request_laws(batch)
        for i, law in enumerate(laws):
            answer = (tuple(want.output_token_ids[i, : int(want.num_accepted[i]) + 1].tolist()),
                      tuple(int(x) for x in want.accepted_nodes[i] if x >= 0))
            assert law.get(answer, 0) > 0, (case, seed, i, answer)
            assert abs(sum(law.values()) - 1) < 1e-9


def test_drafted_law_tells_duplicate_siblings_apart_by_node():
    half = [0.5, 0.5]
    tokens_only = drafted_law([-1, -1], [0, 0], [half] * 3, scheme="sglang")
    with_nodes = drafted_law([-1, -1], [0, 0], [half] * 3, scheme="sglang", nodes=True)
    assert len(tokens_only) == 2 and len(with_nodes) == 4
    assert {k[1] for k in with_nodes} == {(0,), (1,)}


@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_each_edges_placed_answer_is_in_its_support(edge):
    (law,) = request_laws(edge_batch(edge)[0])
    assert law.get((tuple(edge.expected), tuple(edge.nodes)), 0) > 0


def test_the_correct_seeded_devices_pass_every_edge_on_their_own_draws(monkeypatch):
    _at_33(monkeypatch)
    for device in (SeededTreeDevice(), BlackBox(load("torch")), InjectedAndSeeded(load("torch"))):
        results = seeded_edge_checks(device, QUICK)
        assert len(results) == 2 * len(EDGES) and {r.status for r in results} == {"pass"}, \
            [(r.name, r.detail) for r in results if r.status != "pass"]
    name = "L1/trees/edge/duplicate-siblings-rrs/seeded/mixed"
    among = seeded_edge_checks(SeededTreeDevice(), FULL, only=name)
    assert [r.name for r in among] == [name, name.replace("/edge/", "/edge-neighbours/")]
    assert {r.status for r in among} == {"pass"}, [r.detail for r in among]
    assert "within its exact support" in among[0].detail


def test_a_seeded_device_now_has_its_edges_held_and_a_keyed_one_none_of_these(monkeypatch):
    for part in ("pattern_checks", "_limit_cases", "size_checks"):   # the group's other parts: not these checks
        monkeypatch.setattr(l1, part, lambda device, ctx: [])
    results = l1.tree_l1_group(SeededTreeDevice(), QUICK)
    edges = {r.name for r in results if "/trees/edge" in r.name}
    assert edges == {f"L1/trees/edge/{e.name}/seeded{s}" for e in EDGES for s in ("", "/batches")}
    assert not [r for r in l1.tree_l1_group(load("torch"), QUICK) if r.name.endswith(("/seeded", "/seeded/batches"))]


def test_an_own_draws_path_reading_threshold_acc_zero_as_unset_passes_1_13_and_fails_the_seeded_edge(monkeypatch):
    """The zoo mutant behind a black box (no injected noise, unkeyed draws): every tree check 1.13 asks of such a
    device passes — patterns' laws, L2's seeded contracts, L3-trees — and the sglang threshold-acc-zero edge on its
    own draws fails, alone and at batch sizes."""
    _at_33(monkeypatch)
    device = BlackBox(zoo_mutant(MUTANT))
    before = (patterns.pattern_checks(device, QUICK) + l2.tree_l2_group(device, QUICK)
              + statistical.tree_statistical_group(device, QUICK))
    assert before and {r.status for r in before} <= {"pass", "not_supported"}, \
        [(r.name, r.detail) for r in before if r.status not in ("pass", "not_supported")]
    results = seeded_edge_checks(device, QUICK)
    failed = {r.name for r in results if r.status == "fail"}
    assert failed == {f"{EDGE}/seeded", f"{EDGE}/seeded/batches"}, failed
    assert {introduced_in(n) for n in failed} == {"1.14"}
    assert "probability 0" in next(r.detail for r in results if r.name == f"{EDGE}/seeded")
    assert MUTANTS[MUTANT].killed_by == f"{EDGE}/keyed"   # with injected and keyed noise, 1.13's keyed edge kills it


def test_every_pattern_gets_a_twin_on_the_devices_own_draws():
    torch = load("torch")
    keyed = patterns.pattern_twin_checks(torch, QUICK)
    assert len(keyed) == len(patterns.PATTERNS) and {r.status for r in keyed} == {"pass"}
    seeded = patterns.pattern_twin_checks(InjectedAndSeeded(torch), QUICK)
    assert len(seeded) == len(patterns.PATTERNS) and {r.status for r in seeded} == {"pass"}, \
        [(r.name, r.detail) for r in seeded if r.status != "pass"]
    # without injected noise the pattern's own check is its law on those draws: a seeded twin would repeat it
    assert patterns.pattern_twin_checks(SeededTreeDevice(), QUICK) == []
    assert all(r.name.endswith("/keyed") for r in keyed) and all(r.name.endswith("/seeded") for r in seeded)
    one = "L1/trees/pattern/rrs/duplicates/keyed"
    assert [r.name for r in patterns.pattern_twin_checks(torch, QUICK, only=one)] == [one]
    names = [r.name for r in l1.tree_l1_group(torch, QUICK)]
    assert names[-len(keyed):] == [r.name for r in keyed]   # last in the group: earlier checks name a bug first


def test_a_seeded_twin_sees_a_rule_lost_on_the_devices_own_draws_alone():
    """A device right with injected noise whose own draws restart the residual after a placeholder: the injected
    patterns pass, the seeded twins of the placeholder patterns fail."""
    device = InjectedAndSeeded(load("torch"), own=zoo_mutant("tree-rrs-placeholder-resets"))
    assert {r.status for r in patterns.pattern_checks(device, QUICK)} == {"pass"}
    results = patterns.pattern_twin_checks(device, QUICK)
    failed = {r.name for r in results if r.status == "fail"}
    assert failed and all(n.endswith("/seeded") and "/rrs/placeholder" in n for n in failed), failed
    assert {introduced_in(n) for n in failed} == {"1.14"}


def test_the_twins_are_1_14s_and_the_older_checks_keep_their_versions():
    edge = "L1/trees/edge/full-width-rrs"
    assert {introduced_in(f"{edge}/seeded{s}") for s in ("", "/batches", "/mixed")} == {"1.14"}
    assert introduced_in("L1/trees/edge-neighbours/full-width-rrs/seeded/mixed") == "1.14"
    assert {introduced_in(f"L1/trees/pattern/rrs/duplicates/{m}") for m in ("keyed", "seeded")} == {"1.14"}
    assert introduced_in("L1/trees/pattern/rrs/duplicates") == "1.0"
    assert introduced_in(f"{edge}/keyed/mixed") == "1.13" and introduced_in(f"{edge}/mixed") == "1.11"
