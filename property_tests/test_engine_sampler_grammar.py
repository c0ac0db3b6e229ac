"""The engine's properties with structured output (``specsim/engine/grammar.py``, llguidance 1.9.1).

Requests carry ``SamplingParams(grammar=list_grammar())`` (a Lark grammar of
bracketed lists over six toy tokens, 0 the end token); each step the engine
computes the mask of position j after advancing the request's matcher along
drafts 0..j−1, hands the masks to the device as ``SamplerParams.token_mask``,
and rolls the matcher back to the accepted prefix before taking the emitted
token. Skipped when llguidance is absent (``pip install 'specsim[grammar]'``).

* grammar: every output is in the grammar — a fresh matcher takes every token
  and a request that stopped ended at the end token — for every proposer
  (grammar-aware draft model and EAGLE, grammar-blind n-gram and PTD), K,
  forced preemption, block pressure, with and without a repetition penalty;
* greedy: the output is the target's own constrained greedy chain
  (``ToyLM.sequence_law_given`` at temperature 0);
* seeded: a constrained request's tokens depend on its seed only (alone on the
  reference, or batched with others on the device under test, another order,
  ``max_num_seqs``, budget and forced preemptions);
* law: the law of constrained sequences equals non-speculative constrained
  sampling, enumerated exactly (``sequence_law_given``), with a drafter that
  drafts under the grammar and with one that ignores it.

Statistical family (one run of this file): 2 checks, family α = 1e-3 split by
``specsim.judge.stats.Budget`` (its own family); engine seeds ``case_seed(SUITE_SEED, case)``;
n = 3000 sequences per case (detectable TV printed by each check's report).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("llguidance")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
need("llguidance")

from property_tests import test_engine_properties as engine_properties  # noqa: E402
from property_tests.test_engine_properties import assert_sequence_law, run_engine  # noqa: E402
from specsim.engine import SamplingParams, ToyLM  # noqa: E402
from specsim.engine.grammar import list_grammar  # noqa: E402
from specsim.judge.stats import Budget, case_seed  # noqa: E402

SUITE_SEED = 0
BUDGET = Budget(alpha_family=1e-3, checks=2)
GRAMMAR = list_grammar()
V = GRAMMAR.vocab_size
KINDS = ["draft", "draft-noprobs", "eagle", "ngram", "mixed", "ptd"]


@pytest.fixture(autouse=True, scope="module")
def _mask_device(device_under_test):
    """The device under test; skipped (not_supported) unless it serves SPEC §12's token_mask."""
    caps = device_under_test.capabilities
    if "token_mask" not in caps.sampler or "repetition_penalty" not in caps.sampler:
        pytest.skip(f"not_supported: {device_under_test.name} does not declare SPEC §12's token_mask "
                    f"and repetition_penalty (Capabilities.sampler = {caps.sampler})")
    engine_properties._UNDER_TEST[:] = [device_under_test]
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@st.composite
def grammar_scenarios(draw, greedy_only=False):
    """Requests under the list grammar (a few without it, in the same steps), one proposer kind."""
    kind = draw(st.sampled_from(KINDS))
    target = ToyLM(V, order=draw(st.integers(1, 3)), seed=draw(st.integers(0, 50)), eos_id=GRAMMAR.eos_id,
                   max_position=40)
    names = list(engine_properties.proposers(target, kind)) if kind == "mixed" else [None]
    reqs = []
    for i in range(draw(st.integers(1, 4))):
        prompt = draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=4))
        t = 0.0 if greedy_only else draw(st.sampled_from([0.0, 0.8, 1.0]))
        params = SamplingParams(temperature=t, max_tokens=draw(st.integers(1, 14)), proposer=draw(st.sampled_from(names)),
                                num_speculative_tokens=draw(st.sampled_from([None, 1, 3])),
                                repetition_penalty=draw(st.sampled_from([1.0, 1.5])))
        if draw(st.integers(0, 4)):
            params = replace(params, grammar=GRAMMAR)
        reqs.append((f"g{i}", prompt, params, len(prompt) + draw(st.integers(2, 16)), draw(st.sampled_from([None, i]))))
    return target, kind, draw(st.integers(1, 4)), None, reqs


def check_in_grammar(out, engine, reqs) -> None:
    for rid, _, params, _, _ in reqs:
        if params.grammar is None:
            continue
        stopped = engine.requests[rid].finish_reason == "stop"
        assert GRAMMAR.accepts(out[rid], complete=stopped), f"{rid}: {out[rid]} is not in the grammar"


# --------------------------------------------------------------------------- grammar + greedy

@settings(max_examples=30, deadline=None)
@given(grammar_scenarios(), st.integers(0, 6), st.dictionaries(st.integers(1, 12), st.integers(1, 3), max_size=3))
def test_every_output_is_in_the_grammar(case, spare_blocks, preempt_at):
    target, kind, k, drafter_max, reqs = case
    out, engine = run_engine(target, kind, k, drafter_max, reqs, spare_blocks=spare_blocks, preempt_at=preempt_at,
                             max_num_seqs=3)
    check_in_grammar(out, engine, reqs)


@settings(max_examples=25, deadline=None)
@given(grammar_scenarios(greedy_only=True), st.dictionaries(st.integers(1, 12), st.integers(1, 3), max_size=3))
def test_greedy_output_is_the_targets_constrained_greedy_chain(case, preempt_at):
    target, kind, k, drafter_max, reqs = case
    out, _ = run_engine(target, kind, k, drafter_max, reqs, preempt_at=preempt_at, max_num_seqs=3)
    for rid, prompt, params, mml, _ in reqs:
        (chain, p), = target.sequence_law_given(prompt, params, max_model_len=mml).items()
        assert out[rid] == list(chain), (rid, params)


# --------------------------------------------------------------------------- seeded invariance

@settings(max_examples=20, deadline=None)
@given(grammar_scenarios(), st.data())
def test_seeded_constrained_output_is_invariant_to_batch_order_and_preemption(case, data):
    target, kind, k, drafter_max, reqs = case
    engine_properties.assert_seeded_invariance(target, kind, k, drafter_max, reqs, data, seed=3)


# --------------------------------------------------------------------------- law of constrained sequences

LAW_PROMPT, LAW_TOKENS, LAW_N = [1, 4], 5, 3000
LAW_CASES = {
    # case: (proposer kind, SamplingParams fields, engine options)
    "draft/repetition/preempt": ("draft", dict(repetition_penalty=1.5), dict(preempt_at={2: 3, 4: 5})),
    "ngram": ("ngram", {}, {}),
}


@pytest.mark.parametrize("case", list(LAW_CASES))
def test_law_of_constrained_sequences_equals_non_speculative_constrained_sampling(case):
    kind, fields, options = LAW_CASES[case]
    target = ToyLM(V, order=2, seed=5, eos_id=GRAMMAR.eos_id, scale=1.5, max_position=16)
    params = SamplingParams(temperature=1.0, max_tokens=LAW_TOKENS, grammar=GRAMMAR, **fields)
    seed = case_seed(SUITE_SEED, f"engine-grammar-law/{case}/{LAW_N}")
    reqs = [(f"s{i}", LAW_PROMPT, params, 16, None) for i in range(LAW_N)]
    out, engine = run_engine(target, kind, 3, None, reqs, seed=seed, max_num_seqs=256, spare_blocks=1500, **options)
    check_in_grammar(out, engine, reqs)
    law = target.sequence_law_given(LAW_PROMPT, params)
    assert_sequence_law(out, engine, law, BUDGET.nominal, f"grammar sequence law [{case}]", seed, "preempt" in case)
