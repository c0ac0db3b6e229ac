"""The engine with the platforms' proposers (TLI, PTD) and devices (hpu, npu): greedy equality,
seeded agreement across devices, limits checked every step, PTD's per-position acceptance."""

from __future__ import annotations

import numpy as np
import pytest

from devices.hpu_device import HpuDevice
from devices.npu_device import NpuDevice
from specsim.engine import Engine, SamplingParams, SchedulerConfig, ToyLM
from specsim.engine.proposers import PtdProposer, UniversalDraftProposer
from specsim.judge.reference_device import JudgedDevice
from specsim.vocab import VocabMapping, random_tokenizer

T_TOK, D_TOK = random_tokenizer("abc ", 8, seed=1), random_tokenizer("abc ", 10, seed=2, marker="▁")
TARGET = ToyLM(T_TOK.vocab_size, order=2, seed=3, eos_id=T_TOK.vocab_size - 1)


def proposer(kind: str):
    if kind == "ptd":
        return PtdProposer(TARGET.mixed(0.8, seed=5))
    if kind == "ptd-point":
        return PtdProposer(TARGET.mixed(0.8, seed=5), use_probs=False)
    if kind == "universal":
        return UniversalDraftProposer(ToyLM(D_TOK.vocab_size, order=2, seed=4), VocabMapping(T_TOK, D_TOK))
    return UniversalDraftProposer(ToyLM(D_TOK.vocab_size, order=2, seed=4), VocabMapping(T_TOK, D_TOK),
                                  context="ids", fallback=0)


def device(name: str):
    if name.startswith("judged "):
        return JudgedDevice(device(name.removeprefix("judged ")))
    if name == "hpu":
        return HpuDevice()
    if name == "npu":
        return NpuDevice()
    from devices.registry import load
    return load(name)


def run(kind, dev, temperature, *, seed=0, max_model_len=None, blocks=4096, preempt_at=None):
    engine = Engine(TARGET, proposer(kind), device=device(dev), num_speculative_tokens=3, seed=seed,
                    max_model_len=max_model_len, check_invariants=True, preempt_at=preempt_at,
                    scheduler=SchedulerConfig(num_blocks=blocks, block_size=4))
    for i in range(4):
        engine.add_request(f"r{i}", [i % 3, 1], SamplingParams(temperature=temperature, max_tokens=14))
    return engine, engine.run()


@pytest.mark.parametrize("dev", ["hpu", "npu"])
@pytest.mark.parametrize("kind", ["ptd", "ptd-point", "universal", "universal-ids"])
def test_greedy_equals_target_chain(kind, dev):
    engine, out = run(kind, dev, 0.0, max_model_len=13, preempt_at={3: 1})
    for i in range(4):
        assert out[f"r{i}"] == TARGET.greedy_chain([i % 3, 1], 14, 13)
    assert engine.metrics.num_drafts > 0


@pytest.mark.parametrize("kind", ["ptd", "universal"])
def test_seeded_outputs_identical_on_torch_hpu_npu(kind):
    """Keyed drafting + keyed verification: each device's every step equals the reference's (SPEC §9
    waivers for the fp32 npu), so the three runs emit the same tokens."""
    outs = [run(kind, dev, 1.0, seed=7, preempt_at={4: 2})[1] for dev in ("judged torch", "judged hpu", "judged npu")]
    assert outs[0] == outs[1] == outs[2]


def test_ptd_acceptance_falls_with_position():
    """Seed 002's per-position table: the conditional rate P(accept j | accepted j−1) of the
    mask rows (j ≥ 1) is below draft 0's, which sees the real context (deterministic seed;
    at this seed 0.88, 0.35, 0.26)."""
    engine = Engine(TARGET, PtdProposer(TARGET.mixed(0.9, seed=5)), device=device("hpu"), num_speculative_tokens=3,
                    seed=1)
    for i in range(12):
        engine.add_request(f"r{i}", [i % 3, 1], SamplingParams(temperature=1.0, max_tokens=24, ignore_eos=True))
    engine.run()
    metrics = engine.metrics.as_dict()
    acc = metrics["acc_counts"]
    rates = [acc[0] / metrics["num_drafts"], acc[1] / acc[0], acc[2] / acc[1]]
    assert rates[0] > rates[1] and rates[0] > rates[2]
