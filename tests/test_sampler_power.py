"""SPEC §12's constructed edges, precision check, input rules and decisions: what each bug class of the
sampler meets, and the SPEC's decisions on placeholders, None entries, an order alone and stop ids."""

from dataclasses import replace

import numpy as np
import pytest

from devices.hpu_device import make_device as make_hpu
from devices.protocol import Capabilities, SamplerParams, UnsupportedCall, VerifyBatch
from devices.torch_device import CAPABILITIES, TorchDevice, make_cpu_device
from reference.verify import KINDS, verify
from specsim.conformance.run.runner import Context
from specsim.conformance.stats.plan import run_plan
from specsim.conformance.checks.sampler.group import edge_check, edge_law_check
from specsim.conformance.checks.sampler.precision import sampler_precision_check
from specsim.conformance.core.black_box import BlackBox
from specsim.mutants.zoo import MUTANTS, SAMPLER
from specsim.testing.bad_inputs import SAMPLER_BAD_INPUTS
from specsim.judge.compare import reference_step
from specsim.judge.reference_device import ReferenceDevice
from specsim.testing.sampler_edges import SAMPLER_EDGES
from specsim.testing.seeds import case_seed

NEW = [m for m in SAMPLER if m.id in {
    "sampler-vllm-computes-canonical", "sampler-bonus-row-ignores-min-tokens", "sampler-first-stop-id-only",
    "sampler-min-p-strict", "sampler-bias-after-temperature", "sampler-repetition-divides-negative",
    "sampler-frequency-not-accumulating", "sampler-allowed-ids-not-at-bonus"}]
"""The mutants each killed by a constructed edge of its class (the 16-bit ones: by the precision check)."""


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_each_edges_answer_is_the_references_at_every_seed(dtype):
    """The expected tokens hold wherever the seed puts the coins inside their intervals (20 suite seeds)."""
    for edge in SAMPLER_EDGES:
        for order in edge.orders:
            for seed in range(20):
                batch, noise = edge.batch(order, dtype, seed=case_seed(seed, "L1-sampler", edge.name, order))
                want = reference_step(batch, noise)
                emitted = [want.output_token_ids[i, : want.num_accepted[i] + 1].tolist() for i in range(batch.batch_size)]
                assert emitted == edge.expected_in(order), (edge.name, order, seed, noise.uniforms)


def test_the_coins_move_with_the_seed_inside_their_intervals():
    edge = next(e for e in SAMPLER_EDGES if e.name == "frequency-accumulates-over-drafts")
    coins = [edge.batch("canonical", seed=s)[1].uniforms for s in (1, 2)]
    assert not np.array_equal(*coins) and all(((0 <= c) & (c < 1)).all() for c in coins)
    assert np.array_equal(edge.batch("canonical", seed=1)[1].uniforms, coins[0])   # deterministic in the seed
    assert edge.batch("canonical")[1].uniforms.tolist() == [0.5] * 4                # no seed: the fixed coins


def test_the_order_edges_answer_differently_in_each_profile():
    for name in ("order-penalty-meets-bias", "order-min-p-meets-top-p"):
        edge = next(e for e in SAMPLER_EDGES if e.name == name)
        assert edge.expected_in("canonical") != edge.expected_in("vllm")


@pytest.mark.parametrize("mutant", NEW, ids=lambda m: m.id)
def test_each_new_mutant_fails_its_edge_with_injected_noise_and_in_black_box(mutant):
    """Quick sizes, seed 3: the named edge fails both ways (in black box by its exact support: a sequence of
    probability 0), and the correct device passes the same checks."""
    ctx = Context(seed=3, quick=True)
    edge_name, _, only = mutant.killed_by.removeprefix("L1-sampler/edge/").partition("/")
    edge = next(e for e in SAMPLER_EDGES if e.name == edge_name)
    order = only or edge.orders[0]
    name = f"L1-sampler/edge/{edge.name}/{order}"
    broken, correct = mutant.make(), make_cpu_device()
    assert edge_check(correct, edge, order, "float64", name, ctx).status == "pass"
    assert edge_check(broken, edge, order, "float64", name, ctx).status == "fail"
    plan = run_plan(BlackBox(correct).capabilities, ctx)
    assert edge_law_check(BlackBox(correct), edge, order, "float64", name, ctx, plan).status == "pass"
    result = edge_law_check(BlackBox(broken), edge, order, "float64", name, ctx, plan)
    assert result.status == "fail" and "which the exact law gives probability 0" in result.detail, result.detail


def test_the_precision_check_fails_16_bit_penalties_and_passes_the_device():
    """``L1-sampler/precision`` at half its --quick size (512 requests): coins 3–30 × 1e-4 from their ratios."""
    assert sampler_precision_check(make_cpu_device(), seed=5, requests=512).status == "pass"
    for mid in ("sampler-penalties-fp16", "sampler-penalties-bf16"):
        result = sampler_precision_check(MUTANTS[mid].make(), seed=5, requests=512)
        assert result.status == "fail" and result.extra["beyond"] > 0, (mid, result.detail)
    assert sampler_precision_check(BlackBox(make_cpu_device()), seed=5).status == "not_supported"
    assert sampler_precision_check(make_hpu(), seed=5).status == "not_supported"


