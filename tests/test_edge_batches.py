"""SPEC 1.9: every edge at the batch sizes where kernels switch paths (``specsim.conformance.core.batched``).

A rule kept on the path a few requests take and lost on a full batch's passes every 1.8 edge (each one call of its
own 1–10 requests) and every random batch (whose ties and ``u = ratio`` have probability 0); the edges repeated to
fill a batch of each size of the ladder fail it, in each noise mode.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pytest
from devices.protocol import Noise
from devices.registry import load
from specsim.conformance.checks.chain.exact import edge_batch_checks, edge_group
from specsim.conformance.checks.declared.group import declared_exact_group
from specsim.conformance.checks.sampler.group import edge_batch_checks as sampler_batch_checks, edge_checks
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.one_check import one_check
from specsim.conformance.run.runner import Context
from specsim.judge.compare import reference_step, select_step
from specsim.mutants.source import Edit, SourceMutant
from specsim.testing.batches import BatchSpec, random_batch, random_noise, select_requests
from tests.quick_runs import zoo_mutant
from tests.test_empty_residual_params import fallback_lost_at

QUICK = Context(quick=True)


def _statuses(results, suffix: str = "/batches") -> tuple[dict, dict]:
    """(the checks ending in ``suffix`` → status, every other check → status)."""
    at = {r.name: r.status for r in results if r.name.endswith(suffix)}
    return at, {r.name: r.status for r in results if not r.name.endswith(suffix)}


@pytest.mark.parametrize("mutant_id,killer", [("race-tie-last-past-64", "L1/edge/race-tie/batches"),
                                              ("accept-inclusive-past-64", "L1/edge/u0-zero-target-full/batches")])
def test_a_rule_lost_past_64_requests_passes_every_1_8_check_here_and_fails_its_edge_at_batch_size(mutant_id, killer):
    mutant = zoo_mutant(mutant_id)
    at_size, own = _statuses([r for r in edge_group(mutant, QUICK) if introduced_in(r.name) not in ("1.10", "1.11")])
    assert set(own.values()) == {"pass"}, {n: s for n, s in own.items() if s != "pass"}
    declared = declared_exact_group(mutant, QUICK)   # random batches of up to 257 requests, in both noise modes
    assert {r.status for r in declared} == {"pass"}
    assert at_size[killer] == "fail"
    assert all(s == "pass" for n, s in at_size.items() if n.endswith("/keyed/batches"))   # keyed draws hold no ties
    failed = next(r for r in edge_group(mutant, QUICK, only=killer))
    assert "at batch size 257" in failed.detail and "of 257 copies wrong" in failed.detail


def test_a_tree_rule_lost_past_64_requests_passes_every_1_8_tree_check_here_and_fails_its_edge_at_batch_size():
    """SPEC §11.4's guard ``t(x) > 0`` dropped on the path of more than 64 requests (zoo ``tree-zero-sibling-past-64``):
    the edge at one request, the random trees, the patterns, the limits and the ragged batches of up to 257 requests
    (whose zero-probability siblings never meet ``threshold_single = 0``) pass."""
    from specsim.conformance.checks.trees.l1 import edge_batch_checks as tree_batch_checks, tree_l1_group
    mutant = zoo_mutant("tree-zero-sibling-past-64")
    at_size, own = _statuses([r for r in tree_l1_group(mutant, QUICK) if not r.name.endswith("/mixed")])   # 1.11's
    assert set(own.values()) <= {"pass", "not_supported"}, {n: s for n, s in own.items() if s != "pass"}
    # SPEC 1.13's keyed twin sees it too: the guard is lost on that path whatever the noise
    assert [n for n, s in at_size.items() if s != "pass"] == ["L1/trees/edge/sglang-threshold-single-zero/batches",
                                                              "L1/trees/edge/sglang-threshold-single-zero/keyed/batches"]
    (failed,) = tree_batch_checks(mutant, QUICK, only="L1/trees/edge/sglang-threshold-single-zero/batches")
    assert "at batch size 257" in failed.detail and "every copy right at 33)" in failed.detail
    assert {r.status for r in tree_batch_checks(load("torch"), QUICK)} == {"pass"}


def test_the_correct_devices_pass_every_edge_at_every_size_in_every_mode():
    for device in (load("torch"), load("npu"), BlackBox(load("torch"))):
        results = edge_batch_checks(device, QUICK) + sampler_batch_checks(device, QUICK)
        assert {r.status for r in results} <= {"pass", "not_supported"}, \
            [(r.name, r.detail) for r in results if r.status not in ("pass", "not_supported")]


def test_the_check_names_each_mode_and_counts_every_copy():
    names = [r.name for r in edge_batch_checks(load("torch"), QUICK)]
    assert "L1/edge/race-tie/batches" in names and "L1/edge/race-tie/keyed/batches" in names
    assert [r.name for r in edge_batch_checks(BlackBox(load("torch")), QUICK)][0].endswith("/batches")
    r = one_check(load("torch"), Context(), "L1/edge/race-tie/batches")
    assert r.status == "pass" and r.extra["batches"][-1] == 1025 and "(6075 copies)" in r.detail


def test_a_fallback_lost_past_64_requests_fails_support_under_the_devices_own_randomness():
    lost = fallback_lost_at("fallback-lost-past-64", "a batch of more than 64 requests",
                            "(num_accepted >= 0) & (batch > 64)", "SPEC 1.9").make()
    name = "L1/edge/empty-residual/batches"
    assert one_check(BlackBox(load("torch")), QUICK, name).status == "pass"
    failed = one_check(BlackBox(lost), QUICK, name)
    assert failed.status == "fail" and "which its exact law gives probability 0" in failed.detail
    assert "at batch size 257" in failed.detail


ALLOWED_LOST_PAST_64 = SourceMutant(
    "allowed-ids-lost-past-64", "allowed_token_ids ignored once the batch holds more than 64 requests", "SPEC 1.9",
    "devices.torch_sampling", (Edit("    if s.allowed is not None:\n",
                                    "    if s.allowed is not None and s.allowed.shape[0] <= 64:\n"),))


def test_a_sampler_ban_lost_past_64_requests_passes_its_edge_and_fails_it_at_batch_size():
    lost = ALLOWED_LOST_PAST_64.make()
    assert all(r.status in ("pass", "not_supported") for r in edge_checks(lost, QUICK))
    at_size = {r.name: r for r in sampler_batch_checks(lost, QUICK)}
    failed = at_size["L1-sampler/edge/allowed-ids-forbid-draft/canonical/batches"]
    assert failed.status == "fail" and "at batch size 257" in failed.detail
    assert one_check(lost, QUICK, failed.name).status == "fail"   # replayable alone


class _CoinsNudged:
    """The torch device declaring float32 only, its coins read 2·10⁻⁶ high (relative): within SPEC §9's float32
    tolerance of every ratio, so it flips the float64-scale near-tie of ``u-just-below-ratio`` — in every copy.
    ``past``: in a batch of more than that many requests, each request's last token is the next id (no allowance
    explains it)."""

    def __init__(self, past: int | None = None):
        self.inner, self.past, self.name = load("torch"), past, "coins-nudged"
        self.capabilities = dataclasses.replace(self.inner.capabilities, dtypes=("float32",))

    def verify(self, batch, noise=None):
        if noise is None:
            return self.inner.verify(batch, None)
        out = self.inner.verify(batch, Noise(noise.uniforms * (1 + 2e-6), noise.exponentials))
        if self.past is None or batch.batch_size <= self.past:
            return out
        tokens, rows = out.output_token_ids.copy(), np.arange(batch.batch_size)
        tokens[rows, out.num_accepted] = (tokens[rows, out.num_accepted] + 1) % batch.vocab_size
        return dataclasses.replace(out, output_token_ids=tokens)


def test_a_near_tie_flipped_in_every_copy_is_one_allowance_per_size_and_a_real_flip_still_fails():
    name = "L1/edge/u-just-below-ratio/batches"
    ok = one_check(_CoinsNudged(), Context(), name)
    assert ok.status == "pass" and ok.extra["near_tie_allowances"] == 23, ok.detail
    wrong = one_check(_CoinsNudged(past=64), Context(), name)
    assert wrong.status == "fail" and "at batch size 65" in wrong.detail


def test_select_step_is_the_reference_of_the_selected_requests():
    from specsim.conformance.checks.sampler.group import random_case
    rng = np.random.default_rng(7)
    batch = random_batch(rng, BatchSpec(batch=5, max_k=3, vocab_size=9, withdrawn_fraction=0.3))
    sampled, sampled_noise = random_case("all", "canonical", QUICK, 11)
    order = [3, 3, 0, 4, 1, 3, 2, 0]
    for b, noise in ((batch, random_noise(rng, batch)), (batch, None), (sampled, sampled_noise)):
        order_here = [i % b.batch_size for i in order]
        sub, sub_noise = select_requests(b, order_here, noise)
        want, got = reference_step(sub, sub_noise), select_step(b, reference_step(b, noise), order_here)
        for field in ("output_token_ids", "num_accepted", "uniforms", "exponentials", "processed_logits", "computed"):
            assert np.array_equal(getattr(want, field), getattr(got, field)), field
        for field in ("request", "position", "kind", "margin"):
            assert np.array_equal(getattr(want.decisions, field), getattr(got.decisions, field)), field


def test_the_edges_at_batch_sizes_are_1_9s():
    assert introduced_in("L1/edge/race-tie/batches") == "1.9"
    assert introduced_in("L1/edge/top-p-reaches-p/keyed/batches") == "1.9"
    assert introduced_in("L1-sampler/edge/min-p-ties/vllm/batches") == "1.9"
    assert introduced_in("L1/trees/edge/full-width-rrs/batches") == "1.9"
    assert introduced_in("L1/trees/edge/full-width-rrs") == "1.0"
    assert introduced_in("L1/edge/top-p-reaches-p/keyed") == "1.8"
    assert introduced_in("L1/edge/race-tie") == "1.0"
