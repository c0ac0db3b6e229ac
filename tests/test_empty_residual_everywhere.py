"""SPEC 1.7: the empty residual's fallback with every penalty and the bias acting at once
(``L1-sampler/edge/empty-residual-every-cause-then-<cut>``), at every position of the declared depth
(``L1/declared/<mode>/empty-residual-positions-K<K>`` and its support twin), and every row at temperatures past the
band (``L1/edge/empty-residual-temperature-far``, ``L1/edge/bonus-row-temperature-band``).

Each test device below keeps SPEC 1.6's every check and is broken one way 1.7 names: its fallback drops the bias
where a penalty is set, loses the fallback at positions 6 to K − 2, or clamps the temperature to [0.01, 100] (the
fallback's, or every row's). Each fails 1.7's checks of what it lost, and nothing of 1.6."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.checks.chain.exact import FILLER_KINDS
from specsim.conformance.cases.declared import empty_positions, k_limits  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.checks.declared.group import (empty_residual_at_k, empty_residual_positions,  # noqa: E402
                                                       support_checks)
from specsim.conformance.checks.sampler.group import edge_checks  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.mutants.source import Edit, SourceMutant  # noqa: E402
from specsim.testing.edges import BONUS_TEMPERATURES, FAR_TEMPERATURES  # noqa: E402
from specsim.testing.sampler_edges import CAUSES, EVERY_CAUSE, EVERY_PENALTY, TOGETHER_EDGES  # noqa: E402
from tests.test_empty_residual import failed_names, of_version  # noqa: E402
from tests.test_empty_residual_causes import COUNTED_ONCE, WITHOUT, _fallback_from, _then  # noqa: E402
from tests.test_empty_residual_params import (CTX, DTYPES, _every_check, fallback_at_temperature,  # noqa: E402
                                              fallback_lost_at)

FAR = "empty-residual-temperature-far"
BONUS = "bonus-row-temperature-band"

BIAS_BESIDE_PENALTIES = _fallback_from(
    "fallback-bias-or-penalties", "an empty residual falls back to a row with the penalties or the bias, not both: "
    "where a penalty is set the bias is left out",
    "sampler if sampler.presence_penalty is None and sampler.frequency_penalty is None and "
    "sampler.repetition_penalty is None else sampler._replace(logit_bias=None)")
FAR_CLAMPED = fallback_at_temperature(
    "fallback-temperature-clamped-wide", "an empty residual falls back to the row at the temperature clamped to "
    "[0.01, 100]", "SPEC 1.7 item 3", "rows.temperature.clamp(0.01, 100)")
ROWS_CLAMPED = SourceMutant(
    "temperature-clamped-wide", "every row sampled at its temperature clamped to [0.01, 100] (greedy rows as before)",
    "SPEC 1.7 item 3", "devices.torch_device",
    (Edit("    rows = ts.SamplingRows(ts.safe_temperature(temperature),",
          "    rows = ts.SamplingRows(ts.safe_temperature(temperature).clamp(0.01, 100),"),))
DEEP = fallback_lost_at("fallback-lost-deep", "positions 6 to K − 2 of the batch's K",
                        "(num_accepted >= 6) & (num_accepted < max_k - 1)", "SPEC 1.7 item 2",
                        held="at positions 0 to 5 and K − 1 the fallback holds")


def _new(failed) -> list[str]:
    return sorted(set(failed) - set(of_version(failed, "1.6")))


def _edge_names(edge: str, suffixes=("", "/keyed", *(f"/{d}" for d in DTYPES))) -> list[str]:
    return [f"L1/edge/{edge}{s}" for s in suffixes]


def _positions(device) -> list[str]:
    return [f"L1/declared/{mode}/empty-residual-positions-K{lim.value}" for mode in ("injected", "keyed")
            for lim in k_limits(device.capabilities)]


def test_the_new_edges_and_where_they_reach():
    assert sorted(e.name for e in TOGETHER_EDGES) == [f"empty-residual-every-{f}-then-{c}" for f in ("cause", "penalty")
                                                       for c in ("min-p", "top-k", "top-p")]
    assert set(EVERY_CAUSE.strengths) == set(CAUSES) and set(EVERY_PENALTY.strengths) == set(CAUSES) - {"bias"}
    for family in (EVERY_CAUSE, EVERY_PENALTY):
        assert {position for (_, _, position) in family.plans.values()} == {5, 6, 7}
    temperatures = {r.temperature for e in TOGETHER_EDGES for r in e.requests}
    assert min(temperatures) == 2.0 ** -5 and max(temperatures) == 32.0 and len(temperatures) == 10
    assert min(FAR_TEMPERATURES) < 0.01 and max(FAR_TEMPERATURES) > 100
    assert BONUS_TEMPERATURES[0] == 2.0 ** -9 and BONUS_TEMPERATURES[-1] == 2.0 ** 9
    assert empty_positions(8) == tuple(range(8))
    assert empty_positions(1024)[-10:] == (127, 128, 129, 255, 256, 257, 511, 512, 513, 1023)


def test_the_torch_device_passes_every_new_check():
    device = load("torch")
    results = _every_check(device)
    assert not failed_names(results)
    names = {r.name for r in results}
    assert set(_then(TOGETHER_EDGES)) | set(_edge_names(FAR)) | set(_edge_names(BONUS)) <= names
    assert f"L1/sizes/{FAR}-V4097" in names
    positions = [empty_residual_positions(device, CTX, mode, lim, "float32") for mode in ("injected", "keyed")
                 for lim in k_limits(device.capabilities)]
    assert [r.name for r in positions] == _positions(device) and {r.status for r in positions} == {"pass"}


@pytest.mark.parametrize("mutant", [*WITHOUT.values(), COUNTED_ONCE, BIAS_BESIDE_PENALTIES],
                         ids=lambda m: m.id)
def test_a_fallback_short_of_one_cause_fails_every_edge_with_all_its_causes(mutant):
    """With all of a family's causes acting, any one lost (or the frequency counted once) leaves the drafted token
    above the kept ones in both order profiles, so every check of the family fails, in every dtype: a lost penalty
    both families, a lost bias the every-cause one. The bias dropped beside a penalty passed every 1.6 check: each
    of 1.6's edges has one cause."""
    failed = failed_names(edge_checks(mutant.make(), CTX))
    bias_only = mutant in (WITHOUT["bias"], BIAS_BESIDE_PENALTIES)
    want = [e for e in TOGETHER_EDGES if not bias_only or "every-cause" in e.name]
    assert _new(failed) == sorted(_then(want)), _new(failed)
    if mutant is BIAS_BESIDE_PENALTIES:
        assert not of_version(failed, "1.6"), failed


