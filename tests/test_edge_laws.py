"""Every SPEC §4 edge reaches a seeded, draft-probs-only device (HF transformers' profile)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("torch")

from specsim.conformance.cases.edges import as_draft_probs, dtype_twins, request_law  # noqa: E402
from specsim.conformance.checks.chain.exact import edge_group  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.judge.compare import reference_step  # noqa: E402
from specsim.testing.edges import EDGES, make_batch  # noqa: E402
from tests.fixtures.seeded_draft_device import SeededDraftDevice  # noqa: E402


@pytest.mark.parametrize("edge", [e for e in EDGES if e.point], ids=lambda e: e.name)
def test_a_point_edge_restated_with_one_hot_rows_has_the_same_answer(edge):
    """SPEC §3: a point proposal accepts and resamples as a one-hot draft row; same noise, same tokens."""
    batch, noise = make_batch(as_draft_probs(edge).requests, point=False)
    want = reference_step(batch, noise)
    emitted = [want.output_token_ids[i, : int(want.num_accepted[i]) + 1].tolist() for i in range(batch.batch_size)]
    assert emitted == edge.expected


@pytest.mark.parametrize("edge", EDGES, ids=lambda e: e.name)
def test_each_edge_law_holds_the_injected_answer(edge):
    """The injected-noise answer is an outcome of the law (its support) in both forms."""
    for form in (edge, as_draft_probs(edge)):
        for r, want in zip(form.requests, edge.expected):
            assert request_law(r, form.point).get(tuple(want), 0) > 0, (form.name, want)
            assert abs(sum(request_law(r, form.point).values()) - 1) < 1e-12


def test_a_seeded_draft_probs_only_device_gets_every_edge():
    device = SeededDraftDevice()
    results = edge_group(device, Context(quick=True))
    # each edge and its dtype twins, again at the batch sizes (SPEC 1.9) and among fillers (1.10: no neighbours'
    # check under the device's own randomness), and among fillers of each kind (1.11: no top-k below V = 1)
    kinds = 4 * len(EDGES) - sum(make_batch(e.requests)[0].vocab_size == 1 for e in EDGES)
    assert len(results) == 3 * (len(EDGES) + sum(len(dtype_twins(e, device.capabilities)) for e in EDGES)) + kinds
    bad = [f"{r.name}: {r.status}: {r.detail}" for r in results if r.status != "pass"]
    assert not bad, bad
    at_sizes = [r for r in results if r.name.endswith(("/batches", "/mixed")) or "/mixed-" in r.name]
    assert all("without injected noise" in r.detail for r in results if r not in at_sizes)
    assert all("under the device's own randomness" in r.detail for r in at_sizes)


class PlaceholderAccepting(SeededDraftDevice):
    """Accepts a placeholder draft as if it were token 0 (the bug class of vLLM's placeholder handling)."""

    def verify(self, batch, noise=None):
        drafts = np.where(batch.draft_token_ids < 0, 0, batch.draft_token_ids)
        probs = None if batch.draft_probs is None else np.nan_to_num(batch.draft_probs, nan=1.0 / batch.vocab_size)
        return super().verify(dataclasses.replace(batch, draft_token_ids=drafts, draft_probs=probs), noise)


def test_an_accepted_placeholder_fails_without_injected_noise():
    results = {r.name: r for r in edge_group(PlaceholderAccepting(), Context(quick=True))}
    bad = results["L1/edge/placeholder-full"]
    assert bad.status == "fail" and "are not its drafts [-1, 2]" in bad.detail, bad.detail


def test_an_emission_outside_the_law_fails_the_exact_support_check():
    """A device emitting a token the edge's law gives probability 0 (top-k=1 removed it) fails exactly."""
    class IgnoresTopK(SeededDraftDevice):
        def verify(self, batch, noise=None):
            return super().verify(dataclasses.replace(batch, top_k=np.zeros_like(batch.top_k)), noise)

    bad = {r.name: r for r in edge_group(IgnoresTopK(), Context(quick=True))}["L1/edge/u0-zero-target-full"]
    assert bad.status == "fail" and "which the exact law gives probability 0" in bad.detail, bad.detail
