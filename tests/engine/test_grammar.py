"""Structured output's pieces (specsim/engine/grammar.py): the pinned llguidance, masks that agree with
the matcher, masks along drafts, rollback to the accepted prefix, grammars refused with a clear error."""

import numpy as np
import pytest

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("llguidance")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
llguidance = need("llguidance")

from specsim.engine import DraftModelProposer, Engine, SamplingParams, ToyLM  # noqa: E402
from specsim.engine import grammar as grammar_module  # noqa: E402
from specsim.engine.grammar import Grammar, GrammarError, list_grammar  # noqa: E402
from specsim.judge.reference_device import ReferenceDevice  # noqa: E402


def test_llguidance_is_the_pinned_release_and_another_is_refused_with_a_clear_error(monkeypatch):
    assert llguidance.__version__ == grammar_module.LLGUIDANCE_VERSION == "1.9.1"
    monkeypatch.setattr(llguidance, "__version__", "1.8.0")
    with pytest.raises(ImportError, match=r"checks llguidance==1\.9\.1, found 1\.8\.0"):
        grammar_module._load_llguidance()   # what the module runs at import


def test_the_pyproject_extra_and_ci_pin_the_same_release():
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    assert 'grammar = ["llguidance==1.9.1"]' in (root / "pyproject.toml").read_text()
    assert '"llguidance==1.9.1"' in (root / ".ci" / "extras.sh").read_text()


def test_every_masked_token_is_one_the_matcher_takes_and_no_other():
    """llguidance's mask is exact on the toy vocabulary: along random walks, a text token is in the mask iff a
    copy of the matcher consumes it, and the end token iff the matcher accepts the text so far."""
    g, rng = list_grammar(), np.random.default_rng(0)
    for _ in range(40):
        state = g.start()
        for _ in range(rng.integers(1, 9)):
            mask = state.mask()
            for t in range(g.vocab_size):
                takes = state._matcher.is_accepting() if t == g.eos_id else state.fork()._matcher.consume_token(t)
                assert bool(mask[t]) == takes, t
            t = int(rng.choice(np.flatnonzero(mask)))
            if t == g.eos_id:
                break
            state.advance([t])


def test_masks_along_drafts_and_rollback_to_the_accepted_prefix():
    g = list_grammar()
    s = g.start()
    s.advance([1, 4])                                   # "[1" committed
    masks = s.masks_along([3, 5, 2, 1])                 # ",", "2", "]", then a refused "["
    for j, prefix in enumerate([[1, 4], [1, 4, 3], [1, 4, 3, 5], [1, 4, 3, 5, 2]]):
        ref = g.start()
        ref.advance(prefix)
        assert (masks[j] == ref.mask()).all(), j
    assert (masks[4] == masks[3]).all() and not masks[3][1]   # the refused draft's row bans it; the next repeats it
    assert s.pending == 3
    s.commit(1, [3, 4])                                 # "," accepted, "1" emitted instead of "2"
    ref = g.start()
    ref.advance([1, 4, 3, 4])
    assert s.pending == 0 and (s.mask() == ref.mask()).all()


def test_an_end_token_among_the_drafts_ends_the_walk_and_is_taken_at_commit():
    g = list_grammar()
    s = g.start()
    s.advance([1, 4])
    masks = s.masks_along([2, 0, 0])                    # "]" then the end token
    assert s.pending == 1 and masks[2][0] and (masks[3] == masks[2]).all()
    s.commit(2, [2, 0])
    assert s.pending == 0


def test_a_token_the_grammar_refuses_at_commit_raises():
    s = list_grammar().start()
    s.masks_along([])
    with pytest.raises(GrammarError, match="refuses token 2"):
        s.commit(0, [2])                                # "]" before "["


@pytest.mark.parametrize("kind,source", [("regex", r"\[(1|2)+\]"),
                                         ("json_schema", {"type": "array", "items": {"type": "integer"}})])
def test_regex_and_json_schema_grammars_compile(kind, source):
    pieces = ["<eos>", "[", "]", ",", "1", "2"]
    g = Grammar(pieces, source, kind=kind)
    assert g.accepts([1, 4, 5, 2, 0], complete=True)


def test_bad_grammars_and_vocabularies_are_refused_naming_the_argument():
    with pytest.raises(ValueError, match="grammar: llguidance refuses this lark grammar"):
        Grammar(["<eos>", "a"], "start: undefined_rule")
    with pytest.raises(ValueError, match="kind: must be one of"):
        Grammar(["<eos>", "a"], "a", kind="ebnf")
    with pytest.raises(ValueError, match="pieces: must be distinct"):
        Grammar(["<eos>", "a", "a"], 'start: "a"')


def test_a_grammar_over_another_vocabulary_is_refused_at_add_request():
    engine = Engine(ToyLM(8, seed=0, eos_id=0), device=ReferenceDevice())
    with pytest.raises(ValueError, match=r"params.grammar: its vocabulary \(6 pieces, end token 0\)"):
        engine.add_request("a", [1], SamplingParams(grammar=list_grammar()))
    engine = Engine(ToyLM(6, seed=0, eos_id=None), device=ReferenceDevice())
    with pytest.raises(ValueError, match="eos_id None"):
        engine.add_request("a", [1], SamplingParams(grammar=list_grammar()))


def test_a_grammar_aware_drafter_drafts_only_tokens_the_grammar_allows():
    """The draft model walks a fork of the matcher along its own drafts: with the target's table every
    draft is accepted (its row is the target's masked row; rows after a drafted end token are never kept),
    and the engine's matcher is untouched by it."""
    g = list_grammar()
    target = ToyLM(6, order=2, seed=3, eos_id=0, max_position=64)
    engine = Engine(target, DraftModelProposer(target.mixed(1.0, seed=9)), device=ReferenceDevice(),
                    num_speculative_tokens=3, seed=0)
    for i in range(6):
        engine.add_request(f"r{i}", [1, 4], SamplingParams(temperature=1.0, max_tokens=12, grammar=g))
    out = engine.run()
    rounds = [(k, a, e) for k, a, e in engine.metrics.rounds if k]
    assert rounds and all(a == k or e < a + 1 for k, a, e in rounds)   # all accepted, unless cut at the end token
    assert all(g.accepts(o, complete=engine.requests[r].finish_reason == "stop") for r, o in out.items())


def test_docstring_examples_run():
    import doctest
    failures, tried = doctest.testmod(grammar_module, optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0
