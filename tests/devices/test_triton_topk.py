"""devices/triton_topk.py (the top-k candidates in two passes) and the kernels' per-row cut, under
Triton's interpreter: the candidates equal ``torch.topk``'s where flagged exact, the cut keeps what
the whole-row float64 decisions keep, and the step read through the cut gives the tokens of the
step on a filtered copy."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tests.devices.interpreter_mode import enter_or_skip  # noqa: E402

enter_or_skip()

from devices import filter_cut  # noqa: E402
from devices import triton_device as td  # noqa: E402
from devices.triton_mode import kernel_module  # noqa: E402
from tests.devices.test_filter_cut import random_rows  # noqa: E402
from tests.devices.test_filter_sync import same_cut  # noqa: E402

pytestmark = [pytest.mark.needs_extra("triton"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]
topk = kernel_module("devices.triton_topk", True)
SMALL = dict(block=32, programs=8)  # several chunks of several tiles at V = 300
KERNELS = ("group_max_kernel", "compact_kernel", "lane_top_kernel", "select_kernel", "row_select_kernel",
           "decide_kernel")
HOSTS = ("top_values", "sweep_values", "two_pass_values", "decide")


def values(logits, row_ids, ks, width, **kw):
    return topk.top_values(topk, logits, row_ids, torch.as_tensor(ks), width, **{**SMALL, **kw})


PATHS = {"one read, flagged rows": lambda *a: topk.sweep_values(topk, *a, lanes=16, programs=8),
         "one read": lambda *a: topk.sweep_values(topk, *a, lanes=64, programs=8),
         "two reads": lambda *a: topk.two_pass_values(topk, *a, **SMALL)}


@pytest.mark.parametrize("path,dtype", [(path, dtype) for path in PATHS
                                        for dtype in (torch.float32, torch.float64, torch.bfloat16)
                                        if not (path == "one read, flagged rows" and dtype == torch.float64)])
def test_the_candidates_are_the_largest_values(dtype, path):
    rng = np.random.default_rng(5)
    for case in range(6) if path == "two reads" else (1, 2, 3, 4):  # ties, bans, row subsets each twice
        z, _ = random_rows(rng, 12, 300, torch.float64, ties=case % 2 == 1, bans=(0.0, 0.5, 0.9)[case % 3])
        z = z.to(dtype)
        ks = rng.integers(1, 60, 12)
        width = int(ks.max()) + 1
        row_ids = None if case < 3 else torch.as_tensor(rng.permutation(12)[:7])
        rows = z if row_ids is None else z[row_ids]
        ks = ks[:rows.shape[0]]
        got, ties = PATHS[path](z, row_ids, torch.as_tensor(ks), width)
        want = torch.topk(rows.to(got.dtype), width, dim=1).values
        for p, k in enumerate(ks):
            assert torch.equal(got[p, :k + 1], want[p, :k + 1]), (case, p)
            assert int(ties[p]) == int((rows[p].to(got.dtype) == want[p, k - 1]).sum()), (case, p)


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_triton_decisions_are_torch_decide(order):
    """``decide_kernel`` against ``filter_cut.torch_decide`` on the same candidates: the same cut,
    the kept statistics within float64 rounding (the sums run in another order)."""
    rng = np.random.default_rng(9)
    for case in range(8):
        z, rows = random_rows(rng, 16, 300, torch.float32, case % 2 == 1, (0.0, 0.5, 0.97)[case % 3])
        ks = torch.as_tensor(rng.integers(1, 40, 16))
        rows = rows._replace(top_k=ks)
        if case % 4 >= 2:
            rows = rows._replace(min_p=torch.tensor(rng.choice([0.0, 0.05, 0.3], 16)))
        vals, ties = filter_cut.torch_top_values(z, None, ks, 41)
        want_tau, want_stats = filter_cut.torch_decide(vals, ties, ks, rows, order)
        got_tau, got_stats = topk.decide(topk, vals, ties, ks, rows, order)
        assert torch.equal(got_tau, want_tau.to(got_tau.dtype)), case
        torch.testing.assert_close(got_stats, want_stats.to(got_stats.dtype), rtol=1e-6, atol=0)


def test_a_plateau_past_the_slots_is_still_exact():
    """Entries at the floor are counted, not stored: a row of equal values (or of few finite ones)
    needs no more slots than the entries above its floor."""
    z = torch.zeros(3, 300)
    z[1] = torch.arange(300.0)
    z[2, :] = float("-inf")
    z[2, :3] = torch.tensor([1.0, 2.0, 3.0])
    got, ties = values(z, None, [5, 5, 5], 6, capacity=8)
    assert got[0].tolist() == [0.0] * 6 and int(ties[0]) == 300
    assert got[1].tolist() == [299.0, 298.0, 297.0, 296.0, 295.0, 294.0] and int(ties[1]) == 1
    assert got[2].tolist() == [3.0, 2.0, 1.0] + [float("-inf")] * 3 and int(ties[2]) == 297


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_cut_from_the_triton_candidates_keeps_what_the_whole_row_keeps(order):
    rng = np.random.default_rng(6)
    top_values = td.triton_top_values(topk, td.KernelConfig(block=32, programs=8))
    for case in range(8):
        z, rows = random_rows(rng, 16, 300, torch.float32, case % 2 == 1, (0.0, 0.5, 0.97)[case % 3])
        if case % 4 >= 2:
            rows = rows._replace(min_p=torch.tensor(rng.choice([0.0, 0.05, 0.3], 16)))
        want = filter_cut.whole_row_kept(z, rows, order)
        got = filter_cut.kept_mask(z, rows, order, top_values=top_values)
        assert torch.equal(got, want), (case, torch.nonzero((got != want).any(1)).squeeze(1).tolist())


@pytest.mark.parametrize("draft,keyed,every", [(True, True, False), (False, True, False), (True, False, False),
                                               (True, True, True), (False, True, True), (True, False, True)])
def test_the_step_through_the_cut_equals_the_step_on_the_filtered_copy(draft, keyed, every):
    """With ``every`` request on candidates the cut carries the rows' statistics and the step skips
    its first pass; else the step's statistics pass reads the rows through the cut."""
    rng = np.random.default_rng(7 + 2 * draft + keyed + 4 * every)
    B, K, V = 6, 3, 300
    k = rng.integers(0, K + 1, B)
    cu = np.concatenate([[0], np.cumsum(k)])
    n = int(cu[-1])
    logits = torch.tensor(rng.standard_normal((n + B, V)) * 2, dtype=torch.float32)
    logits[torch.tensor(rng.random((n + B, V)) < 0.2)] = float("-inf")
    probs = torch.softmax(torch.tensor(rng.standard_normal((n, V))), 1).float() if draft else None
    ids = torch.tensor(rng.integers(0, V, n))
    temperature = rng.choice([0.7, 1.0], B) if every else rng.choice([0.0, 0.7, 1.0], B)
    top_k = rng.choice([3, 20], B) if every else rng.choice([0, 3, 20, V + 1], B)
    top_p = rng.choice([1.0, 0.9, 0.5], B)
    config = td.KernelConfig(block=64, num_warps=1, programs=4, race_block=32, race_warps=1)
    cut = td.filter_cuts(logits, cu, temperature, top_k, top_p,
                         top_values=td.triton_top_values(topk, td.KernelConfig(block=32, programs=8)))
    filtered = td.filter_logits(logits, cu, temperature, top_k, top_p)
    args = (torch.tensor(cu), ids, probs)
    noise = (dict(seeds=torch.tensor(rng.integers(-2**62, 2**62, B)), positions=torch.tensor(rng.integers(0, 99, B)))
             if keyed else dict(uniforms=torch.tensor(rng.random(n)),
                                exponentials=torch.tensor(rng.exponential(size=(B, V)), dtype=torch.float32)))
    kw = dict(max_k=K, config=config, kernels_module=td.kernels(interpret=True), **noise)
    temps = torch.tensor(temperature)
    want = td.verify_tensors(*args, filtered, temps, **kw)
    got = td.verify_tensors(*args, logits, temps, cut=cut, **kw)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert cut is not None and torch.isfinite(cut.floor).any() and (cut.stats is not None) == every


