"""Engine unit tests: global RNG untouched, proposal kinds, abort, limits, partial scheduling, errors."""

import random

import numpy as np
import pytest

from reference.verify import verify
from specsim.engine import (DraftModelProposer, Engine, EngineError, NgramProposer, SamplingParams, SchedulerConfig,
                            Status, ToyLM)
from specsim.engine.workload import Workload, build_engine
from specsim.judge.reference_device import ReferenceDevice


def test_a_run_never_touches_the_global_rngs(torch_device):
    import torch
    random.seed(1); np.random.seed(2); torch.manual_seed(3)
    before = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone())
    for proposer in ("draft", "eagle", "ngram"):
        build_engine(Workload(num_requests=6, prompt_len=4, output_len=10, proposer=proposer, k=3,
                              temperature=1.0, vocab_size=16, device="torch")).run()
    assert random.getstate() == before[0]
    assert (np.random.get_state()[1] == before[1]).all()
    assert torch.equal(torch.get_rng_state(), before[2])


def test_one_hot_rows_verify_exactly_like_point_proposals():
    """SPEC §3: with draft_probs one-hot at the drafted token, acceptance t(x)/1 and residual max(t − δx, 0)
    equal the point scheme's t(x) and t with x zeroed; same keyed noise ⇒ same tokens. (The engine still
    verifies the two kinds in separate calls: a device may declare only one of them.)"""
    rng = np.random.default_rng(0)
    V, ks = 5, np.array([3, 1, 2, 0])
    ids = rng.integers(0, V, ks.sum())
    logits = rng.standard_normal((ks.sum() + len(ks), V))
    common = dict(temperature=np.array([1.0, 0.7, 1.3, 1.0]), top_k=np.array([0, 2, 0, 0]),
                  top_p=np.array([1.0, 1.0, 0.8, 1.0]))
    for s in range(50):
        keys = dict(seeds=np.arange(4, dtype=np.uint64) + 100 * s, positions=np.array([3, 9, 4, 1]))
        point = verify(ks, ids, None, logits, **common, **keys)
        onehot = verify(ks, ids, np.eye(V)[ids], logits, **common, **keys)
        assert (point.output_token_ids == onehot.output_token_ids).all()


def test_mixed_proposal_kinds_go_to_separate_verify_calls():
    calls = []

    class Spy(ReferenceDevice):
        def verify(self, batch, noise=None):
            calls.append(batch.draft_probs is None)
            return super().verify(batch, noise)

    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, {"draft": DraftModelProposer(target.mixed(0.5, seed=1)), "ngram": NgramProposer(8)},
                    device=Spy(), num_speculative_tokens=2)
    engine.add_request("a", [1, 2, 1, 2], SamplingParams(max_tokens=6, proposer="draft"))
    engine.add_request("b", [1, 2, 1, 2], SamplingParams(max_tokens=6, proposer="ngram"))
    engine.run()
    assert True in calls and False in calls


def test_abort_frees_blocks_and_the_draft_cache():
    engine = build_engine(Workload(num_requests=3, prompt_len=4, output_len=20, k=3, vocab_size=16,
                                   device="reference"))
    engine.step(); engine.step()
    r = engine.requests["r1"]
    assert r.block_table and r.spec_token_ids is not None and r.spec_draft_probs is not None
    engine.abort("r1")
    assert r.status is Status.ABORTED and not r.block_table and r.spec_draft_probs is None
    engine.check_invariants()
    engine.run()
    assert len(r.output) < 20 and engine.pool.num_free == engine.pool.num_blocks


def test_no_position_reaches_max_model_len_even_when_the_target_would_refuse_it():
    # the target raises ModelPositionError for positions >= 12: drafts must be capped below max_model_len 12
    target = ToyLM(8, order=2, seed=0, max_position=12)
    engine = Engine(target, DraftModelProposer(target.mixed(1.0, seed=1)), device=ReferenceDevice(),
                    num_speculative_tokens=5, max_model_len=12, check_invariants=True)
    engine.add_request("a", [1, 2, 3], SamplingParams(temperature=0.0, max_tokens=100))
    out = engine.run()
    r = engine.requests["a"]
    assert len(out["a"]) == 9 and r.finish_reason == "length" and r.max_slot_position <= 10


