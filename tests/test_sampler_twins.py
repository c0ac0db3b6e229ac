"""SPEC 1.12: every §12 edge at batch sizes and among fillers in each noise mode the device declares.

1.9 and 1.11 held §12's edges at the ladder's sizes and among fillers in the first mode alone (injected noise for a
device that takes it). A device drawing its own randomness too met §12 on that path only in random batches of at most
32 requests and in statistics: a keyed path of large §12 batches keying its streams one position on (the same law,
other tokens) passed every check. Here it passes every 1.11 check and fails the edges' keyed twins.
"""

from __future__ import annotations

import dataclasses
from devices.registry import load
from specsim.conformance.checks.sampler.group import edge_batch_checks
from specsim.conformance.checks.sampler.keyed import keyed_sampler_checks
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.one_check import one_check, replayable
from specsim.conformance.run.runner import Context
from specsim.mutants.zoo import MUTANTS
from tests.quick_runs import zoo_mutant

QUICK = Context(quick=True)
FULL = Context(quick=False)
EDGE = "L1-sampler/edge/allowed-ids-at-the-bonus-row/canonical"
MUTANT = "sampler-keyed-position-past-32"


class SeededToo:
    """The torch device declaring injected noise and unkeyed draws of its own (``rng = "seeded"``, as vLLM's V1
    sampler does): its own draws are the keyed streams', which an unkeyed device's may be."""

    def __init__(self, device):
        self.inner, self.name = device, f"{device.name} (seeded too)"
        self.capabilities = dataclasses.replace(device.capabilities, rng="seeded")

    def verify(self, batch, noise=None):
        return self.inner.verify(batch, noise)


def _at_33(monkeypatch):
    """Full runs' checks (the twins among fillers are not asked with --quick) at 33 requests alone."""
    from specsim.conformance.cases import declared
    monkeypatch.setattr(declared, "sampler_mixed_sizes", lambda ctx: (33,))
    monkeypatch.setattr(declared, "edge_batch_sizes", lambda ctx: (1, 32, 33))


def test_a_keyed_path_wrong_past_32_requests_passes_the_1_11_checks_of_its_path_and_fails_the_keyed_twins(
        monkeypatch):
    """Every L1-keyed-sampler batch and the edge in the first mode pass; the keyed twin fails at 33 requests. (The
    mutant passes every other check of 1.11 too: ``specsim mutants`` names its first killer.)"""
    _at_33(monkeypatch)
    mutant = zoo_mutant(MUTANT)
    before = keyed_sampler_checks(mutant, QUICK) + edge_batch_checks(mutant, FULL, only=f"{EDGE}/batches") + \
        edge_batch_checks(mutant, FULL, kind="mixed", only=f"{EDGE}/mixed")
    assert {r.status for r in before} == {"pass"}, [(r.name, r.detail) for r in before if r.status != "pass"]
    for name in (f"{EDGE}/keyed/batches", f"{EDGE}/keyed/mixed"):
        kind = name.rsplit("/", 1)[1]
        failed = [r for r in edge_batch_checks(mutant, FULL, kind=kind, only=name) if r.status == "fail"]
        assert failed and failed[0].name == name and "batch size 33" in failed[0].detail, name
        assert "keyed streams" in failed[0].detail and name.startswith(MUTANTS[MUTANT].killed_by)


def test_the_correct_device_passes_the_keyed_twins_and_the_fillers_rows_on_the_keyed_streams(monkeypatch):
    _at_33(monkeypatch)
    torch_device = load("torch")
    for name in (f"{EDGE}/keyed/batches", f"{EDGE}/keyed/mixed",
                 f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed"):
        r = one_check(torch_device, FULL, name)
        assert r.status == "pass", (name, r.detail)
        assert replayable(name)


def test_a_device_drawing_unkeyed_noise_too_is_held_to_each_copys_support_in_that_mode(monkeypatch):
    _at_33(monkeypatch)
    device = SeededToo(load("torch"))
    for name in (f"{EDGE}/seeded/batches", f"{EDGE}/seeded/mixed"):
        r = one_check(device, FULL, name)
        assert r.status == "pass", (name, r.detail)
    assert not edge_batch_checks(device, FULL, only=f"{EDGE}/keyed/batches")   # a seeded device has no keyed twin


def test_quick_runs_ask_the_twins_at_batch_sizes_and_not_among_fillers(monkeypatch):
    _at_33(monkeypatch)
    device = load("torch")
    assert [r.name for r in edge_batch_checks(device, QUICK, only=f"{EDGE}/keyed/batches")] == [f"{EDGE}/keyed/batches"]
    assert edge_batch_checks(device, QUICK, kind="mixed", only=f"{EDGE}/keyed/mixed") == []
    assert [r.name for r in edge_batch_checks(device, FULL, kind="mixed", only=f"{EDGE}/keyed/mixed")] == [
        f"{EDGE}/keyed/mixed", f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed"]


def test_the_twins_are_1_12s_and_the_first_modes_checks_keep_their_versions():
    assert introduced_in(f"{EDGE}/keyed/batches") == introduced_in(f"{EDGE}/seeded/batches") == "1.12"
    assert introduced_in(f"{EDGE}/keyed/mixed") == introduced_in(f"{EDGE}/seeded/mixed") == "1.12"
    assert introduced_in(f"{EDGE.replace('/edge/', '/edge-neighbours/')}/keyed/mixed") == "1.12"
    assert introduced_in(f"{EDGE}/batches") == introduced_in(f"{EDGE}/float32/batches") == "1.9"
    assert introduced_in(f"{EDGE}/mixed") == introduced_in(f"{EDGE.replace('/edge/', '/edge-neighbours/')}/mixed") \
        == "1.11"
