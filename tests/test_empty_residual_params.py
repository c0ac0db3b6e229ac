"""SPEC 1.5: the empty residual under every sampling parameter — at T ≠ 1 (``L1/edge/empty-residual-temperature``,
``-top-k-temperature``, ``-top-p-temperature``), where a penalty or a bias takes the draft past a cut
(``L1-sampler/edge/empty-residual-penalty-top-k``, ``-bias-min-p``), §12's empty-residual edges in every declared dtype
(``L1-sampler/edge/<edge>/<order>/<dtype>``) and §4's at real vocabularies (``L1/sizes/<edge>-V<V>``).

Each test device below keeps SPEC 1.4's every check and loses the fallback to ``t`` one way 1.5 names: it falls back
to the row at ``T = 1``, to the row before §12's penalties and bias, or races the empty residual on one path only (a
16-bit §12 variant, the cut past one tile). Each fails exactly 1.5's checks of its path."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")

from devices.registry import load  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.checks.chain.sizes import SIZED_EDGES, empty_edge_checks, empty_residual_checks  # noqa: E402
from specsim.conformance.checks.sampler.group import edge_checks  # noqa: E402
from specsim.conformance.core import spec_versions  # noqa: E402
from specsim.conformance.core.black_box import BlackBox  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.conformance.stats.plan import sampler_edge_tests  # noqa: E402
from specsim.mutants.source import Edit, SourceMutant  # noqa: E402
from specsim.mutants.zoo import make_mutant  # noqa: E402
from specsim.testing.sampler_edges import SAMPLER_EDGES  # noqa: E402
from tests.test_empty_residual import PathOf, dtype_is, failed_names, of_version  # noqa: E402

CTX = Context(quick=True)
TEMPERATURE_EDGES = ("empty-residual-temperature", "empty-residual-top-k-temperature",
                     "empty-residual-top-p-temperature")
SAMPLER_1_5 = ("empty-residual-penalty-top-k", "empty-residual-bias-min-p")
DTYPES = ("float16", "bfloat16", "float32")

# The fallback's row, recomputed from the emission row's logits, where the residual is empty.
_RACE = "        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)\n"
_FALL_BACK = ("        weights = ts.residual_weights(target_rows, draft_rows, draft_ids, subtract)\n"
              "        residual = (target_rows - draft_rows).clamp_min(0) if draft_rows is not None else weights\n"
              "        empty = subtract.unsqueeze(1) & ~(residual > 0).any(dim=1, keepdim=True)\n"
              "        token = ts.race(torch.where(empty, fallback, weights), exponentials)\n")


def fallback_at_temperature(mutant_id: str, bug: str, models: str, temperature: str) -> SourceMutant:
    """The torch device whose empty residual falls back to its row at the temperature ``temperature`` (an expression
    of ``rows.temperature``), every cut, ban, penalty and bias kept; every other row as before."""
    return SourceMutant(mutant_id, bug, models, "devices.torch_device", (
        Edit(_RACE, f"        fallback = ts.target_probs(emit_logits, ts.SamplingRows({temperature}, "
                    "rows.top_k, rows.top_p, rows.min_p), **filters)\n" + _FALL_BACK),))


def fallback_lost_at(mutant_id: str, where: str, condition: str, models: str,
                     held: str = "at every other position the fallback holds") -> SourceMutant:
    """The torch device whose empty residual is raced as it is (its first id, token 0, emitted) where ``condition``
    (an expression of the request's ``num_accepted``, its rejected position, and the batch's ``max_k``) holds; the
    fallback holds elsewhere (``held`` says where, for the mutant's text)."""
    return SourceMutant(
        mutant_id, f"an empty residual at {where} is raced as it is (its first id, token 0, emitted); {held}", models,
        "devices.torch_device",
        (Edit(_RACE, "        weights = ts.residual_weights(target_rows, draft_rows, draft_ids, subtract)\n"
                     "        residual = (target_rows - draft_rows).clamp_min(0) if draft_rows is not None else weights\n"
                     "        empty = subtract.unsqueeze(1) & ~(residual > 0).any(dim=1, keepdim=True)\n"
                     f"        lost = ({condition}).unsqueeze(1)\n"
                     "        first = torch.zeros_like(weights)\n"
                     "        first[:, 0] = 1.0\n"
                     "        token = ts.race(torch.where(empty & lost, first, weights), exponentials)\n"),))


UNTEMPERED = fallback_at_temperature(
    "fallback-untempered", "an empty residual falls back to the row at T = 1: the temperature applied to a copy of the "
    "logits the fallback does not read (cuts, bans, penalties and bias kept)", "SPEC 1.5 item 1",
    "torch.ones_like(rows.temperature)")
BANS_ONLY = SourceMutant(
    "fallback-bans-only", "an empty residual falls back to the row after §12's bans but before its penalties and bias "
    "(temperature and cuts kept)", "SPEC 1.5 item 1", "devices.torch_device",
    (Edit("        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)\n",
          "        banned_only = ts.widened(target_logits)\n"
          "        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)\n"
          "        banned_only = torch.where(target_logits == -torch.inf, target_logits, banned_only)\n"),
     Edit("    greedy = temperature == 0\n    if sampler is not None:",
          "    greedy = temperature == 0\n    banned_only = None\n    if sampler is not None:"),
     Edit(_RACE, "        fallback_logits = emit_logits if banned_only is None else "
                 "banned_only[layout.starts + arange + num_accepted]\n"
                 "        fallback = ts.target_probs(fallback_logits, rows, **filters)\n" + _FALL_BACK)))


def _every_check(device) -> list:
    return edge_group(device, CTX) + edge_checks(device, CTX) + empty_residual_checks(device, CTX) + \
        empty_edge_checks(device, CTX)


def _sampler_names(edges, dtypes=("", *(f"/{d}" for d in DTYPES))) -> list[str]:
    return [f"L1-sampler/edge/{e.name}/{o}{d}" for e in SAMPLER_EDGES if e.name in edges for o in e.orders
            for d in dtypes]


def test_the_torch_device_passes_every_new_check():
    results = _every_check(load("torch"))
    assert not failed_names(results)
    names = {r.name for r in results}
    assert {f"L1/edge/{n}{t}" for n in TEMPERATURE_EDGES for t in ("", "/keyed", *(f"/{d}" for d in DTYPES))} <= names
    assert set(_sampler_names(SAMPLER_1_5)) <= names
    assert {f"L1/sizes/{e.name}-V4097" for e in SIZED_EDGES} <= names


def test_a_fallback_at_temperature_one_fails_exactly_the_tempered_edges():
    """Every 1.4 check passes (their targets are one-hot or two equal values, which no temperature changes); every
    1.5 edge at T ≠ 1 fails, with its twins and at size."""
    failed = of_version(failed_names(_every_check(UNTEMPERED.make())), "1.5")
    want = sorted([f"L1/edge/{n}{t}" for n in TEMPERATURE_EDGES for t in ("", "/keyed", *(f"/{d}" for d in DTYPES))]
                  + _sampler_names(SAMPLER_1_5) + [f"L1/sizes/{n}-V4097" for n in TEMPERATURE_EDGES])
    assert failed == want, failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}