def _external():
    from tests.fixtures.external_device import make_device
    return make_device()


@pytest.mark.parametrize("make", [make_cpu_device, ReferenceDevice, make_hpu, _external],
                         ids=["torch", "reference", "hpu", "external"])
def test_every_section_12_4_rule_is_refused_naming_its_argument(make):
    """Every rule is refused naming its argument; a device declaring none of §12 (written from the docs alone,
    ignoring ``batch.sampler``) is not_supported for them, saying why — never a failed input rule."""
    from specsim.conformance.checks.interface.input_rules import probe
    device = make()
    results = {bad.rule: probe(device, bad) for bad in SAMPLER_BAD_INPUTS}
    wrong = {rule: r.detail for rule, r in results.items() if r.status not in ("pass", "not_supported")}
    assert not wrong
    served = [r for r in results.values() if r.status == "pass"]
    expected = {"torch": len(SAMPLER_BAD_INPUTS), "reference": len(SAMPLER_BAD_INPUTS), "hpu": 26}
    if device.name in expected:
        assert len(served) == expected[device.name], [r.detail for r in results.values() if r.status != "pass"]
    else:
        assert all("does not declare sampler" in r.detail for r in results.values() if r.status == "not_supported")


# --- SPEC §12.5: the decisions on §12's rows -------------------------------------------------------------------

def _kinds(step, i=0):
    return {kind: margin for kind, _, margin in step.decisions.of(i)}


def test_a_min_p_tie_is_a_decision_of_margin_zero_and_is_kept():
    step = verify([0], np.zeros(0, np.int64), None, np.array([[0.0, 0.0, -1.0, -1.0]]), [0.5], [0], [1.0],
                  uniforms=np.zeros(0), exponentials=np.array([[1.0, 0.5, 0.001, 1.0]]), sampler={"min_p": np.array([1.0])})
    assert step.output_token_ids.tolist() == [[1]] and _kinds(step)["min_p"] == 0.0


def test_the_vllm_orders_top_p_cut_is_recorded_on_the_row_min_p_cut():
    logits = np.log([[0.4, 0.3, 0.2, 0.1]])
    args = ([0], np.zeros(0, np.int64), None, logits, [1.0], [0], [0.5])
    noise = dict(uniforms=np.zeros(0), exponentials=np.ones((1, 4)))
    vllm = _kinds(verify(*args, **noise, sampler={"min_p": np.array([0.6]), "order": "vllm"}))
    canonical = _kinds(verify(*args, **noise, sampler={"min_p": np.array([0.6]), "order": "canonical"}))
    # vllm: top-p on [4/7, 3/7]: c1 = 4/7 ≥ 0.5, margin 4/7 − 0.5; canonical: on the raw row, c2 − p = 0.2, p − c1 = 0.1
    assert vllm["top_p"] == pytest.approx(4 / 7 - 0.5) and canonical["top_p"] == pytest.approx(0.1)
    # min_p judges every token in the vllm order (nearest: 0.2 / 0.4 = 0.5 against 0.6), top-p's {0, 1} in canonical
    assert vllm["min_p"] == pytest.approx(1 / 6) and canonical["min_p"] == pytest.approx(0.25)


def test_a_greedy_argmax_of_computed_values_is_its_own_kind():
    logits = np.array([[1.0, 0.9999, 0.0], [1.0, 0.9999, 0.0]])
    args = ([0, 0], np.zeros(0, np.int64), None, logits, [0.0, 0.0], [0, 0], [1.0, 1.0])
    step = verify(*args, sampler={"logit_bias": np.array([[0.0, 0.0, 0.0], [0.0, 0.00005, 0.0]])},
                  uniforms=np.zeros(0), exponentials=np.ones((2, 3)))
    assert "greedy" in _kinds(step, 0) and "greedy_computed" in _kinds(step, 1)
    assert _kinds(step, 1)["greedy_computed"] == pytest.approx(0.00005, rel=1e-6)
    assert "greedy_computed" in KINDS


# --- SPEC §12.1, §12.2, §12.4: placeholders, None entries, an order alone, stop ids -----------------------------

def _one(sampler, ids, k=None, V=4, T=1.0):
    k = np.array([len(ids)] if k is None else k)
    return VerifyBatch(k, np.array(ids, np.int64), None, np.zeros((int(k.sum()) + len(k), V)), np.full(len(k), T),
                       np.zeros(len(k), np.int64), np.ones(len(k)), seeds=np.arange(len(k), dtype=np.uint64),
                       positions=np.zeros(len(k), np.int64), sampler=sampler)


