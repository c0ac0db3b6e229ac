"""SPEC 1.6: the empty residual's fallback row after every penalty and the bias, each through every cut
(``L1-sampler/edge/empty-residual-<cause>-then-<cut>``), at the request's own temperature within a factor √2
(``L1/edge/empty-residual-temperature-band``), at positions 0 to 5.

Each test device below keeps SPEC 1.5's every check and loses the fallback one way 1.6 names: it falls back to the
row without one penalty (or the bias), counts a repeated token once, clamps the temperature to [0.1, 10], or races
the empty residual as it is at positions 2 to 5 only. Each fails exactly 1.6's checks of what it lost."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.checks.sampler.group import edge_checks  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.stats.plan import sampler_edge_tests  # noqa: E402
from specsim.mutants.source import Edit, SourceMutant  # noqa: E402
from specsim.testing.edges import BAND_TEMPERATURES  # noqa: E402
from specsim.testing.sampler_edges import CAUSE_CUT_EDGES, CAUSE_CUT_PLANS, CAUSES, CUTS, SAMPLER_EDGES  # noqa: E402
from tests.test_empty_residual import failed_names, of_version  # noqa: E402
from tests.test_empty_residual_params import (_FALL_BACK, _RACE, CTX, DTYPES, _every_check,  # noqa: E402
                                              fallback_at_temperature)

BAND = "empty-residual-temperature-band"
_1_5_EDGE = {"presence": "empty-residual-penalty-top-k", "bias": "empty-residual-bias-min-p"}
"""1.5's edge of each cause it had."""
_PROCESS = "        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)\n"


def _fallback_from(mutant_id: str, bug: str, sampler: str) -> SourceMutant:
    """The torch device whose empty residual falls back to the row §12 makes with the sampler tensors ``sampler`` (an
    expression of ``sampler``); every other row, and the test of emptiness, as before."""
    return SourceMutant(mutant_id, bug, "SPEC 1.6 item 1", "devices.torch_device", (
        Edit(_PROCESS, f"        other = ts.process_logits(target_logits, {sampler}, draft_token_ids, num_draft_tokens,"
                       " max_k)\n" + _PROCESS),
        Edit("    greedy = temperature == 0\n    if sampler is not None:",
             "    greedy = temperature == 0\n    other = None\n    if sampler is not None:"),
        Edit(_RACE, "        fallback_logits = emit_logits if other is None else other[layout.starts + arange + num_accepted]\n"
                    "        fallback = ts.target_probs(fallback_logits, rows, **filters)\n" + _FALL_BACK)))


_FIELD = {"presence": "presence_penalty", "frequency": "frequency_penalty", "repetition": "repetition_penalty",
          "bias": "logit_bias"}
WITHOUT = {cause: _fallback_from(f"fallback-without-{cause}", f"an empty residual falls back to the row without the "
                                 f"{cause} (every other parameter kept)", f"sampler._replace({_FIELD[cause]}=None)")
           for cause in CAUSES}
COUNTED_ONCE = _fallback_from(
    "fallback-frequency-counted-once", "an empty residual falls back to a row whose frequency penalty counts a repeated "
    "token once (a presence penalty of the same strength, added to any presence penalty)",
    "sampler._replace(frequency_penalty=None, presence_penalty=sampler.presence_penalty if sampler.frequency_penalty is "
    "None else sampler.frequency_penalty + (0 if sampler.presence_penalty is None else sampler.presence_penalty))")
CLAMPED = fallback_at_temperature(
    "fallback-temperature-clamped", "an empty residual falls back to the row at the temperature clamped to [0.1, 10]",
    "SPEC 1.6 item 2", "rows.temperature.clamp(0.1, 10)")
MIDDLE = SourceMutant(
    "fallback-lost-in-the-middle", "an empty residual at positions 2 to 5 is raced as it is (its first id, token 0, "
    "emitted); at positions 0, 1 and from 6 on the fallback holds", "SPEC 1.6 items 1 and 2", "devices.torch_device",
    (Edit(_RACE, "        weights = ts.residual_weights(target_rows, draft_rows, draft_ids, subtract)\n"
                 "        residual = (target_rows - draft_rows).clamp_min(0) if draft_rows is not None else weights\n"
                 "        empty = subtract.unsqueeze(1) & ~(residual > 0).any(dim=1, keepdim=True)\n"
                 "        middle = ((num_accepted >= 2) & (num_accepted <= 5)).unsqueeze(1)\n"
                 "        first = torch.zeros_like(weights)\n"
                 "        first[:, 0] = 1.0\n"
                 "        token = ts.race(torch.where(empty & middle, first, weights), exponentials)\n"),))


