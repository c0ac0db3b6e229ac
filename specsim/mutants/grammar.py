"""Mutant grammars: structured output's speculative bookkeeping broken, each a cited source edit of
``specsim/engine/grammar.py`` (``specsim.mutants.source``), killed by a named check of this module.

| id | the edit | models | killed by |
|---|---|---|---|
| `grammar-not-rolled-back` | after a rejection the matcher keeps the rejected drafts it walked for the masks | docs/bugs.md #52 | `grammar/outputs` |
| `mask-from-previous-position` | position j's row gets the mask computed before draft j−1 was taken | docs/bugs.md #53 | `grammar/outputs` |

The checks run the engine with the mutant's ``list_grammar()`` (the draft model
drafting under it, the torch device verifying the masks it is given) and judge
the outputs with the **correct** grammar's fresh matcher:

* ``grammar/outputs``: every output is in the grammar (a request that stopped
  ended at the end token) and the engine ran through — a matcher that refuses a
  token the step emitted raises ``GrammarError`` in the engine, the symptom the
  field reports ("Failed to advance FSM"), and that fails the check too;
* ``grammar/law``: the law of constrained sequences against
  ``ToyLM.sequence_law_given`` (``specsim.judge.stats.sequence_law_test``), for mutants
  that keep every output in the grammar and bend only its law (none so far:
  both mutants here die at ``grammar/outputs``; the correct grammar passes both).

In ``specsim mutants`` this is the ``grammar`` family (``specsim.mutants.families``;
its one correct subject is ``list_grammar``): ``judge`` runs ``grammar/outputs``
(64 requests) then ``grammar/law`` (``LAW_N`` sequences at the family's α);
``--quick`` runs the named check only.

>>> sorted(MUTANTS)
['grammar-not-rolled-back', 'mask-from-previous-position']
"""

from __future__ import annotations

import time

from specsim.conformance.core.results import CheckResult
from specsim.mutants.source import Edit, SourceMutant, load_copy

MODULE = "specsim.engine.grammar"
CORRECT = "list_grammar"
OUTPUT_REQUESTS, LAW_N = 64, 2000

MUTANTS = {m.id: m for m in (
    SourceMutant(
        "grammar-not-rolled-back",
        "commit skips the rollback: the drafts the matcher walked for the masks stay in it after a rejection, "
        "and the emitted token is taken after them", "docs/bugs.md #52", MODULE,
        (Edit("        self.rollback(self.pending - taken)\n", ""),), build=(MODULE, "list_grammar"),
        device="engine", killed_by="grammar/outputs"),
    SourceMutant(
        "mask-from-previous-position",
        "masks_along returns row j−1's mask for position j (the walk itself is right): position j is "
        "masked as if draft j−1 had not been taken", "docs/bugs.md #53", MODULE,
        (Edit("        return np.stack(rows)\n", "        return np.stack(rows[:1] + rows[:-1])\n"),),
        build=(MODULE, "list_grammar"), device="engine", killed_by="grammar/outputs"),
)}


def make(mutant_id: str):
    """The mutant's ``list_grammar()``: a ``Grammar`` whose states run the edited copy of ``grammar.py``."""
    if mutant_id not in MUTANTS:
        raise ValueError(f"mutant: {mutant_id!r} is not a grammar mutant ({', '.join(sorted(MUTANTS))})")
    m = MUTANTS[mutant_id]
    grammar = load_copy(m, MODULE, m.mutated_source(), {}).list_grammar()
    grammar.mutant = m
    return grammar


def _run(grammar, *, seed: int, num_requests: int, max_tokens: int, device="torch", kind: str = "draft"):
    """The engine under ``grammar``: ``num_requests`` requests after ``[1, 4]`` ("[1") at temperature 1,
    K = 3, the draft model (``kind="draft"``) or the n-gram proposer → ``(outputs, engine)``."""
    from specsim.engine import DraftModelProposer, Engine, NgramProposer, SamplingParams, SchedulerConfig, ToyLM
    target = ToyLM(grammar.vocab_size, order=2, seed=5, eos_id=grammar.eos_id, scale=1.5, max_position=32)
    proposer = DraftModelProposer(target.mixed(0.6, seed=11)) if kind == "draft" else NgramProposer(target.vocab_size)
    engine = Engine(target, proposer, device=device, num_speculative_tokens=3, seed=seed,
                    scheduler=SchedulerConfig(max_num_seqs=64, num_blocks=4096))
    params = SamplingParams(temperature=1.0, max_tokens=max_tokens, grammar=grammar)
    for i in range(num_requests):
        engine.add_request(f"g{i}", [1, 4], params)
    return engine.run(), engine


