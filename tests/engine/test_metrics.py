"""Metrics come from emitted tokens: drafts accepted after EOS or past max_tokens are not counted (vLLM #56101, #4, #37)."""

import json

import numpy as np

from specsim.engine import DraftModelProposer, Engine, SamplingParams, SpecDecodeMetrics, ToyLM


def _eos_target():
    """A target whose greedy chain from [1] reaches EOS (0) at its 4th..6th token; searched deterministically."""
    for seed in range(500):
        target = ToyLM(8, order=2, seed=seed, eos_id=0)
        chain, out = [1], []
        for _ in range(6):
            out.append(int(np.argmax(target.next_logits(chain + out))))
            if out[-1] == 0:
                break
        if out[-1] == 0 and len(out) >= 4 and 0 not in out[:-1]:
            return target, out
    raise AssertionError("no seed found")


def test_drafts_accepted_after_eos_are_neither_emitted_nor_counted(torch_device):
    target, chain = _eos_target()
    perfect = DraftModelProposer(target.mixed(1.0, seed=2))  # drafts the target's own argmax, past EOS too
    engine = Engine(target, perfect, device=torch_device, num_speculative_tokens=8)
    engine.add_request("a", [1], SamplingParams(temperature=0.0, max_tokens=50))
    out = engine.run()
    assert out["a"] == chain
    # step 1 emits chain[0] (no drafts); step 2 verifies 8 perfect drafts, all accepted, EOS among them
    (k0, a0, e0), (k1, a1, e1) = engine.metrics.rounds
    assert (k0, e0) == (0, 1) and (k1, a1) == (8, 8) and e1 == len(chain) - 1
    m = engine.metrics.as_dict()
    assert m["acc_counts"] == [1] * e1 + [0] * (8 - e1)
    assert m["num_drafts"] == 1 and m["num_draft_tokens"] == 8
    assert m["emitted_tokens"] == len(chain)
    assert m["mean_acceptance_length"] == e1
    assert m["acc_rate"] == e1 / 8


def test_max_tokens_trims_accepted_drafts_and_the_bonus(torch_device):
    target = ToyLM(8, order=2, seed=3)
    engine = Engine(target, DraftModelProposer(target.mixed(1.0, seed=2)), device=torch_device,
                    num_speculative_tokens=4)
    engine.add_request("a", [1], SamplingParams(temperature=0.0, max_tokens=3))
    out = engine.run()
    assert len(out["a"]) == 3
    assert engine.metrics.rounds == [(0, 0, 1), (4, 4, 2)]
    assert engine.metrics.acc_counts == [1, 1, 0, 0]
    assert engine.metrics.emitted_tokens == 3


def test_print_format_and_json_keys_follow_seed_000():
    m = SpecDecodeMetrics(2)
    m.record(2, 1, 2)
    lines = m.format().splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == ["acc_counts", "acc_rate", "num_draft_tokens", "num_drafts"]
    assert lines[0] == "acc_counts: [1, 0]"
    assert set(json.loads(m.to_json())) == {"acc_counts", "acc_rate", "num_draft_tokens", "num_drafts",
                                           "mean_acceptance_length", "emitted_tokens"}


def test_a_round_cannot_report_more_accepted_than_drafts():
    m = SpecDecodeMetrics(2)
    for bad in [(2, 3, 1), (2, 1, 3), (0, 1, 1)]:
        try:
            m.record(*bad)
        except ValueError:
            continue
        raise AssertionError(f"record{bad} was accepted")