def _then(edges, dtypes=("", *(f"/{d}" for d in DTYPES))) -> list[str]:
    return [f"L1-sampler/edge/{e.name}/{order}{d}" for e in edges for order in e.orders for d in dtypes]


def _band(suffixes=("", "/keyed", *(f"/{d}" for d in DTYPES), "-V4097")) -> list[str]:
    return [f"L1/sizes/{BAND}-V4097" if s == "-V4097" else f"L1/edge/{BAND}{s}" for s in suffixes]


def _of(cause: str) -> list:
    return [e for e in CAUSE_CUT_EDGES if e.name.startswith(f"empty-residual-{cause}-then-")]


def test_every_cause_meets_every_cut_at_temperatures_and_positions_1_5_left_out():
    assert sorted(e.name for e in CAUSE_CUT_EDGES) == sorted(f"empty-residual-{c}-then-{k}" for c in CAUSES
                                                             for k in CUTS)
    temperatures = {r.temperature for e in CAUSE_CUT_EDGES for r in e.requests}
    assert temperatures == {2.0 ** k for k in (-4, -3, -2, -1, 1, 2, 3, 4)}
    assert {len(e.requests[1].draft_ids) - 1 for e in CAUSE_CUT_EDGES} == {2, 3, 4, 5}
    assert {position for (_, _, position) in CAUSE_CUT_PLANS.values()} == {2, 3, 4, 5}
    assert BAND_TEMPERATURES == tuple(2.0 ** k for k in (-5, -3, -1, 1, 3, 5))


def test_the_torch_device_passes_every_new_check():
    results = _every_check(load("torch"))
    assert not failed_names(results)
    names = {r.name for r in results}
    assert set(_then(CAUSE_CUT_EDGES)) | set(_band()) <= names


@pytest.mark.parametrize("cause", CAUSES)
def test_a_fallback_without_one_cause_fails_exactly_that_causes_edges(cause):
    """Each fails every edge of its cause, with every twin; 1.5 checked two of the four causes, through one cut each
    (presence and top-k, bias and min_p), so a fallback without the repetition or the frequency penalty passed it."""
    failed = of_version(failed_names(edge_checks(WITHOUT[cause].make(), CTX)), "1.6")
    old = [e for e in SAMPLER_EDGES if e.name == _1_5_EDGE.get(cause)]
    assert failed == sorted(_then(_of(cause)) + _then(old)), failed
    assert {spec_versions.introduced_in(n) for n in failed} == ({"1.5", "1.6"} if old else {"1.6"})


def test_a_frequency_penalty_counted_once_in_the_fallback_fails_the_frequency_edges():
    """The drafted token is in the output twice; counted once it stays the row's largest logit, kept by every cut."""
    failed = of_version(failed_names(edge_checks(COUNTED_ONCE.make(), CTX)), "1.6")
    assert failed == sorted(_then(_of("frequency"))), failed


def test_a_temperature_clamped_to_a_range_fails_where_it_clamps():
    """Clamped to [0.1, 10], the fallback passes every 1.5 check (T = 0.25 and 4) and fails the band's requests at
    1/32 and 32, with its twins and at size, and the cause-and-cut edges with a request at 1/16 or 16."""
    failed = of_version(failed_names(_every_check(CLAMPED.make())), "1.6")
    clamped = [e for e in CAUSE_CUT_EDGES if any(r.temperature < 0.1 or r.temperature > 10 for r in e.requests)]
    assert len(clamped) == 6
    assert failed == sorted(_band() + _then(clamped)), failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.6"}


