"""The torch device: Philox bit-exactness, every SPEC §4 edge and §3 scheme by hand,
agreement with ``reference.verify`` on random batches, and its side-effect rules.

Fast (a few seconds on one core); tests may import ``reference``, devices may not.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from devices import torch_philox as tp
from devices.validate import validate
from devices.protocol import PLACEHOLDER_TOKEN_ID as PH
from devices.protocol import InvalidInput, Noise, UnsupportedCall, VerifyBatch
from devices.torch_device import Modes, make_cpu_device, make_cuda_device, target_probs, verify_tensors
from reference import rng as ref_rng
from specsim.testing import batches as batches_module
from specsim.judge import compare as compare_module

NEG = -np.inf
DEVICE = make_cpu_device()


# --- builders -------------------------------------------------------------------

def make_batch(requests, dtype="float64", point=False):
    """``requests``: dicts with ``ids`` [K], ``logits`` [K+1, V], optional ``draft`` [K, V],
    ``T``, ``k``, ``p``, ``u`` [K], ``E`` [V]. Returns (VerifyBatch, Noise); defaults u = 0.5, E = 1."""
    V = len(requests[0]["logits"][0])
    ids, draft, logits, u, E = [], [], [], [], []
    for r in requests:
        K = len(r["ids"])
        ids += list(r["ids"])
        logits += list(r["logits"])
        draft += list(r.get("draft", [[1.0 / V] * V] * K))
        u += list(r.get("u", [0.5] * K))
        E.append(r.get("E", [1.0] * V))
    B = len(requests)
    batch = VerifyBatch(
        num_draft_tokens=np.array([len(r["ids"]) for r in requests], np.int64),
        draft_token_ids=np.array(ids, np.int64).reshape(-1),
        draft_probs=None if point else np.array(draft, dtype).reshape(len(ids), V),
        target_logits=np.array(logits, dtype),
        temperature=np.array([r.get("T", 1.0) for r in requests], np.float64),
        top_k=np.array([r.get("k", 0) for r in requests], np.int64),
        top_p=np.array([r.get("p", 1.0) for r in requests], np.float64),
        seeds=np.arange(1, B + 1, dtype=np.uint64), positions=np.zeros(B, np.int64))
    return batch, Noise(np.array(u, np.float64).reshape(-1), np.array(E, np.float64))


def emitted(batch, noise=None, device=DEVICE):
    out = device.verify(batch, noise)
    return [out.emitted(i) for i in range(batch.batch_size)]


def log(*probs):
    with np.errstate(divide="ignore"):
        return list(np.log(np.array(probs, np.float64)))


# --- Philox (SPEC §5.2) --------------------------------------------------------------

RANDOM123_KAT = [  # (counter, key, output) from Random123's kat_vectors, philox4x32_10
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("counter,key,expected", RANDOM123_KAT)
def test_philox_known_answers(counter, key, expected):
    got = tp.philox4x32_10(torch.tensor([counter], dtype=torch.int64), torch.tensor([key], dtype=torch.int64))
    assert got[0].tolist() == expected


@pytest.mark.parametrize("split", [False, True], ids=["wrapping-multiply", "16-bit-split"])
def test_philox_matches_reference_word_for_word(split):
    g = np.random.default_rng(1)
    counter = g.integers(0, 2**32, size=(4096, 4), dtype=np.uint64).astype(np.uint32)
    key = g.integers(0, 2**32, size=(4096, 2), dtype=np.uint64).astype(np.uint32)
    counter[:8], key[:8] = 0xFFFFFFFF, 0xFFFFFFFF  # the top of every 16-bit split
    want = ref_rng.philox4x32_10(counter, key).astype(np.int64)
    got = tp.philox4x32_10(torch.from_numpy(counter.astype(np.int64)), torch.from_numpy(key.astype(np.int64)),
                           split=split)
    np.testing.assert_array_equal(got.numpy(), want)


SEEDS = np.array([0, 7, 2**32 - 1, 2**32, 2**63 - 1, 2**63, 2**63 + 12345, 2**64 - 1], np.uint64)


def test_seeds_travel_as_int64_bits():
    as_int = tp.seeds_to_int64(SEEDS)
    keys = tp.seed_keys(as_int).tolist()
    assert keys == [list(ref_rng.seed_key(int(s))) for s in SEEDS]


@pytest.mark.parametrize("purpose,column", [(tp.ACCEPT, 0), (tp.RECOVER, 0), (tp.DRAFT, 5)])
def test_stream_words_match_reference(purpose, column):
    positions = np.array([0, 1, 2**31, 2**32 - 1, 17, 4096, 3, 2**32 - 2], np.int64)
    keys = tp.seed_keys(tp.seeds_to_int64(SEEDS))
    got = tp.block_words(keys, torch.from_numpy(positions), purpose, column, 11)
    for i, (s, L) in enumerate(zip(SEEDS, positions)):
        want = ref_rng.stream_words(int(s), int(L), purpose, column, 11).astype(np.int64)
        np.testing.assert_array_equal(got[i].numpy(), want)
        index = torch.arange(11)
        single = tp.stream_words(keys[i].expand(11, 2), torch.full((11,), int(L)), purpose, column, index)
        np.testing.assert_array_equal(single.numpy(), want)


@pytest.mark.parametrize("k", [[3, 0, 9, 1, 4, 0, 2, 5], [0] * 8, [64, 1, 0, 0, 0, 0, 0, 2]], ids=["mixed", "no-drafts", "long"])
def test_step_noise_matches_reference(k):
    k = np.array(k, np.int64)
    positions = np.array([12, 0, 2**32 - 1, 2**31, 5, 6, 7, 8], np.int64)
    V = 37  # not a multiple of 4: the last block is cut
    want_u, want_e = ref_rng.step_noise(SEEDS, positions, k, V)
    got_u, got_e = tp.step_noise(tp.seeds_to_int64(SEEDS), torch.from_numpy(positions), torch.from_numpy(k), V)
    np.testing.assert_array_equal(got_u.numpy(), want_u)  # (x + 1/2)·2^-32 is exact
    # -log in float64 is torch's log vs numpy's: equal to the last bit on this CPU, but a libm
    # may differ by an ulp, so allow that (the words and uniforms above are exact).
    np.testing.assert_allclose(got_e.numpy(), want_e, rtol=4e-16, atol=0)


def test_exponential_never_zero_in_float32():
    words = torch.tensor([0, 1, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=torch.int64)
    e32 = tp.exponential(words, torch.float32)
    assert torch.isfinite(e32).all() and (e32 > 0).all()
    np.testing.assert_allclose(e32.double().numpy(), tp.exponential(words).numpy(), rtol=1e-6)


# --- SPEC §2 target rows --------------------------------------------------------------

def test_top_k_keeps_boundary_ties():
    probs = target_probs(torch.tensor([[3.0, 1.0, 3.0, 2.0, 2.0]], dtype=torch.float64), torch.ones(1),
                         torch.tensor([3]), torch.ones(1, dtype=torch.float64))
    kept = (probs[0] > 0).tolist()
    assert kept == [True, False, True, True, True]  # k = 3 lands on the tie 2.0: both kept


def test_top_p_keeps_the_smallest_top_set_and_ties_at_the_cut():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25, 0.0]], dtype=torch.float64))
    p = lambda top_p: target_probs(logits, torch.ones(1), torch.zeros(1, dtype=torch.int64),  # noqa: E731
                                   torch.tensor([top_p], dtype=torch.float64))[0]
    assert (p(0.45) > 0).tolist() == [True, False, False, False]  # c_1 = 0.5 >= 0.45
    assert (p(0.6) > 0).tolist() == [True, True, True, False]     # cut at a tie: both 0.25 kept
    np.testing.assert_allclose(p(0.6).numpy(), [0.5, 0.25, 0.25, 0.0])


# --- SPEC §4 edges, one test each --------------------------------------------------

UNIFORM4 = log(0.25, 0.25, 0.25, 0.25)


def test_draft_probability_zero_rejects_and_residual_keeps_x():
    # d(x=1) = 0: reject even with u = 0; residual max(t - d, 0) = [0, .25, 0, 0] still holds x.
    r = dict(ids=[1], logits=[UNIFORM4, UNIFORM4], draft=[[0.5, 0.0, 0.25, 0.25]], u=[0.0])
    assert emitted(*make_batch([r])) == [[1]]
    assert DEVICE.verify(*make_batch([r])).num_accepted.tolist() == [0]


def test_u_zero_accepts_positive_ratio_and_strict_at_equality():
    base = dict(ids=[0], logits=[log(0.5, 0.5, 0, 0), UNIFORM4], draft=[[1.0, 0, 0, 0]])
    assert DEVICE.verify(*make_batch([dict(base, u=[0.0])])).num_accepted.tolist() == [1]
    # ratio = 0.5 / 1 = 0.5 exactly: u = 0.5 is not < 0.5, so reject; residual [0, .5, 0, 0].
    assert emitted(*make_batch([dict(base, u=[0.5])])) == [[1]]


def test_masked_token_never_accepted_even_with_u_zero():
    for point in (False, True):
        r = dict(ids=[3], logits=[log(0.5, 0.5, 0.0, 0.0), UNIFORM4], draft=[[0, 0, 0, 1.0]], u=[0.0])
        batch, noise = make_batch([r], point=point)
        out = DEVICE.verify(batch, noise)
        assert out.num_accepted.tolist() == [0] and out.emitted(0)[0] in (0, 1)
        # top-k / top-p filtered tokens too
        r = dict(ids=[2], logits=[log(0.4, 0.3, 0.2, 0.1), UNIFORM4], draft=[[0, 0, 1.0, 0]], u=[0.0], k=2)
        assert DEVICE.verify(*make_batch([r], point=point)).num_accepted.tolist() == [0]
        r = dict(r, k=0, p=0.6)  # c_2 = 0.7 >= 0.6: tokens 0 and 1 survive
        assert DEVICE.verify(*make_batch([r], point=point)).num_accepted.tolist() == [0]


def test_empty_residual_draws_from_target():
    # d >= t everywhere (rows may sum to 1 within 1e-3): ratio < 1, u rejects, max(t - d, 0) = 0.
    t = [0.4, 0.3, 0.2, 0.1]
    r = dict(ids=[0], logits=[log(*t), UNIFORM4], draft=[[x + 2e-4 for x in t]], u=[0.9999],
             E=[4.0, 1.0, 4.0, 4.0])  # race over t: scores .1, .3, .05, .025 → token 1
    assert emitted(*make_batch([r])) == [[1]]


def test_k_zero_request_samples_its_bonus_row():
    reqs = [dict(ids=[], logits=[log(0.1, 0.2, 0.3, 0.4)], E=[1.0, 1.0, 1.0, 0.5]),   # scores .1 .2 .3 .8
            dict(ids=[2], logits=[UNIFORM4, log(0.7, 0.1, 0.1, 0.1)], draft=[[0, 0, 1.0, 0]], u=[0.1])]
    assert emitted(*make_batch(reqs)) == [[3], [2, 0]]
    # a batch with no drafts at all: num_tokens = 0
    only = make_batch([reqs[0], reqs[0]])
    assert emitted(*only) == [[3], [3]]
    assert emitted(*make_batch([reqs[0]], point=True)) == [[3]]


def test_placeholder_rejected_row_never_read_and_later_positions_unverified():
    nan_row = [np.nan] * 4
    for point in (False, True):
        r = dict(ids=[PH, 1], logits=[log(0.1, 0.2, 0.3, 0.4), UNIFORM4, UNIFORM4],
                 draft=[nan_row, [0, 1.0, 0, 0]], u=[0.0, 0.0], E=[1.0, 1.0, 1.0, 0.5])
        batch, noise = make_batch([r], point=point)
        out = DEVICE.verify(batch, noise)
        assert out.num_accepted.tolist() == [0]
        assert out.output_token_ids.tolist() == [[3, PH, PH]]  # residual = t itself: token 3 wins


def test_race_ties_go_to_the_smallest_id():
    r = dict(ids=[], logits=[UNIFORM4], E=[2.0, 1.0, 1.0, 1.0])
    assert emitted(*make_batch([r])) == [[1]]


def test_greedy_argmax_ties_lowest_id_and_ignores_filters():
    r = dict(ids=[1, 3], logits=[[0.0, 2.0, 2.0, 1.0], [5.0, 0.0, 0.0, 5.0], [1.0, 1.0, 1.0, 1.0]],
             T=0.0, k=1, p=0.1, u=[0.99, 0.99])
    # position 0: argmax = 1 (tie with 2) accepted; position 1: argmax = 0, draft 3 rejected → emit 0
    assert emitted(*make_batch([r])) == [[1, 0]]
    r = dict(r, ids=[1, 0])
    assert emitted(*make_batch([r])) == [[1, 0, 0]]  # bonus: argmax of equal logits = 0


# --- SPEC §3 schemes ---------------------------------------------------------------

def test_full_scheme_accepts_then_recovers_from_residual():
    t, d = [0.6, 0.3, 0.1, 0.0], [0.2, 0.7, 0.1, 0.0]
    r = dict(ids=[0, 1], logits=[log(*t), log(*t), UNIFORM4], draft=[d, d], u=[0.9, 0.5])
    # pos 0: ratio 3 → accept; pos 1: ratio 0.3/0.7 < 0.5 → reject; residual [0.4, 0, 0, 0]
    assert emitted(*make_batch([r])) == [[0, 0]]


def test_point_scheme_zeroes_the_rejected_draft():
    r = dict(ids=[0], logits=[log(0.6, 0.3, 0.1, 0.0), UNIFORM4], u=[0.7], E=[0.01, 1.0, 1.0, 1.0])
    assert emitted(*make_batch([r], point=True)) == [[1]]  # t[0] = .6 <= .7 rejects; 0 removed


def test_bonus_when_all_accepted_uses_the_shared_exponentials():
    r = dict(ids=[2, 2], logits=[UNIFORM4, UNIFORM4, log(0.1, 0.2, 0.3, 0.4)],
             draft=[[0.25] * 4, [0.25] * 4], u=[0.3, 0.3], E=[0.01, 1.0, 1.0, 1.0])
    assert emitted(*make_batch([r])) == [[2, 2, 0]]


# --- against the reference on random batches -----------------------------------------

SPECS = [
    dict(draft_probs=True, dtype="float64"),
    dict(draft_probs=True, dtype="float32"),
    dict(draft_probs=False, dtype="float64"),
    dict(draft_probs=False, dtype="float32"),
    dict(draft_probs=True, dtype="float32", greedy_fraction=0.0, top_k_fraction=0.5, top_p_fraction=0.5),
    dict(draft_probs=True, dtype="float64", greedy_fraction=1.0),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items()))
@pytest.mark.parametrize("keyed", [False, True], ids=["injected", "keyed"])
def test_matches_reference_on_random_batches(spec, keyed):
    g = np.random.default_rng([20261122, SPECS.index(spec), keyed])
    waived = 0
    for _ in range(6):
        batch = batches_module.random_batch(g, batches_module.BatchSpec(batch=6, max_k=5, vocab_size=23, **spec))
        noise = None if keyed else batches_module.random_noise(g, batch)
        result = compare_module.compare(batch, DEVICE.verify(batch, noise), compare_module.reference_step(batch, noise))
        assert result.ok, result.summary()
        waived += len(result.waived)
    assert waived <= 1  # margins below 1e-4 are rare at these sizes


def test_keyed_mode_equals_injected_reference_noise():
    g = np.random.default_rng(7)
    batch = batches_module.random_batch(g, batches_module.BatchSpec(batch=8, max_k=4, vocab_size=50))
    batch = VerifyBatch(**{**batch.__dict__, "seeds": SEEDS.copy()})
    uniforms, exponentials = ref_rng.step_noise(batch.seeds, batch.positions, batch.num_draft_tokens, 50)
    keyed, injected = DEVICE.verify(batch), DEVICE.verify(batch, Noise(uniforms, exponentials))
    np.testing.assert_array_equal(keyed.output_token_ids, injected.output_token_ids)
    np.testing.assert_array_equal(keyed.num_accepted, injected.num_accepted)


# --- side effects, inputs, capabilities --------------------------------------------------

def test_global_rng_untouched_and_inputs_not_mutated():
    g = np.random.default_rng(3)
    batch = batches_module.random_batch(g, batches_module.BatchSpec(batch=4, max_k=3, vocab_size=9))
    for array in batch.__dict__.values():
        if isinstance(array, np.ndarray):
            array.setflags(write=False)  # a write would raise
    torch_state, numpy_state = torch.get_rng_state(), np.random.get_state()[1].copy()
    DEVICE.verify(batch)
    DEVICE.verify(batch, batches_module.random_noise(g, batch))
    assert torch.equal(torch_state, torch.get_rng_state())
    np.testing.assert_array_equal(numpy_state, np.random.get_state()[1])


def test_keyed_mode_needs_seeds():
    batch, _ = make_batch([dict(ids=[], logits=[UNIFORM4])])
    with pytest.raises(InvalidInput, match="^seeds"):
        DEVICE.verify(VerifyBatch(**{**batch.__dict__, "seeds": None}))


def test_unsupported_k():
    batch, noise = make_batch([dict(ids=[0] * 257, logits=[UNIFORM4] * 258, u=[0.1] * 257)])
    with pytest.raises(UnsupportedCall):
        DEVICE.verify(batch, noise)


def _valid():
    return make_batch([dict(ids=[1, PH], logits=[UNIFORM4] * 3, draft=[[0.25] * 4, [0.0] * 4]),
                       dict(ids=[2], logits=[UNIFORM4] * 2, draft=[[0.25] * 4])])


def _with(field, value):
    batch, noise = _valid()
    if field in ("uniforms", "exponentials"):
        return batch, Noise(**{**noise.__dict__, field: value})
    return VerifyBatch(**{**batch.__dict__, field: value}), noise


BAD_INPUTS = [  # (field, bad value, text the message must contain)
    ("num_draft_tokens", np.zeros(0, np.int64), "empty batch"),
    ("num_draft_tokens", np.array([2.0, 1.0]), "integer dtype"),
    ("num_draft_tokens", np.array([[2, 1]]), "1-D"),
    ("num_draft_tokens", np.array([-1, 4]), "entry 0 is -1"),
    ("draft_token_ids", np.array([1, 2]), "length"),
    ("draft_token_ids", np.array([1, 4, 2]), "entry 1 (request 0, draft 1) is 4, outside [0, V=4)"),
    ("draft_token_ids", np.array([1.0, 0.0, 2.0]), "integer dtype"),
    ("draft_probs", np.array([[0.25] * 4, [0.0] * 4, [0.3] * 4]),
     "row 2 (request 1, draft 0) sums to 1.2000, not 1 within 1e-3"),
    ("draft_probs", np.array([[0.5, 0.5, -0.25, 0.25], [0.0] * 4, [0.25] * 4]), "negative"),
    ("draft_probs", np.array([[0.25] * 4, [0.0] * 4, [0.25] * 4], np.float32), "dtype must be float64 with float64 target_logits"),
    ("draft_probs", np.array([[0.25] * 4, [0.0] * 4]), "shape"),
    ("target_logits", np.array([UNIFORM4] * 4 + [[0.0, np.nan, 0.0, 0.0]]), "row 4 (request 1, bonus row) column 1"),
    ("target_logits", np.array([UNIFORM4] * 4 + [[0.0, np.inf, 0.0, 0.0]]), "finite or -inf"),
    ("target_logits", np.array([UNIFORM4] * 2 + [[NEG] * 4] + [UNIFORM4] * 2), "row 2 (request 0, bonus row) has no finite"),
    ("target_logits", np.zeros((5, 4), np.int64), "dtype"),
    ("target_logits", np.zeros((5, 0)), "V"),
    ("temperature", np.array([1.0, -1.0]), "temperature: entry 1"),
    ("temperature", np.array([1.0, np.inf]), "finite"),
    ("top_k", np.array([0, -1]), "top_k: entry 1"),
    ("top_p", np.array([1.0, 0.0]), "(0, 1]"),
    ("top_p", np.array([1.5, 1.0]), "(0, 1]"),
    ("seeds", np.array([1, -1], np.int64), "seeds"),
    ("positions", np.array([0, 2**32], np.int64), "positions"),
    ("uniforms", np.array([0.5, 1.0, 0.5]), "uniforms: entry 1 (request 0, draft 1)"),
    ("uniforms", np.array([0.5, 0.5]), "length"),
    ("exponentials", np.array([[1.0] * 4, [1.0, 0.0, 1.0, 1.0]]), "exponentials: entry [1, 1]"),
    ("exponentials", np.ones((2, 3)), "shape"),
]


@pytest.mark.parametrize("field,value,text", BAD_INPUTS, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD_INPUTS)])
def test_invalid_input_names_the_argument_and_rule(field, value, text):
    batch, noise = _with(field, value)
    with pytest.raises(InvalidInput) as info:
        DEVICE.verify(batch, noise)
    message = str(info.value)
    assert message.startswith(field) and text in message, message


@pytest.mark.parametrize("field,value,text", BAD_INPUTS, ids=[f"{f}-{i}" for i, (f, _, _) in enumerate(BAD_INPUTS)])
def test_reference_rejects_the_same_inputs(field, value, text):
    """Each bad input breaks SPEC §6 by the reference's reading too (the rules are not the device's own)."""
    batch, noise = _with(field, value)
    with pytest.raises(ValueError):
        compare_module.reference_step(batch, noise)


def test_valid_edge_inputs_accepted():
    batch, noise = _valid()  # placeholder row of zeros (not a distribution) is not read
    validate(batch, noise)
    validate(VerifyBatch(**{**batch.__dict__, "seeds": np.array([0, 2**64 - 1], np.uint64),
                            "temperature": np.array([1, 0])}), noise)


# --- lower-level tensor API and CUDA --------------------------------------------------

def test_verify_tensors_lower_level_api():
    batch, noise = make_batch([dict(ids=[1, 2], logits=[UNIFORM4] * 3, u=[0.1, 0.9])], point=True)
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    out, acc = verify_tensors(t(batch.num_draft_tokens), t(batch.draft_token_ids), None, t(batch.target_logits),
                              t(batch.temperature), t(batch.top_k), t(batch.top_p),
                              uniforms=t(noise.uniforms), exponentials=t(noise.exponentials), max_k=2)
    assert out.tolist() == [[1, 0, -1]] and acc.tolist() == [1]


def test_verify_tensors_with_every_mode_claimed_matches_verify():
    g = np.random.default_rng(5)
    batch = batches_module.random_batch(g, batches_module.BatchSpec(batch=6, max_k=4, vocab_size=11))
    t = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    out, acc = verify_tensors(t(batch.num_draft_tokens), t(batch.draft_token_ids), t(batch.draft_probs),
                              t(batch.target_logits), t(batch.temperature), t(batch.top_k), t(batch.top_p),
                              seeds=tp.seeds_to_int64(batch.seeds), positions=t(batch.positions),
                              max_k=batch.max_k, modes=Modes())  # no device sync: every path runs
    want = DEVICE.verify(batch)
    np.testing.assert_array_equal(out.numpy(), want.output_token_ids)
    np.testing.assert_array_equal(acc.numpy(), want.num_accepted)


def test_cuda_factory_explains_absence():
    if torch.cuda.is_available():
        assert make_cuda_device().name == "torch-cuda"
    else:
        with pytest.raises(RuntimeError, match="CUDA"):
            make_cuda_device()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_reference():
    device = make_cuda_device()
    g = np.random.default_rng(11)
    for spec in SPECS:
        batch = batches_module.random_batch(g, batches_module.BatchSpec(batch=8, max_k=6, vocab_size=1000, **spec))
        for noise in (None, batches_module.random_noise(g, batch)):
            result = compare_module.compare(batch, device.verify(batch, noise), compare_module.reference_step(batch, noise))
            assert result.ok, result.summary()
