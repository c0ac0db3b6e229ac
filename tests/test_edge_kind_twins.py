"""SPEC 1.13: every §4 edge among fillers of one kind in each noise mode the device declares.

1.11 held each §4 edge among 16 fillers all of one kind (greedy, sampled, top-k, top-p) in the first noise mode alone,
where the ladder's sizes (1.9) and the mix of kinds (1.10) run in each mode. A device's own-noise path chosen by one
mix of requests — 16 greedy requests or more, over three quarters of the batch, keying its streams one position on
(the same law, other tokens) — passed every check: the random keyed batches, the keyed edges at batch sizes and
among 1.10's mix never hold such a batch. Here it fails the edges' keyed twins among greedy fillers.
"""

from __future__ import annotations


import pytest
from devices.registry import load
from specsim.conformance.checks.chain.exact import FILLER_KINDS, edge_batch_checks, edge_kind_checks, \
    edge_mixed_checks
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from tests.quick_runs import zoo_mutant
from tests.test_sampler_twins import SeededToo

QUICK = Context(quick=True)
FULL = Context(quick=False)
MUTANT = "keyed-position-when-mostly-greedy"
EDGE = "L1/edge/placeholder-full"


@pytest.fixture
def at_33(monkeypatch):
    """The fillers of one kind at 33 requests alone (257 holds the same batch-wide flags)."""
    from specsim.conformance.cases import declared
    monkeypatch.setattr(declared, "edge_kind_sizes", lambda ctx: (33,))


def test_the_correct_devices_pass_the_twins_of_every_kind(at_33):
    torch_device = load("torch")
    for kind in FILLER_KINDS:
        for name in (f"{EDGE}/keyed/mixed-{kind}", f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed-{kind}"):
            results = edge_kind_checks(torch_device, FULL, only=name)
            assert [r.status for r in results if r.name == name] == ["pass"], (name, [r.detail for r in results])
        seeded = edge_kind_checks(SeededToo(torch_device), FULL, only=f"{EDGE}/seeded/mixed-{kind}")
        assert [r.status for r in seeded] == ["pass"] and "exact support" in seeded[0].detail, seeded


def test_quick_runs_ask_the_twins_too_at_33_requests():
    names = [r.name for r in edge_kind_checks(load("torch"), QUICK, only=f"{EDGE}/keyed/mixed-greedy")]
    assert names == [f"{EDGE}/keyed/mixed-greedy", f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed-greedy"]
    (r,) = [r for r in edge_kind_checks(load("torch"), QUICK, only=f"{EDGE}/keyed/mixed-greedy") if r.name == names[0]]
    assert r.status == "pass" and r.extra["batches"] == [33]


def test_a_keyed_path_of_mostly_greedy_batches_passes_1_12s_checks_of_that_path_and_fails_the_keyed_twins(at_33):
    """The edge at batch sizes and among 1.10's mix in both modes, and among greedy fillers with injected noise, pass;
    its keyed twin among greedy fillers fails at 33 requests. (Every other 1.12 check passes too: ``specsim mutants``
    names the first killer.)"""
    mutant = zoo_mutant(MUTANT)
    before = edge_batch_checks(mutant, FULL, only=f"{EDGE}/keyed/batches") + \
        edge_mixed_checks(mutant, FULL, only=f"{EDGE}/keyed/mixed") + \
        edge_kind_checks(mutant, FULL, only=f"{EDGE}/mixed-greedy")
    assert len(before) >= 3 and {r.status for r in before} == {"pass"}, [(r.name, r.detail) for r in before]
    failed = [r for r in edge_kind_checks(mutant, FULL, only=f"{EDGE}/keyed/mixed-greedy") if r.status == "fail"]
    assert [r.name for r in failed] == [f"{EDGE}/keyed/mixed-greedy"] and "batch size 33" in failed[0].detail
    assert failed[0].name.startswith(MUTANTS[MUTANT].killed_by) and "keyed streams" in failed[0].detail
    assert {r.status for r in edge_kind_checks(mutant, FULL, only=f"{EDGE}/keyed/mixed-sampled")} == {"pass"}


def test_the_kind_twins_are_1_13s_and_the_first_modes_keep_1_11():
    for kind in FILLER_KINDS:
        assert introduced_in(f"{EDGE}/keyed/mixed-{kind}") == introduced_in(f"{EDGE}/seeded/mixed-{kind}") == "1.13"
        assert introduced_in(f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed-{kind}") == "1.13"
        assert introduced_in(f"{EDGE}/mixed-{kind}") == "1.11"
    assert introduced_in(f"{EDGE}/keyed/mixed") == "1.10" and introduced_in(f"{EDGE}/keyed/batches") == "1.9"
