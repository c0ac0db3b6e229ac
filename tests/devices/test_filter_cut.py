"""devices.filter_cut: top-k/top-p/min_p from the top-k candidates keep what the whole-row float64
decisions keep (devices.torch_sampling), row for row, ties and bans included (CPU torch)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from devices import filter_cut  # noqa: E402
from devices.torch_sampling import SamplingRows  # noqa: E402


def random_rows(rng, n: int, vocab: int, dtype, ties: bool, bans: float):
    """``n`` rows of logits (normal × 2), rounded to halves where ``ties`` (many equal values,
    some across the k-th), a share ``bans`` of them ``-inf``; and their parameters."""
    z = rng.standard_normal((n, vocab)) * 2
    if ties:
        z = np.round(z * 2) / 2
    z[rng.random((n, vocab)) < bans] = -np.inf
    k = rng.choice([0, 1, 2, 5, 17, 50, vocab - 1, vocab + 3], n)
    rows = SamplingRows(torch.tensor(rng.choice([0.5, 1.0, 1.7], n)), torch.tensor(k),
                        torch.tensor(rng.choice([1.0, 0.95, 0.9, 0.5, 0.1], n)))
    return torch.tensor(z, dtype=dtype), rows


@pytest.mark.parametrize("order", ["canonical", "vllm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_candidates_keep_what_the_whole_row_keeps(order, dtype):
    rng = np.random.default_rng(3)
    for case in range(24):
        ties, bans = case % 2 == 1, (0.0, 0.5, 0.97)[case % 3]
        z, rows = random_rows(rng, 16, 300, dtype, ties, bans)
        if case % 4 >= 2:
            rows = rows._replace(min_p=torch.tensor(rng.choice([0.0, 0.05, 0.3], 16)))
        want = filter_cut.whole_row_kept(z, rows, order)
        got = filter_cut.kept_mask(z, rows, order)
        assert torch.equal(got, want), (case, torch.nonzero((got != want).any(1)).squeeze(1).tolist())


def test_top_k_past_the_candidate_cap_decides_on_the_whole_row(monkeypatch):
    monkeypatch.setattr(filter_cut, "CANDIDATES", 4)
    rng = np.random.default_rng(4)
    z, rows = random_rows(rng, 32, 100, torch.float32, False, 0.0)
    assert torch.equal(filter_cut.kept_mask(z, rows), filter_cut.whole_row_kept(z, rows))


def test_a_tie_across_the_kth_entry_keeps_every_tied_token():
    z = torch.tensor([[3.0, 1.0, 2.0, 2.0, 2.0, 0.0]])
    rows = SamplingRows(torch.ones(1, dtype=torch.float64), torch.tensor([2]), torch.ones(1, dtype=torch.float64))
    assert filter_cut.kept_mask(z, rows).tolist() == [[True, False, True, True, True, False]]


def plateau_rows(V: int = 400):
    """Rows whose k-th value recurs far past the candidates, where top-p's cut depends on the whole
    run: one 3.0 above fifty 2.0s (the rest lower or banned), top-k 2, top-p 0.5 — the 3.0 holds
    e/(e+50) of the mass, so every 2.0 is kept; counting one 2.0 would keep the 3.0 alone."""
    z = torch.full((4, V), -5.0)
    z[:, 0] = 3.0
    z[:, 10:60] = 2.0
    z[1, 200:] = float("-inf")
    z[2, 1:10] = 2.5  # nine entries between: the k-th is 2.5, its run ends in the candidates
    z[3] = float("-inf")
    z[3, :3] = torch.tensor([1.0, 1.0, 0.5])  # fewer finite entries than k
    rows = SamplingRows(torch.ones(4, dtype=torch.float64), torch.tensor([2, 2, 12, 20]),
                        torch.full((4,), 0.5, dtype=torch.float64))
    return z, rows


@pytest.mark.parametrize("order", ["canonical", "vllm"])
@pytest.mark.parametrize("min_p", [None, 0.0, 0.05, 0.5])
def test_a_run_of_ties_past_the_candidates_counts_in_every_sum(order, min_p):
    z, rows = plateau_rows()
    if min_p is not None:
        rows = rows._replace(min_p=torch.full((4,), min_p, dtype=torch.float64))
    want = filter_cut.whole_row_kept(z, rows, order)
    got = filter_cut.kept_mask(z, rows, order)
    assert torch.equal(got, want), torch.nonzero((got != want).any(1)).squeeze(1).tolist()
    if min_p in (None, 0.0):
        assert int(got[0].sum()) == 51 and int(got[1].sum()) == 51


def test_tied_kept_weighs_each_candidate_by_its_count():
    candidates = torch.tensor([[3.0, 2.0, float("-inf")]])
    rows = SamplingRows(torch.ones(1, dtype=torch.float64), torch.tensor([2]), torch.tensor([0.5], dtype=torch.float64))
    assert filter_cut.tied_kept(candidates, torch.tensor([[1, 50, 0]]), rows).tolist() == [[True, True, False]]
    assert filter_cut.tied_kept(candidates, torch.tensor([[1, 1, 0]]), rows).tolist() == [[True, False, False]]