def test_a_fallback_lost_between_position_5_and_the_last_fails_only_the_positions_checks():
    """1.6 checked the fallback at positions 0 to 5 and at the last of K = 8 and of max_k: this device passes all of
    it, and fails each positions check (every position of K = 8; of K = 256 up to 65, each side of 128, and 255)."""
    device = DEEP.make()
    every = failed_names(_every_check(device))
    assert not of_version(every, "1.6"), every
    assert all(n.startswith("L1-sampler/edge/empty-residual-every-") for n in every), every
    for lim in k_limits(device.capabilities):
        assert empty_residual_at_k(device, CTX, "injected", lim, "float32").status == "pass"
    results = [empty_residual_positions(device, CTX, mode, lim, "float32") for mode in ("injected", "keyed")
               for lim in k_limits(device.capabilities)]
    assert [r.status for r in results] == ["fail"] * 4, [r.detail for r in results]


def test_without_injected_noise_the_positions_are_held_by_their_support():
    good = [r for r in support_checks(BlackBox(load("torch")), CTX) if "positions" in r.name]
    assert [r.status for r in good] == ["pass", "pass"], [r.detail for r in good]
    bad = [r for r in support_checks(BlackBox(DEEP.make()), CTX) if "positions" in r.name]
    assert [r.status for r in bad] == ["fail", "fail"], [r.detail for r in bad]
    assert "the request rejecting at position 6" in bad[0].detail, bad[0].detail
    assert {spec_versions.introduced_in(r.name) for r in bad} == {"1.7"}


