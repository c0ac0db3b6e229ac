"""The engine's properties with tree drafts (SPEC §11; ``specsim/engine/engine.py``'s tree step).

The step loop verifies ``TreeProposer`` trees through ``device.verify_tree``
(the device under test, held to the reference step by step), with the nodes
counted in the token budget and KV slots kept for the accepted path only:

* greedy: the output is the target's argmax chain, whatever the block
  pressure, forced preemptions and ``max_model_len`` (trees and chains mixed
  in one step; the target reads its context from the paged KV, so a wrong
  path slot changes its logits);
* seeded: a request's tokens depend on its seed only — alone on the
  reference, or batched on the device under test with another order,
  ``max_num_seqs``, token budget and forced preemptions (a replay from a
  recomputed prefix verifies the cached tree under the same keyed coins);
* law: for V = 3 the law of complete sequences equals the target's
  autoregressive law (``ToyLM.sequence_law``) under preemption and
  ``partial_drafts`` (a tree cut to a node prefix by the token budget).

A device that declares no ``"rrs"`` in ``tree_schemes`` is skipped with
``not_supported`` in the reason (visible in ``-rs``), never passed.

Statistical family (one run of this file): 1 check at α = 1e-3 (its own
family, beside ``test_engine_properties.py``'s); the engine seed is
``case_seed(SUITE_SEED, case)``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from property_tests import test_engine_properties as engine_properties
from reference.target import target_probs
from specsim.engine import SamplingParams, ToyLM
from specsim.judge.stats import Budget, case_seed
from specsim.judge.reference_device import JudgedDevice, ReferenceDevice

SUITE_SEED = 0
BUDGET = Budget(alpha_family=1e-3, checks=1)
_UNDER_TEST: list = []


@pytest.fixture(autouse=True, scope="module")
def _tree_device(device_under_test):
    """The device under test, judged against the reference; skipped (not_supported) without trees."""
    if "rrs" not in device_under_test.capabilities.tree_schemes:
        pytest.skip(f"not_supported: {device_under_test.name} declares no tree scheme 'rrs' "
                    f"(Capabilities.tree_schemes = {device_under_test.capabilities.tree_schemes}; SPEC §11)")
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)       # tiny tensors: intra-op threads only add contention
    _UNDER_TEST[:] = [JudgedDevice(device_under_test)]
    yield
    torch.set_num_threads(before)


@st.composite
def scenarios(draw, greedy_only=False):
    vocab = draw(st.sampled_from([4, 7]))
    target = ToyLM(vocab, order=draw(st.integers(1, 3)), seed=draw(st.integers(0, 50)),
                   eos_id=draw(st.sampled_from([None, 0])), max_position=40)
    reqs = []
    for i in range(draw(st.integers(1, 4))):
        prompt = draw(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=6))
        params = SamplingParams(temperature=0.0 if greedy_only else draw(st.sampled_from([0.0, 0.7, 1.0])),
                                top_k=draw(st.sampled_from([0, 2])), max_tokens=draw(st.integers(1, 12)),
                                num_speculative_tokens=draw(st.sampled_from([None, 0, 1, 3])),
                                proposer=draw(st.sampled_from([None, "tree", "chain"])))
        reqs.append((f"q{i}", prompt, params, len(prompt) + draw(st.integers(1, 14)),
                     draw(st.sampled_from([None, 2**63 + i, i]))))
    return target, draw(st.integers(1, 4)), reqs


def run_engine(target, k, reqs, *, device=None, **options):
    """``test_engine_properties.run_engine`` with the ``"tree"`` proposers, on the judged device under test."""
    return engine_properties.run_engine(target, "tree", k, None, reqs, device=device or _UNDER_TEST[0], **options)


@settings(max_examples=25)
@given(scenarios(greedy_only=True), st.integers(1, 6), st.dictionaries(st.integers(1, 12), st.integers(1, 3), max_size=3))
def test_greedy_tree_decoding_equals_the_targets_argmax_chain(case, spare_blocks, preempt_at):
    target, k, reqs = case
    out, _ = run_engine(target, k, reqs, spare_blocks=spare_blocks, preempt_at=preempt_at, max_num_seqs=3)
    for rid, prompt, params, mml, _ in reqs:
        assert out[rid] == target.greedy_chain(prompt, params.max_tokens, mml), rid


@settings(max_examples=15)
@given(scenarios(), st.data())
def test_seeded_tree_output_is_invariant_to_batch_order_budget_and_preemption(case, data):
    target, k, reqs = case
    alone = {}
    for r in reqs:
        alone.update(run_engine(target, k, [r], device=ReferenceDevice(), seed=7)[0])
    longest = max(mml for *_, mml, _ in reqs) + 2 + 10         # room for a recompute and a whole tree (10 nodes)
    out, _ = run_engine(target, k, reqs, seed=7, order=data.draw(st.permutations(range(len(reqs)))),
                        max_num_seqs=data.draw(st.integers(1, 4)), spare_blocks=data.draw(st.integers(1, 4)),
                        budget=data.draw(st.integers(longest, longest + 12)),
                        preempt_at=data.draw(st.dictionaries(st.integers(1, 10), st.integers(1, 2), min_size=1,
                                                             max_size=6)))
    assert out == alone


def test_trees_hold_their_nodes_in_the_budget_and_their_path_in_the_kv():
    """Every tree round is verified whole (nodes counted against the budget), and is preempted while
    holding its tree at every other step, yet gives the calm run's tokens."""
    target = ToyLM(16, order=2, seed=1)
    reqs = [(f"q{i}", [1, 2 + i], SamplingParams(temperature=1.0, max_tokens=12), 40, i) for i in range(4)]
    calm, engine = run_engine(target, 3, reqs)
    stormy, stormy_engine = run_engine(target, 3, reqs, preempt_at={s: 4 for s in range(2, 30, 2)})
    assert sum(r.num_preemptions for r in stormy_engine.requests.values()) >= 8
    assert stormy == calm
    assert max(k for k, _, _ in engine.metrics.rounds) == engine.proposers["tree"].max_nodes


LAW_V, LAW_PROMPT, LAW_TOKENS, LAW_N = 3, [1, 2], 4, 3000   # detectable TV ≈ 0.09 at power 0.999


def test_tree_sequence_law_equals_the_targets_autoregressive_law():
    target = ToyLM(LAW_V, order=2, seed=5, eos_id=0, scale=1.0, max_position=16)
    seed = case_seed(SUITE_SEED, f"engine-law/tree/{LAW_N}")
    params = SamplingParams(temperature=1.0, max_tokens=LAW_TOKENS)
    out, engine = run_engine(target, 3, [(f"s{i}", LAW_PROMPT, params, 16, None) for i in range(LAW_N)], seed=seed,
                             device=_UNDER_TEST[0].device,   # unjudged here: the law is the check
                             max_num_seqs=256, spare_blocks=1500, preempt_at={2: 3, 4: 5}, budget=503, partial=True)
    law = target.sequence_law(LAW_PROMPT, LAW_TOKENS, lambda z: target_probs(z, 1.0, 0))
    engine_properties.assert_sequence_law(out, engine, law, BUDGET.nominal, "tree sequence law", seed, preempted=True)
    assert any(0 < k < engine.proposers["tree"].max_nodes for k, _, _ in engine.metrics.rounds), "no tree was cut"
