"""SPEC §12's reference pipeline, protocol extension and input rules."""

import dataclasses

import numpy as np
import pytest

from devices import registry
from devices.validate import check_call, validate
from devices.protocol import Capabilities, InvalidInput, SamplerParams, UnsupportedCall, VerifyBatch
from reference.sampler import process_logits, sampler_rows
from reference.target import target_rows

RNG = np.random.default_rng(18)


def _batch(sampler=None, k=(2, 1), V=6):
    k = np.array(k)
    return VerifyBatch(num_draft_tokens=k, draft_token_ids=np.arange(k.sum()) % V, draft_probs=None,
                       target_logits=RNG.normal(size=(k.sum() + len(k), V)), temperature=np.ones(len(k)),
                       top_k=np.zeros(len(k), np.int64), top_p=np.ones(len(k)), seeds=np.arange(len(k), dtype=np.uint64),
                       positions=np.zeros(len(k), np.int64), sampler=sampler)


def test_without_parameters_it_is_the_section_2_step():
    logits, k = RNG.normal(size=(7, 9)), np.array([3, 2])
    T, top_k, top_p = np.array([0.7, 1.3]), np.array([4, 0]), np.array([0.9, 0.6])
    rows = np.repeat([0, 1], k + 1)
    expected = target_rows(logits, T[rows], top_k[rows], top_p[rows])[0]
    for order in ("canonical", "vllm"):
        assert np.allclose(sampler_rows(logits, k, np.zeros(5, int), T, top_k, top_p, order=order), expected)


def test_min_tokens_crossing_inside_the_step():
    z = process_logits(np.zeros((3, 6)), [2], np.array([1, 2]), output_token_ids=[[5]], min_tokens=np.array([2]),
                       stop_token_ids=[[3]])
    assert np.isneginf(z[:, 3]).tolist() == [True, False, False]


def test_bad_word_completed_by_this_steps_drafts_rejects_the_draft():
    # bad word [4, 1, 2]: drafts [4, 1, 2] complete it at row 2, whose target probability for 2 is then 0.
    probs = sampler_rows(np.zeros((4, 5)), [3], np.array([4, 1, 2]), np.ones(1), np.zeros(1, int), np.ones(1),
                         bad_words=[[[4, 1, 2]]])
    assert probs[2, 2] == 0 and probs[0, 2] > 0 and probs[3, 2] > 0


def test_penalties_see_the_drafts_before_each_row():
    z = process_logits(np.full((3, 4), 2.0), [2], np.array([1, 1]), repetition_penalty=np.array([2.0]),
                       frequency_penalty=np.array([0.5]), prompt_token_ids=[[3]])
    assert z[:, 1].tolist() == [2.0, 0.5, 0.0] and z[:, 3].tolist() == [1.0, 1.0, 1.0]


def test_the_order_profiles_differ():
    logits = np.log(np.array([[0.4, 0.3, 0.2, 0.1]]))
    args = (logits, [0], np.zeros(0, int), np.ones(1), np.zeros(1, int), np.array([0.5]))
    canonical = sampler_rows(*args, min_p=np.array([0.7]), order="canonical")
    vllm = sampler_rows(*args, min_p=np.array([0.7]), order="vllm")
    assert canonical[0].round(4).tolist() == [0.5714, 0.4286, 0.0, 0.0]   # top-p keeps {0, 1}; min_p keeps both
    assert vllm[0].round(4).tolist() == [1.0, 0.0, 0.0, 0.0]              # min_p keeps {0, 1}; then top-p 0.5 keeps 0


def test_greedy_rows_take_the_processed_argmax():
    probs = sampler_rows(np.array([[3.0, 1.0, 0.0]]), [0], np.zeros(0, int), np.zeros(1), np.zeros(1, int),
                         np.ones(1), logit_bias=np.array([[0.0, 2.5, 0.0]]))
    assert probs[0].tolist() == [0.0, 1.0, 0.0]


BAD = [
    ({"repetition_penalty": np.array([1.0, 0.0])}, "repetition_penalty: entry 1"),
    ({"min_p": np.array([0.0, 1.5])}, "min_p: entry 1"),
    ({"frequency_penalty": np.array([np.nan, 0.0])}, "frequency_penalty: entry 0"),
    ({"logit_bias": np.full((2, 6), np.nan)}, "logit_bias: entry"),
    ({"logit_bias": np.zeros((2, 5))}, "logit_bias: shape"),
    ({"allowed_token_ids": ([1, 2], [])}, "allowed_token_ids: request 1 allows no token"),
    ({"allowed_token_ids": ([1, 6], None)}, "allowed_token_ids: request 0 holds 6"),
    ({"bad_words": (([7],), ())}, "bad_words: request 0, word 0 holds 7"),
    ({"output_token_ids": ([1],)}, "output_token_ids: must hold one entry per request"),
    ({"min_tokens": np.array([-1, 0])}, "min_tokens: entry 0"),
    ({"token_mask": np.ones((5, 6))}, "token_mask: must be bool"),
    ({"token_mask": np.eye(5, 6, dtype=bool) & False | np.eye(5, 6, dtype=bool) * (np.arange(5) != 2)[:, None]},
     "token_mask: row 2 allows no token"),
    ({"order": "transformers"}, "order: must be one of"),
]


@pytest.mark.parametrize("fields,message", BAD, ids=[m.split(":")[0] + str(i) for i, (_, m) in enumerate(BAD)])
def test_input_rules_name_the_argument(fields, message):
    with pytest.raises(InvalidInput, match="^" + message.replace("(", r"\(")):
        validate(_batch(SamplerParams(**fields)))


def test_undeclared_parameters_raise_unsupported_call():
    batch = _batch(SamplerParams(min_p=np.array([0.1, 0.0])))
    caps = Capabilities(injected_noise=True, rng="philox", max_vocab_size=100)
    with pytest.raises(UnsupportedCall, match="sampler min_p"):
        check_call(batch, None, caps)
    with pytest.raises(UnsupportedCall, match="sampler order canonical"):
        check_call(batch, None, dataclasses.replace(caps, sampler=("min_p",)))
    check_call(batch, None, dataclasses.replace(caps, sampler=("min_p",), sampler_orders=("canonical",)))
    check_call(_batch(SamplerParams()), None, caps)   # nothing given: today's step
    with pytest.raises(UnsupportedCall):
        registry.load("hpu").verify(batch)   # the torch device serves §12; hpu declares none
    with pytest.raises(InvalidInput, match="capabilities.sampler"):
        dataclasses.replace(caps, sampler=("typical_p",))