def test_filter_cuts_off_cuda_is_the_eager_cut():
    """``devices.filter_graph.FilterCuts`` takes graphs on CUDA only; elsewhere it is ``filter_cuts``."""
    from devices.filter_graph import FilterCuts
    rng = np.random.default_rng(8)
    B, V = 3, 200
    cu = np.array([0, 1, 3, 4])
    logits = torch.tensor(rng.standard_normal((int(cu[-1]) + B, V)), dtype=torch.float32)
    args = (cu, np.ones(B), np.array([5, 0, 9]), np.array([0.9, 0.5, 1.0]))
    cuts = FilterCuts(td.triton_top_values(topk, td.KernelConfig(block=32, programs=8)))
    want = td.filter_cuts(logits, *args)
    for _ in range(3):
        assert same_cut(cuts(logits, *args), want)
    assert cuts(logits, cu, np.ones(B), np.zeros(B, np.int64), np.ones(B)) is None


class _Launch:
    """A kernel of ``triton_topk`` whose launches may read tensors on the host (Triton's interpreter
    copies its arguments): the guard is off for the launch only."""

    def __init__(self, kernel, guard):
        self.kernel, self.guard = kernel, guard

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.guard["on"] = False
            try:
                return self.kernel[grid](*args, **kwargs)
            finally:
                self.guard["on"] = True
        return launch


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_triton_cut_reads_nothing_back_outside_its_launches(monkeypatch, order):
    from types import SimpleNamespace

    from tests.devices.test_filter_sync import batches, host_reads_forbidden
    rng = np.random.default_rng(13)
    config = td.KernelConfig(block=32, programs=8)
    for logits, cu, temperature, top_k, top_p, min_p in batches(rng, 200):
        args = (logits, cu, temperature, top_k, top_p, min_p, order)
        want = td.filter_cuts(*args, td.triton_top_values(topk, config))
        with host_reads_forbidden(monkeypatch) as guard:
            module = SimpleNamespace(**{name: _Launch(getattr(topk, name), guard) for name in KERNELS},
                                     **{name: getattr(topk, name) for name in HOSTS})
            got = td.filter_cuts(*args, td.triton_top_values(module, config))
        assert same_cut(got, want)
        assert same_cut(want, td.filter_cuts(*args))  # the torch.topk candidates: the same cut


