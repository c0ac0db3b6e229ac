"""Mutant proposers (specsim.mutants.proposers): each killed by its named check, at a design that detects
less than the mutant's exact TV (issue 18)."""

from __future__ import annotations

import pytest

from specsim.mutants.proposers import MUTANTS, make, position0_tv
from specsim.proposer_check import Declaration, check, plan

SAMPLES = 16_000


@pytest.mark.parametrize("mutant_id", sorted(MUTANTS))
def test_mutant_proposer_is_killed_by_its_check(mutant_id):
    proposer, m = make(mutant_id), MUTANTS[mutant_id]
    case = next(c for c in plan(Declaration.of(proposer), proposer.vocab_size, samples=SAMPLES, k=3, suite_seed=0)
                if c.id == m.case)
    size = position0_tv(proposer, case.context, case.params)
    result = check(proposer, samples=SAMPLES, only=(m.case,))
    named = next(c for c in result["checks"] if c["check"] == m.killed_by)
    assert named["status"] == "fail", named
    assert named["detectable_tv"] < size, (named["detectable_tv"], size)   # caught by design, not by luck


def test_anchors_match_exactly_once():
    for m in MUTANTS.values():
        m.source.mutated_source()            # StaleAnchor otherwise
