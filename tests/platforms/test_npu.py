"""The ``npu`` device's numerics without float64 or log1p, its TLI step, and the engine with TLI drafting."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

from devices.npu_device import (NpuDevice, coin_accepts, keyed_exponentials, log1p_free, tli_draft_probs,
                                uniform_parts)
from reference.rng import exponential as ref_exponential
from specsim.engine import Engine, SamplingParams, ToyLM
from specsim.engine.proposers import UniversalDraftProposer
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.judge.compare import compare, reference_step
from specsim.testing.seeds import case_seed
from specsim.vocab import VocabMapping, random_tokenizer


def test_coin_decides_as_float64_does():
    """u < fl64(t/d) for fp32 t, d and float64 u — including u one ulp below and equal to the ratio."""
    rng = np.random.default_rng(case_seed(0, "npu-coin"))
    n = 4000
    t = (rng.random(n) ** rng.integers(1, 20, n)).astype(np.float32)
    d = np.maximum((rng.random(n) ** rng.integers(1, 20, n)).astype(np.float32), np.float32(1e-30))
    t[:200] = 0
    ratio = t.astype(np.float64) / d.astype(np.float64)
    u = rng.random(n)
    edge = slice(200, 1400)
    u[edge] = np.where(rng.random(1200) < 0.5, np.minimum(ratio[edge], np.nextafter(1, 0)),
                       np.nextafter(np.minimum(ratio[edge], 1), 0))
    u[1400:1450] = 0.0
    mu, eu = uniform_parts(u)
    got = coin_accepts(mu, eu, torch.from_numpy(t), torch.from_numpy(d)).numpy()
    assert (got == (u < ratio)).all()
    words = rng.integers(0, 2**32, n)
    got = coin_accepts(torch.from_numpy(2 * words + 1), torch.full((n,), -33), torch.from_numpy(t),
                       torch.from_numpy(d)).numpy()
    assert (got == (((words + 0.5) * 2.0**-32) < ratio)).all()


def test_coin_exact_against_fractions_spot():
    mu, eu = uniform_parts(np.array([2 / 3, np.nextafter(2 / 3, 0)]))
    t, d = torch.tensor([0.5, 0.5]), torch.tensor([0.75, 0.75])
    assert coin_accepts(mu, eu, t, d).tolist() == [False, True]
    assert Fraction(2 / 3) < Fraction(2, 3)       # the float64 ratio rounds down: u == fl64(t/d) rejects


def test_log1p_free_and_keyed_exponentials():
    y = -torch.logspace(-12, -0.3, 200, dtype=torch.float32)
    rel = ((log1p_free(y).double() - torch.log1p(y.double())) / torch.log1p(y.double())).abs().max()
    assert rel < 1e-6
    words = torch.tensor([0, 1, 2**20, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1], dtype=torch.int64)
    got = keyed_exponentials(words).double().numpy()
    want = ref_exponential(words.numpy().astype(np.uint32))
    assert (got > 0).all() and np.isfinite(got).all()
    assert np.max(np.abs(got - want) / want) < 1e-6


def test_tli_draft_probs_on_device_matches_mapping():
    t_tok, d_tok = random_tokenizer("abcd ", 10, seed=3), random_tokenizer("abcd ", 14, seed=4, marker="▁")
    mapping = VocabMapping(t_tok, d_tok)
    logits = np.random.default_rng(0).normal(size=(3, d_tok.vocab_size))
    temperature = np.array([0.7, 1.0, 1.5])
    got = tli_draft_probs(torch.tensor(logits, dtype=torch.float32), torch.tensor(mapping.draft_to_target),
                          t_tok.vocab_size, torch.tensor(temperature))
    z = np.exp(logits / temperature[:, None] - (logits / temperature[:, None]).max(axis=1, keepdims=True))
    want = mapping.to_target(z / z.sum(axis=1, keepdims=True))
    assert np.allclose(got.numpy(), want, atol=1e-6)


def test_agrees_with_reference_float32():
    device = NpuDevice()
    rng = np.random.default_rng(case_seed(0, "npu-ref"))
    for draft_probs in (True, False):
        for _ in range(5):
            batch = random_batch(rng, BatchSpec(batch=5, max_k=4, vocab_size=33, dtype="float32",
                                                draft_probs=draft_probs))
            noise = random_noise(rng, batch)
            for n in (noise, None):
                assert compare(batch, device.verify(batch, n), reference_step(batch, n)).ok


def _tli_engine(device, temperature: float, seed: int = 0):
    t_tok, d_tok = random_tokenizer("abc ", 8, seed=1), random_tokenizer("abc ", 10, seed=2, marker="▁")
    target = ToyLM(t_tok.vocab_size, order=2, seed=3)
    mapping = VocabMapping(t_tok, d_tok)
    proposer = UniversalDraftProposer(ToyLM(d_tok.vocab_size, order=2, seed=4), mapping)
    engine = Engine(target, proposer, device=device, num_speculative_tokens=3, seed=seed, check_invariants=True)
    for i in range(3):
        engine.add_request(f"r{i}", [0, 1 + i], SamplingParams(temperature=temperature, max_tokens=12))
    return target, engine


def test_engine_greedy_tli_on_npu_equals_target_argmax_chain():
    target, engine = _tli_engine(NpuDevice(), temperature=0.0)
    out = engine.run()
    for i in range(3):
        tokens = [0, 1 + i]
        for _ in range(12):
            tokens.append(int(np.argmax(target.next_logits(tokens))))
        assert out[f"r{i}"] == tokens[2:]
    assert engine.metrics.num_drafts > 0


def test_engine_seeded_tli_npu_matches_torch():
    """Keyed drafting and keyed verification: the fp32 NPU and the torch device emit the same tokens
    (up to SPEC §9 waivers, none expected at these sizes)."""
    from devices.registry import load
    _, a = _tli_engine(NpuDevice(), temperature=1.0, seed=5)
    _, b = _tli_engine(load("torch"), temperature=1.0, seed=5)
    assert a.run() == b.run()