@pytest.mark.parametrize("device", [make_cpu_device(), ReferenceDevice()], ids=["torch", "reference"])
def test_a_row_after_a_placeholder_is_never_an_empty_row_error(device):
    """Allowed ids = the stop ids, min_tokens 2: row 0 (length 0) would be empty; after the placeholder at 0,
    rows 1 and 2 are never read — so a batch whose only empty rows follow a placeholder is valid."""
    stop = dict(allowed_token_ids=(np.array([1, 2]),), stop_token_ids=(np.array([1]),), min_tokens=np.array([2]))
    with pytest.raises(ValueError, match="token_mask: row 0"):   # row 0 is read: an error
        device.verify(_one(SamplerParams(**stop, bad_words=((np.array([2]),),)), [0, 1]))
    mask = np.array([[1, 1, 1, 1], [0, 0, 1, 0], [1, 1, 1, 1]], bool)   # row 1: only 2, which the bad word bans
    got = device.verify(_one(SamplerParams(token_mask=mask, bad_words=((np.array([3, 2]),),)), [-1, 3]))
    assert got.num_accepted.tolist() == [0]


@pytest.mark.parametrize("device", [make_cpu_device(), ReferenceDevice()], ids=["torch", "reference"])
def test_none_entries_are_the_requests_defaults(device):
    rng = np.random.default_rng(4)
    full = SamplerParams(prompt_token_ids=(np.array([1]), np.zeros(0, np.int64)),
                         output_token_ids=(np.zeros(0, np.int64), np.array([2])),
                         allowed_token_ids=(np.array([0, 1, 2]), np.arange(4)),
                         bad_words=((np.array([3]),), ()), stop_token_ids=(np.array([2]), np.zeros(0, np.int64)),
                         min_tokens=np.array([1, 1]), repetition_penalty=np.array([1.5, 1.5]))
    nones = replace(full, prompt_token_ids=(np.array([1]), None), output_token_ids=(None, np.array([2])),
                    allowed_token_ids=(np.array([0, 1, 2]), None), bad_words=((np.array([3]),), None),
                    stop_token_ids=(np.array([2]), None))
    base = _one(full, [1, 2, 0], k=[2, 1])
    base = replace(base, target_logits=rng.normal(size=base.target_logits.shape), seeds=np.array([7, 8], np.uint64))
    assert np.array_equal(device.verify(base).output_token_ids, device.verify(replace(base, sampler=nones)).output_token_ids)


def test_an_order_alone_is_the_plain_step_and_need_not_be_declared():
    device = TorchDevice(capabilities=replace(CAPABILITIES, sampler_orders=("canonical",)))
    plain = _one(None, [1, 2])
    alone = replace(plain, sampler=SamplerParams(order="vllm"))
    assert np.array_equal(device.verify(alone).output_token_ids, device.verify(plain).output_token_ids)
    assert np.array_equal(ReferenceDevice().verify(alone).output_token_ids, device.verify(plain).output_token_ids)
    with pytest.raises(UnsupportedCall, match="sampler order vllm"):
        device.verify(replace(plain, sampler=SamplerParams(order="vllm", min_p=np.array([0.1]))))
    for d in (device, ReferenceDevice()):
        with pytest.raises(ValueError, match="order: must be"):
            d.verify(replace(plain, sampler=SamplerParams(order="hf")))


@pytest.mark.parametrize("device", [make_cpu_device(), ReferenceDevice()], ids=["torch", "reference"])
def test_stop_ids_without_min_tokens_are_inert(device):
    batch = _one(None, [1, 3, 3])
    batch = replace(batch, target_logits=np.random.default_rng(9).normal(size=batch.target_logits.shape))
    stops = replace(batch, sampler=SamplerParams(stop_token_ids=(np.array([3, 1]),)))
    zero = replace(batch, sampler=SamplerParams(stop_token_ids=(np.array([3, 1]),), min_tokens=np.array([0])))
    want = device.verify(batch).output_token_ids
    assert np.array_equal(device.verify(stops).output_token_ids, want)
    assert np.array_equal(device.verify(zero).output_token_ids, want)


def test_capabilities_without_the_order_report_the_order_edges_not_supported():
    from specsim.conformance.checks.sampler.group import edge_checks
    caps = Capabilities(True, "none", 64, sampler=("repetition_penalty", "logit_bias"), sampler_orders=("canonical",))
    device = TorchDevice(capabilities=replace(CAPABILITIES, sampler=caps.sampler, sampler_orders=caps.sampler_orders))
    status = {r.name: r.status for r in edge_checks(device, Context(quick=True))}
    assert status["L1-sampler/edge/order-penalty-meets-bias/canonical"] == "pass"
    assert status["L1-sampler/edge/order-penalty-meets-bias/vllm"] == "not_supported"


def test_a_batch_without_drafts_with_bans_is_served():
    """Every K = 0: the rows-read test has no draft column (a batch the engine sends at its first step)."""
    batch = _one(SamplerParams(allowed_token_ids=(np.array([2]), None), min_p=np.array([0.05, 0.05])), [], k=[0, 0])
    got = make_cpu_device().verify(batch)
    assert got.output_token_ids[0].tolist() == [2] and ReferenceDevice().verify(batch).output_token_ids[0].tolist() == [2]
