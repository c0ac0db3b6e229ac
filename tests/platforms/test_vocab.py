"""Toy tokenizers, the TLI mapping's errors and laws, SLEM examples."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.engine.models import ToyLM
from specsim.vocab import (TokenizerError, ToyTokenizer, VocabError, VocabMapping, greedy_generate, lm_drafter,
                           oracle_drafter, random_tokenizer, slem_generate)


def test_space_markers_normalise_to_the_same_token():
    gpt = ToyTokenizer(["a", "Ġ", "Ġa", "<eos>"], marker="Ġ")
    sp = ToyTokenizer(["▁a", "a", "▁", "<eos>"], marker="▁")
    m = VocabMapping(gpt, sp)
    assert m.draft_to_target.tolist() == [2, 0, 1, 3]   # "▁a" ↔ "Ġa", specials by name


def test_duplicate_spelling_and_unknown_character_are_named():
    with pytest.raises(TokenizerError, match="both normalise to ' a'"):
        ToyTokenizer(["Ġa", "▁a"])
    with pytest.raises(TokenizerError, match="character 'z'"):
        ToyTokenizer(["a"]).encode("az")


def test_empty_intersection_is_a_clear_error():
    with pytest.raises(VocabError, match="share no token"):
        VocabMapping(ToyTokenizer(["a", "b"]), ToyTokenizer(["c", "d"], marker="▁"))


def test_out_of_range_and_outside_intersection_ids_are_refused():
    m = VocabMapping(ToyTokenizer(["a", "b"]), ToyTokenizer(["a", "c"], marker="▁"))
    with pytest.raises(VocabError, match=r"entry 0 is 2, outside the draft vocabulary \[0, 2\)"):
        m.map_draft_to_target([2])
    with pytest.raises(VocabError, match="not in the intersection"):
        m.map_draft_to_target([1])
    with pytest.raises(VocabError, match="has no draft id"):
        m.map_target_to_draft([1])
    assert m.map_target_to_draft([1, 0], fallback=1).tolist() == [1, 0]
    with pytest.raises(VocabError, match="no mass on the 1-token intersection"):
        m.constrain(np.array([0.0, 1.0]))
    with pytest.raises(VocabError, match="last dimension"):
        m.constrain(np.ones(3) / 3)


def test_tokenisation_is_not_injective_across_boundaries():
    tok = ToyTokenizer(["a", "b", "ab"])
    assert tok.encode("a") + tok.encode("b") != tok.encode("ab")


def test_slem_greedy_string_equals_target_and_oracle_beats_random_drafter():
    t_tok, d_tok = random_tokenizer("ab c", 6, seed=1), random_tokenizer("ab c", 9, seed=2, marker="▁")
    target = ToyLM(t_tok.vocab_size, order=2, seed=3)
    want = greedy_generate(target, [0, 1], 30)
    oracle = slem_generate(target, t_tok, oracle_drafter(target, t_tok, d_tok), d_tok, [0, 1], 30, k=4)
    other = slem_generate(target, t_tok, lm_drafter(ToyLM(d_tok.vocab_size, seed=5)), d_tok, [0, 1], 30, k=4)
    assert oracle.token_ids == other.token_ids == want
    assert oracle.text == t_tok.decode(want)
    assert oracle.num_accepted > other.num_accepted
