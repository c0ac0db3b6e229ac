"""Proposers: seed 004's Top1 rules and merge, keyed draft sampling, n-gram lookup."""

import numpy as np
import pytest

from reference.rng import DRAFT, exponential, stream_words
from specsim.engine import DraftModelProposer, EagleProposer, NgramProposer, Request, SamplingParams, ToyLM, top1_propose
from specsim.judge.stats import case_seed, gof_test


def _req(rid, tokens, seed=0, t=1.0):
    return Request(rid, list(tokens), SamplingParams(temperature=t), seed=seed)


def test_a_request_that_fits_exactly_speculates_and_one_past_goes_without():
    target = ToyLM(6, order=2, seed=0)
    prop = DraftModelProposer(target.mixed(0.5, seed=1, max_position=10))
    fits, over = _req("a", range(7)), _req("b", range(8))     # 7 + 3 == 10 fits; 8 + 3 > 10
    ids, probs, lens = top1_propose(prop, [fits, over], np.array([3, 3]))
    assert lens.tolist() == [3, 0]
    assert ids[1].tolist() == [-1, -1, -1] and not probs[1].any()       # placeholder ids, zero rows
    assert np.allclose(probs[0].sum(axis=1), 1.0)


def test_merge_keeps_rows_in_batch_order_when_the_drafter_returns_nothing_for_some():
    class Sparse:
        name, has_probs, max_len, vocab_size = "sparse", True, None, 4

        def propose(self, requests, ks):
            return [None if r.request_id == "b" else (np.array([1] * k), np.eye(4)[[1] * k]) for r, k in zip(requests, ks)]

    reqs = [_req("a", [0]), _req("b", [0]), _req("c", [0])]
    ids, probs, lens = top1_propose(Sparse(), reqs, np.array([2, 2, 1]))
    assert lens.tolist() == [2, 0, 1]
    assert ids.tolist() == [[1, 1], [-1, -1], [1, -1]]
    assert probs[1].sum() == 0 and probs[2, 1].sum() == 0 and probs[2, 0, 1] == 1


def test_all_requests_skipped_gives_an_all_placeholder_merge():
    prop = DraftModelProposer(ToyLM(4, order=1, seed=0).mixed(0.5, seed=1, max_position=3))
    ids, probs, lens = top1_propose(prop, [_req("a", [0, 1, 2])], np.array([2]))
    assert lens.tolist() == [0] and ids.tolist() == [[-1, -1]]


def test_draft_sampling_is_the_keyed_race_of_spec_5_2():
    target = ToyLM(6, order=2, seed=0)
    draft = target.mixed(0.3, seed=1)
    r = _req("a", [1, 2, 3], seed=12345, t=0.8)
    [(tokens, rows)] = DraftModelProposer(draft).propose([r], np.array([3]))
    context = [1, 2, 3]
    for j in range(3):  # recompute each draft from the reference stream S(seed, L, DRAFT, j)
        z = draft.next_logits(context) / 0.8
        probs = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        assert np.allclose(rows[j], probs)
        e = exponential(stream_words(12345, 3, DRAFT, j, 6))
        assert tokens[j] == int(np.argmax(probs / e))
        context.append(int(tokens[j]))


def test_first_draft_follows_its_draft_probs():
    """4000 requests with distinct seeds: the first draft's law is softmax(draft logits / T)."""
    draft = ToyLM(5, order=1, seed=0, scale=1.0)
    seed = case_seed(0, "engine/first-draft-law")
    reqs = [_req(f"r{i}", [2], seed=seed + i, t=1.0) for i in range(4000)]
    out = DraftModelProposer(draft).propose(reqs, np.full(len(reqs), 1))
    counts = np.bincount([int(t[0]) for t, _ in out], minlength=5)
    result = gof_test(counts, out[0][1][0], 1e-5, what="first draft law", seed=seed)
    assert result.passed, result.report()


def test_kill_switch_gives_point_proposals_of_the_argmax():
    draft = ToyLM(6, order=2, seed=0)
    [(tokens, rows)] = DraftModelProposer(draft, use_probs=False).propose([_req("a", [1, 2])], np.array([2]))
    assert rows is None
    assert tokens[0] == int(np.argmax(draft.next_logits([1, 2])))


def test_eagle_without_a_hidden_feature_proposes_nothing():
    target = ToyLM(6, order=2, seed=0)
    assert EagleProposer(target.mixed(0.5, seed=1)).propose([_req("a", [1, 2])], np.array([2])) == [None]


def test_eagle_drafts_from_the_feature_not_the_tokens():
    target = ToyLM(6, order=2, seed=0)
    head = target.mixed(1.0, seed=1)
    r = _req("a", [1, 2], t=0.0)
    r.output = [3]
    r.hidden = target.hidden_at(np.array([target.key_of([1, 2])]))[0]  # the row that produced token 3
    [(tokens, _)] = EagleProposer(head).propose([r], np.array([1]))
    assert tokens[0] == int(np.argmax(target.next_logits([1, 2, 3])))
    r.hidden = target.hidden_at(np.array([target.key_of([4, 4])]))[0]  # a stale feature: a different context
    [(stale, _)] = EagleProposer(head).propose([r], np.array([1]))
    assert stale[0] == int(np.argmax(target.next_logits([4, 4, 3])))


@pytest.mark.parametrize("tokens,k,expected", [([5, 6, 7, 8, 5, 6], 3, [7, 8, 5]), ([1, 2, 3], 2, None),
                                               ([4, 4], 3, [4]), ([1, 2, 9, 1, 2], 1, [9])])
def test_ngram_prompt_lookup(tokens, k, expected):
    [out] = NgramProposer(10).propose([_req("a", tokens)], np.array([k]))
    assert (None if out is None else out[0].tolist()) == expected


def _lookup_by_definition(tokens, k, min_n=1, max_n=3):
    for n in range(min(max_n, len(tokens) - 1), min_n - 1, -1):
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start:start + n] == tokens[-n:]:
                return tokens[start + n:start + n + k]
    return None


def test_vectorised_ngram_lookup_matches_its_definition():
    rng = np.random.default_rng(0)
    prop = NgramProposer(4, min_n=1, max_n=3)
    for _ in range(300):
        tokens = rng.integers(0, 4, rng.integers(1, 30)).tolist()
        found = prop._lookup(tokens, 3)
        assert (None if found is None else found.tolist()) == _lookup_by_definition(tokens, 3), tokens