def test_without_injected_noise_the_clamped_fallback_fails_the_band_by_its_law():
    """A black box: at T = 1/32 the row at 0.1 is far from t (TV above 0.5), so the goodness-of-fit test fails."""
    good = edge_group(BlackBox(load("torch")), CTX, only=f"L1/edge/{BAND}")
    assert [r.status for r in good] == ["pass"], good[0].detail
    (bad,) = edge_group(BlackBox(CLAMPED.make()), CTX, only=f"L1/edge/{BAND}")
    assert bad.status == "fail" and bad.layer == "L3" and bad.p_value < bad.alpha, bad.detail


def test_a_fallback_lost_at_positions_2_to_5_fails_only_the_new_checks():
    """1.5's empty residuals sit at positions 0 and 1 (and at the last of K = 8, L1-declared's): all pass; the band
    (positions 0 to 5) and every cause-and-cut edge (its second request at 2 to 5) fail."""
    from specsim.conformance.cases.declared import k_limits
    from specsim.conformance.checks.declared.group import empty_residual_at_k
    device = MIDDLE.make()
    failed = of_version(failed_names(_every_check(device)), "1.6")
    assert failed == sorted(_band() + _then(CAUSE_CUT_EDGES)), failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.6"}
    (core,) = [lim for lim in k_limits(device.capabilities) if lim.value == 8]
    assert empty_residual_at_k(device, CTX, "injected", core, "float32").status == "pass"


def test_without_injected_noise_every_new_edge_and_twin_is_planned():
    caps = BlackBox(load("torch")).capabilities
    planned = {check for _, check, _ in sampler_edge_tests(caps)}
    for name in _then(CAUSE_CUT_EDGES):
        assert name in planned, name


def test_a_device_declaring_1_5_sees_the_new_checks_apart():
    base = load("torch")
    caps = dataclasses.replace(base.capabilities, spec_version="1.5")
    results = spec_versions.annotate(edge_group(base, CTX, only=f"L1/edge/{BAND}/keyed"), caps)
    assert results[0].extra["since"] == "1.6" and results[0].extra["newer_than_declared"]
    for name, version in ((f"L1/edge/{BAND}", "1.6"), (f"L1/edge/{BAND}/bfloat16", "1.6"),
                          (f"L1/sizes/{BAND}-V32000", "1.6"),
                          ("L1-sampler/edge/empty-residual-bias-then-min-p/vllm", "1.6"),
                          ("L1-sampler/edge/empty-residual-repetition-then-top-p/canonical/float16", "1.6"),
                          ("L1-sampler/edge/empty-residual-presence-then-top-k/vllm/V151936", "1.6"),
                          ("L1/sizes/support/empty-residual-V128256", "1.6"),
                          ("L1/sizes/support/empty-residual-top-k-temperature-V4097", "1.6"),
                          ("L1/edge/top-p-cut-ties-dyadic/bfloat16", "1.6"),
                          ("L1-sampler/edge/order-min-p-meets-top-p-dyadic/vllm/V65537", "1.6"),
                          ("L1/edge/top-p-cut-ties", "1.0"),
                          ("L1/sizes/empty-residual-V128256", "1.3"),
                          ("L1/edge/empty-residual-temperature", "1.5"),
                          ("L1/sizes/empty-residual-temperature-V4097", "1.5"),
                          ("L1-sampler/edge/empty-residual-bias-min-p/canonical", "1.5"),
                          ("L1-sampler/edge/empty-residual-penalty-top-k/vllm/float16", "1.5")):
        assert spec_versions.introduced_in(name) == version, name


def test_a_device_broken_on_its_16_bit_sampler_path_fails_the_new_edges_bfloat16_twins():
    """1.5's twins run every §12 edge in every declared dtype; the new edges have theirs (a 16-bit §12 kernel variant
    racing the empty residual as it is fails each of them there, and only there)."""
    from specsim.mutants.zoo import make_mutant
    from tests.test_empty_residual import PathOf, of_version
    from tests.test_empty_residual_params import _sampler_bfloat16
    base = load("torch")
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _sampler_bfloat16)
    failed = failed_names(edge_checks(device, CTX))
    new = sorted(set(of_version(failed, "1.6")) - set(of_version(failed, "1.5")))
    assert new == sorted(_then(CAUSE_CUT_EDGES, ("/bfloat16",))), new


