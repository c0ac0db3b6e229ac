"""L1-keyed-sampler: SPEC §5.2's keyed streams on §12's batches, for a device that also takes injected noise."""

from __future__ import annotations

import dataclasses

import pytest

from devices.registry import load
from specsim.conformance.checks.sampler.keyed import KEYED_CASES, keyed_sampler_checks, keyed_sampler_group
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.one_check import one_check, replay_command
from specsim.conformance.run.runner import Context
from specsim.mutants import seedtable
from specsim.mutants.zoo import MUTANTS

KEYED_MUTANTS = ("keyed-sampler-position-from-history", "keyed-sampler-coin-flat-row")


@pytest.fixture(scope="module")
def torch_device():
    return load("torch")


def test_the_torch_device_draws_the_reference_streams_on_every_case_and_order(torch_device):
    results = keyed_sampler_group(torch_device, Context(quick=True))
    assert len(results) == 2 * len(KEYED_CASES)
    assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]
    assert all(seedtable.group_of(r.name) == "L1-keyed-sampler" for r in results)


def test_a_device_without_the_keyed_streams_or_the_sampler_is_told_why(torch_device):
    [black] = keyed_sampler_group(BlackBox(torch_device), Context(quick=True))
    assert black.status == "not_supported" and "'seeded'" in black.detail
    plain = dataclasses.replace(torch_device.capabilities, sampler=(), sampler_orders=())
    [none] = keyed_sampler_group(type("Plain", (), {"capabilities": plain})(), Context(quick=True))
    assert none.status == "not_supported" and "§12" in none.detail


def test_an_undeclared_withdrawal_or_order_is_not_supported_with_its_cause(torch_device):
    caps = dataclasses.replace(torch_device.capabilities, withdrawn_drafts=False, sampler_orders=("canonical",))
    narrowed = type("Narrowed", (), {"capabilities": caps, "verify": torch_device.verify})()
    results = {r.name: r for r in keyed_sampler_checks(narrowed, Context(quick=True))}
    assert "withdrawn_drafts" in results["L1/keyed-sampler/canonical/withdrawn"].detail
    assert "'vllm'" in results["L1/keyed-sampler/vllm/all"].detail
    assert results["L1/keyed-sampler/canonical/all"].status == "pass"


@pytest.mark.parametrize("mutant_id", KEYED_MUTANTS)
def test_each_keyed_mutant_fails_the_group_and_passes_injected_noise(mutant_id):
    mutant = MUTANTS[mutant_id].make()
    failed = [r.name for r in keyed_sampler_group(mutant, Context(quick=True)) if r.status == "fail"]
    assert failed and all(n.startswith(MUTANTS[mutant_id].killed_by) for n in failed)
    from specsim.conformance.checks.sampler.group import random_checks
    assert {r.status for r in random_checks(mutant, Context(quick=True))} == {"pass"}  # its injected-noise twin


def test_a_keyed_sampler_check_replays_alone_and_belongs_to_spec_1_2(torch_device):
    name = "L1/keyed-sampler/vllm/far-drafts"
    assert one_check(torch_device, Context(quick=True), name).status == "pass"
    assert replay_command("torch", 0, name) == f"specsim replay --device torch --seed 0 {name}"
    assert introduced_in(name) == "1.2" and introduced_in("L1/keyed/full-mixed/V8/float32") == "1.0"
