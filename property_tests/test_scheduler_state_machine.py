"""A Hypothesis state machine over add / step / preempt / abort interleavings.

After every rule, ``Engine.check_invariants`` checks the scheduler's state:

* blocks: each is free xor held by exactly one running request; nothing
  leaked or double-freed; waiting and finished requests hold none; a running
  request's blocks cover its computed tokens;
* request states: every unfinished request in exactly one queue; running
  ≤ ``max_num_seqs``; ``num_computed = num_tokens − 1`` while running;
* draft-prob cache (seed 003): drafts belong to the current round
  (``spec_position == num_tokens``), never reach ``max_model_len``, carry
  ``[k, V]`` rows when the proposer has probs, and are gone once finished;
* limits: no KV slot at or beyond ``max_model_len``, no token after EOS.

And on the outputs: a greedy request that finished (not aborted) equals the
target's argmax chain whatever happened to it; a request preempted while it
held drafts verifies exactly those drafts on resume.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from specsim.engine import (DraftModelProposer, Engine, NgramProposer, SamplingParams, SchedulerConfig, Status,
                            ToyLM)
from specsim.judge.reference_device import ReferenceDevice

V = 5


class SchedulerMachine(RuleBasedStateMachine):
    @initialize(num_blocks=st.integers(8, 16), block_size=st.integers(1, 3), max_num_seqs=st.integers(1, 4),
                budget=st.integers(24, 40), partial=st.booleans(), k=st.integers(1, 3), probs=st.booleans())
    def setup(self, num_blocks, block_size, max_num_seqs, budget, partial, k, probs):
        self.target = ToyLM(V, order=2, seed=3, eos_id=0, max_position=20)
        proposers = {"draft": DraftModelProposer(self.target.mixed(0.5, seed=4, max_position=14), use_probs=probs),
                     "ngram": NgramProposer(V)}
        config = SchedulerConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=budget, block_size=block_size,
                                 num_blocks=num_blocks * 3 // block_size + 4, partial_drafts=partial)
        self.engine = Engine(self.target, proposers, device=ReferenceDevice(), num_speculative_tokens=k,
                             scheduler=config, seed=1, check_invariants=True)
        self.added = 0
        self.aborted: set[str] = set()
        self.pending: dict[str, tuple] = {}  # request id -> (spec_position, drafts) cached at preemption

    @rule(prompt=st.lists(st.integers(0, V - 1), min_size=1, max_size=5), greedy=st.booleans(),
          max_tokens=st.integers(1, 10), room=st.integers(1, 12), proposer=st.sampled_from(["draft", "ngram"]))
    def add(self, prompt, greedy, max_tokens, room, proposer):
        rid = f"r{self.added}"
        self.added += 1
        params = SamplingParams(temperature=0.0 if greedy else 1.0, max_tokens=max_tokens, proposer=proposer)
        self.engine.add_request(rid, prompt, params, max_model_len=min(len(prompt) + room, 20))

    @rule()
    def step(self):
        before = {rid: (r.spec_position, None if r.spec_token_ids is None else r.spec_token_ids.tolist())
                  for rid, r in self.engine.requests.items()}
        out = self.engine.step()
        for rid, tokens in out.new_tokens.items():
            if rid in self.pending and self.pending[rid][1] is not None:
                position, drafts = self.pending[rid]
                # the round resumed after preemption used the drafts cached before it
                assert before[rid] == (position, drafts)
            self.pending.pop(rid, None)

    @precondition(lambda self: self.engine.scheduler.running)
    @rule(data=st.data())
    def preempt(self, data):
        request = data.draw(st.sampled_from(self.engine.scheduler.running))
        drafts = None if request.spec_token_ids is None else request.spec_token_ids.tolist()
        assert self.engine.preempt(request.request_id)
        self.pending[request.request_id] = (request.spec_position, drafts)

    @precondition(lambda self: self.added)
    @rule(data=st.data())
    def abort(self, data):
        rid = f"r{data.draw(st.integers(0, self.added - 1))}"
        self.engine.abort(rid)
        if self.engine.requests[rid].status is Status.ABORTED:
            self.aborted.add(rid)

    @invariant()
    def bookkeeping(self):
        self.engine.check_invariants()

    @invariant()
    def greedy_outputs_are_the_argmax_chain(self):
        for rid, r in self.engine.requests.items():
            if r.status is Status.FINISHED and r.params.temperature == 0:
                assert r.output == self.target.greedy_chain(r.prompt, r.params.max_tokens, r.max_model_len), rid

    def teardown(self):
        if hasattr(self, "engine"):
            self.engine.run()  # everything left finishes, and the pool is whole again
            self.engine.check_invariants()
            assert self.engine.pool.num_free == self.engine.pool.num_blocks


SchedulerMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
TestScheduler = SchedulerMachine.TestCase
