"""``devices/torch_sampling.py``, the one torch implementation of each SPEC rule, against ``reference``.

The devices' own suites check the rules in context; this file pins the shared
rungs directly, on both layouts they serve (``[rows, V]`` and ``[B, slots, V]``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devices import torch_sampling as ts
from reference import target as ref_target
from specsim.testing.seeds import case_seed


def _rows(rng, n, V, ties):
    logits = rng.normal(size=(n, V)) * 2
    if ties:  # a few duplicated values so both filters meet boundary ties
        logits = np.round(logits, 1)
    return logits, rng.uniform(0.3, 2.0, n), rng.integers(0, V + 1, n), np.where(rng.random(n) < 0.3, 1.0,
                                                                                 rng.uniform(0.05, 1.0, n))


@pytest.mark.parametrize("ties", [False, True])
def test_target_probs_is_the_reference_in_float64(ties):
    rng = np.random.default_rng(case_seed(0, "torch-sampling", ties))
    logits, T, k, p = _rows(rng, 64, 33, ties)
    rows = ts.SamplingRows(torch.tensor(T), torch.tensor(k), torch.tensor(p))
    got = ts.target_probs(torch.tensor(logits), rows).numpy()
    want = np.stack([ref_target.target_probs(z, t, kk, pp) for z, t, kk, pp in zip(logits, T, k, p)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert ((got > 0) == (want > 0)).all()
    kept = ts.filter_kept(ts.scale_by_temperature(torch.tensor(logits), rows.temperature), rows).numpy()
    assert (kept == (want > 0)).all()


def test_rules_work_on_static_bucket_shapes():
    """[B, slots, V] (the hpu layout) gives the same rows as the flat [B·slots, V] layout."""
    rng = np.random.default_rng(case_seed(0, "torch-sampling-3d"))
    logits, T, k, p = _rows(rng, 12, 9, True)
    flat = ts.target_probs(torch.tensor(logits), ts.SamplingRows(torch.tensor(T), torch.tensor(k), torch.tensor(p)))
    shaped = ts.SamplingRows(*(torch.tensor(a).reshape(3, 4) for a in (T, k, p)))
    assert torch.equal(ts.target_probs(torch.tensor(logits).reshape(3, 4, 9), shaped).reshape(12, 9), flat)


def test_layout_first_rejection_and_output_rows():
    k = torch.tensor([2, 0, 3])
    layout = ts.ragged_layout(k, 5)
    accept = torch.tensor([True, False, True, True, True])
    dense = ts.per_request(accept, layout.starts, ts.output_width(3), False)
    num_accepted = ts.first_rejection(dense, k)
    assert num_accepted.tolist() == [1, 0, 3]
    drafts = ts.per_request(torch.tensor([10, 11, 20, 21, 22]), layout.starts, 4, -1)
    out = ts.emitted_rows(drafts, num_accepted, torch.tensor([7, 8, 9]))
    assert out.tolist() == [[10, 7, -1, -1], [8, -1, -1, -1], [20, 21, 22, 9]]
    assert ts.target_row_requests(k, 8).tolist() == [0, 0, 0, 1, 2, 2, 2, 2]


def test_race_and_argmax_break_ties_to_the_smallest_id():
    assert ts.race(torch.tensor([[0.0, 1.0, 1.0]]), torch.ones(1, 3, dtype=torch.float64)).tolist() == [1]
    assert ts.greedy_argmax(torch.tensor([[1.0, 3.0, 3.0]])).tolist() == [1]
