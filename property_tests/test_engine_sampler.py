"""The engine's properties with SPEC §12's sampler parameters on (``specsim/engine/sampling.py``).

Requests carry penalties, bad words, min_tokens with stop ids, logit bias,
allowed ids and min_p; the engine hands each verify call a ``SamplerParams``
built from the committed output, and the device processes every row along the
drafts. The oracle is ``ToyLM.sequence_law_given``: non-speculative sampling
with the same processors, enumerated exactly.

* greedy: the speculative output is the target's own penalised greedy chain
  (``sequence_law_given`` at temperature 0), for every proposer (draft model,
  EAGLE, n-gram, PTD, universal draft, mixed), forced preemption, block pressure,
  both order profiles;
* seeded: with §12 parameters on (requests with and without them mixed in a
  step), a request's tokens depend on its seed only — alone on the reference,
  or batched on torch / the reference / the device under test with another
  order, ``max_num_seqs``, budget and forced preemptions;
* law: the law of whole sequences equals non-speculative sampling with the same
  processors (G / Cressie–Read through ``specsim.judge.stats.sequence_law_test``), one
  case per order profile; the drafter drafts from the processed row (draft model)
  or ignores every processor (n-gram): losslessness rests on the verifier.

Statistical family (one run of this file): 2 checks, family α = 1e-3 split by
``specsim.judge.stats.Budget`` (its own family, beside ``test_engine_properties.py``'s);
engine seeds are ``case_seed(SUITE_SEED, case)``; n = 3000 sequences per case
(detectable TV printed by each check's report).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from property_tests import test_engine_properties as engine_properties
from property_tests.test_engine_properties import assert_sequence_law, run_engine
from specsim.engine import SamplingParams, ToyLM
from specsim.judge.stats import Budget, case_seed

SUITE_SEED = 0
BUDGET = Budget(alpha_family=1e-3, checks=2)
SAFE = 1   # a token never banned by the drawn parameters (allowed, never a bad word's end, never a stop id)


@pytest.fixture(autouse=True, scope="module")
def _sampler_device(device_under_test):
    """The device under test; skipped (not_supported) unless it serves every §12 parameter in both orders."""
    from devices.protocol import SAMPLER_ORDERS, SAMPLER_PARAMETERS
    caps = device_under_test.capabilities
    missing = [p for p in SAMPLER_PARAMETERS if p not in caps.sampler and p != "token_mask"]
    missing += [o for o in SAMPLER_ORDERS if o not in caps.sampler_orders]
    if missing:
        pytest.skip(f"not_supported: {device_under_test.name} does not declare SPEC §12's {missing}")
    engine_properties._UNDER_TEST[:] = [device_under_test]
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)       # tiny tensors: intra-op threads only add contention
    yield
    torch.set_num_threads(before)


@st.composite
def sampler_fields(draw, vocab: int, max_tokens: int):
    """Some of SPEC §12's parameters (possibly none), never banning token ``SAFE``."""
    others = [t for t in range(vocab) if t != SAFE]
    kw = {}
    if draw(st.booleans()):
        kw["repetition_penalty"] = draw(st.sampled_from([0.7, 1.3, 2.0]))
    if draw(st.booleans()):
        kw["frequency_penalty"] = draw(st.sampled_from([0.3, 1.0]))
    if draw(st.booleans()):
        kw["presence_penalty"] = draw(st.sampled_from([-0.5, 0.8]))
    if draw(st.booleans()):
        kw["logit_bias"] = draw(st.dictionaries(st.integers(0, vocab - 1), st.sampled_from([-2.0, 1.5]), max_size=2))
    if draw(st.booleans()):
        kw["bad_words"] = draw(st.lists(st.tuples(st.integers(0, vocab - 1), st.sampled_from(others)), max_size=2))
    if draw(st.booleans()):
        kw["allowed_token_ids"] = sorted({SAFE} | set(draw(st.lists(st.sampled_from(others), max_size=2))))
    if draw(st.booleans()):
        kw["min_tokens"] = draw(st.integers(0, max_tokens))
        kw["stop_token_ids"] = draw(st.lists(st.sampled_from(others), max_size=1))
    if draw(st.booleans()):
        kw["min_p"] = draw(st.sampled_from([0.05, 0.2]))
    return kw


