"""SPEC §6's 16-bit logits at float32's tolerance: the torch device widens them, the placed noise sits where
16-bit arithmetic flips decisions and float32 does not, and group L1-16bit tells the two apart."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from devices import torch_sampling as ts
from devices.registry import load
from specsim.conformance.checks.chain.placed import NEAR, placed_noise, reference_rows
from specsim.conformance.checks.sampler.sixteen_bit import chain_check, sampler_check, sixteen_bit_group
from specsim.conformance.core.black_box import BlackBox
from specsim.conformance.core.context import Context
from specsim.judge.compare import TOLERANCE, reference_step
from specsim.mutants.zoo import make_mutant
from reference.verify import KINDS
from specsim.testing.batches import BatchSpec, random_batch, random_noise

TOL = TOLERANCE["bfloat16"]


@pytest.mark.parametrize("low", [torch.float16, torch.bfloat16])
def test_sixteen_bit_rows_are_computed_in_float32(low):
    logits = (torch.randn(4, 32, generator=torch.Generator().manual_seed(0)) * 3).to(low)
    rows = ts.SamplingRows(torch.full((4,), 0.7, dtype=torch.float64), torch.zeros(4, dtype=torch.int64),
                           torch.ones(4, dtype=torch.float64))
    got = ts.target_probs(logits, rows)
    assert got.dtype == torch.float32
    assert torch.equal(got, ts.target_probs(logits.to(torch.float32), rows))


def _batch(dtype: str, point: bool = False, size: int = 256):
    rng = np.random.default_rng(3)
    batch = random_batch(rng, BatchSpec(batch=size, max_k=4, vocab_size=64, dtype=dtype, draft_probs=not point,
                                        masked_fraction=0.0, draw="inverse-cdf"))
    return rng, batch, random_noise(rng, batch)


@pytest.mark.parametrize("point", [False, True])
def test_placed_coins_and_races_sit_between_the_tolerance_and_sixteen_bit_rounding(point):
    rng, batch, noise = _batch("bfloat16", point)
    placed = placed_noise(rng, batch, noise, TOL)
    step = reference_step(batch, placed)
    coins = step.decisions.margin[step.decisions.kind == KINDS.index("coin")]
    races = step.decisions.margin[step.decisions.kind == KINDS.index("race")]
    low, high = NEAR[0] * TOL * 0.99, NEAR[1] * TOL * 1.01
    assert len(coins) > 100 and len(races) > 100
    assert np.mean((coins >= low) & (coins <= high)) > 0.5      # most coins are placeable (ratio < 1)
    assert np.mean((races >= low) & (races <= high)) > 0.5      # most races have two robust candidates
    assert np.all(placed.exponentials > 0) and np.all((placed.uniforms >= 0) & (placed.uniforms < 1))


def test_reference_rows_read_sixteen_bit_values_exactly():
    _, batch, _ = _batch("float16", size=8)
    wide = replace(batch, target_logits=np.asarray(batch.target_logits, np.float32))
    assert np.array_equal(reference_rows(batch), reference_rows(wide))


def test_the_torch_device_passes_and_each_sixteen_bit_mutant_fails():
    torch_device = load("torch")
    assert chain_check(torch_device, seed=0, dtype="bfloat16", requests=256).status == "pass"
    assert sampler_check(torch_device, seed=0, dtype="float16", requests=256).status == "pass"
    for mutant, check, dtype in (("softmax-in-16-bit", chain_check, "float16"),
                                 ("temperature-in-16-bit", chain_check, "bfloat16"),
                                 ("residual-in-16-bit", chain_check, "bfloat16"),
                                 ("penalties-in-16-bit", sampler_check, "bfloat16")):
        result = check(make_mutant(torch_device, mutant), seed=0, dtype=dtype, requests=256)
        assert result.status == "fail" and result.extra["beyond"] > 0, (mutant, result.detail)


def test_without_sixteen_bit_dtypes_or_injected_noise_the_group_says_why():
    npu = load("npu")
    [result] = sixteen_bit_group(npu, Context(quick=True))
    assert result.status == "not_supported" and "no 16-bit logits dtype" in result.detail
    results = sixteen_bit_group(BlackBox(load("torch")), Context(quick=True))
    assert {r.status for r in results} == {"not_supported"}
    assert all("injected noise" in r.detail for r in results)
