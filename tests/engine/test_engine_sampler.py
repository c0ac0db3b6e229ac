"""The engine carries SPEC §12's parameters (specsim/engine/sampling.py): validation, the step's
``SamplerParams``, requests without them untouched, stop ids, trees refused, the drafter's processed rows."""

import numpy as np
import pytest

from specsim.engine import DraftModelProposer, Engine, NgramProposer, SamplingParams, ToyLM
from specsim.engine.proposers.tree import TreeProposer
from specsim.judge.reference_device import ReferenceDevice


class Spy(ReferenceDevice):
    """The reference device, keeping every batch it verified."""

    def __init__(self):
        super().__init__()
        self.batches = []

    def verify(self, batch, noise=None):
        self.batches.append(batch)
        return super().verify(batch, noise)


@pytest.mark.parametrize("field,value,rule", [
    ("repetition_penalty", 0.0, "repetition_penalty: must be finite and > 0"),
    ("repetition_penalty", float("nan"), "repetition_penalty: must be finite and > 0"),
    ("frequency_penalty", float("inf"), "frequency_penalty: must be finite"),
    ("presence_penalty", float("nan"), "presence_penalty: must be finite"),
    ("min_p", 1.5, r"min_p: must be in \[0, 1\]"),
    ("min_tokens", 20, r"min_tokens: must be an integer in \[0, max_tokens = 16\]"),
    ("min_tokens", -1, "min_tokens"),
    ("logit_bias", {1: float("nan")}, "logit_bias: every bias must be finite"),
    ("logit_bias", {-1: 1.0}, "logit_bias: token ids must be integers >= 0"),
    ("allowed_token_ids", [], "allowed_token_ids: must list at least one token"),
    ("allowed_token_ids", [1.5], "allowed_token_ids: token ids must be integers"),
    ("bad_words", [[]], "bad_words: each word must have at least one token"),
    ("stop_token_ids", "ab", "stop_token_ids: must be a sequence of token ids"),
])
def test_bad_sampler_parameters_are_refused_naming_the_field_and_the_rule(field, value, rule):
    with pytest.raises(ValueError, match=rule):
        SamplingParams(**{field: value})


@pytest.mark.parametrize("field,value", [("allowed_token_ids", [0, 8]), ("bad_words", [[1, 9]]),
                                         ("logit_bias", {8: 1.0}), ("stop_token_ids", [8])])
def test_ids_outside_the_targets_vocabulary_are_refused_at_add_request(field, value):
    engine = Engine(ToyLM(8, seed=0), device=ReferenceDevice())
    with pytest.raises(ValueError, match=rf"{field}: token ids must be in \[0, 8\)"):
        engine.add_request("a", [1], SamplingParams(**{field: value}))


def test_unknown_sampler_order_is_refused():
    with pytest.raises(ValueError, match="sampler_order: must be one of"):
        Engine(ToyLM(8, seed=0), sampler_order="transformers")


def test_requests_without_sampler_parameters_keep_spec_2s_step():
    spy = Spy()
    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, DraftModelProposer(target.mixed(0.5, seed=1)), device=spy, num_speculative_tokens=2)
    engine.add_request("a", [1, 2], SamplingParams(max_tokens=5))
    engine.run()
    assert spy.batches and all(b.sampler is None for b in spy.batches)


def test_the_steps_sampler_params_carry_the_committed_output_and_neutral_entries_for_plain_requests():
    spy = Spy()
    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, DraftModelProposer(target.mixed(0.5, seed=1)), device=spy, num_speculative_tokens=2,
                    sampler_order="vllm")
    engine.add_request("plain", [1, 2], SamplingParams(max_tokens=6))
    engine.add_request("penalised", [3, 4, 5], SamplingParams(max_tokens=6, repetition_penalty=1.5,
                                                              logit_bias={2: 1.0}, min_tokens=3))
    engine.run()
    last = [b for b in spy.batches if b.batch_size == 2][-1]
    s = last.sampler
    assert s.order == "vllm" and set(s.given()) == {"repetition_penalty", "logit_bias", "min_tokens"}
    assert s.repetition_penalty.tolist() == [1.0, 1.5] and s.min_tokens.tolist() == [0, 3]
    assert s.logit_bias[0].tolist() == [0.0] * 8 and s.logit_bias[1, 2] == 1.0
    assert [p.tolist() for p in s.prompt_token_ids] == [[1, 2], [3, 4, 5]]
    # the output so far is the committed output before this step (the device adds the drafts row by row)
    assert all(len(o) < 6 for o in s.output_token_ids)


def test_stop_token_ids_end_a_request_and_min_tokens_holds_them_back():
    target = ToyLM.constant([0.0, 3.0, 0.0], max_position=64)   # token 1 nearly always
    engine = Engine(target, DraftModelProposer(ToyLM.constant([0.0, 3.0, 0.0], max_position=64)),
                    device=ReferenceDevice(), num_speculative_tokens=3)
    engine.add_request("stops", [0], SamplingParams(temperature=0, max_tokens=8, stop_token_ids=[1]))
    engine.add_request("held", [0], SamplingParams(temperature=0, max_tokens=8, stop_token_ids=[1], min_tokens=3))
    out = engine.run()
    assert out["stops"] == [1] and engine.requests["stops"].finish_reason == "stop"
    assert out["held"] == [0, 0, 0, 1]   # 1 banned while fewer than 3 tokens: the argmax of the rest is 0


def test_trees_refuse_sampler_parameters():
    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, TreeProposer(target.mixed(0.6, seed=1), depth=2, branch=2, width=2),
                    device=ReferenceDevice(), num_speculative_tokens=2)
    engine.add_request("a", [1, 2], SamplingParams(max_tokens=6, presence_penalty=0.5))
    with pytest.raises(ValueError, match="not defined for trees"):
        engine.run()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_perfect_drafter_drafts_the_processed_row_so_every_draft_is_accepted(temperature):
    """The drafter applies the request's processors (penalties over output + drafts, bans, bias): with the
    target's own table its row is the target's row, so every draft is accepted (q = p)."""
    target = ToyLM(6, order=2, seed=4, max_position=64)
    engine = Engine(target, DraftModelProposer(target.mixed(1.0, seed=9)), device=ReferenceDevice(),
                    num_speculative_tokens=3, seed=1)
    params = SamplingParams(temperature=temperature, max_tokens=20, repetition_penalty=1.8, frequency_penalty=0.3,
                            bad_words=[(2, 3)], logit_bias={4: 1.0}, min_p=0.05)
    for i in range(8):
        engine.add_request(f"r{i}", [1, 2 + i % 3], params)
    engine.run()
    m = engine.metrics
    assert m.num_draft_tokens > 0 and sum(m.acc_counts) == m.num_draft_tokens


def test_an_ngram_drafter_ignoring_every_processor_is_still_verified_against_them():
    """Point drafts that a ban forbids are rejected with certainty: no output holds a banned pair."""
    target = ToyLM(4, order=1, seed=6, max_position=64)
    engine = Engine(target, NgramProposer(4), device=ReferenceDevice(), num_speculative_tokens=3, seed=2)
    for i in range(16):
        engine.add_request(f"r{i}", [1, 1, 1, 1], SamplingParams(max_tokens=12, bad_words=[(1, 1)]))
    out = engine.run()
    assert engine.metrics.num_draft_tokens > 0
    assert not any(a == b == 1 for o in out.values() for a, b in zip(o, o[1:]))
