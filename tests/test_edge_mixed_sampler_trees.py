"""SPEC 1.11: every §12 sampler edge and every §11 tree edge among filler requests, and every §4 edge among fillers
of one kind.

1.10 put §4's edges among other requests, of every kind at once. §12's and §11's edges ran only alone and repeated (1.9), so a batch-wide
flag their own requests set — every request penalised, banned or masked; every tree request sampled — chose the path
they were held on. Here a rule kept only on a uniform batch's path passes every 1.9 check and every random batch, and
fails the edge among fillers (or its fillers' rows). And a §4 rule kept on every path but one mix's — no greedy
request, some cut by top-p — passes 1.10's mix, whose first filler is greedy, and fails among top-p fillers.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pytest
from devices.protocol import SAMPLER_PARAMETERS
from devices.registry import load
from specsim.conformance.checks.chain.exact import FILLER_KINDS, edge_group, edge_kind_checks, kind_filler
from specsim.conformance.checks.declared.group import declared_exact_group
from specsim.conformance.checks.sampler.group import (edge_batch_checks as sampler_batch_checks, edge_checks,
                                                      edge_mixed_checks as sampler_mixed_checks, random_checks,
                                                      sampler_filler)
from specsim.conformance.checks.trees.l1 import EDGES as TREE_EDGES, edge_batch, tree_filler, tree_l1_group
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.one_check import one_check, replayable
from specsim.conformance.run.runner import Context
from specsim.judge.compare import reference_step, select_step
from specsim.testing.batches import BatchSpec, join_requests, neutral_sampler, random_batch, random_noise
from specsim.testing.edges import EDGES, make_batch
from specsim.testing.sampler_edges import SAMPLER_EDGES
from specsim.testing.sampler_params import random_sampler
from specsim.testing.trees import (TreeSpec, join_tree_requests, random_tree_batch, random_tree_noise,
                                   reference_tree_step, select_tree_requests)
from tests.quick_runs import zoo_mutant

QUICK = Context(quick=True)
EDGE = "L1-sampler/edge/repetition-on-negative-logits/canonical/mixed"


def test_a_sampler_rule_lost_in_a_mixed_batch_passes_every_1_9_check_and_fails_among_fillers():
    mutant = zoo_mutant("sampler-repetition-divides-when-mixed")
    before = edge_checks(mutant, QUICK) + random_checks(mutant, QUICK) + sampler_batch_checks(mutant, QUICK)
    assert {r.status for r in before} <= {"pass", "not_supported"}, \
        [r.name for r in before if r.status not in ("pass", "not_supported")]
    failed = [r for r in sampler_mixed_checks(mutant, QUICK) if r.status == "fail"]
    assert failed and all(r.name.endswith("/mixed") for r in failed)
    assert any("filler request" in r.detail for r in failed)


def test_a_tree_rule_lost_in_a_mixed_batch_passes_every_1_9_check_and_fails_its_edge_among_fillers():
    results = tree_l1_group(zoo_mutant("tree-zero-sibling-when-mixed"), QUICK)
    before = {r.name: r.status for r in results if not r.name.endswith("/mixed")}
    assert set(before.values()) == {"pass"}, {n: s for n, s in before.items() if s != "pass"}
    failed = next(r for r in results if r.name == "L1/trees/edge/sglang-threshold-single-zero/mixed")
    assert failed.status == "fail" and "at batch size 33, copy 0 (edge request 0)" in failed.detail   # quick: 33, 257


def test_the_correct_devices_pass_every_tree_edge_among_fillers_and_name_both_checks():
    from specsim.conformance.checks.trees.l1 import edge_mixed_checks
    results = edge_mixed_checks(load("torch"), Context())
    assert len(results) == 2 * len(TREE_EDGES) and {r.status for r in results} == {"pass"}
    names = {r.name for r in results}
    assert {"L1/trees/edge/full-width-rrs/mixed", "L1/trees/edge-neighbours/full-width-rrs/mixed"} <= names
    edge = next(r for r in results if r.name == "L1/trees/edge/full-width-rrs/mixed")
    assert "every copy of the edge's request among filler requests" in edge.detail
    assert edge.extra["batches"] == [2, 9, 33, 65, 129, 257, 513, 1025]


def test_the_correct_devices_pass_the_sampler_edges_among_fillers_in_each_mode():
    some = ("repetition-on-negative-logits", "mask-forbids-draft", "min-p-threshold-ties")
    for device in (load("torch"), BlackBox(load("torch"))):
        for edge in some:
            for check in (f"L1-sampler/edge/{edge}/canonical/mixed", f"L1-sampler/edge/{edge}/vllm/mixed"):
                r = one_check(device, QUICK, check)
                assert r.status == "pass", (check, r.detail)
    r = one_check(load("torch"), QUICK, f"L1-sampler/edge-neighbours/{some[0]}/canonical/mixed")
    assert r.status == "pass" and "every filler row among the edge's requests" in r.detail
    assert replayable(r.name) and replayable(EDGE)


def test_the_sampler_filler_has_unpenalised_requests_beside_every_declared_parameter():
    caps = load("torch").capabilities
    edge = next(e for e in SAMPLER_EDGES if e.name == "repetition-on-negative-logits")
    batch, _ = edge.batch("canonical", "float64", seed=0)
    filler, noise = sampler_filler(caps, QUICK, edge.name, "canonical", batch, "float64")
    assert filler.batch_size == 16 and filler.vocab_size == batch.vocab_size
    assert set(filler.sampler.given()) == set(SAMPLER_PARAMETERS)
    assert (filler.sampler.repetition_penalty[:4] == 1).all() and (filler.sampler.repetition_penalty[4:] > 1).all()
    assert filler.sampler.allowed_token_ids[:4] == (None,) * 4 and (filler.sampler.min_p[:4] == 0).all()
    assert np.isfinite(filler.target_logits).all()   # one safe token stays on every row: no raw -inf logit
    assert filler.temperature[0] == 0 and filler.top_k[1] > 0 and filler.top_p[2] < 1
    none, _ = sampler_filler(dataclasses.replace(caps, sampler=()), QUICK, edge.name, "canonical", batch, "float64")
    assert none.sampler is None


def test_joined_sampler_requests_keep_each_requests_answer():
    rng = np.random.default_rng(5)
    spec = BatchSpec(batch=3, max_k=3, vocab_size=9, masked_fraction=0.0)
    a = random_batch(rng, spec)
    a = dataclasses.replace(a, sampler=random_sampler(rng, a, ("bad_words", "repetition_penalty", "token_mask")))
    b = random_batch(rng, dataclasses.replace(spec, batch=4))
    b = dataclasses.replace(b, sampler=random_sampler(rng, b, ("min_p", "logit_bias")))
    c = random_batch(rng, dataclasses.replace(spec, batch=2))   # no §12 parameter at all
    for first, second in ((a, b), (a, c), (c, b)):
        noise_1, noise_2 = random_noise(rng, first), random_noise(rng, second)
        joined, noise = join_requests(first, second, noise_1, noise_2)
        want = reference_step(joined, noise)
        for part, part_noise, order in ((first, noise_1, range(first.batch_size)),
                                        (second, noise_2, range(first.batch_size, joined.batch_size))):
            alone = reference_step(part, part_noise)
            picked = select_step(joined, want, list(order))
            assert np.array_equal(alone.output_token_ids, picked.output_token_ids[:, : part.max_k + 1])
    joined, _ = join_requests(c, b)
    assert joined.sampler.logit_bias[:2].tolist() == neutral_sampler(c, "logit_bias").tolist()
    with pytest.raises(ValueError, match="order profile"):
        join_requests(a, dataclasses.replace(b, sampler=dataclasses.replace(b.sampler, order="vllm")))
    with pytest.raises(ValueError, match="neutral_sampler: name"):
        neutral_sampler(c, "order")


def test_joined_tree_requests_keep_each_requests_answer_and_refuse_another_scheme():
    rng = np.random.default_rng(7)
    a = random_tree_batch(rng, TreeSpec(batch=3, vocab_size=6, drafting="top"))
    b = random_tree_batch(rng, TreeSpec(batch=5, vocab_size=6, drafting="top"))
    noise_a, noise_b = random_tree_noise(rng, a), random_tree_noise(rng, b)
    joined, noise = join_tree_requests(a, b, noise_a, noise_b)
    want = reference_tree_step(joined, noise)
    for part, part_noise, order in ((a, noise_a, [0, 1, 2]), (b, noise_b, [3, 4, 5, 6, 7])):
        alone = reference_tree_step(part, part_noise)
        sub, sub_noise = select_tree_requests(joined, order, noise)
        again = reference_tree_step(sub, sub_noise)
        assert np.array_equal(alone.num_accepted, again.num_accepted)
        assert np.array_equal(alone.num_accepted, want.num_accepted[order])
    with pytest.raises(ValueError, match="scheme"):
        join_tree_requests(a, dataclasses.replace(b, scheme="sglang"))


def test_the_tree_filler_follows_the_edge_and_what_the_device_declares():
    caps = load("torch").capabilities
    edge = next(e for e in TREE_EDGES if e.name == "sglang-threshold-single-zero")
    batch, _ = edge_batch(edge)
    filler, noise = tree_filler(caps, QUICK, edge, batch)
    assert filler.batch_size == 16 and filler.scheme == "sglang" and filler.threshold_single == 0.0
    assert filler.draft_probs is None and filler.vocab_size == batch.vocab_size
    assert filler.temperature[0] == 0 and (filler.temperature[1:4] > 0).all() and filler.top_p[2] < 1
    greedy_only = dataclasses.replace(caps, tree_schemes=("greedy",))
    plain, _ = tree_filler(greedy_only, QUICK, edge, batch)
    assert (plain.temperature == 0).all()


def test_the_edges_among_fillers_of_12_and_11_are_1_11s():
    assert introduced_in(EDGE) == "1.11"
    assert introduced_in("L1-sampler/edge/empty-residual-bias-then-top-k/canonical/float16/mixed") == "1.11"
    assert introduced_in("L1-sampler/edge-neighbours/empty-residual-bias-then-top-k/vllm/mixed") == "1.11"
    assert introduced_in("L1/trees/edge/full-width-rrs/mixed") == "1.11"
    assert introduced_in("L1/trees/edge-neighbours/full-width-rrs/mixed") == "1.11"
    assert introduced_in("L1/edge/race-tie/mixed") == "1.10"
    assert introduced_in("L1-sampler/edge/repetition-on-negative-logits/canonical/batches") == "1.9"


def test_a_rule_lost_on_one_mix_passes_1_10s_mix_and_fails_among_fillers_of_that_kind():
    mutant = zoo_mutant("accept-inclusive-when-top-p-without-greedy")
    results = edge_group(mutant, QUICK)
    before = {r.name: r.status for r in results if "/mixed-" not in r.name}   # 1.9's and 1.10's among them
    assert set(before.values()) == {"pass"}, {n: s for n, s in before.items() if s != "pass"}
    assert {r.status for r in declared_exact_group(mutant, QUICK)} == {"pass"}
    failed = next(r for r in results if r.name == "L1/edge/u0-zero-target-full/mixed-top-p")
    assert failed.status == "fail" and "at batch size 33" in failed.detail
    assert next(r for r in results if r.name == "L1/edge/u0-zero-target-full/mixed-greedy").status == "pass"


def test_the_correct_devices_pass_every_edge_among_fillers_of_each_kind():
    for device in (load("torch"), load("npu"), BlackBox(load("torch"))):
        results = edge_kind_checks(device, Context())
        assert results and {r.status for r in results} <= {"pass", "not_supported"}, \
            [(r.name, r.detail) for r in results if r.status not in ("pass", "not_supported")]
    names = {r.name for r in edge_kind_checks(load("torch"), QUICK)}
    assert {f"L1/edge/race-tie/mixed-{k}" for k in FILLER_KINDS} <= names
    assert {f"L1/edge-neighbours/race-tie/mixed-{k}" for k in FILLER_KINDS} <= names
    assert "L1/edge/vocab-one/mixed-top-k" not in names and "L1/edge/vocab-one/mixed-top-p" in names   # V = 1
    r = one_check(load("torch"), Context(), "L1/edge/race-tie/mixed-top-p")
    assert r.status == "pass" and r.extra["batches"] == [33, 257]


def test_each_kinds_fillers_are_all_of_it_and_a_kind_not_declared_is_not_asked():
    caps = load("torch").capabilities
    edge = next(e for e in EDGES if e.name == "race-tie")
    batch, _ = make_batch(edge.requests, dtype="float64")
    fillers = {kind: kind_filler(caps, QUICK, edge.name, batch, "float64", kind)[0] for kind in FILLER_KINDS}
    assert (fillers["greedy"].temperature == 0).all()
    for kind in ("sampled", "top-k", "top-p"):
        assert (fillers[kind].temperature > 0).all()
    assert (fillers["sampled"].top_k == 0).all() and (fillers["sampled"].top_p == 1).all()
    assert ((fillers["top-k"].top_k > 0) & (fillers["top-k"].top_k < batch.vocab_size)).all()
    assert (fillers["top-p"].top_p < 1).all() and (fillers["top-p"].top_k == 0).all()
    assert all((f.draft_token_ids >= 0).all() for f in fillers.values())   # no padding placeholders
    lacking = kind_filler(dataclasses.replace(caps, top_p=False), QUICK, edge.name, batch, "float64", "top-p")
    assert lacking == "device does not declare top_p: no filler of kind 'top-p'"


def test_the_edges_among_fillers_of_one_kind_are_1_11s():
    assert introduced_in("L1/edge/race-tie/mixed-greedy") == "1.11"
    assert introduced_in("L1/edge-neighbours/race-tie/mixed-top-p") == "1.11"
    assert introduced_in("L1/edge-neighbours/race-tie/mixed") == "1.10"
