"""SPEC 1.10: every §4 edge among filler requests (``specsim.conformance.core.batched.mixed``).

A rule kept on a uniform batch's path — every request greedy, every request sampled, no request filtered, as the
edge's own requests and their copies make it — and lost on a mixed batch's passes every 1.9 check (the edge alone
and at every batch size) and every random batch (which mixes requests but meets ties and ``u = ratio`` with
probability 0); the edge among filler requests fails it, in each noise mode.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pytest
from devices.registry import load
from specsim.conformance.checks.chain.exact import (MIXED_FILLERS, edge_group, edge_mixed_checks, mixed_filler)
from specsim.conformance.checks.declared.group import declared_exact_group
from specsim.conformance.core.batched import mixed
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.one_check import one_check
from specsim.conformance.run.runner import Context
from specsim.judge.compare import reference_step, select_step
from specsim.testing.batches import BatchSpec, join_requests, random_batch, random_noise, select_requests
from specsim.testing.edges import EDGES, make_batch
from tests.quick_runs import zoo_mutant
from tests.test_empty_residual_params import fallback_lost_at

QUICK = Context(quick=True)


@pytest.mark.parametrize("mutant_id,killer", [("accept-inclusive-when-mixed", "L1/edge/u0-zero-target-full/mixed"),
                                              ("race-tie-last-when-some-filtered",
                                               "L1/edge/top-k-boundary-ties/mixed")])
def test_a_rule_lost_in_a_mixed_batch_passes_every_1_9_check_here_and_fails_its_edge_among_fillers(mutant_id, killer):
    mutant = zoo_mutant(mutant_id)
    results = edge_group(mutant, QUICK)
    own = {r.name: r.status for r in results if not r.name.endswith("/mixed") and "/mixed-" not in r.name}   # 1.11's
    assert set(own.values()) == {"pass"}, {n: s for n, s in own.items() if s != "pass"}
    declared = declared_exact_group(mutant, QUICK)   # random batches of up to 257 requests, mixed, both noise modes
    assert {r.status for r in declared} == {"pass"}
    failed = next(r for r in results if r.name == killer)
    assert failed.status == "fail" and "at batch size 33" in failed.detail and "copies of the edge wrong" in failed.detail


def test_the_correct_devices_pass_every_edge_among_fillers_in_every_mode():
    for device in (load("torch"), load("npu"), BlackBox(load("torch"))):
        results = edge_mixed_checks(device, QUICK)
        assert results and {r.status for r in results} <= {"pass", "not_supported"}, \
            [(r.name, r.detail) for r in results if r.status not in ("pass", "not_supported")]


def test_the_checks_are_named_per_mode_and_dtype_and_say_what_they_held():
    names = [r.name for r in edge_mixed_checks(load("torch"), QUICK)]
    assert {"L1/edge/race-tie/mixed", "L1/edge/race-tie/keyed/mixed", "L1/edge/race-tie/bfloat16/mixed",
            "L1/edge-neighbours/race-tie/mixed", "L1/edge-neighbours/race-tie/keyed/mixed"} <= set(names)
    seeded = [r.name for r in edge_mixed_checks(BlackBox(load("torch")), QUICK)]
    assert "L1/edge/race-tie/mixed" in seeded and not any(n.startswith("L1/edge-neighbours/") for n in seeded)
    r = one_check(load("torch"), Context(), "L1/edge/race-tie/mixed")   # replayable alone
    assert r.status == "pass" and r.extra["batches"][0] == 2 and r.extra["batches"][-1] == 1025
    assert "every copy of the edge's requests among filler requests" in r.detail
    assert one_check(load("torch"), QUICK, "L1/edge-neighbours/race-tie/mixed").status == "pass"


def test_the_layout_puts_the_edge_at_the_start_middle_and_end_and_every_filler_between():
    rows = mixed(3, MIXED_FILLERS, 65)
    edge_rows = np.flatnonzero(rows < 3)
    assert edge_rows.tolist() == [0, 1, 2, 31, 32, 33, 62, 63, 64]
    assert sorted(set(rows[rows >= 3].tolist())) == list(range(3, 3 + MIXED_FILLERS))
    assert mixed(3, MIXED_FILLERS, 4).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="size must exceed"):
        mixed(3, MIXED_FILLERS, 3)


def test_the_filler_sets_no_batch_flag_the_edge_would():
    caps = load("torch").capabilities
    edge = next(e for e in EDGES if e.name == "race-tie")
    batch, _ = make_batch(edge.requests, dtype="float64")
    filler, noise = mixed_filler(caps, QUICK, edge.name, batch, "float64")
    assert filler.batch_size == MIXED_FILLERS and filler.vocab_size == batch.vocab_size
    assert filler.temperature[0] == 0 and (filler.temperature[1:4] > 0).all()
    assert 0 < filler.top_k[1] < batch.vocab_size and filler.top_p[2] < 1 and filler.top_k[3] == 0
    assert (filler.draft_token_ids >= 0).all()   # no padding placeholders: they are edges of their own
    assert filler.top_p[3] == 1 and noise.exponentials.shape == (MIXED_FILLERS, batch.vocab_size)
    no_filters = dataclasses.replace(caps, greedy=False, top_k=False, top_p=False)
    plain, _ = mixed_filler(no_filters, QUICK, edge.name, batch, "float64")
    assert (plain.temperature > 0).all() and (plain.top_k == 0).all() and (plain.top_p == 1).all()


def test_joined_requests_keep_each_requests_answer():
    rng = np.random.default_rng(3)
    a = random_batch(rng, BatchSpec(batch=3, max_k=2, vocab_size=7, withdrawn_fraction=0.4))
    b = random_batch(rng, BatchSpec(batch=4, max_k=5, vocab_size=7))
    for noise_a, noise_b in ((random_noise(rng, a), random_noise(rng, b)), (None, None)):
        joined, noise = join_requests(a, b, noise_a, noise_b)
        want = reference_step(joined, noise)
        for part, part_noise, order in ((a, noise_a, [0, 1, 2]), (b, noise_b, [3, 4, 5, 6])):
            alone = reference_step(part, part_noise)
            picked = select_step(joined, want, order)
            assert np.array_equal(alone.output_token_ids, picked.output_token_ids[:, : part.max_k + 1])
        sub, _ = select_requests(joined, [3, 0, 6])
        assert sub.num_draft_tokens.tolist() == [b.num_draft_tokens[0], a.num_draft_tokens[0], b.num_draft_tokens[3]]
    with pytest.raises(ValueError, match="draft_probs"):
        join_requests(a, dataclasses.replace(b, draft_probs=None))
    with pytest.raises(ValueError, match="noise"):
        join_requests(a, b, random_noise(rng, a), None)


class _FillerRowsWrong:
    """The torch device, wrong in a mixed batch of more than 40 requests on the rows of top-k requests only (or of
    top-p requests, ``by="top_p"``; their emitted token the next id): every edge's copy is right; a filler row is
    not."""

    def __init__(self, by: str = "top_k"):
        self.inner, self.name, self.by = load("torch"), "filler-rows-wrong", by
        self.capabilities = self.inner.capabilities

    def verify(self, batch, noise=None):
        out = self.inner.verify(batch, noise)
        filtered = batch.top_k > 0 if self.by == "top_k" else batch.top_p < 1
        cut = np.flatnonzero(filtered & (batch.temperature > 0))
        if batch.batch_size <= 40 or len(cut) == batch.batch_size:
            return out
        tokens = out.output_token_ids.copy()
        tokens[cut, out.num_accepted[cut]] = (tokens[cut, out.num_accepted[cut]] + 1) % batch.vocab_size
        return dataclasses.replace(out, output_token_ids=tokens)


def test_a_filler_row_wrong_fails_the_neighbours_check_naming_the_filler_and_not_the_edges():
    results = {r.name: r for r in edge_group(_FillerRowsWrong(), QUICK, only="L1/edge/race-tie/mixed")}
    assert results["L1/edge/race-tie/mixed"].status == "pass"
    failed = results["L1/edge-neighbours/race-tie/mixed"]
    assert failed.status == "fail" and "at batch size 257" in failed.detail and "filler request" in failed.detail


def test_the_field_confirms_a_top_p_deviation_on_the_neighbours_only_where_top_p_is_the_cause():
    from specsim.field.table import confirm_neighbours_top_p, experiment_for
    name = "L1/edge-neighbours/race-tie/mixed"
    assert experiment_for("top-p-kept-set-approximate", name) is confirm_neighbours_top_p
    assert experiment_for("top-p-kept-set-approximate", "L1/edge/top-p-reaches-p/mixed") is None
    assert one_check(_FillerRowsWrong("top_p"), QUICK, name).status == "fail"
    assert confirm_neighbours_top_p(_FillerRowsWrong("top_p"), name, True).startswith("confirmed")
    assert confirm_neighbours_top_p(_FillerRowsWrong("top_k"), name, True).startswith("NOT confirmed")


def test_a_fallback_lost_in_a_mixed_batch_fails_support_under_the_devices_own_randomness():
    lost = fallback_lost_at("fallback-lost-when-mixed", "a batch that also holds greedy requests",
                            "(num_accepted >= 0) & has_greedy", "SPEC 1.10").make()
    name = "L1/edge/empty-residual/mixed"
    assert one_check(BlackBox(load("torch")), QUICK, name).status == "pass"
    assert one_check(BlackBox(lost), QUICK, "L1/edge/empty-residual/batches").status == "pass"
    failed = one_check(BlackBox(lost), QUICK, name)
    assert failed.status == "fail" and "which its exact law gives probability 0" in failed.detail
    assert "at batch size 33" in failed.detail


def test_the_edges_among_fillers_are_1_10s():
    assert introduced_in("L1/edge/race-tie/mixed") == "1.10"
    assert introduced_in("L1/edge/top-p-reaches-p/mixed") == "1.10"
    assert introduced_in("L1/edge/top-p-reaches-p/keyed/mixed") == "1.10"
    assert introduced_in("L1/edge/race-tie/bfloat16/mixed") == "1.10"
    assert introduced_in("L1/edge-neighbours/race-tie/keyed/mixed") == "1.10"
    assert introduced_in("L1/edge/race-tie/batches") == "1.9"
