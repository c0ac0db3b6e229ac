"""Mutant families: mutants that are not verifier devices, each judged by the check that must kill it.

``specsim mutants`` runs the device zoo (``specsim.mutants.zoo``, judged by the
conformance suite; family ``"device"``) and every family of ``FAMILIES``. A
family is three things and a sentence:

* ``mutant_ids()`` — its mutants (ids unique across every family, so
  ``--only`` needs no prefix);
* ``correct_ids()`` — the correct subjects that must pass the same check
  (the unmutated code each mutant is an edit of), so a kill means the edit
  was seen, not that the check fails everything;
* ``judge(kind, subject_id, ctx)`` — build the subject (``kind`` is
  ``"mutant"`` or ``"correct"``) in this process and run the check on it,
  returning a ``specsim.mutants.verdict.Verdict`` whose ``killer`` is the first
  failing (or erroring) check as a ``CheckResult``, so rows, ``mutants.json``
  and the report read the same as the zoo's;
* ``design(ctx)`` — the check, its size, α and power, written into
  ``mutants.json`` (``families``) and printed under the table.

A judgement is a pure function of (family, kind, id, suite seed, α, quick), so
it is one ``runner.Job`` and runs on any campaign executor. Families have no
black-box twin (``--black-box`` is the device zoo's: it hides injected noise
a family's check never uses). A mutant that survives fails the command (exit
1), as does a correct subject that fails.

To add a family: write its mutants and its check
elsewhere, then a ``Family`` here with the four members and append it to
``FAMILIES``; ``tests/test_proposer_mutants.py`` then holds it to the rules
above (unique ids, correct subjects pass, every mutant killed).

The **proposer** family (``specsim.mutants.proposers``: q-before-processors,
docs/bugs.md #41; reduced-precision-draws, #44) is judged by
``specsim.conformance.proposer.proposers.check`` at ``PROPOSER_SAMPLES`` = 16 000 calls a case,
k = 3, α_family as given (default 10⁻³, split over the law checks, each run at
a tenth of its share), power 0.999; the correct subjects are the drafters the
mutants edit (``processed_draft``, ``large_logits_draft``). ``--quick`` runs
only each mutant's named case (and, for a correct drafter, the cases its
mutants name) at the same size and α, so it is still a verdict, with less
power: over suite seeds 0–19 every case kills reduced-precision-draws at 20 of
20 seeds, its named case T0.7 alone at 17 (docs/statistics.md).

The **grammar** family (``specsim.mutants.grammar``: grammar-not-rolled-back,
docs/bugs.md #52; mask-from-previous-position, #53; the correct subject
``list_grammar``) runs the engine under each grammar and judges it with
``grammar/outputs`` (every output in the correct grammar, exact) and
``grammar/law`` (the law of constrained sequences, α_family as given);
``--quick``: ``grammar/outputs`` only. It is registered only where llguidance
is installed.

>>> [f.id for f in FAMILIES.values()][0]    # then 'grammar' where llguidance is installed
'proposer'
>>> FAMILIES["proposer"].mutant_ids()
['q-before-processors', 'reduced-precision-draws']
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from specsim.conformance.core.results import CheckResult
from specsim.conformance.run.runner import Context
from specsim.mutants.verdict import Verdict

DEVICE = "device"
"""The device zoo's family name (``specsim.mutants.zoo``, judged by the conformance suite; not in ``FAMILIES``)."""


@dataclass(frozen=True)
class Family:
    """One family of mutants: see the module docstring."""

    id: str
    subject: str                                          # what its correct subjects are, e.g. "proposer"
    mutant_ids: Callable[[], list[str]]
    correct_ids: Callable[[], list[str]]
    judge: Callable[[str, str, Context], Verdict]         # (kind, subject id, ctx) -> Verdict
    design: Callable[[Context], str]


# --------------------------------------------------------------------------- the proposer family

PROPOSER_SAMPLES = 16_000
"""Calls a case: the size at which docs/statistics.md measured the proposer mutants' kill rates."""
PROPOSER_K = 3


def _proposer_mutant_ids() -> list[str]:
    from specsim.mutants.proposers import MUTANTS
    return sorted(MUTANTS)


def _proposer_correct_ids() -> list[str]:
    """The registered drafters the mutants are edits of (``ProposerMutant.drafter``)."""
    from specsim.mutants.proposers import MUTANTS
    return sorted({m.drafter for m in MUTANTS.values()})


def _named_cases(subject: str, kind: str) -> tuple[str, ...]:
    """The cases ``--quick`` runs: a mutant's named case; for a drafter, the cases of the mutants editing it."""
    from specsim.mutants.proposers import MUTANTS
    if kind == "mutant":
        return (MUTANTS[subject].case,)
    return tuple(sorted({m.case for m in MUTANTS.values() if m.drafter == subject}))


def _as_check_result(c: dict) -> CheckResult:
    """One ``proposer_check`` row as a ``CheckResult`` named ``proposer/CASE/CHECK``."""
    return CheckResult(f"proposer/{c.get('case') or '-'}/{c['check']}", "proposer", c["status"], c.get("detail", ""),
                       p_value=c.get("p_value"), alpha=c.get("alpha"), n=c.get("n"),
                       detectable_tv=c.get("detectable_tv"))


