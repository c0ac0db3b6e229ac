"""SPEC §2's tie rules on §12's rows in every order profile: top-k's and top-p's tie classes kept, greedy ties to
the smallest id — each an L1-sampler edge in ``canonical`` and ``vllm``, exact under injected noise and held to
its law in black box; the vllm order's exactly-k top-k and sorted-prefix top-p (docs/bugs.md #58) fail them."""

from __future__ import annotations

import dataclasses
from itertools import combinations

import numpy as np
import pytest

from devices.torch_device import make_cpu_device
from reference.sampler import sampler_rows
from specsim.conformance.cases.edges import request_law, sampler_edge_laws
from specsim.conformance.checks.sampler.group import edge_check, edge_law_check
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.spec_versions import introduced_in
from specsim.conformance.run.runner import Context
from specsim.conformance.stats.plan import run_plan
from specsim.mutants.zoo import MUTANTS
from specsim.testing.sampler_edges import SAMPLER_EDGES

TIE_EDGES = ("top-k-tie-class-kept", "top-p-tie-class-kept", "greedy-tie-smallest-id")
VLLM_MUTANTS = ("sampler-vllm-top-k-exactly-k", "sampler-vllm-top-p-sorted-prefix")


def _edge(name: str):
    return next(e for e in SAMPLER_EDGES if e.name == name)


def test_every_tie_edge_holds_in_every_order_profile_and_belongs_to_spec_1_2():
    for name in TIE_EDGES:
        edge = _edge(name)
        assert edge.orders == ("canonical", "vllm") and "allowed_token_ids" in edge.needs
        for order in edge.orders:
            assert introduced_in(f"L1-sampler/edge/{name}/{order}") == "1.2"
            assert introduced_in(f"L1-sampler/edge/{name}/{order}/V151936") == "1.2"
    assert introduced_in("L1-sampler/edge/min-p-threshold-ties/vllm") == "1.1"


@pytest.mark.parametrize("mutant_id", VLLM_MUTANTS)
def test_each_vllm_tie_mutant_fails_its_edge_in_the_vllm_order_only_both_ways(mutant_id):
    """Seed 3, quick: the named edge fails with injected noise and in black box (by its exact support); the same
    edge in the canonical order passes (the edit is the vllm order's), and the correct device passes all four."""
    mutant = MUTANTS[mutant_id]
    edge_name, _, order = mutant.killed_by.removeprefix("L1-sampler/edge/").partition("/")
    assert order == "vllm"
    edge, ctx = _edge(edge_name), Context(seed=3, quick=True)
    broken, correct = mutant.make(), make_cpu_device()
    plan = run_plan(BlackBox(correct).capabilities, ctx)
    for profile in ("canonical", "vllm"):
        name = f"L1-sampler/edge/{edge.name}/{profile}"
        assert edge_check(correct, edge, profile, "float64", name, ctx).status == "pass"
        assert edge_law_check(BlackBox(correct), edge, profile, "float64", name, ctx, plan).status == "pass"
        want = "fail" if profile == "vllm" else "pass"
        assert edge_check(broken, edge, profile, "float64", name, ctx).status == want
        result = edge_law_check(BlackBox(broken), edge, profile, "float64", name, ctx, plan)
        assert result.status == want, result.detail
        if want == "fail":
            assert "which the exact law gives probability 0" in result.detail


def _cut_rows(edge, order: str, keep) -> np.ndarray:
    """The edge's §12 rows ``[rows, V]`` with every tied token outside ``keep`` removed from the first row of
    each request (the drafted row) and the rows renormalised: a filter that cut the tie class there."""
    batch, _ = edge.batch(order)
    rows = sampler_rows(batch.target_logits, batch.num_draft_tokens, batch.draft_token_ids, batch.temperature,
                        batch.top_k, batch.top_p, **batch.sampler.as_kwargs())
    starts = np.concatenate([[0], np.cumsum(batch.num_draft_tokens + 1)])[:-1]
    cut = rows.copy()
    for r in starts:
        cut[r, [v for v in (1, 2, 3) if v not in keep]] = 0.0
        cut[r] /= cut[r].sum()
    return cut


@pytest.mark.parametrize("name, kept_members", [("top-k-tie-class-kept", 1), ("top-p-tie-class-kept", 1)])
def test_a_cut_tie_class_emits_a_sequence_of_probability_0_whatever_the_tie_break(name, kept_members):
    """Whichever members of the tie class {1, 2, 3} a filter keeps (exactly k, or the sorted prefix, in any order
    among equals), some request drafted a dropped one: it rejects, and what it emits the exact law never does."""
    edge = _edge(name)
    for order in edge.orders:
        laws = sampler_edge_laws(edge, order)
        batch, _ = edge.batch(order)
        starts = np.concatenate([[0], np.cumsum(batch.num_draft_tokens + 1)])
        for keep in combinations((1, 2, 3), kept_members):
            rows = _cut_rows(edge, order, keep)
            outside = []
            for i, r in enumerate(edge.requests):
                request = dataclasses.replace(r, draft_rows=batch.draft_probs[i: i + 1])
                bugged = request_law(request, False, rows[starts[i]: starts[i + 1]])
                outside += [seq for seq, p in bugged.items() if seq not in laws[i] and p > 0]
            assert outside, (name, order, keep)
