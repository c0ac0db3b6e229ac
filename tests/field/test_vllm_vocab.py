"""Seed 001 against the real thing: specsim's TLI checks with vLLM 0.33.0's ``VocabMapping`` (loaded from its
wheel) for toy tokenizer pairs and a real pair shipped in a package (mistral-common 1.13.1's vocabularies)."""

from __future__ import annotations

import doctest
from fractions import Fraction

import numpy as np
import pytest

from reference.laws import emitted_law, lossless_error
from specsim.engine.models import ToyLM
from specsim.engine.proposers.universal import UniversalDraftProposer
from specsim.engine.state import Request, SamplingParams
from specsim.vocab import VocabMapping, random_tokenizer
from specsim.vocab import vllm as vv
from specsim.vocab.tokenizers import ToyTokenizer


def _pair(seed: int):
    return (random_tokenizer("ab c", 8, seed=seed, marker="Ġ"),
            random_tokenizer("ab cx", 9, seed=100 + seed, marker="▁"))


def test_docstring_examples_run():
    assert doctest.testmod(vv).failed == 0


@pytest.mark.parametrize("seed", range(6))
def test_vllms_mapping_is_lossless_and_parts_from_specsims_only_at_inner_markers(cache, seed):
    t_tok, d_tok = _pair(seed)
    ours, theirs = VocabMapping(t_tok, d_tok), vv.VllmVocabMapping(t_tok, d_tok)
    assert vv.is_partial_bijection(theirs)
    diff = vv.differences(ours, theirs)
    assert not diff["only_theirs"] and not diff["disagree"], diff
    assert all(vv.marker_inside(d_tok.pieces[i]) for i in diff["only_ours"]), [d_tok.pieces[i] for i in
                                                                                diff["only_ours"]]
    rng = np.random.default_rng(seed)
    target_rows = rng.dirichlet(np.ones(t_tok.vocab_size), 3)
    mapped = theirs.to_target(rng.dirichlet(np.ones(d_tok.vocab_size), 2))
    assert lossless_error(emitted_law(list(target_rows), list(mapped), "full"), list(target_rows)) < 1e-12
    logits = rng.normal(size=d_tok.vocab_size)       # vLLM's own constraint = specsim's renormalised law
    constrained = np.exp(theirs.constrain_logits(logits))
    assert np.allclose(constrained / constrained.sum(), theirs.constrain(np.exp(logits) / np.exp(logits).sum()))


def test_acceptance_through_vllms_mapping_is_the_sum_of_mins_exactly(cache):
    t_tok, d_tok = _pair(3)
    mapping = vv.VllmVocabMapping(t_tok, d_tok)
    rng = np.random.default_rng(3)
    target = [[Fraction(x) for x in row] for row in rng.dirichlet(np.ones(t_tok.vocab_size), 2)]
    target = [[x / sum(row) for x in row] for row in target]
    mapped = [Fraction(x) for x in mapping.to_target(rng.dirichlet(np.ones(d_tok.vocab_size)))]
    mapped = [x / sum(mapped) for x in mapped]
    law = emitted_law(target, [mapped], "full", exact=True)
    assert sum(p for tokens, p in law.items() if len(tokens) == 2) == sum(map(min, zip(target[0], mapped)))


def test_the_universal_draft_proposer_drafts_on_vllms_mapping(cache):
    t_tok, d_tok = _pair(1)
    mapping = vv.VllmVocabMapping(t_tok, d_tok)
    proposer = UniversalDraftProposer(ToyLM(d_tok.vocab_size, seed=4), mapping)
    (ids, rows), = proposer.propose([Request("a", [0, 1, 2], SamplingParams(temperature=0.8), seed=3)],
                                    np.array([3]))
    assert np.allclose(rows.sum(axis=1), 1) and (rows[:, mapping.target_to_draft < 0] == 0).all()
    assert (rows[np.arange(3), ids] > 0).all()       # each draft carries the probability it was drawn with


def test_a_real_pair_mistral_nemo_target_mistral_7b_draft(cache):
    """Tekken (131,072 ids, byte-level ``Ġ``) and Mistral 7B's SentencePiece (32,000, ``▁``): vLLM's
    intersection is specsim's less the 14 whitespace-run pieces (``▁▁`` ... ``▁`` × 16), and lossless."""
    from devices.field import mistral_vocab
    try:
        target_pieces, draft_pieces = mistral_vocab.mistral_pair()
    except mistral_vocab.VocabFetchError as e:
        pytest.skip(f"mistral-common's vocabularies unavailable: {e}")
    t_tok, d_tok = ToyTokenizer(target_pieces, marker="Ġ"), ToyTokenizer(draft_pieces, marker="▁")
    ours, theirs = VocabMapping(t_tok, d_tok), vv.VllmVocabMapping(t_tok, d_tok)
    assert (ours.intersection_size, theirs.intersection_size) == (24554, 24540)
    assert vv.is_partial_bijection(theirs) and vv.is_partial_bijection(ours)
    diff = vv.differences(ours, theirs)
    only = [d_tok.pieces[i] for i in diff["only_ours"]]
    assert not diff["only_theirs"] and not diff["disagree"] and len(only) == 14
    assert all(set(p) == {"▁"} and len(p) > 1 for p in only), only
    rng = np.random.default_rng(0)
    target_probs = rng.dirichlet(np.ones(t_tok.vocab_size) * 0.1)
    draft_probs = rng.dirichlet(np.ones(d_tok.vocab_size) * 0.1)
    assert np.abs(vv.first_token_law(theirs, target_probs, draft_probs) - target_probs).max() < 1e-12
