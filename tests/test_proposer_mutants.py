"""Mutant proposers (specsim.mutants.proposers): each killed by its named check, at a design that detects
less than the mutant's exact TV."""

from __future__ import annotations

import pytest

from specsim.mutants.proposers import MUTANTS, make, position0_tv
from specsim.conformance.proposer.proposers import Declaration, check, plan

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


# --------------------------------------------------------------------------- the family in `specsim mutants`

def test_family_ids_are_unique_and_every_family_has_mutants_and_correct_subjects():
    from specsim.mutants.families import FAMILIES
    from specsim.mutants.zoo import MUTANTS as ZOO
    seen = set(ZOO)
    for f in FAMILIES.values():
        ids = f.mutant_ids()
        assert ids and f.correct_ids(), f.id
        assert not seen & set(ids), (f.id, seen & set(ids))     # --only names a mutant without its family
        seen |= set(ids)
    assert FAMILIES["proposer"].mutant_ids() == sorted(MUTANTS)


FAMILY_EXTRAS = {"grammar": "llguidance"}
"""A family present only where its optional dependency is (``specsim.mutants.families.FAMILIES``): its subjects
carry ``needs_extra``, so that CI's extras step (``pytest -m needs_extra``) judges them."""


def _family_subjects():
    from specsim.mutants.families import FAMILIES

    def param(family: str, kind: str, subject: str):
        extra = FAMILY_EXTRAS.get(family)
        return pytest.param(family, kind, subject, marks=[pytest.mark.needs_extra(extra)] if extra else [])
    return [param(f.id, "mutant", m) for f in FAMILIES.values() for m in f.mutant_ids()] + \
           [param(f.id, "correct", c) for f in FAMILIES.values() for c in f.correct_ids()]


@pytest.mark.parametrize("family,kind,subject", _family_subjects())
def test_every_family_kills_each_mutant_and_passes_each_correct_subject(family, kind, subject):
    """``specsim mutants --quick``'s judgement of every family's subjects (the proposer family: the named
    case at 16 000 calls, the size of docs/statistics.md; its named check fails too)."""
    from specsim.mutants.runner import Job, run_job
    r = run_job(Job(kind, subject, base="torch", black_box=False, seed=0, alpha_family=1e-3, quick=True,
                    family=family))
    assert r["family"] == family
    if kind == "mutant":
        assert r["killed"], r
    else:
        assert not r["killed"], r
        assert r["counts"]["pass"] > 0 and r["counts"]["fail"] == r["counts"]["error"] == 0
    if family == "proposer" and kind == "mutant":
        m = MUTANTS[subject]
        assert r["killer"]["name"].startswith(f"proposer/{m.case}/"), r
        assert f"named {m.case} {m.killed_by}: fail" in r["evidence"], r["evidence"]


class _Survivor:
    """A family whose one mutant no check kills: the command must say so and exit 1."""

    @staticmethod
    def judge(kind, subject, ctx):
        from specsim.mutants.runner import Verdict
        v = Verdict(subject, "(a bug no check sees)", "docs/bugs.md #0", False, None, ["case"], 0.0)
        v.counts = {"pass": 1, "fail": 0, "not_supported": 0, "error": 0}
        return v


def test_a_surviving_family_mutant_fails_the_command(tmp_path, monkeypatch):
    import json

    from specsim.cli import main
    from specsim.mutants import families
    toy = families.Family("toy", "toy", lambda: ["toy-survivor"], lambda: ["toy-correct"], _Survivor.judge,
                          lambda ctx: "nothing")
    monkeypatch.setitem(families.FAMILIES, "toy", toy)
    assert main(["mutants", "--families", "toy", "--out", str(tmp_path)]) == 1
    doc = json.loads((tmp_path / "mutants.json").read_text())
    assert [(r["name"], r["family"], r["killed"]) for r in doc["mutants"]] == [("toy-survivor", "toy", False)]
    assert [r["name"] for r in doc["correct_subjects"]] == ["toy-correct"] and doc["families"] == {"toy": "nothing"}
    assert main(["mutants", "--only", "no-such-mutant"]) == 2
