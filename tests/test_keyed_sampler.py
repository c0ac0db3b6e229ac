"""L1-keyed-sampler: SPEC §5.2's keyed streams on §12's batches (a device taking injected noise too), and §5.2's
contract on them for any device drawing its own randomness (a black box too)."""

from __future__ import annotations

import dataclasses

import pytest

from devices.registry import load
from specsim.conformance.checks.sampler.keyed import (CONTRACT_CHECKS, KEYED_CASES, contract_checks,
                                                      keyed_sampler_checks, keyed_sampler_group, select_sampled)
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
    assert len(results) == 2 * (len(KEYED_CASES) + len(CONTRACT_CHECKS))
    assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]
    assert all(seedtable.group_of(r.name) == "L1-keyed-sampler" for r in results)


def test_a_black_box_is_held_to_the_contract_and_told_why_it_is_not_replayed(torch_device):
    black, *contracts = keyed_sampler_group(BlackBox(torch_device), Context(quick=True))
    assert black.status == "not_supported" and "'seeded'" in black.detail
    assert len(contracts) == 2 * len(CONTRACT_CHECKS) and {r.status for r in contracts} == {"pass"}
    assert all(seedtable.group_of(r.name) == "L1-keyed-sampler" for r in [black] + contracts)


def test_a_device_without_the_sampler_or_its_own_randomness_is_told_why(torch_device):
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


@pytest.mark.parametrize("mutant_id, contract", list(zip(KEYED_MUTANTS, ("position-sensitivity", "batch-invariance"))))
def test_each_keyed_mutant_fails_the_group_keyed_and_in_black_box_and_passes_injected_noise(mutant_id, contract):
    mutant = MUTANTS[mutant_id].make()
    failed = [r.name for r in keyed_sampler_checks(mutant, Context(quick=True)) if r.status == "fail"]
    assert failed and failed[0].startswith(MUTANTS[mutant_id].killed_by)
    black = [r.name for r in contract_checks(BlackBox(mutant), Context(quick=True)) if r.status == "fail"]
    assert black and all(n.endswith("/" + contract) for n in black)
    from specsim.conformance.checks.sampler.group import random_checks
    [twin] = random_checks(mutant, Context(quick=True), only="L1-sampler/canonical/all")   # given injected noise
    assert twin.status == "pass"


def test_a_sub_batch_carries_its_requests_sampler_rows(torch_device):
    from specsim.conformance.checks.sampler.keyed import contract_batch
    batch = contract_batch("canonical", Context(), torch_device.capabilities)
    whole = torch_device.verify(batch)
    alone = torch_device.verify(select_sampled(batch, [5]))
    k = int(batch.num_draft_tokens[5])
    assert alone.output_token_ids[0, : k + 1].tolist() == whole.output_token_ids[5, : k + 1].tolist()
    assert select_sampled(batch, [5]).sampler.given() == batch.sampler.given()


def test_a_keyed_sampler_check_replays_alone_and_belongs_to_spec_1_2(torch_device):
    name = "L1/keyed-sampler/vllm/far-drafts"
    assert one_check(torch_device, Context(quick=True), name).status == "pass"
    assert replay_command("torch", 0, name) == f"specsim replay --device torch --seed 0 {name}"
    assert introduced_in(name) == "1.2" and introduced_in("L1/keyed/full-mixed/V8/float32") == "1.0"
