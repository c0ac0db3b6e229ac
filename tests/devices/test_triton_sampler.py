"""The Triton device's SPEC §12 path (devices/triton_sampler.py) under the interpreter, small sizes."""


import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tests.devices.interpreter_mode import enter_or_skip  # noqa: E402

enter_or_skip()

from devices.protocol import InvalidInput, SamplerParams, VerifyBatch  # noqa: E402
from devices.triton_device import make_interpreter_device  # noqa: E402
from reference.sampler import process_logits  # noqa: E402
from specsim.conformance.run.runner import Context  # noqa: E402
from specsim.conformance.checks.chain.exact import judge  # noqa: E402
from specsim.conformance.checks.sampler.group import random_case  # noqa: E402
from specsim.testing.seeds import case_seed  # noqa: E402

# tl.where evaluates both branches: -inf - -inf in the discarded one is expected
pytestmark = [pytest.mark.needs_extra("triton"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]


@pytest.fixture(scope="module")
def device():
    return make_interpreter_device()


@pytest.mark.parametrize("order,dtype", [("canonical", np.float64), ("vllm", np.float32)])
def test_the_processed_rows_are_the_references(device, order, dtype):
    for seed in range(2):
        batch, _ = random_case("all", order, Context(), seed)
        logits = batch.target_logits.astype(dtype)
        want = process_logits(logits, batch.num_draft_tokens, batch.draft_token_ids, **batch.sampler.as_kwargs())
        got = device.sampler_logits(batch, torch.tensor(logits), batch.request_offsets()).numpy()
        assert (np.isneginf(got) == np.isneginf(want)).all(), f"bans differ (order {order}, seed {seed})"
        finite = np.isfinite(want)
        tol = 0 if dtype == np.float64 else 1e-5
        assert np.allclose(got[finite], want[finite], rtol=tol, atol=tol), f"order {order}, seed {seed}"


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_l1_sampler_cases_with_every_parameter_pass(device, order):
    """L1-sampler's all-parameter cases (draft probs, point proposals, float32), quick sizes;
    ``specsim conform --device triton`` runs the whole group (every case, the edges) on a GPU."""
    for case in ("all", "all-point", "all-float32"):
        seed = case_seed(0, "L1-sampler", order, case)
        batch, noise = random_case(case, order, Context(quick=True), seed)
        result = judge(f"L1-sampler/{order}/{case}", device, batch, noise, seed)
        assert result.status == "pass", result.detail


def test_the_l1_sampler_edges_pass(device):
    """The issue's edges with exact answers (a banned draft never recovered, a bad word completed
    by this step's drafts, min_tokens crossing inside the step, ...)."""
    from specsim.conformance.checks.sampler.group import edge_checks   # the group's edges alone: its random cases are above
    results = edge_checks(device, Context(quick=True))
    assert results and {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results]


def test_a_row_the_drafts_empty_is_invalid_input(device):
    """V = 2, token 1 allowed only by the mask... and banned once draft 0 completes the bad word [0, 1]."""
    mask = np.array([[True, True], [False, True], [True, True]])
    batch = VerifyBatch(np.array([2]), np.array([0, 1]), None, np.zeros((3, 2)), np.ones(1), np.zeros(1, np.int64),
                        np.ones(1), seeds=np.array([1], np.uint64), positions=np.array([0]),
                        sampler=SamplerParams(token_mask=mask, bad_words=((np.array([0, 1]),),)))
    with pytest.raises(InvalidInput, match=r"token_mask: row 1 \(request 0, position 1\) allows no token"):
        device.verify(batch)


def test_a_row_the_drafts_empty_is_invalid_input_on_either_sampler_path(device):
    """The same emptied row, once on the fused path (no filters) and once on the processed path (a
    top-p): ``choose_path`` picks each, and both refuse with the same message (SPEC §12.4)."""
    from dataclasses import replace

    from devices.triton_device import FUSED, PLAIN, PROCESSED, choose_path
    mask = np.array([[True, True], [False, True], [True, True]])
    batch = VerifyBatch(np.array([2]), np.array([0, 1]), None, np.zeros((3, 2)), np.ones(1), np.zeros(1, np.int64),
                        np.ones(1), seeds=np.array([1], np.uint64), positions=np.array([0]),
                        sampler=SamplerParams(token_mask=mask, bad_words=((np.array([0, 1]),),)))
    filtered = replace(batch, top_p=np.array([0.9]))
    assert (choose_path(batch), choose_path(filtered)) == (FUSED, PROCESSED)
    assert choose_path(replace(batch, sampler=None)) == choose_path(replace(filtered, sampler=None)) == PLAIN
    for b in (batch, filtered):
        with pytest.raises(InvalidInput, match=r"^token_mask: row 1 \(request 0, position 1\) allows no token "
                                               r"after every ban$"):
            device.verify(b)


def test_min_p_alone_takes_the_processed_path():
    """min_p decides on the processed rows, like top-k and top-p; a greedy request's min_p filters nothing."""
    from dataclasses import replace

    from devices.triton_device import FUSED, PROCESSED, choose_path
    batch = VerifyBatch(np.array([1]), np.array([0]), None, np.zeros((2, 4)), np.ones(1), np.zeros(1, np.int64),
                        np.ones(1), seeds=np.array([1], np.uint64), positions=np.array([0]),
                        sampler=SamplerParams(min_p=np.array([0.1]), logit_bias=np.zeros((1, 4))))
    assert choose_path(batch) == PROCESSED
    assert choose_path(replace(batch, temperature=np.zeros(1))) == FUSED


def test_the_benchmark_parameters_give_the_torch_devices_tokens(device, order="vllm"):
    """``specsim bench --sampler all``'s parameters (every one on), keyed noise: the same tokens as
    the torch device (tools/gpu/sampler_check.py runs this at 256 × 4 × 128256 on a GPU)."""
    import dataclasses

    from devices.torch_device import make_cpu_device
    from specsim.bench.workloads import FILTERS, sampler_params
    rng = np.random.default_rng(5)
    B, K, V = 3, 3, 130
    ids = rng.integers(0, V, B * K)
    batch = VerifyBatch(np.full(B, K), ids, None, rng.standard_normal((B * (K + 1), V)).astype(np.float32) * 2,
                        np.array([1.0, 0.0, 0.7]), np.full(B, FILTERS["top_k"]), np.full(B, FILTERS["top_p"]),
                        seeds=np.array([1, 2, 3], np.uint64), positions=np.array([0, 5, 9]),
                        sampler=dataclasses.replace(sampler_params(B, K, V, ids, 0, prompt=20, output=6), order=order))
    got, want = device.verify(batch), make_cpu_device().verify(batch)
    assert (got.output_token_ids == want.output_token_ids).all() and (got.num_accepted == want.num_accepted).all()


# --- the fused path: §12 inside the step's loads (no top-k/top-p/min_p in the batch) --------

def without_filters(batch):
    """The batch with top-k, top-p and min_p off: the device takes its fused §12 path."""
    from dataclasses import replace
    sampler = replace(batch.sampler, min_p=None)
    return replace(batch, top_k=np.zeros(batch.batch_size, np.int64), top_p=np.ones(batch.batch_size),
                   sampler=sampler)


def unfused(device, batch, noise):
    """Today's other path on the same batch: the processed rows written (process_kernel,
    edit_kernel), then the plain step on them."""
    from dataclasses import replace
    rows = device.sampler_logits(batch, torch.tensor(batch.target_logits), batch.request_offsets()).numpy()
    return device.verify(replace(batch, target_logits=rows, sampler=None), noise)


@pytest.mark.parametrize("order", ["canonical", "vllm"])
def test_the_fused_path_passes_the_l1_sampler_cases_without_filters(device, order):
    """Each all-parameter case with its filters off (so the fused path runs): the reference's
    tokens (``judge``: margins as SPEC §9) and the unfused path's tokens, request for request."""
    for case in ("all", "all-point", "all-float32"):
        seed = case_seed(0, "L1-sampler", order, case)
        batch, noise = random_case(case, order, Context(quick=True), seed)
        batch = without_filters(batch)
        result = judge(f"L1-sampler/{order}/{case}/fused", device, batch, noise, seed)
        assert result.status == "pass", result.detail
        got, want = device.verify(batch, noise), unfused(device, batch, noise)
        assert (got.output_token_ids == want.output_token_ids).all(), (order, case)


@pytest.mark.parametrize("point", [False, True])
def test_the_fused_path_gives_the_torch_devices_tokens_with_keyed_noise(device, point):
    """``specsim bench --sampler all``'s parameters without filters, keyed noise, a greedy request
    among random ones, float32 and float64 logits: the torch device's tokens."""
    import dataclasses

    from devices.torch_device import make_cpu_device
    from specsim.bench.workloads import sampler_params
    rng = np.random.default_rng(7)
    B, K, V = 4, 3, 300  # V past one 256-wide tile: two race chunks, tiles ending mid-word
    ids = rng.integers(0, V, B * K)
    ids[K] = -1  # a placeholder: request 1 drafts nothing from its first position on
    draft = None if point else rng.dirichlet(np.ones(V), B * K)
    for order, dtype in (("vllm", np.float32), ("canonical", np.float64)):
        params = dataclasses.replace(sampler_params(B, K, V, np.maximum(ids, 0), 1, prompt=30, output=8),
                                     order=order, min_p=None)
        batch = VerifyBatch(np.full(B, K), ids, None if draft is None else draft.astype(dtype),
                            (rng.standard_normal((B * (K + 1), V)) * 2).astype(dtype), np.array([1.0, 0.0, 0.7, 1.3]),
                            np.zeros(B, np.int64), np.ones(B), seeds=np.array([1, 2, 3, 4], np.uint64),
                            positions=np.array([0, 5, 9, 2]), sampler=params)
        got, want = device.verify(batch), make_cpu_device().verify(batch)
        assert (got.output_token_ids == want.output_token_ids).all(), (order, got.output_token_ids,
                                                                       want.output_token_ids)
        assert (got.num_accepted == want.num_accepted).all()


def test_the_fused_paths_packed_bits():
    """``pack_bits``: bit v % 32 of word v // 32, the last word zero-padded."""
    from devices.triton_sampler import pack_bits
    mask = np.random.default_rng(0).random((3, 70)) < 0.5
    words = pack_bits(mask).view(np.uint32)
    assert words.shape == (3, 3)
    bits = (words[:, np.arange(70) // 32] >> (np.arange(70) % 32)) & 1
    assert (bits.astype(bool) == mask).all() and (words[:, 2] >> 6 == 0).all()


def test_the_fused_path_with_several_chunks_and_record_steps(monkeypatch):
    """Small launch shapes, so that rows split into several statistics and race chunks and each
    row's records take several steps (``edit_stats_kernel``, ``race_edits``' count): the torch
    device's tokens, keyed noise, both orders, draft and point, several seeds."""
    import dataclasses

    from devices.torch_device import make_cpu_device
    from devices.triton_device import KernelConfig
    from specsim.bench.workloads import sampler_params
    dev = make_interpreter_device(KernelConfig(block=64, num_warps=1, programs=24, race_block=32, race_warps=1))
    monkeypatch.setattr(dev.sampler_kernels, "FUSED_EDIT_BLOCK", 8)
    monkeypatch.setattr(dev.kernels, "EDIT_SCAN", 8)
    rng = np.random.default_rng(11)
    B, K, V = 3, 2, 200
    ids = rng.integers(0, V, B * K)
    for order, point in (("vllm", False), ("canonical", True)):
        params = dataclasses.replace(sampler_params(B, K, V, ids, 2, prompt=25, output=10), order=order, min_p=None,
                                     repetition_penalty=np.full(B, 0.2), frequency_penalty=np.full(B, -2.0))
        # (penalties that raise the history's tokens: the records hold the winners, whose chunk must be raced)
        batch = VerifyBatch(np.full(B, K), ids, None if point else rng.dirichlet(np.ones(V), B * K).astype(np.float32),
                            (rng.standard_normal((B * (K + 1), V)) * 2).astype(np.float32), np.array([1.0, 0.8, 0.0]),
                            np.zeros(B, np.int64), np.ones(B), seeds=np.array([5, 6, 7], np.uint64),
                            positions=np.array([3, 1, 4]), sampler=params)
        for seeds in ([5, 6, 7], [8, 9, 10], [11, 12, 13]):
            batch = dataclasses.replace(batch, seeds=np.array(seeds, np.uint64))
            got, want = dev.verify(batch), make_cpu_device().verify(batch)
            assert (got.output_token_ids == want.output_token_ids).all(), (order, point, seeds)


@pytest.mark.parametrize("only", ["token_mask", "allowed_token_ids", "logit_bias", "presence_penalty",
                                  "bad_words", "none of the records"])
def test_the_fused_path_with_one_parameter_at_a_time(device, only):
    """Each parameter alone (the others' buffers absent), ragged drafts with a request of K = 0,
    and one case whose rows hold no record but the drafts': the torch device's tokens."""
    import dataclasses

    from devices.torch_device import make_cpu_device
    from specsim.bench.workloads import sampler_params
    rng = np.random.default_rng(13)
    k, V = np.array([2, 0, 3]), 90
    ids = rng.integers(0, V, int(k.sum()))
    full = sampler_params(3, 3, V, np.resize(ids, 9), 4, prompt=12, output=5)
    if only == "none of the records":
        params = dataclasses.replace(full, order="canonical", **{f.name: None for f in dataclasses.fields(full)
                                                                  if f.name not in ("order", "logit_bias")})
    else:
        params = dataclasses.replace(full, **{f.name: None for f in dataclasses.fields(full)
                                              if f.name not in ("order", only)})
    if only == "token_mask":
        params = dataclasses.replace(params, token_mask=rng.random((int(k.sum()) + 3, V)) < 0.6)
    batch = VerifyBatch(k, ids, rng.dirichlet(np.ones(V), int(k.sum())), rng.standard_normal((int(k.sum()) + 3, V)) * 2,
                        np.array([1.0, 0.9, 0.0]), np.zeros(3, np.int64), np.ones(3), seeds=np.array([3, 1, 2], np.uint64),
                        positions=np.array([7, 8, 9]), sampler=params)
    got, want = device.verify(batch), make_cpu_device().verify(batch)
    assert (got.output_token_ids == want.output_token_ids).all() and (got.num_accepted == want.num_accepted).all()


# --- the fused path with filters: the top-k candidates of the §12 rows, never written ----------

def fused_filter_batch(rng, order: str, B: int = 4, K: int = 3, V: int = 300, point: bool = False,
                       few_allowed: bool = True):
    """Every §12 parameter, every request random with a top-k (1 .. 60), top-p and min_p: the fused
    path's filters (``cut_in_one_sweep``). ``few_allowed``: request 1 allows three ids, fewer than its
    top-k, so its rows are flagged and redone on the whole row (``row_select_kernel``)."""
    import dataclasses

    from specsim.bench.workloads import sampler_params
    ids = rng.integers(0, V, B * K)
    params = dataclasses.replace(sampler_params(B, K, V, ids, int(rng.integers(1000)), prompt=30, output=8),
                                 order=order, min_p=rng.choice([0.0, 0.05, 0.2], B))
    if few_allowed:
        allowed = list(params.allowed_token_ids)
        allowed[1] = np.array([ids[K], 7, 150])
        params = dataclasses.replace(params, allowed_token_ids=tuple(allowed))
    top_k = rng.integers(1, 61, B)
    top_k[0] = 1
    return VerifyBatch(np.full(B, K), ids, None if point else rng.dirichlet(np.ones(V), B * K).astype(np.float32),
                       (rng.standard_normal((B * (K + 1), V)) * 2).astype(np.float32),
                       rng.uniform(0.5, 1.5, B), top_k, rng.choice([0.8, 0.95, 1.0], B),
                       seeds=rng.integers(0, 2**63, B).astype(np.uint64), positions=rng.integers(0, 50, B),
                       sampler=params)


@pytest.mark.parametrize("order,point", [("vllm", False), ("canonical", True)])
def test_the_fused_path_with_filters_gives_the_torch_devices_tokens(device, order, point):
    """Top-k, top-p and min_p on every request with every §12 parameter: the fused path (the cut of
    the rows the sampler leaves, found without writing them) gives the torch device's tokens with
    keyed noise, and the processed path's."""
    from dataclasses import replace

    from devices.torch_device import make_cpu_device
    from devices.triton_device import FUSED, PROCESSED, choose_path
    rng = np.random.default_rng(21 if point else 20)
    for _ in range(2):
        batch = fused_filter_batch(rng, order, point=point)
        assert choose_path(batch) == FUSED
        assert choose_path(replace(batch, top_k=np.where(np.arange(batch.batch_size) == 2, 0, batch.top_k))) == PROCESSED
        got, want = device.verify(batch), make_cpu_device().verify(batch)
        assert (got.output_token_ids == want.output_token_ids).all(), (order, got.output_token_ids,
                                                                       want.output_token_ids)
        assert (got.num_accepted == want.num_accepted).all()
        rows = device.processed_rows(batch, batch.request_offsets(), torch.tensor(batch.target_logits))
        processed = device.assemble(rows, *device.launch(batch, None, rows))
        assert (processed.output_token_ids == got.output_token_ids).all()


def test_the_fused_path_with_filters_passes_the_l1_sampler_cases(device):
    """L1-sampler's ``all-top-k`` case (every request sampled and cut by a top-k): the device takes its
    fused path with the filters on it (so the suite holds that path, not only the processed one), and
    gives the reference's tokens (``judge``, margins as SPEC §9); a draft-probability and a point variant."""
    from dataclasses import replace

    from devices.triton_device import FUSED, choose_path
    for order in ("canonical", "vllm"):
        seed = case_seed(0, "L1-sampler", order, "all-top-k")
        batch, noise = random_case("all-top-k", order, Context(quick=True), seed)
        for b in (batch, replace(batch, draft_probs=None)):
            assert choose_path(b) == FUSED
            result = judge(f"L1-sampler/{order}/all-top-k", device, b, noise, seed)
            assert result.status == "pass", result.detail


def test_a_row_the_drafts_empty_is_invalid_input_on_the_fused_path_with_filters(device):
    """SPEC §12.4 on the fused path with filters: the emptied row's kept maximum is -inf."""
    from dataclasses import replace

    from devices.triton_device import FUSED, choose_path
    mask = np.array([[True, True], [False, True], [True, True]])
    batch = VerifyBatch(np.array([2]), np.array([0, 1]), None, np.zeros((3, 2)), np.ones(1), np.ones(1, np.int64),
                        np.ones(1), seeds=np.array([1], np.uint64), positions=np.array([0]),
                        sampler=SamplerParams(token_mask=mask, bad_words=((np.array([0, 1]),),)))
    assert choose_path(batch) == FUSED and choose_path(replace(batch, top_k=np.zeros(1, np.int64))) == FUSED
    with pytest.raises(InvalidInput, match=r"^token_mask: row 1 \(request 0, position 1\) allows no token "
                                           r"after every ban$"):
        device.verify(batch)


def test_the_fused_top_k_bound_is_the_sweeps():
    from devices.triton_device import FUSED_TOP_K
    from devices.triton_mode import kernel_module
    assert FUSED_TOP_K == kernel_module("devices.triton_topk", True).SWEEP_WIDTH - 1


@pytest.mark.parametrize("records,order", [(8, "vllm"), (512, "canonical")])
def test_the_fused_statistics_are_the_processed_rows(monkeypatch, records, order):
    """``fused_stats`` (``live_kernel``, ``edit_stats_kernel``, ``fused_stats_kernel``) against
    ``process_logits``' rows, row by row: the columns' statistics combined give each processed row's
    maximum and first argmax exactly and its softmax sum within float32 rounding; the live words are
    the mask and allowed bits less the records' entries; each record's value is its processed entry.
    Rows dense with records (a prompt longer than V), several chunks a row, ``records`` a step of
    ``edit_stats_kernel``: what a token-level comparison can miss (an entry counted twice shifts a
    sum, not always a token)."""
    import dataclasses

    from devices.triton_device import KernelConfig
    from devices.triton_host import vocab_chunks
    from specsim.bench.workloads import sampler_params
    dev = make_interpreter_device(KernelConfig(block=64, num_warps=1, programs=40, race_block=32, race_warps=1))
    ks = dev.sampler_kernels
    monkeypatch.setattr(ks, "FUSED_EDIT_BLOCK", records)
    rng = np.random.default_rng(records)
    B, K, V = 3, 2, 300
    k = np.array([2, 0, 1])
    ids = rng.integers(0, V, int(k.sum()))
    rows = int(k.sum()) + B
    params = dataclasses.replace(sampler_params(B, K, V, np.resize(ids, B * K), 5, prompt=400, output=30),
                                 order=order, min_p=None, token_mask=rng.random((rows, V)) < 0.9)
    logits = torch.tensor((rng.standard_normal((rows, V)) * 2).astype(np.float32))
    cu = torch.tensor(np.concatenate([[0], np.cumsum(k)]), dtype=torch.int64)
    temperature = torch.tensor([1.0, 0.7, 1.3], dtype=torch.float32)
    fused = ks.fused_inputs(params, k, ids, V, "cpu", torch.float32)
    want = ks.process_logits(ks, logits, cu, K, ks.sampler_inputs(params, k, ids, V, "cpu", torch.float32), 64, 64,
                             num_warps=1).double()
    chunk, nchunk = vocab_chunks(V, rows, 64, 40)
    assert nchunk > 1
    columns = nchunk + 1  # the records' statistics: a column of their own
    stats = (torch.empty(rows, columns), torch.empty(rows, columns), torch.empty(rows, columns, dtype=torch.int32))
    live, edit_z = ks.fused_stats(ks, logits, cu, temperature, torch.empty(B, dtype=torch.int32), fused, stats, K,
                                  chunk, 64, 1)
    t = temperature.double()[torch.tensor(np.repeat(np.arange(B), k + 1))][:, None]
    m = stats[0].double()
    top = m.max(dim=1).values
    got_sum = (stats[1].double() * torch.exp((m - top[:, None]) / t).nan_to_num(0.0)).sum(dim=1)
    got_arg = torch.where(m == top[:, None], stats[2], 2**31 - 1).min(dim=1).values
    assert torch.equal(top, want.max(dim=1).values)
    assert torch.equal(got_arg.long(), want.argmax(dim=1))
    want_sum = torch.exp((want - top[:, None]) / t).sum(dim=1)
    assert torch.allclose(got_sum, want_sum, rtol=1e-5), (got_sum, want_sum)
    e = ks.row_edits(params, k, ids, with_drafts=True)
    assert torch.equal(edit_z[:len(e["row"])].double(), want[e["row"], e["token"]])
    allowed = ks.allowed_mask(params, B, V)[np.repeat(np.arange(B), k + 1)] & params.token_mask
    allowed[e["row"], e["token"]] = False
    assert (live.numpy() == ks.pack_bits(allowed)).all()
