"""L3: the statistical layer — the output law of a device that draws its own randomness.

For every case of ``cases.CASES`` the group replicates the case's batch
template into many independent trials (drafts sampled here from the draft
rows; a fresh seed and position per request), runs them through the device
with ``noise=None`` in large heterogeneous batches, and tests, per request:

* ``pos{j}`` — the token emitted at position j, given it is emitted, against
  ``target_probs`` of row j (SPEC §3; bonus included): pooled CR(2/3), or
  randomized PIT + DKWM for the large-V case;
* ``accepted`` — the number accepted against its exact law (SPEC §8);
* ``exact`` — no emitted token of target probability 0, tokens in [0, V),
  accepted tokens equal the drafts, padding after the last token (no α);
* ``greedy-exact`` for greedy requests: the deterministic path, token for token.

Budget: each statistical check is one test of the run's statistical plan
(``stats.plan.run_plan``: ``ctx.alpha_family`` split evenly over every
statistical test of the run, each run at a tenth of its share). The trial
count of a case comes from the planner (``stats.l3_design.make_plan``) so that every
position, bonus included, detects worst-case TV ``TARGET_TV`` with power 1-β at
that α; the plan asserts this design.
Expected laws come from ``reference`` (float64, raw logits and parameters),
never from the device.
"""

from __future__ import annotations

import time

from specsim.judge import stats
from specsim.conformance.core.calls import Refusal, refused
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.shards import run_trials
from specsim.conformance.stats.l3_design import make_plan
from specsim.conformance.stats.plan import run_plan
from specsim.conformance.stats.verdicts import NO_RANDOMNESS, case_verdicts, mark_holm, not_supported


def statistical_group(device, ctx, *, stop_at_first_fail: bool = False, cases=None) -> list[CheckResult]:
    """The L3 group: ``run(device, ctx) -> list[CheckResult]`` (see the module docstring).

    ``stop_at_first_fail`` (used by ``specsim mutants``) stops after the first
    case with a failing check; ``cases`` runs only those case ids. Neither changes
    the plan: every check's α and trials are the full run's.
    """
    if device.capabilities.rng == "none":
        return [NO_RANDOMNESS]
    plan = make_plan(run_plan(device.capabilities, ctx), ctx.quick)
    results = []
    for cp in plan.cases:
        if cases is not None and cp.case.id not in cases:
            continue
        unsupported = not_supported(device, cp)
        if unsupported:
            results += unsupported
            continue
        start = time.perf_counter()
        try:
            tally = run_trials(device, cp, ctx.seed)
        except Refusal as r:  # inside the declaration a fail, outside it not_supported (``_common.refused``)
            refusals = [refused(n, "L3", r, device.capabilities, seed=stats.case_seed(ctx.seed, cp.case.id))
                        for n in cp.checks or [f"L3/{cp.case.id}"]]
            results += refusals
            if stop_at_first_fail and any(x.status == "fail" for x in refusals):
                break
            continue
        found = case_verdicts(cp, tally, plan, ctx.seed, time.perf_counter() - start)
        results += found
        if stop_at_first_fail and any(r.status == "fail" for r in found):
            break
    mark_holm(results, plan)
    return results