def test_a_fallback_before_the_penalties_and_bias_fails_exactly_their_edges():
    """A fallback that applies §12's bans but not its penalties or bias keeps every 1.4 edge (each reached through a
    ban) and fails the two 1.5 edges where a penalty or a bias, not a ban, takes the draft past the cut."""
    failed = of_version(failed_names(edge_checks(BANS_ONLY.make(), CTX)), "1.5")
    assert failed == sorted(_sampler_names(SAMPLER_1_5)), failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}


def test_without_injected_noise_the_untempered_fallback_fails_by_its_law():
    """A black box: the tempered edges' laws under the device's own draws. The row at T = 1 holds the same support,
    so it is the goodness-of-fit test that fails (TV 0.25 between the two laws, n = 400 with ``--quick``)."""
    good = edge_group(BlackBox(load("torch")), CTX, only="L1/edge/empty-residual-temperature")
    assert [r.status for r in good] == ["pass"], good[0].detail
    (bad,) = edge_group(BlackBox(UNTEMPERED.make()), CTX, only="L1/edge/empty-residual-temperature")
    assert bad.status == "fail" and bad.layer == "L3" and bad.p_value < bad.alpha, bad.detail


def _sampler_bfloat16(batch, noise) -> bool:
    return batch.sampler is not None and bool(batch.sampler.given()) and \
        np.asarray(batch.target_logits).dtype.name == "bfloat16"


def test_a_device_broken_on_its_16_bit_sampler_path_fails_those_twins_only():
    base = load("torch")
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _sampler_bfloat16)
    failed = of_version(failed_names(edge_checks(device, CTX)), "1.5")
    empty = tuple(e.name for e in SAMPLER_EDGES if e.name.startswith("empty-residual"))
    assert failed == of_version(_sampler_names(empty, ("/bfloat16",)), "1.5"), failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}


def _cut_past_a_tile(batch, noise) -> bool:
    """A cut's or a temperature's call at a vocabulary past one 4096-wide tile: the plain float64 rows, and every
    call at V = 4, answer correctly."""
    filtered = bool(np.any(batch.top_k > 0) or np.any(batch.top_p < 1) or np.any(batch.temperature != 1))
    return filtered and batch.vocab_size > 4096


def test_a_device_broken_past_one_tile_fails_the_sized_edges_only():
    base = load("torch")
    device = PathOf(base, make_mutant(base, "empty-residual-token-zero"), _cut_past_a_tile)
    failed = of_version(failed_names(_every_check(device)), "1.5")
    want = of_version((f"L1/sizes/{e.name}-V4097" for e in SIZED_EDGES if e.name != "empty-residual-withdrawn"), "1.5")
    assert failed == want, failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}
    assert spec_versions.introduced_in("L1/sizes/empty-residual-V4097") == "1.3"


