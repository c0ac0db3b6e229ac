"""The torch device's SPEC §12 path and the L1-sampler group."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from devices import torch_sampling as ts
from devices.hpu_device import make_device as make_hpu
from devices.protocol import SAMPLER_ORDERS, SAMPLER_PARAMETERS
from devices.torch_device import CAPABILITIES, TorchDevice, make_cpu_device, tiled_sampler
from reference.sampler import process_logits
from specsim.conformance.run.runner import Context
from specsim.conformance.checks.sampler.group import CASES, random_case, sampler_group
from specsim.judge.reference_device import ReferenceDevice
from tests.quick_runs import quick_group


@pytest.mark.parametrize("order", SAMPLER_ORDERS)
def test_the_torch_rows_are_the_references(order):
    for seed in range(5):
        batch, _ = random_case("all", order, Context(), seed)
        want = process_logits(batch.target_logits, batch.num_draft_tokens, batch.draft_token_ids,
                              **batch.sampler.as_kwargs())
        k = torch.tensor(batch.num_draft_tokens)
        got = ts.process_logits(torch.tensor(batch.target_logits), ts.sampler_tensors(batch.sampler, batch.batch_size, batch.vocab_size, "cpu"),
                                torch.tensor(batch.draft_token_ids), k, batch.max_k).numpy()
        read = _rows_read(batch)   # rows past a placeholder are never read (SPEC §4): their history is free
        got, want = got[read], want[read]
        assert (np.isneginf(got) == np.isneginf(want)).all(), f"bans differ (order {order}, seed {seed})"
        assert np.allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-12, atol=1e-12)


def _rows_read(batch) -> np.ndarray:
    """``[rows]`` bool: the target rows a step may read (up to each request's first placeholder)."""
    read, start = [], 0
    for k in batch.num_draft_tokens:
        drafts = list(batch.draft_token_ids[start: start + k]) + [0]
        first = drafts.index(-1) if -1 in drafts else k
        read += [j <= first for j in range(k + 1)]
        start += k
    return np.array(read)


@pytest.mark.whole_run
def test_every_l1_sampler_check_passes_on_the_reference_device_and_counts_as_declared():
    from specsim.testing.sampler_edges import SAMPLER_EDGES
    from specsim.conformance.cases.edges import dtype_twins, own_randomness_twin
    from specsim.conformance.checks.sampler.group import QUICK_SIZES, SIZES
    # quick sizes, the reference device (the reference itself): the torch device passes the same quick group in
    # property_tests/test_conformance_groups.py and the whole group at full size in the README's first command
    # (tests/test_first_run.py reads its verdict)
    device, ctx = ReferenceDevice(), Context(quick=True)
    results = sampler_group(device, ctx)
    at_size = len(QUICK_SIZES if ctx.quick else SIZES) * sum(len(edge.orders) for edge in SAMPLER_EDGES)   # at size V
    in_dtypes = sum(len(edge.orders) * len(dtype_twins(edge, device.capabilities)) for edge in SAMPLER_EDGES)
    batches = sum(len(edge.orders) for edge in SAMPLER_EDGES) + in_dtypes   # SPEC 1.9: each edge at the batch sizes
    if own_randomness_twin(device.capabilities):   # SPEC 1.12: again under the device's own randomness (1.14: in
        batches += sum(len(edge.orders) for edge in SAMPLER_EDGES)   # every dtype too, but not with --quick)
    mixed = 2 * sum(len(edge.orders) for edge in SAMPLER_EDGES)   # SPEC 1.11, quick: the edge and its fillers' rows
    assert len(results) == len(SAMPLER_ORDERS) * (len(CASES) + len(SAMPLER_EDGES)) + 1 + at_size + in_dtypes + \
        batches + mixed
    assert [r for r in results if r.status != "pass"] == []


def test_a_device_lacking_a_parameter_or_an_order_is_not_supported_for_exactly_those_checks():
    device = TorchDevice(capabilities=replace(CAPABILITIES, sampler=("min_p",), sampler_orders=("canonical",)))
    status = {r.name: (r.status, r.detail) for r in sampler_group(device, Context(quick=True))}
    assert status["L1-sampler/canonical/min_p"][0] == "pass"
    assert status["L1-sampler/edge/min-p-after-temperature/canonical"][0] == "pass"
    assert status["L1-sampler/canonical/bad_words"] == ("not_supported", "device does not declare sampler bad_words")
    assert status["L1-sampler/vllm/min_p"] == ("not_supported", "device does not declare sampler order 'vllm'")
    assert status["L1-sampler/canonical/declared"][0] == "pass"     # the declared subset together: min_p alone
    assert sorted(name for name, (s, _) in status.items() if s == "pass") == sorted([
        "L1-sampler/canonical/declared", "L1-sampler/canonical/min_p", "L1-sampler/edge/min-p-after-temperature/canonical",
        "L1-sampler/edge/min-p-after-temperature/canonical/V151936", "L1-sampler/edge/min-p-threshold-ties/canonical",
        "L1-sampler/edge/min-p-threshold-ties/canonical/V151936", "L1-sampler/edge/order-min-p-meets-top-p/canonical",
        "L1-sampler/edge/order-min-p-meets-top-p/canonical/V151936", "L1-sampler/precision",
        # SPEC 1.5: the edge whose logits every dtype holds, in each other declared dtype
        *(f"L1-sampler/edge/min-p-threshold-ties/canonical/{d}" for d in ("float16", "bfloat16", "float32")),
        # SPEC 1.6: the min_p edges of logarithm logits restated on dyadic ones, with their twins
        *(f"L1-sampler/edge/{e}-dyadic/canonical{d}" for e in ("min-p-after-temperature", "order-min-p-meets-top-p")
          for d in ("", "/V151936", "/float16", "/bfloat16", "/float32")),
        # SPEC 1.9: each edge it can be asked at the batch sizes, and those with dtype twins in each of their dtypes
        *(f"L1-sampler/edge/{e}/canonical/batches" for e in ("min-p-after-temperature", "min-p-threshold-ties",
                                                              "order-min-p-meets-top-p", "min-p-after-temperature-dyadic",
                                                              "order-min-p-meets-top-p-dyadic")),
        *(f"L1-sampler/edge/{e}/canonical/{d}/batches" for e in ("min-p-threshold-ties", "min-p-after-temperature-dyadic",
                                                                  "order-min-p-meets-top-p-dyadic")
          for d in ("float16", "bfloat16", "float32")),
        # SPEC 1.12: each at the batch sizes on the keyed streams too (quick: not among fillers)
        *(f"L1-sampler/edge/{e}/canonical/keyed/batches" for e in ("min-p-after-temperature", "min-p-threshold-ties",
                                                                    "order-min-p-meets-top-p",
                                                                    "min-p-after-temperature-dyadic",
                                                                    "order-min-p-meets-top-p-dyadic")),
        # SPEC 1.11 (quick: the edges' dtype alone): each edge among fillers, and the fillers' rows
        *(f"L1-sampler/{area}/{e}/canonical/mixed" for area in ("edge", "edge-neighbours")
          for e in ("min-p-after-temperature", "min-p-threshold-ties", "order-min-p-meets-top-p",
                    "min-p-after-temperature-dyadic", "order-min-p-meets-top-p-dyadic"))])
    assert {s for s, _ in status.values()} == {"pass", "not_supported"}


def test_devices_without_the_parameters_report_not_supported():
    results = sampler_group(make_hpu(), Context(quick=True))
    assert {r.status for r in results} == {"not_supported"}


def test_repeated_calls_carry_the_sampler():
    device = make_cpu_device()
    template, _ = random_case("all", "vllm", Context(quick=True), 3)
    template = replace(template, seeds=np.arange(4, dtype=np.uint64), positions=np.zeros(4, np.int64))
    repeats, rng = 3, np.random.default_rng(0)
    ids = np.tile(template.draft_token_ids, repeats)
    seeds, positions = rng.integers(0, 2**63, 4 * repeats).astype(np.uint64), np.zeros(4 * repeats, np.int64)
    tiled = replace(template, num_draft_tokens=np.tile(template.num_draft_tokens, repeats), draft_token_ids=ids,
                    draft_probs=np.tile(template.draft_probs, (repeats, 1)),
                    target_logits=np.tile(template.target_logits, (repeats, 1)),
                    temperature=np.tile(template.temperature, repeats), top_k=np.tile(template.top_k, repeats),
                    top_p=np.tile(template.top_p, repeats), seeds=seeds, positions=positions,
                    sampler=tiled_sampler(template.sampler, repeats))
    got = device.verify_repeated(template, repeats, ids, seeds, positions)
    want = device.verify(tiled)
    assert (got.output_token_ids == want.output_token_ids).all()


def test_without_injected_noise_the_edges_are_held_to_their_exact_support():
    from specsim.conformance.core.black_box import BlackBox
    from specsim.mutants.zoo import MUTANTS
    results = quick_group("L1-sampler", black_box=True)
    at_size = [r for r in results if r.name.rsplit("/", 1)[-1].startswith("V")]   # the edges re-stated at size
    edges = [r for r in results if "/edge/" in r.name and r not in at_size]
    assert edges and {r.status for r in edges} == {"pass"} and "exact support" in edges[0].detail
    assert {r.status for r in results if "/edge/" not in r.name} == {"not_supported"}
    assert at_size and all(r.status == "not_supported" and "injected noise" in r.detail for r in at_size)
    broken = sampler_group(BlackBox(MUTANTS["sampler-bad-words-pre-step"].make()), Context(quick=True))
    assert {r.name for r in broken if r.status == "fail"} == {   # both bad-word edges see the pre-step history
        f"L1-sampler/edge/{edge}/{order}{dtype}{at_sizes}" for edge in ("bad-word-completed-by-drafts",
                                                                         "bad-word-at-every-split")
        for order in ("canonical", "vllm") for dtype in ("", "/float16", "/bfloat16", "/float32")
        for at_sizes in ("", "/batches")} | {   # SPEC 1.11, quick: among fillers in the edges' dtype alone
        f"L1-sampler/edge/{edge}/{order}/mixed" for edge in ("bad-word-completed-by-drafts", "bad-word-at-every-split")
        for order in ("canonical", "vllm")}


def test_without_injected_noise_an_edges_law_is_tested_inside_the_runs_statistical_plan():
    """Mass moved inside the support (vLLM 0.33.0's bonus row banning the stop tokens by the pre-step length,
    docs/bugs.md #54) is seen by the edge's goodness-of-fit test; the correct device passes it, and each
    request's test is one of the run's statistical plan, at its α there."""
    from specsim.conformance.stats.plan import run_plan
    from specsim.conformance.core.black_box import BlackBox
    from specsim.mutants.zoo import MUTANTS
    ctx = Context(quick=True)
    device = BlackBox(make_cpu_device())
    plan = run_plan(device.capabilities, ctx)
    planned = plan.of_group("L1-sampler")
    assert planned and math.fsum(t.alpha_share for t in plan.tests) == ctx.alpha_family
    tested = [r for r in quick_group("L1-sampler", black_box=True) if "/edge/" in r.name and r.alpha is not None]
    assert tested and {r.status for r in tested} == {"pass"}
    assert {r.name for r in tested} == {t.check for t in planned}
    assert all(r.alpha in {t.alpha for t in planned if t.check == r.name} for r in tested)
    broken = sampler_group(BlackBox(MUTANTS["sampler-min-tokens-bonus-pre-step"].make()), ctx)
    failed = [r for r in broken if r.status == "fail"]
    assert [r.name for r in failed] == [f"L1-sampler/edge/min-tokens-crossing/{order}{dtype}"
                                        for order in ("canonical", "vllm")
                                        for dtype in ("", "/float16", "/bfloat16", "/float32")]
    assert all(r.alpha is not None and r.p_value <= r.alpha for r in failed)


def test_l3_with_section_12_parameters():
    """The two L3 cases with §12 parameters (quick sizes): the torch device passes; a device without the
    parameters is not_supported, naming them."""
    from specsim.conformance.checks.chain.statistical import statistical_group
    cases = {"v16-sampler", "v16-sampler-vllm"}
    results = statistical_group(make_cpu_device(), Context(quick=True), cases=cases)
    assert len(results) == 16 and {r.status for r in results} == {"pass"}
    lacking = statistical_group(make_hpu(), Context(quick=True), cases=cases)
    assert {r.status for r in lacking} == {"not_supported"} and "sampler min_p" in lacking[-1].detail


def test_a_row_a_completed_bad_word_empties_is_invalid_input_on_the_device():
    from devices.protocol import InvalidInput, SamplerParams, VerifyBatch
    sampler = SamplerParams(allowed_token_ids=(np.array([2]),), bad_words=((np.array([2, 2]),),))
    batch = VerifyBatch(np.array([1]), np.array([2]), None, np.zeros((2, 3)), np.ones(1), np.zeros(1, np.int64),
                        np.ones(1), sampler=sampler, seeds=np.zeros(1, np.uint64), positions=np.zeros(1, np.int64))
    with pytest.raises(InvalidInput, match=r"token_mask: row 1 \(request 0, position 1\) allows no token after every ban"):
        make_cpu_device().verify(batch)


def test_a_black_box_twin_keeps_to_its_declaration_and_refuses_injected_noise():
    """``specsim mutants --black-box``: the wrapper declares no injected noise, so given noise it raises
    ``UnsupportedCall`` — the capabilities group then passes it, instead of "killing" every black-box twin that
    survived the real checks."""
    from devices.protocol import UnsupportedCall
    from specsim.conformance.run.runner import run_group
    from specsim.conformance.core.black_box import BlackBox
    from specsim.testing.sampler_edges import SAMPLER_EDGES
    batch, noise = SAMPLER_EDGES[0].batch("canonical")
    with pytest.raises(UnsupportedCall, match="injected noise"):
        BlackBox(make_cpu_device()).verify(batch, noise)
    results = {r.name: r.status for r in run_group("capabilities", BlackBox(make_cpu_device()), Context(quick=True))}
    assert results["capabilities/injected_noise"] == "pass"
