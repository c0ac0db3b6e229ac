"""The Triton device in Triton's CPU interpreter: Philox words bit for bit, every
SPEC §4 edge, token-for-token agreement with ``reference.verify`` (injected and
keyed noise, margin-aware per §9), vocabulary sizes around the tile, and chunked
reductions. Small sizes: the interpreter runs each program in numpy.

This test process runs Triton in interpreter mode (``devices/triton_mode.py``);
where it already runs compiled kernels (a CUDA machine, after a compiled import) the
module is skipped with that reason. Skipped cleanly where triton is not installed.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from tests.devices.interpreter_mode import enter_or_skip  # noqa: E402

enter_or_skip()

from devices import triton_device as td  # noqa: E402
from devices.protocol import InvalidInput, Noise  # noqa: E402
from reference import rng as ref_rng  # noqa: E402
from specsim.testing.batches import BatchSpec, random_batch, random_noise, select_requests  # noqa: E402
from specsim.judge.compare import compare, reference_step  # noqa: E402
from specsim.testing.edges import EDGES, make_batch  # noqa: E402
from specsim.testing.seeds import case_seed  # noqa: E402

tk = td.kernels(interpret=True)
# tl.where evaluates both branches: log(0) and -inf - -inf in the discarded one are expected
pytestmark = [pytest.mark.needs_extra("triton"), pytest.mark.filterwarnings("ignore::RuntimeWarning")]

SUITE_SEED = 20261122
BLOCK = 64
SMALL = td.KernelConfig(block=BLOCK, num_warps=1, programs=1, race_block=None, race_warps=None)
CHUNKED = td.KernelConfig(block=BLOCK, num_warps=1, programs=64, race_block=None, race_warps=None)  # several chunks per row
DEVICE = td.TritonDevice("cpu", SMALL)


def _seeds(values) -> torch.Tensor:
    return torch.from_numpy(np.asarray(values, np.uint64).view(np.int64).copy())


# --- §5.2 keyed streams ----------------------------------------------------------

SEEDS = [0, 7, 2**32 - 1, 2**32, 2**63, 2**64 - 1, 123456789012345]
POSITIONS = [0, 5, 2**31, 2**32 - 1, 77, 1, 4096]


@pytest.mark.parametrize("purpose,column", [(ref_rng.ACCEPT, 0), (ref_rng.RECOVER, 0), (ref_rng.DRAFT, 3)])
def test_philox_words_equal_reference_bit_for_bit(purpose, column):
    n = 37  # not a multiple of the tile or of 4
    words = torch.empty((len(SEEDS), n), dtype=torch.int32)
    exps = torch.empty((len(SEEDS), n), dtype=torch.float64)
    tk.stream_kernel[(len(SEEDS),)](_seeds(SEEDS), torch.tensor(POSITIONS), words, exps, purpose, column, n,
                                    BLOCK=16, FP64=True)
    for i, (s, L) in enumerate(zip(SEEDS, POSITIONS)):
        want = ref_rng.stream_words(s, L, purpose, column, n)
        np.testing.assert_array_equal(words[i].numpy().view(np.uint32), want)
        np.testing.assert_array_equal(exps[i].numpy(), ref_rng.exponential(want))  # float64: same formula


def test_float32_exponential_is_accurate_and_positive_at_both_ends():
    """§5.2: in float32 the top half goes through log1p, so x = 2^32 - 1 gives 2^-33, not 0."""
    words = np.array([0, 1, 2**24 + 3, 2**31 - 1, 2**31, 2**32 - 2**20, 2**32 - 2, 2**32 - 1,
                      0x12345678, 0xDEADBEEF, 0x9E3779B9, 0x80000001, 5, 6, 7, 8], np.uint32)
    out = torch.empty(len(words), dtype=torch.float32)
    tk.exponential_kernel[(1,)](torch.from_numpy(words.view(np.int32).copy()), out, len(words), FP64=False)
    got, want = out.numpy().astype(np.float64), ref_rng.exponential(words)
    assert (got > 0).all() and np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-6)


# --- §4 edges and the §2/§3 tie rules ---------------------------------------------

@pytest.mark.parametrize("edge", EDGES, ids=[e.name for e in EDGES])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_edges(edge, dtype):
    if dtype == "float32" and not edge.float32_exact:
        pytest.skip("the answer hinges on a float64 ratio (SPEC §9 waives float32 there)")
    batch, noise = make_batch(edge.requests, dtype=dtype, point=edge.point)
    out = DEVICE.verify(batch, noise)
    assert [out.emitted(i) for i in range(batch.batch_size)] == edge.expected, edge.why


# --- agreement with the reference ------------------------------------------------

CASES = [(dtype, draft, keyed) for dtype in ("float64", "float32") for draft in (True, False) for keyed in (True, False)]
CASES += [(dtype, draft, True) for dtype in ("bfloat16", "float16") for draft in (True, False)]  # up-cast in the kernels


@pytest.mark.parametrize("dtype,draft,keyed", CASES)
def test_matches_reference_on_random_batches(dtype, draft, keyed):
    rng = np.random.default_rng(case_seed(SUITE_SEED, "random", dtype, draft, keyed))
    batch = random_batch(rng, BatchSpec(batch=6, max_k=4, vocab_size=96, dtype=dtype, draft_probs=draft,
                                        closeness=0.3))
    noise = None if keyed else random_noise(rng, batch)
    result = compare(batch, DEVICE.verify(batch, noise), reference_step(batch, noise))
    assert result.ok, result.summary()
    assert len(result.waived) <= 1, result.summary()


@pytest.mark.parametrize("vocab_size", [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 3])
@pytest.mark.parametrize("config", [SMALL, CHUNKED], ids=["one-chunk", "chunked"])
def test_vocab_sizes_around_the_tile(vocab_size, config):
    """Tails of the last tile, and rows split into several chunks whose statistics and race winners combine."""
    rng = np.random.default_rng(case_seed(SUITE_SEED, "vocab", vocab_size, config.programs))
    batch = random_batch(rng, BatchSpec(batch=4, max_k=3, vocab_size=vocab_size, dtype="float32",
                                        zero_k_fraction=0.0, top_k_fraction=0.0, top_p_fraction=0.0))
    device = td.TritonDevice("cpu", config)
    for noise in (None, random_noise(rng, batch)):
        result = compare(batch, device.verify(batch, noise), reference_step(batch, noise))
        assert result.ok, result.summary()


PROBE = """