def test_partial_scheduling_verifies_fewer_drafts_and_keeps_the_law_keys():
    target = ToyLM(8, order=2, seed=0)
    # budget 7: "a" (1 uncached + 4 drafts) fits; "b" gets the remaining 2 tokens: 1 draft
    engine = Engine(target, DraftModelProposer(target.mixed(0.9, seed=1)), device=ReferenceDevice(),
                    num_speculative_tokens=4, check_invariants=True,
                    scheduler=SchedulerConfig(max_num_batched_tokens=7, partial_drafts=True))
    engine.add_request("a", [1, 2], SamplingParams(max_tokens=6))
    engine.add_request("b", [3, 4], SamplingParams(max_tokens=6))
    engine.run()
    ks = [k for k, _, _ in engine.metrics.rounds]
    assert any(0 < k < 4 for k in ks), ks


def test_a_deferred_round_keeps_its_cached_drafts():
    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, DraftModelProposer(target.mixed(0.5, seed=1)), device=ReferenceDevice(),
                    num_speculative_tokens=4, check_invariants=True,
                    scheduler=SchedulerConfig(max_num_batched_tokens=8))
    engine.add_request("a", [1, 2], SamplingParams(max_tokens=3))
    engine.add_request("b", [3, 4], SamplingParams(max_tokens=3))
    engine.step()  # both prefill (2 + 2 tokens)
    b = engine.requests["b"]
    drafts = b.spec_token_ids.copy()
    out = engine.step()  # a takes 5 of 8 tokens; b's round (5 tokens) waits whole
    assert "b" not in out.new_tokens and (b.spec_token_ids == drafts).all()


@pytest.mark.parametrize("kwargs,match", [
    (dict(prompt=[]), "prompt"), (dict(prompt=[99]), "prompt"), (dict(max_model_len=3, prompt=[1, 2, 3]), "prompt"),
    (dict(max_model_len=10_000), "max_position"), (dict(params=SamplingParams(proposer="nope")), "proposer"),
])
def test_bad_requests_are_refused_with_the_argument_named(kwargs, match):
    target = ToyLM(8, order=2, seed=0, max_position=100)
    engine = Engine(target, DraftModelProposer(target.mixed(0.5, seed=1)), device=ReferenceDevice(),
                    num_speculative_tokens=2)
    args = dict(prompt=[1, 2]) | kwargs
    with pytest.raises(ValueError, match=match):
        engine.add_request("a", args.pop("prompt"), **args)


def test_a_request_that_could_never_be_scheduled_is_refused():
    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, None, device=ReferenceDevice(), scheduler=SchedulerConfig(max_num_batched_tokens=8))
    with pytest.raises(ValueError, match="never be scheduled"):
        engine.add_request("a", [1] * 6, SamplingParams(max_tokens=10))


def test_engine_takes_a_device_by_name():
    target = ToyLM(8, order=2, seed=0)
    assert Engine(target, None, device="torch").device.name.startswith("torch")
    with pytest.raises(Exception, match="unknown device"):
        Engine(target, None, device="no-such-device")


@pytest.mark.parametrize("kind", ["draft", "eagle"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_perfect_drafter_is_always_accepted_even_under_preemption(kind, temperature):
    """Acceptance sanity (vLLM #5, #18): with drafter == target, every draft is accepted. A stale EAGLE
    feature, draft state lost at preemption or a misaligned row would show up here as rejections."""
    from specsim.engine import EagleProposer
    target = ToyLM(16, order=2, seed=0)
    head = target.mixed(1.0, seed=1)
    proposer = DraftModelProposer(head) if kind == "draft" else EagleProposer(head)
    engine = Engine(target, proposer, device=ReferenceDevice(), num_speculative_tokens=3, check_invariants=True,
                    preempt_at={s: 2 for s in range(3, 12, 3)})
    for i in range(3):
        engine.add_request(f"r{i}", [i + 1, 2], SamplingParams(temperature=temperature, max_tokens=14),
                           max_model_len=40)
    engine.run()
    rounds = engine.metrics.rounds
    assert all(a == k for k, a, _ in rounds) and sum(k for k, _, _ in rounds) >= 9, rounds


def test_verify_batches_carry_request_seeds_and_round_start_positions():
    """SPEC §5.2: positions = tokens in the sequence before this step's drafts; seeds = the request's seed."""
    seen = []

    class Spy(ReferenceDevice):
        def verify(self, batch, noise=None):
            seen.append((batch.seeds.tolist(), batch.positions.tolist()))
            return super().verify(batch, noise)

    target = ToyLM(8, order=2, seed=0)
    engine = Engine(target, DraftModelProposer(target.mixed(0.5, seed=1)), device=Spy(), num_speculative_tokens=3)
    r = engine.add_request("a", [1, 2, 3], SamplingParams(max_tokens=12), seed=2**64 - 5)
    lengths = []
    while engine.has_unfinished():
        lengths.append(r.num_tokens)
        engine.step()
    assert seen == [([2**64 - 5], [n]) for n in lengths]