DYADIC = {"sampler-min-p-before-temperature": "min-p-after-temperature-dyadic",
          "sampler-vllm-computes-canonical": "order-min-p-meets-top-p-dyadic",
          "sampler-vllm-top-p-sorted-prefix": "top-p-tie-class-kept-dyadic"}


@pytest.mark.parametrize("mutant", sorted(DYADIC))
def test_a_16_bit_path_that_breaks_a_logarithm_edges_rule_fails_its_dyadic_twin(mutant):
    """SPEC 1.6 item 3: 1.5 ran no twin of the edges whose logits are logarithms, so a bfloat16 §12 path with min_p
    before temperature, the canonical order for the vllm one, or top-p's sorted prefix passed every edge; each now
    fails the dyadic restatement's bfloat16 twin (min_p before temperature the min_p cause-and-cut edges' too: min_p's
    threshold is taken at the request's temperature there as well)."""
    from specsim.mutants.zoo import make_mutant
    from tests.test_empty_residual import PathOf, of_version
    from tests.test_empty_residual_params import _sampler_bfloat16
    base = load("torch")
    device = PathOf(base, make_mutant(base, mutant), _sampler_bfloat16)
    failed = failed_names(edge_checks(device, CTX))
    new = sorted(set(of_version(failed, "1.6")) - set(of_version(failed, "1.5")))
    edge = next(e for e in SAMPLER_EDGES if e.name == DYADIC[mutant])
    twins = {f"L1-sampler/edge/{edge.name}/{order}/bfloat16" for order in edge.orders}
    # the order edge holds a different answer per profile: the canonical order computed for both fails the vllm one
    assert twins & set(new) and all(n.endswith("/bfloat16") for n in new), new
    assert all(n.startswith(f"L1-sampler/edge/{edge.name}/") or "-then-" in n for n in new), new
    assert {spec_versions.introduced_in(n) for n in new} == {"1.6"}
    assert not [n for n in failed if n.endswith("/float16") or n.endswith("/float32")]


def test_the_dyadic_edges_run_in_every_declared_dtype_and_say_what_they_restate():
    from specsim.conformance.cases.edges import dtype_twins
    from specsim.testing.edges import EDGES
    caps = load("torch").capabilities
    dyadic = [e for e in (*EDGES, *SAMPLER_EDGES) if e.name.endswith("-dyadic")]
    assert sorted(e.name.removesuffix("-dyadic") for e in dyadic) == sorted(
        ["top-p-cut-ties", "min-p-after-temperature", "order-min-p-meets-top-p", "top-p-tie-class-kept"])
    for edge in dyadic:
        assert dtype_twins(edge, caps) == ("float16", "bfloat16", "float32"), edge.name


def test_without_injected_noise_the_empty_residual_is_held_at_size_by_its_support():
    """SPEC 1.6 item 3: a device drawing its own randomness and taking no injected noise had every L1/sizes
    empty-residual check not supported. A fallback that recovers token 0 past one tile (the cut's and temperature's
    paths) passed every 1.5 check as a black box; it now fails those edges' support at size."""
    from specsim.conformance.checks.chain.sizes import SUPPORT_EDGES, empty_support_checks
    from specsim.mutants.zoo import make_mutant
    from tests.test_empty_residual import PathOf
    from tests.test_empty_residual_params import _cut_past_a_tile
    base = load("torch")
    quick = [f"L1/sizes/support/{e.name}-V4097" for e in SUPPORT_EDGES]
    good = empty_support_checks(BlackBox(base), CTX)
    assert [r.name for r in good] == quick and {r.status for r in good} == {"pass"}, good
    assert {r.status for r in empty_support_checks(base, CTX)} == {"not_supported"}   # its exact tokens instead
    device = BlackBox(PathOf(base, make_mutant(base, "empty-residual-token-zero"), _cut_past_a_tile))
    failed = of_version(failed_names(empty_support_checks(device, CTX)), "1.6")
    assert failed == of_version((n for n in quick if "top-" in n or "temperature" in n), "1.6"), failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.6"}
    (detail,) = {r.detail for r in empty_support_checks(device, CTX, only=failed[0])}
    assert "which the exact law gives probability 0" in detail and "(8 of 8 runs" in detail, detail