@triton.jit
def _complement_probe(words_ptr, out_ptr, N: tl.constexpr, FP64: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, complement_floor(tl.load(words_ptr + i).to(tl.uint32), FP64))
"""


@pytest.mark.parametrize("fp64", [False, True], ids=["float32", "float64"])
def test_the_bounds_uniform_is_never_above_the_words_complement_uniform(fp64):
    """``below_bound`` skips a tile only if no element can win given ``E ≥ y``; it takes ``y`` from
    ``complement_floor``, which must never exceed the complement uniform ``(2^32 - x - 1/2)·2^-32`` (a larger ``y``
    could skip the winner's tile), and stays within ``2^-23`` of it (float32) or is ``c·2^-32`` exactly (float64)."""
    from devices.triton_mode import kernel_module
    source = open(tk.__spec__.origin, encoding="utf-8").read() + PROBE
    probe = kernel_module("devices.triton_kernels", True, source=source)._complement_probe
    edges = [0, 1, 2, 510, 511, 512, 513, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 513, 2**32 - 512, 2**32 - 2, 2**32 - 1]
    rng = np.random.default_rng(case_seed(SUITE_SEED, "complement-floor"))
    words = np.array(edges + list(rng.integers(0, 2**32, 64 - len(edges))), dtype=np.int64)
    out = torch.empty(64, dtype=torch.float64 if fp64 else torch.float32)
    probe[(1,)](torch.from_numpy(words), out, N=64, FP64=fp64)
    got = out.double().numpy()
    c = (2**32 - 1 - words).astype(np.float64)
    uniform = (c + 0.5) * 2.0**-32
    assert (got <= uniform).all(), words[got > uniform]
    if fp64:
        assert (got == c * 2.0**-32).all()
    else:
        assert (uniform - got < 2.0**-23).all() and (got >= 0).all()


@pytest.mark.parametrize("draft,logit_scale", [(True, 0.5), (False, 8.0)], ids=["draft-flat", "point-peaked"])
def test_race_bound_skips_tiles_and_changes_no_token(draft, logit_scale, monkeypatch):
    """The race skips the logarithms of a tile none of whose elements can beat the chunk's best score
    (``below_bound``). It must change no token — equal to the exact race and to the reference — and
    must skip: fewer tiles take their exponentials than without the bound."""
    rng = np.random.default_rng(case_seed(SUITE_SEED, "bound", draft, logit_scale))
    batch = random_batch(rng, BatchSpec(batch=3, max_k=2, vocab_size=700, dtype="float32", draft_probs=draft,
                                        logit_scale=logit_scale, greedy_fraction=0.0, closeness=0.5))
    calls = {}
    exact = tk.inverse_exponential

    def counted(label):
        def inverse_exponential(words, FP64):
            calls[label] = calls.get(label, 0) + 1
            return exact(words, FP64)
        return inverse_exponential

    outs = {}
    for bound in (False, True):
        monkeypatch.setattr(tk, "inverse_exponential", counted(bound))
        outs[bound] = td.TritonDevice("cpu", dataclasses.replace(SMALL, bound=bound),
                                      kernels_module=tk).verify(batch)
    assert np.array_equal(outs[True].output_token_ids, outs[False].output_token_ids)
    assert np.array_equal(outs[True].num_accepted, outs[False].num_accepted)
    assert calls[True] < 0.7 * calls[False], calls
    result = compare(batch, outs[True], reference_step(batch, None))
    assert result.ok, result.summary()


def test_keyed_tokens_are_batch_invariant():
    """§5.2: a request's keyed noise depends on (seed, position), never on its batch row."""
    rng = np.random.default_rng(case_seed(SUITE_SEED, "invariance"))
    batch = random_batch(rng, BatchSpec(batch=4, max_k=3, vocab_size=60, greedy_fraction=0.0))
    whole = DEVICE.verify(batch)
    order = [3, 0]
    sub, _ = select_requests(batch, order)
    part = DEVICE.verify(sub)
    for row, i in enumerate(order):
        assert part.emitted(row) == whole.emitted(i)


def test_injected_noise_is_used_exactly():
    """Exponentials that make token 2 win by a mile must make token 2 the bonus."""
    rng = np.random.default_rng(case_seed(SUITE_SEED, "injected"))
    batch = random_batch(rng, BatchSpec(batch=3, max_k=0, vocab_size=20, greedy_fraction=0.0, masked_fraction=0.0,
                                        top_k_fraction=0.0, top_p_fraction=0.0, draft_probs=False))
    E = np.ones((3, 20))
    E[:, 2] = 1e-9
    out = DEVICE.verify(batch, Noise(np.zeros(0), E))
    assert [out.emitted(i) for i in range(3)] == [[2], [2], [2]]


@pytest.mark.parametrize("every", [False, True], ids=["some-filter", "every-row-on-its-candidates"])
def test_triton_step_with_filters_emits_the_devices_tokens(every):
    """``TritonStep(filters=StepFilters(...))`` (an engine's eager call, its host arrays as the engine sets
    them) emits what ``TritonDevice.verify`` emits for the same batch and keyed noise, and the reference's."""
    from devices.triton_step import StepFilters, TritonStep
    rng = np.random.default_rng(case_seed(SUITE_SEED, "triton-step-filters", every))
    spec = BatchSpec(batch=5, max_k=3, vocab_size=2 * BLOCK + 3, dtype="float32", greedy_fraction=0.0 if every else 0.2,
                     top_k_fraction=1.0 if every else 0.4, top_p_fraction=0.5, top_k_below_vocab=True)
    batch = random_batch(rng, spec)
    if every:
        batch = dataclasses.replace(batch, top_k=np.minimum(np.maximum(batch.top_k, 1), batch.vocab_size - 1))
    cu = batch.request_offsets()
    filters = StepFilters(cu, batch.temperature, batch.top_k, batch.top_p)
    out, num_accepted = TritonStep(SMALL)(
        torch.from_numpy(cu), torch.from_numpy(batch.draft_token_ids.astype(np.int64)),
        torch.from_numpy(batch.draft_probs), torch.from_numpy(batch.target_logits),
        torch.from_numpy(batch.temperature.astype(np.float32)), max_k=batch.max_k,
        seeds=_seeds(batch.seeds), positions=torch.from_numpy(batch.positions.astype(np.int64)), filters=filters)
    want = DEVICE.verify(batch)
    width = batch.max_k + 1
    assert np.array_equal(out.numpy()[:, :width], want.output_token_ids)
    assert np.array_equal(num_accepted.numpy(), want.num_accepted)
    result = compare(batch, want, reference_step(batch, None))
    assert result.ok, result.summary()


# --- errors -----------------------------------------------------------------------

def test_invalid_input_is_refused_with_the_argument_named():
    batch, noise = make_batch(EDGES[0].requests, dtype="float64")
    bad = Noise(np.array([1.5]), noise.exponentials)
    with pytest.raises(InvalidInput, match="uniforms"):
        DEVICE.verify(batch, bad)


@pytest.mark.parametrize("interpret_env", [None, "1"])
def test_triton_is_never_the_interpreter(monkeypatch, interpret_env):
    """Without CUDA, 'triton' refuses (naming 'triton-interpret'), even under TRITON_INTERPRET=1."""
    if interpret_env is None:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", interpret_env)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="triton-interpret"):
        td.make_device()


def test_interpreter_device_has_its_own_name():
    from devices.registry import load
    device = load("triton-interpret")
    assert device.name == "triton-interpret" and device.capabilities.rng == "philox"
    assert type(device.kernels.step_kernel).__name__ == "InterpretedFunction"


def test_a_process_runs_triton_one_way(monkeypatch):
    """This process interprets: the compiled device refuses to load, and says why (even with a GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1 here"):
        td.make_device()


def test_mode_is_decided_by_the_device_not_by_an_import():
    """A fresh process: loading 'triton-interpret' decides nothing; its first call enters interpreter mode,
    and a plain import of triton afterwards does not change it."""
    code = ("import sys; from devices.registry import load; from devices import triton_mode as m; "
            "d = load('triton-interpret'); assert m.interpreting() is None, 'load decided the mode'; "
            "d.kernels; import triton.language as tl; print(m.interpreting(), type(tl.philox).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.stdout.split() == ["True", "InterpretedFunction"], out.stderr


# --- SPEC §11 trees: the tree_walk kernel in the interpreter ------------------------------

@pytest.mark.parametrize("case", ["rrs-with-replacement", "rrs-without-replacement", "rrs-point", "greedy",
                                  "sglang-duplicates", "sglang-relaxed"])
def test_tree_kernel_matches_the_reference_coin_for_coin(case):
    from specsim.conformance.checks.trees.l1 import CASES
    from specsim.testing.trees import compare_tree, random_tree_batch, random_tree_noise, reference_tree_step
    for seed in range(3):
        rng = np.random.default_rng(case_seed(SUITE_SEED, f"tree/{case}/{seed}"))
        batch = random_tree_batch(rng, dataclasses.replace(CASES[case], vocab_size=int(rng.integers(2, 150)), batch=5))
        noise = random_tree_noise(rng, batch)
        assert not compare_tree(DEVICE.verify_tree(batch, noise), reference_tree_step(batch, noise),
                                repro=f" [case {case}, seed {seed}]")
        assert not compare_tree(DEVICE.verify_tree(batch), reference_tree_step(batch, None))


def test_tree_groups_pass_on_the_interpreter():
    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.trees.l1 import tree_l1_group
    from specsim.conformance.checks.trees.l2 import tree_l2_group
    results = tree_l1_group(DEVICE, Context(quick=True)) + tree_l2_group(DEVICE, Context(quick=True))
    assert {r.status for r in results} == {"pass"}, [(r.name, r.detail) for r in results if r.status != "pass"]
    # the engine-sized trees (64+ nodes, depth 6) are in L1-trees; here at V = 96, on a GPU at 128256
    engine = [r for r in results if r.name.startswith("L1/trees/engine/")]
    assert len(engine) == 6 and all("deepest accepted path 6" in r.detail for r in engine)
    assert any(r.name.startswith("L1/trees/pattern/") for r in results)


def test_every_capability_both_ways():
    """SPEC §10: each declared mode served, each undeclared one (and each limit + 1) refused."""
    from specsim.conformance.checks.interface.capabilities import ROWS, check_row
    # Not the row at the declared max_vocab_size: one request over 2^20 tokens takes the CPU
    # interpreter minutes; the compiled device runs it in `specsim conform` on a GPU.
    results = [check_row(DEVICE, row) for row in ROWS if row.name != "max_vocab_size"]
    bad = [f"{r.name}: {r.detail}" for r in results if r.status in ("fail", "error")]
    assert not bad, bad


# --- SPEC §4 withdrawn drafts: the residual reads the withdrawn draft's row, padding's reads none ----------

def _withdrawn_batch(name: str, **spec):
    """A batch holding both kinds of placeholder. Each withdrawn draft's row puts 0.9 on its target row's
    argmax, so that its residual ``max(t − d, 0)`` mostly leaves out the token padding's residual ``t``
    favours: the answers of the two rules differ in most requests that emit there."""
    rng = np.random.default_rng(case_seed(SUITE_SEED, "withdrawn", name))
    batch = random_batch(rng, BatchSpec(batch=8, max_k=2, vocab_size=96, withdrawn_fraction=0.8,
                                        placeholder_fraction=0.1, greedy_fraction=0.1, zero_k_fraction=0.0, **spec))
    probs = batch.draft_probs.copy()
    gone = np.flatnonzero(batch.withdrawn)
    rows = gone + np.repeat(np.arange(batch.batch_size), batch.num_draft_tokens)[gone]   # cu[i] + i + j
    top = np.argmax(batch.target_logits[rows].astype(np.float64), axis=1)
    probs[gone] = 0.1 / batch.vocab_size
    probs[gone, top] += 0.9
    return dataclasses.replace(batch, draft_probs=probs.astype(batch.draft_probs.dtype)), random_noise(rng, batch)


@pytest.mark.parametrize("dtype,keyed", [("float64", False), ("float32", False), ("float32", True),
                                         ("bfloat16", True)])
def test_withdrawn_drafts_match_the_reference(dtype, keyed):
    batch, noise = _withdrawn_batch(f"{dtype}-{keyed}", dtype=dtype)
    noise = None if keyed else noise
    want = reference_step(batch, noise)
    result = compare(batch, DEVICE.verify(batch, noise), want)
    assert result.ok, result.summary()
    as_padding = reference_step(dataclasses.replace(batch, withdrawn=None), noise)
    assert (as_padding.output_token_ids != want.output_token_ids).any(), "no token depends on the withdrawn rule"


def test_withdrawn_drafts_in_chunked_rows_and_through_the_fused_sampler():
    """Several race chunks per row (the draft row's bound per chunk), and SPEC §12's fused path (its records'
    race reads the same draft row)."""
    from devices.protocol import SamplerParams
    batch, noise = _withdrawn_batch("chunked", dtype="float32", top_k_fraction=0.0, top_p_fraction=0.0)
    chunked = td.TritonDevice("cpu", CHUNKED)
    want = reference_step(batch, noise)
    result = compare(batch, chunked.verify(batch, noise), want)
    assert result.ok, result.summary()
    as_padding = reference_step(dataclasses.replace(batch, withdrawn=None), noise)
    assert (as_padding.output_token_ids != want.output_token_ids).any(), "no token depends on the withdrawn rule"
    fused = dataclasses.replace(batch, sampler=SamplerParams(presence_penalty=np.full(batch.batch_size, 0.7),
                                                             output_token_ids=tuple(np.array([3, 5]) for _ in
                                                                                    range(batch.batch_size))))
    result = compare(fused, DEVICE.verify(fused, noise), reference_step(fused, noise))
    assert result.ok, result.summary()


# --- the statistics pass's forms and programs per batch size ---------------------------------

def _stats(logits, temperature, sub, cut=None, rows_form=False):
    """``stats_kernel`` over one request of ``logits.shape[0] - 1`` drafts, one chunk a row (``rows_form``: its
    ``ROWS`` tiles, ``[BLOCK / sub, sub]``)."""
    rows, V = logits.shape
    cu = torch.tensor([0, rows - 1])
    compute = torch.float64 if logits.dtype == torch.float64 else torch.float32
    out = [torch.empty(rows, dtype=compute) for _ in range(2)]
    arg, counter = torch.empty(rows, dtype=torch.int32), torch.empty(1, dtype=torch.int32)
    block = 32
    tiles = -(-V // block)
    extra = {} if cut is None else dict(cut_ptr=cut, CUT=True)
    tk.stats_kernel[(1, rows, 1)](logits, cu, torch.tensor([temperature], dtype=torch.float64), counter, out[0], out[1], arg, V,
                                  tiles * block, 1, TILES=tiles, BLOCK=block, FP64=logits.dtype == torch.float64,
                                  SUB=sub, ROWS=rows_form, **extra)
    return out[0], out[1], arg


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("cut", [False, True], ids=["whole-rows", "through-a-cut"])
def test_the_tiled_softmax_agrees_with_the_lane_wise_one_and_greedy_rows_get_the_first_argmax(dtype, cut):
    rng = np.random.default_rng(case_seed(SUITE_SEED, "stats-forms", str(dtype), cut))
    logits = torch.from_numpy(rng.normal(0, 3, (3, 77))).to(dtype)
    logits[1, :40] = float("-inf")                  # lanes all -inf for a whole tile, and some for the row
    logits[2, 5] = logits[2, 7] = logits[2, 60] = logits[2].max() + 1   # ties within a lane (5, 7) and across tiles: the first wins
    floor = torch.tensor([-1.0, -0.5, 0.0], dtype=torch.float64 if dtype == torch.float64 else torch.float32)
    wide = logits.to(floor.dtype)
    kept = torch.where(wide >= floor[:, None], wide, float("-inf")) if cut else logits
    floor_ = floor if cut else None
    wide_forms = [(4, False), (4, True)] if dtype in (torch.float32, torch.float64) else [(8, True), (4, True)]
    forms = [_stats(logits, 0.7, 1, floor_)] + [_stats(logits, 0.7, sub, floor_, rows_) for sub, rows_ in wide_forms]
    want = torch.exp((kept.double() - kept.double().amax(dim=1, keepdim=True)) / 0.7).sum(dim=1)
    tol = 1e-12 if dtype == torch.float64 else 2e-6
    for got in forms:
        assert torch.equal(got[0], kept.amax(dim=1).to(got[0].dtype))
        assert torch.allclose(got[1].double(), want, rtol=tol)
    for sub, rows_ in [(4, False)] + wide_forms:         # greedy: the argmax, no softmax
        top, _, first = _stats(logits, 0.0, sub, floor_, rows_)
        assert torch.equal(top, kept.amax(dim=1).to(top.dtype))
        assert first.tolist() == [int(np.argmax(row)) for row in kept.double().numpy()] and first[2] == 5


def test_programs_per_batch_size_pick_the_chunking_and_change_no_token():
    """A config whose small batches run many programs (several chunks a row) and large ones one."""
    config = td.KernelConfig(block=BLOCK, num_warps=1, programs=1, race_block=None, race_warps=None,
                             programs_by_batch=((1, 64), (4, 1)))
    assert config.programs_at(2) == 64 and config.programs_at(4) == 1
    device = td.TritonDevice("cpu", config)
    for size, batch, noise in _two_batch_sizes("programs-by-batch", 2 * BLOCK + 3):
        result = compare(batch, device.verify(batch, noise), reference_step(batch, noise))
        assert result.ok, result.summary()


def _two_batch_sizes(label: str, vocab_size: int):
    """``(size, batch, noise)``: random float32 batches of 2 and 4 requests, each with no noise (keyed) and
    injected noise."""
    for size in (2, 4):
        rng = np.random.default_rng(case_seed(SUITE_SEED, label, size))
        batch = random_batch(rng, BatchSpec(batch=size, max_k=3, vocab_size=vocab_size, dtype="float32",
                                            zero_k_fraction=0.0, top_k_fraction=0.0, top_p_fraction=0.0))
        for noise in (None, random_noise(rng, batch)):
            yield size, batch, noise


def test_race_shapes_per_batch_size_pick_the_step_kernels_tile_and_change_no_token(monkeypatch):
    """A config whose small batches race on tiles four times the large ones' and in one chunk a row (their race
    aims for one program), the large ones in a chunk a tile: the step kernel is launched with each batch size's
    tile and chunks, and every token is the reference's."""
    config = td.KernelConfig(block=BLOCK, num_warps=1, programs=64, race_block=None, race_warps=None,
                             race_by_batch=((1, 4 * BLOCK, 1), (4, BLOCK, 1)), race_programs_by_batch=((1, 1), (4, 64)))
    launched = []
    kernel = tk.step_kernel

    class Recorded:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launched.append((kwargs["BLOCK"], grid[1]))
                return kernel[grid](*args, **kwargs)
            return launch
    monkeypatch.setattr(tk, "step_kernel", Recorded())
    device = td.TritonDevice("cpu", config)
    for size, batch, noise in _two_batch_sizes("race-by-batch", 8 * BLOCK + 3):
        launched.clear()
        result = compare(batch, device.verify(batch, noise), reference_step(batch, noise))
        assert result.ok, result.summary()
        assert launched == [(4 * BLOCK, 1) if size < 4 else (BLOCK, 9)]   # 8 * BLOCK + 3 ids: 9 tiles


# --- §4's empty residual: the t race, chunk by chunk --------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("keyed", [False, True], ids=["injected", "keyed"])
@pytest.mark.parametrize("residual", ["empty", "one-chunk"])
def test_an_empty_residual_races_t_and_chunks_empty_alone_do_not(dtype, keyed, residual):
    """The drafted token has target probability ~1e-14 and draft probability 1e-6 more than it, so it is
    rejected; every other entry of the draft row is its target probability plus 1e-6 (the row sums to 1 within
    SPEC §6's tolerance). ``empty``: the residual ``max(t − d, 0)`` is empty, so the token is the race over ``t``
    (SPEC §4), made by every chunk after its own w race found nothing. ``one-chunk``: eight ids of the second
    chunk lose draft mass to the drafted token, so the residual lies there alone and the other chunks' t races
    must go unread."""
    from specsim.testing.edges import Request
    V, x = 2 * BLOCK + 3, 7
    rng = np.random.default_rng(case_seed(SUITE_SEED, "empty-residual", dtype, keyed, residual))
    logits = rng.normal(0, 2, (2, V))
    logits[0, x] = -30.0
    t = np.exp(logits[0] - logits[0].max())
    t /= t.sum()
    d = t + 1e-6
    lost = np.arange(BLOCK, BLOCK + 8)
    if residual == "one-chunk":
        d[lost] = t[lost] / 2
        d[x] += (t[lost] / 2).sum()
    request = Request(draft_ids=[x], logits=logits.tolist(), draft_rows=[d.tolist()], uniforms=[0.9999],
                      exponentials=rng.exponential(size=V).tolist())
    batch, noise = make_batch([request], dtype=dtype)
    noise = None if keyed else noise
    want = reference_step(batch, noise)
    assert want.num_accepted.tolist() == [0]
    token = int(want.output_token_ids[0, 0])
    if residual == "one-chunk":
        assert token in lost.tolist()
    chunked = td.TritonDevice("cpu", CHUNKED)
    assert td.vocab_chunks(V, 1, BLOCK, CHUNKED.programs)[1] == 3
    result = compare(batch, chunked.verify(batch, noise), want)
    assert result.ok, result.summary()