def test_without_injected_noise_every_sampler_dtype_twin_is_planned():
    caps = BlackBox(load("torch")).capabilities
    planned = {check for _, check, _ in sampler_edge_tests(caps)}
    for name in _sampler_names(("empty-residual-allowed-ids", *SAMPLER_1_5)):
        assert name in planned, name


def test_a_device_declaring_1_4_sees_the_new_checks_apart():
    base = load("torch")
    caps = dataclasses.replace(base.capabilities, spec_version="1.4")
    results = spec_versions.annotate(edge_group(base, CTX, only="L1/edge/empty-residual-temperature/keyed"), caps)
    assert results[0].extra["since"] == "1.5" and results[0].extra["newer_than_declared"]
    for name, version in (("L1/edge/empty-residual-top-k/bfloat16", "1.4"),
                          ("L1/edge/empty-residual-top-k-temperature/bfloat16", "1.5"),
                          ("L1-sampler/edge/empty-residual-bad-word/vllm", "1.4"),
                          ("L1-sampler/edge/empty-residual-bad-word/vllm/V151936", "1.4"),
                          ("L1-sampler/edge/empty-residual-bad-word/vllm/float16", "1.5"),
                          ("L1-sampler/edge/empty-residual-bias-min-p/canonical/V65537", "1.5"),
                          ("L1/sizes/empty-residual-top-p-V128256", "1.5")):
        assert spec_versions.introduced_in(name) == version, name


def test_a_16_bit_path_that_breaks_any_edges_rule_fails_that_edges_twin():
    """SPEC 1.5 item 2: an inclusive coin (u <= ratio: u = 0 accepts a draft of target probability 0) on the bfloat16
    path alone passes every float64 edge and fails the edges that show it, in bfloat16 only; before 1.5 only
    L1-16bit's volume checks met that path, whose coins are never 0."""
    base = load("torch")
    device = PathOf(base, make_mutant(base, "accept-inclusive"), dtype_is("bfloat16"))
    failed = of_version(failed_names(edge_group(device, CTX)), "1.5")
    assert failed and all(n.endswith("/bfloat16") for n in failed), failed
    assert "L1/edge/u0-zero-target-full/bfloat16" in failed and "L1/edge/u0-masked-point/bfloat16" in failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}


def test_a_16_bit_sampler_path_that_reads_the_wrong_mask_row_fails_those_twins():
    base = load("torch")
    device = PathOf(base, make_mutant(base, "sampler-mask-previous-row"), _sampler_bfloat16)
    failed = of_version(failed_names(edge_checks(device, CTX)), "1.5")
    assert failed and all(n.endswith("/bfloat16") for n in failed), failed
    assert "L1-sampler/edge/mask-forbids-draft/canonical/bfloat16" in failed
    assert {spec_versions.introduced_in(n) for n in failed} == {"1.5"}


def test_a_fallback_lost_past_the_cores_limits_fails_at_the_declared_ones():
    """SPEC 1.5 item 3: a device declaring V up to 2^19 and K up to 256 whose fallback recovers token 0 only past
    V = 262144, or only past the core's K = 8, passes the empty-residual checks at the core's limits and fails the
    empty-residual check at its declared limit, in each noise mode it declares."""
    from specsim.conformance.cases.declared import k_limits, vocab_limits
    from specsim.conformance.checks.declared.group import empty_residual_at_k, empty_residual_at_v, noise_modes
    base = load("torch")
    caps = dataclasses.replace(base.capabilities, max_vocab_size=1 << 19)
    broken = make_mutant(base, "empty-residual-token-zero")
    past_v = PathOf(base, broken, lambda batch, noise: batch.vocab_size > 262144, caps)
    past_k = PathOf(base, broken, lambda batch, noise: batch.max_k > 8, caps)
    assert [lim.value for lim in vocab_limits(caps)] == [262144, 524288]
    assert [lim.value for lim in k_limits(caps)] == [8, 256]
    assert noise_modes(caps) == ["injected", "keyed"]
    for mode in noise_modes(caps):
        got = {r.name: r.status for lim in vocab_limits(caps) for r in [empty_residual_at_v(past_v, CTX, mode, lim,
                                                                                             "float32")]}
        assert got == {f"L1/declared/{mode}/empty-residual-V262144": "pass",
                       f"L1/declared/{mode}/empty-residual-V524288": "fail"}, got
        got = {r.name: r.status for lim in k_limits(caps) for r in [empty_residual_at_k(past_k, CTX, mode, lim,
                                                                                         "float32")]}
        assert got == {f"L1/declared/{mode}/empty-residual-K8": "pass",
                       f"L1/declared/{mode}/empty-residual-K256": "fail"}, got
    assert spec_versions.introduced_in("L1/declared/keyed/empty-residual-K256") == "1.5"