@pytest.mark.parametrize("capacity", [2048, 8])
def test_the_triton_candidates_decide_a_run_of_ties_past_them(capacity):
    from tests.devices.test_filter_cut import plateau_rows

    def top_values(logits, row_ids, ks, width):
        return topk.top_values(topk, logits, row_ids, ks, width, capacity=capacity, **SMALL)
    z, rows = plateau_rows()
    for min_p in (None, 0.05):
        params = rows if min_p is None else rows._replace(min_p=torch.full((4,), min_p, dtype=torch.float64))
        for order in ("canonical", "vllm"):
            want = filter_cut.whole_row_kept(z, params, order)
            assert torch.equal(filter_cut.kept_mask(z, params, order, top_values=top_values), want), (min_p, order)


@pytest.mark.parametrize("lanes,subset", [(16, False), (64, True), (2048, False)])
def test_the_candidates_of_the_sampler_rows_are_their_largest_values(lanes, subset):
    """``sweep_values(sampler=RowsSampler)`` reads the raw rows through §12's live bits, bias and
    records: the values and ties of ``torch.topk`` on the processed rows (``process_logits``), with
    rows flagged by a lane's capacity (16 lanes) and by fewer allowed ids than k + 1, and a subset of rows."""
    import dataclasses

    from specsim.bench.workloads import sampler_params
    ks_mod = kernel_module("devices.triton_sampler", True)
    rng = np.random.default_rng(lanes)
    B, K, V = 4, 2, 300
    ids = rng.integers(0, V, B * K)
    params = sampler_params(B, K, V, ids, 3, prompt=40, output=10)
    allowed = list(params.allowed_token_ids)
    allowed[2] = np.array([4, 9, 200])
    params = dataclasses.replace(params, allowed_token_ids=tuple(allowed), repetition_penalty=np.full(B, 0.3))
    logits = torch.tensor(rng.standard_normal((B * (K + 1), V)).astype(np.float32) * 2)
    cu = torch.tensor(np.arange(B + 1) * K)
    temps = torch.ones(B, dtype=torch.float64)
    fused = ks_mod.fused_inputs(params, np.full(B, K), ids, V, "cpu", torch.float32)
    live, edit_z = ks_mod.fused_prepare(ks_mod, logits, cu, temps, fused, K)
    inputs = ks_mod.sampler_inputs(params, np.full(B, K), ids, V, "cpu", torch.float32)
    processed = ks_mod.process_logits(ks_mod, logits, cu, K, inputs, 256, 512)
    sampler = topk.RowsSampler(live, fused.logit_bias, fused.row_request, fused.edit_start, edit_z)
    row_ids = torch.as_tensor(rng.permutation(B * (K + 1))[:7]) if subset else None
    rows = processed if row_ids is None else processed[row_ids]
    ks = rng.integers(1, 50, rows.shape[0])
    width = int(ks.max()) + 1
    got, ties = topk.sweep_values(topk, logits, row_ids, torch.as_tensor(ks), width, lanes=lanes, programs=8,
                                  sampler=sampler)
    want = torch.topk(rows, width, dim=1).values
    for p, k in enumerate(ks):
        assert torch.equal(got[p, :k + 1], want[p, :k + 1]), p
        assert int(ties[p]) == int((rows[p] == want[p, k - 1]).sum()), p
