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