def _refused(check: str, error: Exception) -> CheckResult:
    """A ``GrammarError`` (the original's or a mutant copy's class) as the check's failure; anything else raises."""
    if type(error).__name__ != "GrammarError":
        raise error
    return CheckResult(check, "L4", "fail", f"the engine's matcher refused an emitted token: "
                                           f"{str(error).splitlines()[0]}")


def check_outputs(grammar, *, seed: int = 0, num_requests: int = OUTPUT_REQUESTS, device="torch") -> CheckResult:
    """``grammar/outputs``: the engine runs through and every output is in the correct list grammar."""
    from specsim.engine.grammar import list_grammar
    truth = list_grammar()
    try:
        out, engine = _run(grammar, seed=seed, num_requests=num_requests, max_tokens=12, device=device)
    except Exception as e:
        return _refused("grammar/outputs", e)
    bad = {rid: o for rid, o in out.items()
           if not truth.accepts(o, complete=engine.requests[rid].finish_reason == "stop")}
    if bad:
        rid, o = next(iter(bad.items()))
        return CheckResult("grammar/outputs", "L4", "fail", f"{len(bad)} of {len(out)} outputs outside the "
                                                            f"grammar (e.g. {rid}: {o})", n=len(out))
    rejected = engine.metrics.num_draft_tokens - sum(engine.metrics.acc_counts)
    return CheckResult("grammar/outputs", "L4", "pass", f"{len(out)} outputs in the grammar "
                                                        f"({rejected} drafts rejected)", n=len(out))


def check_law(grammar, *, seed: int = 0, n: int = LAW_N, alpha: float = 1e-3, device="torch") -> CheckResult:
    """``grammar/law``: the law of constrained sequences (max_tokens 5) against non-speculative constrained
    sampling, enumerated exactly (``ToyLM.sequence_law_given``), at level ``alpha``."""
    from specsim.judge.stats import sequence_law_test
    try:
        out, engine = _run(grammar, seed=seed, num_requests=n, max_tokens=5, device=device)
    except Exception as e:
        return _refused("grammar/law", e)
    params = next(iter(engine.requests.values())).params
    law = engine.target.sequence_law_given([1, 4], params)
    support, gof = sequence_law_test(out.values(), law, alpha, what="grammar sequence law", seed=seed)
    if not support.passed:
        return CheckResult("grammar/law", "L4", "fail", support.report(), n=support.n, seed=seed)
    return CheckResult("grammar/law", "L4", "pass" if gof.passed else "fail", gof.report(), p_value=gof.p_value,
                       alpha=alpha, n=gof.n, statistic=gof.statistic, detectable_tv=gof.detectable_tv, seed=seed)


CHECKS_BY_NAME = {"grammar/outputs": check_outputs, "grammar/law": check_law}


def judge(kind: str, subject: str, ctx):
    """``specsim mutants``' judgement of the mutant or correct grammar ``subject`` (``families.Family.judge``):
    ``grammar/outputs``, then (unless ``ctx.quick``) ``grammar/law`` at ``ctx.alpha_family``; the killer is
    the first failing check."""
    from specsim.engine.grammar import list_grammar
    from specsim.mutants.verdict import Verdict
    start = time.perf_counter()
    grammar = make(subject) if kind == "mutant" else list_grammar()
    checks = [check_outputs(grammar, seed=ctx.seed)]
    if not ctx.quick:
        checks.append(check_law(grammar, seed=ctx.seed, alpha=ctx.alpha_family))
    bad = [c for c in checks if c.status != "pass"]
    m = MUTANTS.get(subject) if kind == "mutant" else None
    v = Verdict(subject, m.bug if m else "(correct grammar)", m.models if m else "", bool(bad),
                bad[0] if bad else None, [c.name for c in checks], time.perf_counter() - start)
    if m is not None:
        named = next(c for c in checks if c.name == m.killed_by)
        v.note = f"named {m.killed_by}: {named.status}"
    else:
        v.note = "; ".join(c.detail.split(";")[0] for c in checks)
    v.counts = {s: sum(c.status == s for c in checks) for s in ("pass", "fail", "not_supported", "error")}
    return v


def design(ctx) -> str:
    return (f"grammar/outputs: {OUTPUT_REQUESTS} requests under the mutant's list grammar (draft model, K=3, torch "
            f"device), every output judged by the correct grammar's fresh matcher, exact (no alpha); "
            + ("--quick: that check only" if ctx.quick else
               f"then grammar/law: {LAW_N} sequences of 5 tokens against sequence_law_given, alpha "
               f"{ctx.alpha_family:g}, seed {ctx.seed}"))


__all__ = ["MUTANTS", "CORRECT", "CHECKS_BY_NAME", "make", "check_outputs", "check_law", "judge", "design"]
