"""SPEC §4's withdrawn drafts: a -1 drawn from its draft row and withdrawn, told apart from padding.

The worked example's exact law (``Fraction``), the reference and the torch device on random batches
holding both kinds of placeholder, the capability both ways, the input rules, the edge's law for a
device without injected noise, and the field experiment that re-judges vLLM's placeholder-row-read.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction as F

import numpy as np
import pytest

from devices.protocol import PLACEHOLDER_TOKEN_ID, InvalidInput, UnsupportedCall
from reference import laws
from reference.verify import verify
from specsim.conformance.checks.interface.capabilities import ROWS, check_row
from specsim.conformance.checks.chain.exact import edge_group
from specsim.conformance.run.runner import Context
from specsim.testing.bad_inputs import BAD_INPUTS
from specsim.testing.batches import BatchSpec, random_batch, random_noise, select_requests
from specsim.judge.compare import compare, reference_step
from specsim.testing.edges import EDGES, make_batch
from specsim.testing.seeds import case_seed

torch_device = pytest.importorskip("devices.torch_device")

SUITE_SEED = 20260704
TARGET, DRAFT = [F(1, 2), F(1, 2), F(0)], [F(1, 2), F(0), F(1, 2)]
BONUS = [F(1), F(0), F(0)]


def _first_token_law(law: dict) -> list:
    return [sum((m for s, m in law.items() if s[0] == y), F(0)) for y in range(3)]


# --- the worked example of SPEC §4, exactly ----------------------------------------------------

def test_the_worked_example_is_lossless_when_read_as_withdrawn():
    law = laws.emitted_law([TARGET, BONUS], [DRAFT], "full", exact=True, withdrawn=[{2}])
    assert law == {(0, 0): F(1, 2), (1,): F(1, 2)}
    assert _first_token_law(law) == [F(1, 2), F(1, 2), F(0)] == TARGET
    assert laws.lossless_error(law, [TARGET, BONUS]) == 0


def test_the_worked_example_read_as_padding_has_the_biased_law():
    law = laws.emitted_law([TARGET, BONUS], [DRAFT], "full", exact=True, withdrawn=[{2}], withdrawn_as_padding=True)
    assert law == {(0, 0): F(1, 2), (0,): F(1, 4), (1,): F(1, 4)}
    assert _first_token_law(law) == [F(3, 4), F(1, 4), F(0)]
    assert laws.lossless_error(law, [TARGET, BONUS]) == F(1, 4)


def test_withdrawing_a_token_the_target_allows_loses_losslessness():
    """Lossless exactly when only target-probability-0 drafts are withdrawn (SPEC §4)."""
    law = laws.emitted_law([[F(1, 2), F(1, 2)], [F(1), F(0)]], [[F(1, 2), F(1, 2)]], "full", exact=True,
                           withdrawn=[{1}])
    assert laws.lossless_error(law, [[F(1, 2), F(1, 2)], [F(1), F(0)]]) > 0


def test_a_greedy_withdrawn_draft_emits_the_argmax_and_a_point_one_is_refused():
    law = laws.emitted_law([TARGET, BONUS], [DRAFT], "greedy", exact=True, withdrawn=[{2}])
    assert law == {(0, 0): F(1, 2), (0,): F(1, 2)}   # argmax of [1/2, 1/2, 0] is 0 (smallest id)
    with pytest.raises(ValueError, match="withdrawn"):
        laws.emitted_law([TARGET, BONUS], [DRAFT], "point", exact=True, withdrawn=[{2}])


def test_the_reference_step_emits_the_withdrawn_residual_and_padding_emits_from_t():
    logits = np.array([[0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]])
    args = (np.array([1]), np.array([PLACEHOLDER_TOKEN_ID]), np.array([[0.5, 0.0, 0.5]]), logits, np.ones(1),
            np.zeros(1, np.int64), np.ones(1))
    noise = dict(uniforms=np.array([0.0]), exponentials=np.array([[0.01, 1.0, 1.0]]))
    withdrawn = verify(*args, **noise, withdrawn=np.array([True]))
    padding = verify(*args, **noise)
    assert withdrawn.output_token_ids.tolist() == [[1, -1]] and padding.output_token_ids.tolist() == [[0, -1]]


def test_the_edge_answers_the_worked_example_for_the_reference():
    edge = next(e for e in EDGES if e.name == "withdrawn-draft")
    batch, noise = make_batch(edge.requests)
    want = reference_step(batch, noise)
    assert [want.output_token_ids[i, : want.num_accepted[i] + 1].tolist() for i in range(2)] == edge.expected
    padding = reference_step(dataclasses.replace(batch, withdrawn=None), noise)   # E favours token 0
    assert [padding.output_token_ids[i, : padding.num_accepted[i] + 1].tolist() for i in range(2)] == [[0], [0, 0]]


# --- random batches: the reference and the torch device ------------------------------------------

def _batch(seed_name: str, **spec):
    rng = np.random.default_rng(case_seed(SUITE_SEED, seed_name))
    batch = random_batch(rng, BatchSpec(batch=12, vocab_size=24, **spec))
    return batch, random_noise(rng, batch)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("injected", [True, False])
def test_the_torch_device_matches_the_reference_with_withdrawn_drafts_and_padding(dtype, injected):
    device, differ = torch_device.make_cpu_device(), 0
    for n in range(6):
        batch, noise = _batch(f"torch-{dtype}-{injected}-{n}", dtype=dtype, withdrawn_fraction=0.3,
                              placeholder_fraction=0.15)
        noise = noise if injected else None
        want = reference_step(batch, noise)
        cmp = compare(batch, device.verify(batch, noise), want)
        assert cmp.ok, cmp.summary()
        as_padding = reference_step(dataclasses.replace(batch, withdrawn=None), noise)
        differ += int((as_padding.output_token_ids != want.output_token_ids).any(axis=1).sum())
    assert differ > 0, "no request's tokens depend on the withdrawn rule: the batches test nothing"


def test_random_batches_withdraw_drawn_drafts_and_mask_them_in_their_target_rows():
    batch, _ = _batch("masking", withdrawn_fraction=0.5, placeholder_fraction=0.0)
    gone = np.flatnonzero(batch.withdrawn)
    assert len(gone) and (batch.draft_token_ids[gone] == PLACEHOLDER_TOKEN_ID).all()
    assert ((batch.draft_token_ids == PLACEHOLDER_TOKEN_ID) == batch.withdrawn).all()   # no padding in this spec
    plain, _ = _batch("masking", withdrawn_fraction=0.0, placeholder_fraction=0.0)
    assert plain.withdrawn is None
    kept = np.setdiff1d(np.arange(len(plain.draft_token_ids)), gone)
    assert (plain.draft_token_ids[kept] == batch.draft_token_ids[kept]).all()   # the other streams are untouched
    np.testing.assert_array_equal(plain.draft_probs, batch.draft_probs)
    with pytest.raises(ValueError, match="withdrawn_fraction"):
        random_batch(np.random.default_rng(0), BatchSpec(draft_probs=False, withdrawn_fraction=0.1))


def test_select_requests_and_verify_repeated_carry_the_mask():
    batch, noise = _batch("select", withdrawn_fraction=0.4)
    sub, sub_noise = select_requests(batch, [3, 0, 7], noise)
    cu = batch.request_offsets()
    assert sub.withdrawn.tolist() == np.concatenate([batch.withdrawn[cu[i]:cu[i + 1]] for i in (3, 0, 7)]).tolist()
    device = torch_device.make_cpu_device()
    template = select_requests(batch, [int(np.flatnonzero(batch.num_draft_tokens)[0])])[0]
    tiled = dataclasses.replace(template, num_draft_tokens=np.tile(template.num_draft_tokens, 3),
                                draft_token_ids=np.tile(template.draft_token_ids, 3),
                                draft_probs=np.tile(template.draft_probs, (3, 1)),
                                target_logits=np.tile(template.target_logits, (3, 1)),
                                temperature=np.tile(template.temperature, 3), top_k=np.tile(template.top_k, 3),
                                top_p=np.tile(template.top_p, 3), seeds=np.arange(1, 4, dtype=np.uint64),
                                positions=np.arange(3), withdrawn=np.tile(template.withdrawn, 3))
    got = device.verify_repeated(template, 3, tiled.draft_token_ids, tiled.seeds, tiled.positions)
    want = device.verify(tiled)
    assert got.output_token_ids.tolist() == want.output_token_ids.tolist()


# --- the capability, both ways -----------------------------------------------------------------------

ROW = next(r for r in ROWS if r.name == "withdrawn_drafts")


class Declaring:
    """The torch device behind another declaration (it serves what it serves)."""

    def __init__(self, **changes):
        self.inner = torch_device.make_cpu_device()
        self.name, self.capabilities = "declaring", dataclasses.replace(self.inner.capabilities, **changes)

    def verify(self, batch, noise=None):
        return self.inner.verify(batch, noise)


def test_a_declaring_device_is_served_and_an_undeclaring_one_refuses():
    assert check_row(torch_device.make_cpu_device(), ROW).status == "pass"
    undeclared = torch_device.TorchDevice(capabilities=dataclasses.replace(torch_device.CAPABILITIES,
                                                                           withdrawn_drafts=False))
    result = check_row(undeclared, ROW)
    assert result.status == "pass" and "UnsupportedCall: withdrawn_drafts" in result.detail
    call = ROW.call(undeclared.capabilities)
    with pytest.raises(UnsupportedCall, match="withdrawn_drafts"):
        undeclared.verify(call.batch, call.noise)


def test_a_device_answering_withdrawn_drafts_it_does_not_declare_fails_the_row():
    result = check_row(Declaring(withdrawn_drafts=False), ROW)
    assert result.status == "fail" and "answered the call instead of raising UnsupportedCall" in result.detail


def test_an_all_false_mask_needs_no_capability():
    batch, noise = _batch("all-false")
    batch = dataclasses.replace(batch, withdrawn=np.zeros(len(batch.draft_token_ids), bool))
    undeclared = torch_device.TorchDevice(capabilities=dataclasses.replace(torch_device.CAPABILITIES,
                                                                           withdrawn_drafts=False))
    assert compare(batch, undeclared.verify(batch, noise), reference_step(batch, noise)).ok


# --- input rules -------------------------------------------------------------------------------------------

WITHDRAWN_BAD = [b for b in BAD_INPUTS if "withdrawn_drafts" in b.needs]


def test_the_withdrawn_block_covers_each_rule():
    assert {b.argument for b in WITHDRAWN_BAD} == {"withdrawn", "draft_probs"} and len(WITHDRAWN_BAD) >= 5


@pytest.mark.parametrize("bad", WITHDRAWN_BAD, ids=lambda b: b.rule.replace(" ", "-"))
def test_the_reference_and_the_devices_refuse_bad_withdrawn_input_by_name(bad):
    """Input rules come before capabilities (SPEC §6): the hpu device, which declares no withdrawn drafts,
    refuses bad input as such too."""
    from devices.hpu_device import make_device
    batch, noise = bad.make()
    with pytest.raises(ValueError, match=f"^{bad.argument}:"):   # reference.validate.InvalidInput
        reference_step(batch, noise)
    for device in (torch_device.make_cpu_device(), make_device()):
        with pytest.raises(InvalidInput, match=f"^{bad.argument}:"):
            device.verify(batch, noise)


# --- the edge without injected noise -------------------------------------------------------------------------

class WithdrawnAsPadding:
    """A seeded device that drops the mask: every -1 is padding (the bias of SPEC §4's worked example)."""

    def __init__(self):
        from tests.fixtures.seeded_draft_device import SeededDraftDevice
        self.inner = SeededDraftDevice()
        self.name, self.capabilities = "withdrawn-as-padding", self.inner.capabilities

    def verify(self, batch, noise=None):
        return self.inner.verify(dataclasses.replace(batch, withdrawn=None), noise)


def test_the_edge_law_catches_a_withdrawn_draft_read_as_padding():
    results = {r.name: r for r in edge_group(WithdrawnAsPadding(), Context(quick=True), only="L1/edge/withdrawn-draft")}
    bad = results["L1/edge/withdrawn-draft"]
    assert bad.status == "fail" and "probability 0" in bad.detail, bad.detail


# --- the field experiment: a device that reads every -1 as withdrawn ---------------------------------------------

class EveryPlaceholderWithdrawn:
    """vLLM's rule on the torch device: every -1 reads its draft row, ``max(t − d, 0)`` (a zero row gives
    ``t``, padding's answer, so zero rows are left as padding)."""

    name = "every-placeholder-withdrawn"

    def __init__(self):
        self.inner = torch_device.make_cpu_device()
        self.capabilities = self.inner.capabilities

    def verify(self, batch, noise=None):
        if batch.draft_probs is not None:
            rows = np.abs(np.asarray(batch.draft_probs, np.float64).sum(axis=1) - 1) < 1e-3
            batch = dataclasses.replace(batch, withdrawn=(batch.draft_token_ids == PLACEHOLDER_TOKEN_ID) & rows)
        return self.inner.verify(batch, noise)


def test_the_field_experiment_confirms_the_withdrawn_reading_and_only_it():
    from specsim.field.table import confirm_placeholder_row_read
    from specsim.conformance.checks.chain.exact import run_cases
    device = EveryPlaceholderWithdrawn()
    failing = [r.name for r in run_cases(device, Context(quick=True), "L1/injected", injected=True)
               if r.status == "fail"]
    assert failing, "no case holds a padding placeholder whose row changes the answer"
    said = confirm_placeholder_row_read(device, failing[0], quick=True)
    assert said.startswith("confirmed") and "withdrawn" in said, said
    honest = confirm_placeholder_row_read(torch_device.make_cpu_device(), failing[0], quick=True)
    assert honest.startswith("NOT confirmed"), honest   # nothing to confirm: the torch device passes the case