def test_a_fallback_clamped_to_a_wide_range_fails_the_far_temperatures():
    """Clamped to [0.01, 100], the fallback passes the band (1/32 to 32) and every 1.6 check, and fails the far
    edge (2^-9 and 2^9 lie outside; 2^-7 and 2^7 inside), with its twins and at size."""
    failed = failed_names(_every_check(FAR_CLAMPED.make()))
    assert not of_version(failed, "1.6"), failed
    assert failed == sorted(_edge_names(FAR) + [f"L1/sizes/{FAR}-V4097"] +
                            [f"L1/edge/{FAR}/{twin}{kind}" for kind in ("batches", "mixed")
                             for twin in ("", "keyed/", *(f"{d}/{m}" for d in DTYPES for m in ("", "keyed/")))] +
                            # SPEC 1.9's, 1.10's (and 1.14's: the dtypes on the keyed streams)
                            [f"L1/edge/{FAR}/{twin}mixed-{kind}" for kind in FILLER_KINDS
                             for twin in ("", "keyed/")]), failed   # 1.11's, 1.13's


def test_every_row_clamped_to_a_wide_range_fails_the_bonus_rows_band():
    """A clamp on every row, not only the fallback's: 1.6's edges, at 1/32 to 32, pass; the bonus rows at 2^-9 and
    2^9, and the far fallback, fail."""
    failed = failed_names(_every_check(ROWS_CLAMPED.make()))
    assert not of_version(failed, "1.6"), failed
    assert set(_edge_names(BONUS)) <= set(failed), failed
    # 1.7's edges, at batch sizes (1.9), among fillers (1.10) and among fillers of each kind (1.11; 1.13 on the keyed
    # streams), and at batch sizes and among fillers in every dtype on the keyed streams (1.14)
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.7", "1.9", "1.10", "1.11", "1.13", "1.14"}
    assert {spec_versions.introduced_in(n) for n in failed
            if not n.endswith(("/batches", "/mixed")) and "/mixed-" not in n} == {"1.7"}


def test_without_injected_noise_the_far_temperatures_are_held_by_their_law():
    good = edge_group(BlackBox(load("torch")), CTX, only=f"L1/edge/{BONUS}")
    assert [r.status for r in good] == ["pass"], good[0].detail
    (bad,) = edge_group(BlackBox(ROWS_CLAMPED.make()), CTX, only=f"L1/edge/{BONUS}")
    assert bad.status == "fail" and bad.layer == "L3" and bad.p_value < bad.alpha, bad.detail


def test_a_device_declaring_1_6_sees_the_new_checks_apart():
    base = load("torch")
    caps = dataclasses.replace(base.capabilities, spec_version="1.6")
    results = spec_versions.annotate(edge_group(base, CTX, only=f"L1/edge/{FAR}/keyed"), caps)
    assert results[0].extra["since"] == "1.7" and results[0].extra["newer_than_declared"]
    for name, version in ((f"L1/edge/{FAR}", "1.7"), (f"L1/edge/{FAR}/bfloat16", "1.7"),
                          (f"L1/sizes/{FAR}-V32000", "1.7"), (f"L1/sizes/support/{FAR}-V4097", "1.7"),
                          (f"L1/edge/{BONUS}", "1.7"), (f"L1/edge/{BONUS}/keyed", "1.7"),
                          ("L1-sampler/edge/empty-residual-every-cause-then-top-p/vllm", "1.7"),
                          ("L1-sampler/edge/empty-residual-every-cause-then-min-p/canonical/bfloat16", "1.7"),
                          ("L1-sampler/edge/empty-residual-every-cause-then-top-k/vllm/V151936", "1.7"),
                          ("L1-sampler/edge/empty-residual-every-penalty-then-top-p/canonical/float16", "1.7"),
                          ("L1/declared/keyed/empty-residual-positions-K8", "1.7"),
                          ("L3/declared/support/empty-residual-positions-K256", "1.7"),
                          ("L1/declared/injected/empty-residual-K8", "1.5"),
                          ("L1/edge/empty-residual-temperature-band", "1.6"),
                          ("L1-sampler/edge/empty-residual-bias-then-min-p/vllm", "1.6"),
                          ("L1/sizes/support/empty-residual-V128256", "1.6")):
        assert spec_versions.introduced_in(name) == version, name