def _exact_size(proposer, mutant_id: str, ctx: Context) -> float:
    """The mutant's TV between drawn and reported row at its named case's first draft (``position0_tv``)."""
    from specsim.mutants.proposers import MUTANTS, position0_tv
    from specsim.conformance.proposer.proposers import Declaration, plan
    m = MUTANTS[mutant_id]
    case = next(c for c in plan(Declaration.of(proposer), proposer.vocab_size, samples=PROPOSER_SAMPLES,
                                k=PROPOSER_K, suite_seed=ctx.seed) if c.id == m.case)
    return position0_tv(proposer, case.context, case.params)


def _judge_proposer(kind: str, subject: str, ctx: Context) -> Verdict:
    """``proposer_check.check`` on the mutant or correct drafter ``subject``; the killer is its first failing check."""
    from specsim.engine.proposers.checked import load
    from specsim.mutants.proposers import MUTANTS, make
    from specsim.conformance.proposer.proposers import check
    start = time.perf_counter()
    proposer = make(subject) if kind == "mutant" else load(subject)
    only = _named_cases(subject, kind) if ctx.quick else None
    try:
        result = check(proposer, samples=PROPOSER_SAMPLES, k=PROPOSER_K, suite_seed=ctx.seed,
                       alpha_family=ctx.alpha_family, only=only)
        checks = result["checks"]
    except Exception as e:  # noqa: BLE001 - the same isolation as a conformance group: an error, said
        checks = [{"check": "crashed", "case": None, "status": "error", "detail": f"{type(e).__name__}: {e}"}]
    bad = [c for c in checks if c["status"] in ("fail", "error")]
    cases = sorted({c["case"] for c in checks if c.get("case")}, key=[c["case"] for c in checks if c.get("case")].index)
    if kind == "mutant":
        m = MUTANTS[subject]
        v = Verdict(subject, m.source.bug, m.source.models, bool(bad), _as_check_result(bad[0]) if bad else None,
                    cases, time.perf_counter() - start)
        named = next((c for c in checks if c["case"] == m.case and c["check"] == m.killed_by), None)
        size = _exact_size(proposer, subject, ctx)
        if named is not None:
            tv = named.get("detectable_tv")
            v.note = (f"named {m.case} {m.killed_by}: {named['status']}"
                      + (f", p={named['p_value']:.3g}" if named.get("p_value") is not None else "")
                      + (f", detectable TV {tv:.3g} vs the mutant's exact TV {size:.3g}" if tv is not None else ""))
        else:
            v.note = f"named {m.case} {m.killed_by}: not run"
    else:
        v = Verdict(subject, "(correct proposer)", "", bool(bad), _as_check_result(bad[0]) if bad else None,
                    cases, time.perf_counter() - start)
    v.counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "not_supported", "error")}
    return v


def _proposer_design(ctx: Context) -> str:
    return (f"specsim.conformance.proposer.proposers.check at {PROPOSER_SAMPLES} calls a case, k={PROPOSER_K}, suite seed {ctx.seed}, "
            f"alpha_family {ctx.alpha_family:g} per subject (Bonferroni over its law checks, each run at a tenth of "
            f"its share), power 0.999 at the detectable TV each law check states; "
            + ("--quick: each mutant's named case only (same size and alpha)" if ctx.quick else "every case"))


PROPOSER = Family("proposer", "proposer", _proposer_mutant_ids, _proposer_correct_ids, _judge_proposer,
                  _proposer_design)

# --------------------------------------------------------------------------- the grammar family

def _grammar_mutant_ids() -> list[str]:
    from specsim.mutants.grammar import MUTANTS
    return sorted(MUTANTS)


def _judge_grammar(kind: str, subject: str, ctx: Context) -> Verdict:
    from specsim.mutants.grammar import judge
    return judge(kind, subject, ctx)


def _grammar_design(ctx: Context) -> str:
    from specsim.mutants.grammar import design
    return design(ctx)


GRAMMAR = Family("grammar", "grammar", _grammar_mutant_ids, lambda: ["list_grammar"], _judge_grammar,
                 _grammar_design)
"""Structured output's bookkeeping (``specsim.mutants.grammar``: grammar-not-rolled-back, docs/bugs.md #52;
mask-from-previous-position, #53), judged by ``grammar/outputs`` and ``grammar/law``; present only where
llguidance is installed (``pip install 'specsim[grammar]'``)."""


def _llguidance_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("llguidance") is not None


FAMILIES: dict[str, Family] = {f.id: f for f in (PROPOSER, GRAMMAR) if f is not GRAMMAR or _llguidance_installed()}


def family_of(mutant_id: str) -> str | None:
    """The family whose mutant ``mutant_id`` is (None: not a family's; maybe the device zoo's)."""
    return next((f.id for f in FAMILIES.values() if mutant_id in f.mutant_ids()), None)


__all__ = ["DEVICE", "FAMILIES", "Family", "PROPOSER", "GRAMMAR", "PROPOSER_SAMPLES", "family_of"]