@st.composite
def sampler_scenarios(draw, greedy_only=False):
    """``test_engine_properties.scenarios`` with §12 parameters drawn onto most requests."""
    target, kind, k, drafter_max, reqs = draw(engine_properties.scenarios(greedy_only=greedy_only))
    with_params = []
    for rid, prompt, params, mml, seed in reqs:
        if draw(st.integers(0, 3)):   # one request in four keeps SPEC §2's step, in the same verify calls
            params = replace(params, **draw(sampler_fields(target.vocab_size, params.max_tokens)))
        with_params.append((rid, prompt, params, mml, seed))
    return target, kind, k, drafter_max, with_params, draw(st.sampled_from(["canonical", "vllm"]))


def penalised_greedy_chain(target: ToyLM, prompt, params: SamplingParams, mml: int, order: str) -> list[int]:
    """The target's own greedy output with the request's processors: the one sequence of its law at T = 0."""
    (chain, p), = target.sequence_law_given(prompt, params, order=order, max_model_len=mml).items()
    assert p == 1.0
    return list(chain)


# --------------------------------------------------------------------------- greedy

@settings(max_examples=40, deadline=None)
@given(sampler_scenarios(greedy_only=True), st.integers(0, 6),
       st.dictionaries(st.integers(1, 12), st.integers(1, 3), max_size=3))
def test_greedy_output_is_the_targets_penalised_greedy_chain(case, spare_blocks, preempt_at):
    target, kind, k, drafter_max, reqs, order = case
    out, _ = run_engine(target, kind, k, drafter_max, reqs, spare_blocks=spare_blocks, preempt_at=preempt_at,
                        max_num_seqs=3, sampler_order=order)
    for rid, prompt, params, mml, _ in reqs:
        assert out[rid] == penalised_greedy_chain(target, prompt, params, mml, order), (rid, params)


def test_repetition_penalty_changes_the_greedy_chain_and_the_engine_follows():
    """Control: the penalty does act here (the plain argmax chain loops), and the engine gives the penalised one."""
    target = ToyLM(4, order=1, seed=6, max_position=40)   # its argmax chain after [1, 2] is 1, 1, 1, ...
    params = SamplingParams(temperature=0, max_tokens=10, repetition_penalty=3.0)
    plain = target.greedy_chain([1, 2], 10)
    penalised = penalised_greedy_chain(target, [1, 2], params, 40, "canonical")
    assert plain != penalised
    out, engine = run_engine(target, "draft", 3, None, [("a", [1, 2], params, 40, 0)])
    assert out["a"] == penalised and engine.metrics.num_drafts > 0


# --------------------------------------------------------------------------- seeded invariance

@settings(max_examples=25, deadline=None)
@given(sampler_scenarios(), st.data())
def test_seeded_output_with_sampler_parameters_is_invariant_to_batch_order_preemption_and_device(case, data):
    target, kind, k, drafter_max, reqs, order = case
    engine_properties.assert_seeded_invariance(target, kind, k, drafter_max, reqs, data, seed=7, sampler_order=order)


# --------------------------------------------------------------------------- whole-sequence law

LAW_PROMPT, LAW_TOKENS, LAW_N = [1, 2], 4, 3000
LAW_CASES = {
    # case: (vocab, proposer kind, order, SamplingParams fields, engine options)
    "canonical/draft/preempt": (3, "draft", "canonical", dict(
        repetition_penalty=1.6, presence_penalty=0.4, logit_bias={2: 0.8}, bad_words=[(1, 1)], min_tokens=2),
        dict(preempt_at={2: 3, 4: 5})),
    "vllm/ngram": (4, "ngram", "vllm", dict(
        allowed_token_ids=[0, 1, 3], frequency_penalty=0.5, min_p=0.15, logit_bias={3: -0.5}), {}),
}


@pytest.mark.parametrize("case", list(LAW_CASES))
def test_sequence_law_with_sampler_parameters_equals_non_speculative_sampling(case):
    vocab, kind, order, fields, options = LAW_CASES[case]
    target = ToyLM(vocab, order=2, seed=5, eos_id=0, scale=1.0, max_position=16)
    params = SamplingParams(temperature=1.0, max_tokens=LAW_TOKENS, **fields)
    seed = case_seed(SUITE_SEED, f"engine-sampler-law/{case}/{LAW_N}")
    out, engine = run_engine(target, kind, 3, None, [(f"s{i}", LAW_PROMPT, params, 16, None) for i in range(LAW_N)],
                             seed=seed, max_num_seqs=256, spare_blocks=1500, sampler_order=order, **options)
    law = target.sequence_law_given(LAW_PROMPT, params, order=order)
    assert_sequence_law(out, engine, law, BUDGET.nominal, f"sampler sequence law [{case}]", seed, "preempt" in case)
