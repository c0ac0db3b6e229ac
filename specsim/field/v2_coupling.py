"""Model Runner V2's draft and its residual on separate noise: V2's drafter and V2's verifier, one request seed.

vLLM's Model Runner V2 draws a draft by a Gumbel race keyed by ``(request seed, position, token)`` and, when
verification rejects it, the replacement from the residual ``max(p − q, 0)`` by a Gumbel race keyed the same way.
vLLM PR #54282 (``_DRAFT_NOISE_SALT`` in ``vllm/v1/worker/gpu/sample/gumbel.py``) offsets the draft's position by
2^30 so that the two races use disjoint noise; without it (the code before the PR, and a fork that dropped the
offset) the first draft of a step and its residual share one noise vector, and the emitted token no longer
follows the target's law. This check runs V2's own members (``devices.field.vllm_v2_coupling``: the drafter's
``gumbel_sample(..., is_drafting=True)``, then ``rejection_sample``) on one case and holds what they emit to
the target's law:

* ``FIELD/vllm-v2/draft-noise/emitted-law``: the first emitted token of ``trials`` steps, each its own request
  seed (``case_seed(suite_seed, CASE_ID, trial)``), against ``target_probs`` (pooled Cressie–Read 2/3,
  ``specsim.judge.stats.gof_test``) at the stated α, with the worst-case TV it detects with power 1 − β and
  its exact power against the coupled law below;
* ``FIELD/vllm-v2/draft-noise/support``: no emitted token of target probability 0 (exact, no α);
* ``FIELD/vllm-v2/draft-noise/residual-law``: the token emitted after a rejection against the residual law
  ``max(p − q, 0) / Σ`` (the same test), the sharper view of the same coupling.

The case: ``target_probs = (3/4, 1/4, 0)``, ``draft_probs = (1/2, 0, 1/2)``. Token 2 is always rejected (its
target probability is 0); the residual is ``(1/2, 1/2, 0)``. With one noise vector ``g`` for both races the
draft is 2 exactly when ``g_2 > g_0``, and then the residual race ``argmax(g_0, g_1)`` picks 0 with probability
``P(g_1 < g_0 < g_2) / P(g_0 < g_2) = 1/3``, not 1/2: the coupled step emits ``(2/3, 1/3, 0)`` (TV 1/12 from the
target). ``coupled_law`` computes that law exactly for any pair of rows:

    >>> from fractions import Fraction as F
    >>> [str(x) for x in coupled_law([F(3, 4), F(1, 4), F(0)], [F(1, 2), F(0), F(1, 2)])]
    ['2/3', '1/3', '0']

Run it: ``python -m specsim.field.v2_coupling`` (vLLM's salt; exit 0 when every check passes) and
``python -m specsim.field.v2_coupling --draft-salt 0`` (the pre-fix coupling; exit 1: it fails). Triton's
interpreter runs it on any machine (about 50 ms a step there); ``--json FILE`` keeps the results.
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction

import numpy as np

from specsim.conformance.core.results import CheckResult
from specsim.judge import stats
from specsim.testing.seeds import case_seed

CASE_ID = "vllm-v2/draft-noise"
TARGET_PROBS = (Fraction(3, 4), Fraction(1, 4), Fraction(0))
DRAFT_PROBS = (Fraction(1, 2), Fraction(0), Fraction(1, 2))
TRIALS = 2000
ALPHA = 1e-4
"""The field run's design: 2000 steps at α = 1e-4 detect any TV ≥ about 0.08 with power 0.999 (two pooled cells)
and the coupled law (TV 1/12) with power above 0.9999."""

PR_LINK = "https://github.com/vllm-project/vllm/pull/54282"
NAME = "FIELD/vllm-v2/draft-noise"


def joint_argmax_law(draft_probs, residual_probs) -> dict[tuple[int, int], Fraction]:
    """P(X = x, Y = y) exactly, X = argmax(log draft_probs + g), Y = argmax(log residual_probs + g), one Gumbel
    vector ``g`` for both (``[V]`` rows of Fractions, each summing to 1).

    With ``E = exp(−g)`` i.i.d. Exp(1), X = x and Y = y (x ≠ y) is ``E_y / E_x = u`` in
    ``(a_y, 1 / b_x)`` and every other ``E_j > max(a_j E_x, b_j E_y)``, ``a = q / q_x``, ``b = r / r_y``; integrating
    ``E_x`` out leaves ``∫ du / (1 + u + Σ_j max(a_j, u b_j))²``, a rational function on each piece between the
    breakpoints ``a_j / b_j``. X = Y = k is ``1 / Σ_j max(a_j, b_j)``.

    >>> F = Fraction
    >>> law = joint_argmax_law([F(1, 2), F(1, 2)], [F(1, 2), F(1, 2)])   # the same race twice: X = Y
    >>> sorted((k, str(v)) for k, v in law.items() if v)
    [((0, 0), '1/2'), ((1, 1), '1/2')]
    """
    q, r = [Fraction(x) for x in draft_probs], [Fraction(x) for x in residual_probs]
    V = len(q)
    law = {}
    for x in range(V):
        for y in range(V):
            if q[x] == 0 or r[y] == 0:
                continue
            a = [qj / q[x] for qj in q]
            b = [rj / r[y] for rj in r]
            law[(x, y)] = (1 / sum(max(aj, bj) for aj, bj in zip(a, b)) if x == y
                           else _piecewise_integral(a, b, x, y))
    return law


def _piecewise_integral(a, b, x: int, y: int) -> Fraction:
    """``∫ du / (1 + u + Σ_{j ≠ x, y} max(a_j, u b_j))²`` over ``a_y < u < 1 / b_x`` (unbounded when ``b_x = 0``)."""
    lo = a[y]
    hi = None if b[x] == 0 else 1 / b[x]
    if hi is not None and hi <= lo:
        return Fraction(0)
    others = [j for j in range(len(a)) if j not in (x, y)]
    cuts = {a[j] / b[j] for j in others if b[j] > 0}
    breaks = sorted(u for u in cuts if lo < u and (hi is None or u < hi))
    ends = [lo, *breaks, hi]
    total = Fraction(0)
    for u0, u1 in zip(ends[:-1], ends[1:]):
        inside = u0 + 1 if u1 is None else (u0 + u1) / 2
        const, slope = Fraction(1), Fraction(1)      # 1 + u, then each max on this piece
        for j in others:
            if a[j] >= inside * b[j]:
                const += a[j]
            else:
                slope += b[j]
        total += 1 / (slope * (const + slope * u0)) - (0 if u1 is None else 1 / (slope * (const + slope * u1)))
    return total


def residual_law(target_probs, draft_probs) -> list[Fraction]:
    """``max(p − q, 0) / Σ`` exactly (``[V]``); ValueError naming the rows when the residual is empty."""
    r = [max(Fraction(p) - Fraction(q), Fraction(0)) for p, q in zip(target_probs, draft_probs)]
    if sum(r) == 0:
        raise ValueError("target_probs, draft_probs: equal rows have no residual (nothing is ever rejected)")
    return [x / sum(r) for x in r]


def coupled_law(target_probs, draft_probs) -> list[Fraction]:
    """``[V]`` exact law of the first emitted token when the draft and its residual share one noise vector and
    the coin is independent of both: ``min(p, q)(y) + Σ_x (1 − min(1, p_x / q_x)) · P(X = x, Y = y)``."""
    p, q = [Fraction(x) for x in target_probs], [Fraction(x) for x in draft_probs]
    law = [min(px, qx) for px, qx in zip(p, q)]
    for (x, y), mass in joint_argmax_law(q, residual_law(p, q)).items():
        law[y] += (1 - min(Fraction(1), p[x] / q[x])) * mass
    return law


def step_seeds(suite_seed: int, trials: int) -> list[int]:
    """One request seed per step, derived from the case: ``case_seed(suite_seed, CASE_ID, trial)``."""
    return [case_seed(suite_seed, CASE_ID, t) for t in range(trials)]


def exact_power(law_alt, target_probs, n: float, alpha: float) -> float:
    """Power of the pooled test at level ``alpha`` on ``n`` samples against the specific law ``law_alt`` (the
    noncentral χ² with noncentrality ``n · χ²(law_alt ‖ target)`` on the target's support)."""
    from scipy import stats as sps
    p = np.asarray([float(x) for x in target_probs])
    alt = np.asarray([float(x) for x in law_alt])
    keep = p > 0
    df = int(keep.sum()) - 1
    if df < 1:
        return 0.0
    lam = n * float(np.sum((alt[keep] - p[keep]) ** 2 / p[keep]))
    return float(sps.ncx2.sf(sps.chi2.isf(alpha, df), df, lam))


def judge(first_tokens, num_accepted, *, alpha: float = ALPHA, beta: float = stats.DEFAULT_BETA,
          seed: int | None = None, what: str = "vLLM's salt") -> list[CheckResult]:
    """The three checks on ``first_tokens`` ``[N]`` and ``num_accepted`` ``[N]`` of the case's steps."""
    p = np.asarray([float(x) for x in TARGET_PROBS])
    residual = np.asarray([float(x) for x in residual_law(TARGET_PROBS, DRAFT_PROBS)])
    coupled = coupled_law(TARGET_PROBS, DRAFT_PROBS)
    first_tokens = np.asarray(first_tokens, np.int64)
    counts = np.bincount(first_tokens, minlength=p.size)[: p.size]
    after_rejection = first_tokens[np.asarray(num_accepted) == 0]
    out = []
    support = stats.support_check(counts, p, what=f"{NAME}/support", seed=seed)
    out.append(CheckResult(f"{NAME}/support", "L3", "pass" if support.passed else "fail", support.report(),
                           n=int(first_tokens.size), seed=seed, extra={"draft_salt": what}))
    emitted = stats.gof_test(counts, p, alpha, beta=beta, what=f"{NAME}/emitted-law", seed=seed)
    out.append(_statistical(emitted, "emitted-law", seed, what, {
        "coupled_law": [str(x) for x in coupled],
        "power_against_coupled_law": exact_power(coupled, TARGET_PROBS, first_tokens.size, alpha)}))
    rej = stats.gof_test(np.bincount(after_rejection, minlength=p.size)[: p.size], residual, alpha, beta=beta,
                         what=f"{NAME}/residual-law", seed=seed)
    out.append(_statistical(rej, "residual-law", seed, what, {"rejections": int(after_rejection.size)}))
    return out


def _statistical(result, check: str, seed, what: str, extra: dict) -> CheckResult:
    detail = f"{result.report()} [{what}; vLLM PR #54282: {PR_LINK}]"
    return CheckResult(f"{NAME}/{check}", "L3", "pass" if result.passed else "fail", detail,
                       p_value=result.p_value, alpha=result.alpha, n=result.n, statistic=result.statistic,
                       detectable_tv=result.detectable_tv, seed=seed, extra={"draft_salt": what, **extra})


def run_check(*, trials: int = TRIALS, suite_seed: int = 0, alpha: float = ALPHA, beta: float = stats.DEFAULT_BETA,
              draft_salt: int | None = None, interpret: bool | None = None) -> list[CheckResult]:
    """The case's ``trials`` steps through V2's members (``draft_salt``: None for vLLM's own, 0 for the
    pre-fix coupling), judged by ``judge``."""
    from devices.field.vllm_v2_coupling import draft_then_verify
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials: a positive int, got {trials!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: in (0, 1), got {alpha!r}")
    step = draft_then_verify([float(x) for x in TARGET_PROBS], [float(x) for x in DRAFT_PROBS],
                             step_seeds(suite_seed, trials), draft_salt_value=draft_salt, interpret=interpret)
    what = "vLLM's salt (2^30)" if draft_salt is None else f"draft salt set to {step.draft_salt}"
    return judge(step.first_tokens, step.num_accepted, alpha=alpha, beta=beta, seed=suite_seed, what=what)


def _salt(text: str) -> int | None:
    if text == "vllm":
        return None
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--draft-salt: 'vllm' or a non-negative int, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--draft-salt: 'vllm' or a non-negative int, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Exit 0: every check passed; 1: a check failed; 3: V2's members could not be loaded."""
    parser = argparse.ArgumentParser(prog="python -m specsim.field.v2_coupling", description=__doc__.splitlines()[0])
    parser.add_argument("--draft-salt", type=_salt, default=None, metavar="vllm|N",
                        help="the drafting salt: 'vllm' (0.33.0's 2^30, default) or N (0: before vLLM PR #54282)")
    parser.add_argument("--trials", type=int, default=TRIALS, help=f"steps, each its own request seed ({TRIALS})")
    parser.add_argument("--seed", type=int, default=0, help="the suite seed the steps' seeds derive from")
    parser.add_argument("--alpha", type=float, default=ALPHA, help=f"each statistical check's level ({ALPHA:g})")
    parser.add_argument("--interpret", action="store_true", help="Triton's interpreter even where CUDA is available")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results here")
    args = parser.parse_args(argv)
    from devices.field.vllm_loader import VllmLoadError
    try:
        results = run_check(trials=args.trials, suite_seed=args.seed, alpha=args.alpha, draft_salt=args.draft_salt,
                            interpret=True if args.interpret else None)
    except VllmLoadError as e:
        print(f"vLLM's Model Runner V2 members did not load: {e}", file=sys.stderr)
        return 3
    for r in results:
        print(f"{r.status.upper():4} {r.name}: {r.detail}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "python -m specsim.field.v2_coupling " + " ".join(argv or sys.argv[1:]),
                       "target_probs": [str(x) for x in TARGET_PROBS], "draft_probs": [str(x) for x in DRAFT_PROBS],
                       "results": [r.to_json() for r in results]}, f, indent=1)
    return 0 if all(r.status == "pass" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
