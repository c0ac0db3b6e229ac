"""transformers 5.23.0's Gemma-4 assistant drafter (SinglePositionMultiTokenCandidateGenerator) through ``specsim proposer``.

What the check finds (docs/field.md, "transformers' drafters as proposers"): every draft is the argmax of the
logits it hands the verifier as q, so the drafts are not drawn from that q — ``law/position-*`` fail, at
position 0 with the measured TV ``1 - max q`` — while ``transformers-assisted`` beside it keeps passing.
Small here (100 calls a case, T = 1 and greedy: a few seconds).
"""

from __future__ import annotations

import numpy as np
import pytest

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("transformers")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
need("transformers")

from specsim.engine.proposers.checked import load  # noqa: E402
from specsim.engine.state import Request, SamplingParams  # noqa: E402
from specsim.conformance.proposer.proposers import Declaration, check, plan  # noqa: E402


@pytest.fixture(scope="module")
def proposer():
    return load("transformers-gemma4-assistant")


@pytest.fixture(scope="module")
def result(proposer):
    return check(proposer, samples=100, only=("T1", "greedy"))


def _one(proposer, temperature: float, seed: int, context=(3, 5, 1, 6), **params):
    request = Request("r", list(context), SamplingParams(temperature=temperature, **params), seed=seed)
    return proposer.propose([request], np.array([3]))[0]


def test_generate_picks_the_gemma4_assistant_generator(proposer):
    assert proposer.name.endswith("SinglePositionMultiTokenCandidateGenerator")
    assert type(proposer.target).__name__ == "Gemma4ForCausalLM"
    assert type(proposer.assistant).__name__ == "Gemma4AssistantForCausalLM"


def test_every_sampled_draft_is_the_argmax_of_its_q(proposer):
    for seed in range(3):
        ids, draft_probs = _one(proposer, 1.0, seed)
        assert ids.tolist() == draft_probs.argmax(-1).tolist()
        assert draft_probs.max(-1).max() < 0.99            # q is no point mass: the drafts were not drawn from it


def test_it_reads_none_of_the_requests_sampling_parameters(proposer):
    ids, draft_probs = _one(proposer, 1.0, 7)
    for params in (dict(temperature=0.7), dict(temperature=0.9, top_k=3), dict(temperature=1.1, top_p=0.8)):
        other_ids, other_probs = _one(proposer, seed=7, **params)
        assert other_ids.tolist() == ids.tolist() and np.array_equal(other_probs, draft_probs), params


def test_the_law_checks_fail_with_the_measured_tv(result, proposer):
    laws = {c["check"]: c for c in result["checks"] if c["case"] == "T1" and c["check"].startswith("law/")}
    assert sorted(laws) == ["law/position-0", "law/position-1", "law/position-2"]
    assert all(c["status"] == "fail" for c in laws.values()), laws
    case = next(c for c in plan(Declaration.of(proposer), proposer.vocab_size, samples=100, k=3, suite_seed=0)
                if c.id == "T1")
    _, draft_probs = _one(proposer, 1.0, 0, case.context)      # every call drafts the argmax of this row
    assert laws["law/position-0"]["measured_tv"] == pytest.approx(1 - draft_probs[0].max(), abs=1e-9)
    assert laws["law/position-0"]["measured_tv"] > laws["law/position-0"]["detectable_tv"]


def test_greedy_drafts_are_the_argmax(result):
    greedy = [c for c in result["checks"] if c["check"] == "greedy-argmax"]
    assert [c["status"] for c in greedy] == ["pass"]


def test_the_assisted_generator_keeps_passing_the_law():
    result = check(load("transformers-assisted"), samples=100, only=("T1",))
    laws = [c for c in result["checks"] if c["check"].startswith("law/")]
    assert laws and all(c["status"] == "pass" for c in laws), laws
