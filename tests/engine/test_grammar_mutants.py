"""The grammar mutants (specsim/mutants/grammar.py): each killed by its named check, the correct grammar
passing every check, anchors exact, and the family registered in ``specsim mutants``."""

import pytest

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("llguidance")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
need("llguidance")

from specsim.engine.grammar import list_grammar  # noqa: E402
from specsim.mutants import grammar as grammar_mutants  # noqa: E402
from specsim.mutants.grammar import CHECKS_BY_NAME, MUTANTS, make  # noqa: E402


@pytest.mark.parametrize("mutant_id", sorted(MUTANTS))
def test_each_grammar_mutant_is_killed_by_its_named_check(mutant_id):
    m = MUTANTS[mutant_id]
    result = CHECKS_BY_NAME[m.killed_by](make(mutant_id))
    assert result.status == "fail", result
    assert m.models.startswith("docs/bugs.md #")


@pytest.mark.parametrize("check", sorted(CHECKS_BY_NAME))
def test_the_correct_grammar_passes_every_check(check):
    result = CHECKS_BY_NAME[check](list_grammar())
    assert result.status == "pass", result.detail


def test_every_anchor_occurs_exactly_once_in_the_current_grammar_module():
    for m in MUTANTS.values():
        m.mutated_source()   # StaleAnchor otherwise: a refactor cannot silently disarm a mutant


def test_the_grammar_family_is_registered_in_specsim_mutants():
    from specsim.mutants.families import FAMILIES
    f = FAMILIES["grammar"]
    assert f.mutant_ids() == sorted(MUTANTS) and f.correct_ids() == [grammar_mutants.CORRECT]


def test_docstring_examples_run():
    import doctest
    failures, tried = doctest.testmod(grammar_mutants, optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0
