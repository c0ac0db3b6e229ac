"""Proposer conformance: are the drafts drawn from the ``draft_probs`` (q) the proposer reports?

Rejection sampling is lossless only if draft ``j`` was drawn from the q row
handed to the verifier, given the context and drafts ``0..j-1`` (SPEC §3):
a q the drafter did not sample from (processors applied to one side,
docs/bugs.md #41; reduced precision on one side, #44) moves the committed
tokens off the target law, and no verifier check can see it. This module
checks a proposer — the engine's protocol, ``specsim.engine.proposers.base``:
``propose(requests, ks) -> [(token_ids [k'], draft_probs [k', V] | None) | None]``
— as a black box, with what it declares:

* ``has_probs`` (False: point proposals, no q), ``greedy`` (temperature 0
  drafts the argmax of its q), ``sampling`` (which of ``temperature``,
  ``top_k``, ``top_p`` its q applies; default none).

**Exact checks** (no α): each output is None or ``(ids, rows)`` with
``k' ≤ k``; ids in ``[0, V)`` with placeholders (-1) only at the end; q rows
finite, ≥ 0, summing to 1 within ``V·2⁻²⁴ + 1e-6``; each draft has q > 0;
greedy drafts are an argmax of q; and q reflects the declared parameters:
at position 0 (the context alone, so the same row in every call) q under
``(T, top_k, top_p)`` equals SPEC §2 applied to ``log`` of the proposer's own
T = 1 row with the declared parameters (the others left off), within TV
``DECLARED_TV``.

**The law** (statistical, one check per case and position): for position
``j``, calls are grouped by their prefix ``(drafts 0..j-1)``. The context is
fixed, so for a drafter whose q is a function of (context, prefix) — checked
exactly: every row of a group equal within ``ROW_TOLERANCE`` — the tokens of a
group are i.i.d. draws that must follow the group's one q row: a
Cressie–Read test per group (cells pooled to expected ≥ 20 from q alone) and
the groups' statistics summed (independent given the prefixes, so the sum is
χ² with the summed df). Its power is stated as a detectable **mean
conditional TV** (E over tested prefixes of TV(law | prefix, q_prefix)):
the noncentrality is Σ n_g χ²_g ≥ Σ 4 n_g TV_g² ≥ 4 n TV̄² (Cauchy–Schwarz,
then Jensen), so ``stats.min_detectable_tv`` at the summed cells and the
tested n bounds it. The check also reports the measured mean conditional TV,
Σ_g (n_g / n) · TV(the group's token frequencies, q_g) over every call that
drafted the position (a plug-in estimate: above 0 for a correct drafter too,
of order √(V / n_g) per group; the test, not this figure, decides). Where
rows are not a function of the prefix (a drafter whose q depends on its
seed), the position falls back to the randomized PIT
of each draft under its own row: under H0 each PIT value is U(0,1) given
everything before it, so they are i.i.d. uniform and DKW–Massart is exact —
but its power is a KS distance of the PIT law, which does not bound TV (mass
swapped between neighbouring ranks), so only a detectable KS distance is
stated there. Seeds: request ``i`` of case ``c`` has seed
``case_seed(suite_seed, c) + i``; the family budget is ``ALPHA_FAMILY`` split
over the statistical checks (each run at α/10, as L3's).

>>> from specsim.engine.proposers.checked import load
>>> result = check(load("draft_model"), samples=600, k=2)
>>> result["verdict"], [c["check"] for c in result["checks"][:2]]
('pass', ['design', 'design'])
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from reference.target import target_probs
from specsim.engine.state import Request, SamplingParams
from specsim.judge.stats import (DEFAULT_BETA, Budget, case_seed, design_cells, dkwm_test, min_detectable_tv, min_samples,
                           pool_cells, pooled)

ALPHA_FAMILY = 1e-3
"""The false-fail rate of one proposer check, split (Bonferroni) over its statistical checks."""

DECLARED_TV = 1e-4
"""How far (TV) q at position 0 may sit from SPEC §2 applied to the proposer's own T = 1 row: float32
rows agree to ~1e-6; a processor missing from q moves it by 0.1 and more."""

ROW_TOLERANCE = 1e-6
"""Rows of one (context, prefix) group count as one row when they agree elementwise within this."""

SAMPLING_PARAMETERS = ("temperature", "top_k", "top_p")
CHUNK = 4096
"""Requests per ``propose`` call."""


@dataclass(frozen=True)
class Declaration:
    """What a proposer says it is (attributes of the proposer; see the module docstring)."""

    has_probs: bool
    greedy: bool
    sampling: tuple[str, ...]

    @classmethod
    def of(cls, proposer) -> "Declaration":
        sampling = tuple(getattr(proposer, "sampling", ()))
        unknown = set(sampling) - set(SAMPLING_PARAMETERS)
        if unknown:
            raise ValueError(f"sampling: {sorted(unknown)} are not among {SAMPLING_PARAMETERS}")
        return cls(bool(proposer.has_probs), bool(getattr(proposer, "greedy", False)), sampling)


@dataclass(frozen=True)
class Case:
    """One context and one set of sampling parameters, proposed ``calls`` times with distinct seeds."""

    id: str
    context: tuple[int, ...]
    params: SamplingParams
    k: int
    calls: int
    seed: int

    def requests(self, start: int, stop: int) -> list[Request]:
        return [Request(f"{self.id}/{i}", list(self.context), self.params, seed=(self.seed + i) % (1 << 63))
                for i in range(start, stop)]

    def describe(self, i: int | None = None) -> str:
        p = self.params
        call = "" if i is None else f", call {i} (request seed {(self.seed + i) % (1 << 63)})"
        return (f"case {self.id}: context {list(self.context)}, T={p.temperature:g} top_k={p.top_k} "
                f"top_p={p.top_p:g}, k={self.k}{call}")


SAMPLED_CASES = (("T1", dict(temperature=1.0), ()), ("T0.7", dict(temperature=0.7), ("temperature",)),
                 ("T0.9-k3", dict(temperature=0.9, top_k=3), ("top_k",)),
                 ("T1.1-p0.8", dict(temperature=1.1, top_p=0.8), ("top_p",)))
"""(id, parameters, the declaration that makes the case worth running): T = 1 always runs."""


def plan(decl: Declaration, vocab_size: int, *, samples: int, k: int, suite_seed: int) -> list[Case]:
    """The cases, fixed before anything is proposed: a context per case from its seed; point proposers
    and the greedy case get few calls (exact checks only)."""
    out = []
    for case_id, params, needs in SAMPLED_CASES:
        if set(needs) <= set(decl.sampling):
            out.append((case_id, SamplingParams(**params), samples if decl.has_probs else min(samples, 64)))
    if decl.greedy:
        out.append(("greedy", SamplingParams(temperature=0.0), min(samples, 64)))
    cases = []
    for case_id, params, calls in out:
        seed = case_seed(suite_seed, "proposer", case_id)
        context = tuple(int(t) for t in np.random.default_rng(seed).integers(0, vocab_size, 4))
        cases.append(Case(case_id, context, params, k, calls, seed))
    return cases


# --------------------------------------------------------------------------- running

@dataclass
class Calls:
    """One case's outputs, padded: ``ids [n, k]`` (-1 past each length), ``rows [n, k, V]`` or None, ``lens [n]``."""

    ids: np.ndarray
    rows: np.ndarray | None
    lens: np.ndarray


def _fail(check: str, case: Case | None, detail: str, **extra) -> dict:
    return {"check": check, "case": case.id if case else None, "status": "fail", "detail": detail, **extra}


def _pass(check: str, case: Case | None, detail: str, **extra) -> dict:
    return {"check": check, "case": case.id if case else None, "status": "pass", "detail": detail, **extra}


def _structure(out, k: int, vocab_size: int, has_probs: bool) -> str | None:
    """What is wrong with one call's output (None: nothing)."""
    if out is None:
        return None
    if not isinstance(out, tuple) or len(out) != 2:
        return f"output is {type(out).__name__}, not (token_ids, draft_probs) or None"
    ids, rows = np.asarray(out[0]), out[1]
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        return f"token_ids: must be 1-D integers, got shape {ids.shape} {ids.dtype}"
    if len(ids) > k:
        return f"token_ids: {len(ids)} drafts for k={k}"
    placeholder = ids == -1
    if placeholder.any() and not placeholder[np.argmax(placeholder):].all():
        return f"token_ids: placeholder -1 before a real draft: {ids.tolist()}"
    real = ids[~placeholder]
    if ((real < 0) | (real >= vocab_size)).any():
        return f"token_ids: ids outside [0, {vocab_size}): {ids.tolist()}"
    if (rows is None) == has_probs:
        return f"draft_probs: {'missing' if has_probs else 'given'} but the proposer declares has_probs={has_probs}"
    if rows is not None and np.shape(rows) != (len(ids), vocab_size):
        return f"draft_probs: shape {np.shape(rows)}, expected {(len(ids), vocab_size)}"
    return None


def run_case(proposer, case: Case, decl: Declaration) -> tuple[Calls, list[dict]]:
    """Propose ``case.calls`` times; the structural check (exact) comes back with the padded outputs."""
    V, k = proposer.vocab_size, case.k
    ids = np.full((case.calls, k), -1, np.int64)
    rows = np.zeros((case.calls, k, V)) if decl.has_probs else None
    lens = np.zeros(case.calls, np.int64)
    for start in range(0, case.calls, CHUNK):
        stop = min(case.calls, start + CHUNK)
        outs = proposer.propose(case.requests(start, stop), np.full(stop - start, k, np.int64))
        if len(outs) != stop - start:
            return Calls(ids, rows, lens), [_fail("structure", case, f"{len(outs)} outputs for {stop - start} requests")]
        for i, out in enumerate(outs, start):
            problem = _structure(out, k, V, decl.has_probs)
            if problem:
                return Calls(ids, rows, lens), [_fail("structure", case, f"{case.describe(i)}: {problem}")]
            if out is None:
                continue
            tok = np.asarray(out[0], np.int64)
            n = int(np.sum(tok != -1))                     # placeholders end the proposal
            ids[i, :n], lens[i] = tok[:n], n
            if rows is not None:
                rows[i, :n] = np.asarray(out[1], np.float64)[:n]
    return Calls(ids, rows, lens), [_pass("structure", case, f"{case.calls} calls, k={k}: lengths <= k, ids in "
                                          f"[0, {V}), placeholders only at the end; {int(lens.sum())} drafts")]


def _first(bad: np.ndarray) -> tuple[int, int]:
    i, j = np.argwhere(bad)[0]
    return int(i), int(j)


def rows_checks(case: Case, calls: Calls, decl: Declaration) -> list[dict]:
    """Exact: q rows are distributions, drafts have q > 0, greedy drafts are an argmax of q."""
    rows, ids = calls.rows, calls.ids
    V = rows.shape[-1]
    live = np.arange(case.k)[None, :] < calls.lens[:, None]                        # [n, k]
    out = []
    tol = V * 2.0 ** -24 + 1e-6
    bad = live & ~(np.isfinite(rows).all(-1) & (rows >= 0).all(-1) & (np.abs(rows.sum(-1) - 1) <= tol))
    if bad.any():
        i, j = _first(bad)
        out.append(_fail("q-is-a-distribution", case, f"{case.describe(i)}, position {j}: row sums to "
                         f"{rows[i, j].sum():.9g}, min {rows[i, j].min():.3g} (tolerance {tol:.2g})"))
        return out
    out.append(_pass("q-is-a-distribution", case, f"every row finite, >= 0, sum 1 within {tol:.2g}"))
    q_tok = np.take_along_axis(rows, np.maximum(ids, 0)[..., None], -1)[..., 0]   # [n, k]
    bad = live & ~(q_tok > 0)
    if bad.any():
        i, j = _first(bad)
        out.append(_fail("draft-in-support", case, f"{case.describe(i)}, position {j}: draft {ids[i, j]} has q = 0"))
    else:
        out.append(_pass("draft-in-support", case, "every draft has q > 0"))
    if case.params.temperature == 0:
        bad = live & (q_tok < rows.max(-1))
        if bad.any():
            i, j = _first(bad)
            out.append(_fail("greedy-argmax", case, f"{case.describe(i)}, position {j}: greedy draft {ids[i, j]} "
                             f"has q {q_tok[i, j]:.6g}, argmax q is {int(rows[i, j].argmax())} ({rows[i, j].max():.6g})"))
        else:
            out.append(_pass("greedy-argmax", case, "every greedy draft is an argmax of its q"))
    return out


def expected_row(raw: np.ndarray, params: SamplingParams, decl: Declaration) -> np.ndarray:
    """SPEC §2 on ``log raw`` ``[V]`` (the proposer's T = 1 row) with the declared parameters only."""
    with np.errstate(divide="ignore"):
        logits = np.log(raw)
    return target_probs(logits, params.temperature if "temperature" in decl.sampling else 1.0,
                        params.top_k if "top_k" in decl.sampling else 0,
                        params.top_p if "top_p" in decl.sampling else 1.0)


def declared_sampling(proposer, case: Case, calls: Calls, decl: Declaration) -> dict:
    """Exact: q at position 0 against SPEC §2 on the proposer's own T = 1 row of the same context."""
    first = np.flatnonzero(calls.lens > 0)
    if not len(first):
        return {"check": "declared-sampling", "case": case.id, "status": "not_supported",
                "detail": "no drafts at position 0"}
    raw_case = Case(case.id + "/raw", case.context, SamplingParams(temperature=1.0), 1, 1, case.seed)
    out = proposer.propose(raw_case.requests(0, 1), np.array([1]))[0]
    if out is None or len(out[0]) == 0 or out[1] is None:
        return {"check": "declared-sampling", "case": case.id, "status": "not_supported",
                "detail": "no T = 1 row for this context"}
    expected = expected_row(np.asarray(out[1], np.float64)[0], case.params, decl)
    got = calls.rows[first[0], 0]
    tv = 0.5 * float(np.abs(got - expected).sum())
    what = (f"q at position 0 vs SPEC §2 on the proposer's T = 1 row with declared {list(decl.sampling) or 'nothing'}: "
            f"TV {tv:.3g} (tolerance {DECLARED_TV:g})")
    if tv > DECLARED_TV:
        return _fail("declared-sampling", case, f"{case.describe(int(first[0]))}: {what}; q = "
                     f"{np.round(got, 4).tolist()}, expected {np.round(expected, 4).tolist()}", tv=tv)
    return _pass("declared-sampling", case, what, tv=tv)


def _pit(tokens: np.ndarray, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Randomized PIT ``[m]`` of ``tokens`` ``[m]`` each under its own row ``[m, V]`` (descending order, ties by id)."""
    order = np.argsort(-rows, axis=1, kind="stable")
    sorted_rows = np.take_along_axis(rows, order, 1)
    rank = np.argmax(order == tokens[:, None], axis=1)
    before = np.cumsum(sorted_rows, axis=1) - sorted_rows
    pick = np.arange(len(tokens))
    return before[pick, rank] + rng.random(len(tokens)) * sorted_rows[pick, rank]


def law_check(case: Case, calls: Calls, j: int, alpha: float) -> dict:
    """The law of draft ``j`` given the context and drafts ``0..j-1`` (module docstring), at level ``alpha``."""
    name = f"law/position-{j}"
    at = np.flatnonzero(calls.lens > j)
    if len(at) == 0:
        return {"check": name, "case": case.id, "status": "not_supported", "detail": f"no call drafted position {j}"}
    prefixes, group = np.unique(calls.ids[at, :j], axis=0, return_inverse=True)
    group = group.reshape(-1)
    rows, tokens = calls.rows[at, j], calls.ids[at, j]
    first = np.zeros(len(prefixes), np.int64)
    first[group[::-1]] = np.arange(len(at))[::-1]                 # the first call of each group
    fixed = bool(np.all(np.abs(rows - rows[first[group]]) <= ROW_TOLERANCE))
    seed = case_seed(case.seed, "pit", j)
    if not fixed:
        result = dkwm_test(_pit(tokens, rows, np.random.default_rng(seed)), alpha, what=name, seed=seed)
        detail = (f"q varies within a prefix group: randomized PIT + DKW-Massart over {len(at)} drafts, "
                  f"KS {result.ks:.3g}, p<={result.p_value:.3g}, alpha={alpha:.2g}, detectable KS distance "
                  f"{result.detectable_ks:.3g} (no TV bound: module docstring)")
        return {"check": name, "case": case.id, "status": "pass" if result.passed else "fail", "detail": detail,
                "method": "pit", "p_value": result.p_value, "alpha": alpha, "n": len(at),
                "detectable_ks": result.detectable_ks}
    statistic, df, tested = 0.0, 0, 0
    worst = (0.0, -1)
    V = rows.shape[1]
    measured = 0.0
    for g in range(len(prefixes)):
        members = np.flatnonzero(group == g)
        q = rows[first[g]]
        counts = np.bincount(tokens[members], minlength=V)
        measured += 0.5 * float(np.abs(counts - len(members) * q).sum()) / len(at)
        labels = pool_cells(q, len(members))
        obs, mass = pooled(counts, q, labels)
        if len(obs) < 2:
            continue
        n_support = float(obs.sum())             # drafts off q's support are draft-in-support's (exact) failure
        if n_support == 0:
            continue
        s = float(scipy_stats.power_divergence(obs, n_support * mass / mass.sum(), lambda_="cressie-read")[0])
        statistic, df, tested = statistic + s, df + len(obs) - 1, tested + int(n_support)
        worst = max(worst, (s / (len(obs) - 1), g))
    p = float(scipy_stats.chi2.sf(statistic, df)) if df else 1.0
    tv = min_detectable_tv(df + 1, tested, alpha) if df else math.inf
    where = ""
    if worst[1] >= 0:
        where = f"; largest per-df statistic at prefix {prefixes[worst[1]].tolist()} ({worst[0]:.3g})"
    detail = (f"{len(prefixes)} prefixes, {tested} of {len(at)} drafts in tested groups: CR statistic "
              f"{statistic:.4g}, df {df}, p={p:.3g}, alpha={alpha:.2g}, seeds from {case.seed}; detectable mean "
              f"conditional TV {tv:.3g}, measured {measured:.3g}{where}")
    return {"check": name, "case": case.id, "status": "pass" if p > alpha else "fail", "detail": detail,
            "method": "pooled-by-prefix", "p_value": p, "alpha": alpha, "n": tested, "df": df, "detectable_tv": tv,
            "measured_tv": measured}


class DesignError(ValueError):
    """The planned test cannot detect the TV asked for: more samples are needed (said how many)."""


def design(proposer, case: Case, alpha: float, max_tv: float | None) -> dict:
    """Before sampling: the position-0 test's cells (from one call's q row, fixed by the context) and the TV
    it detects at ``case.calls`` draws; ``DesignError`` above ``max_tv``."""
    out = proposer.propose(case.requests(0, 1), np.array([case.k]))[0]
    if out is None or len(out[0]) == 0 or out[1] is None:
        return {"check": "design", "case": case.id, "status": "not_supported", "detail": "no draft at position 0"}
    q0 = np.asarray(out[1], np.float64)[0]
    cells = design_cells(q0, case.calls)
    tv = min_detectable_tv(cells, case.calls, alpha)
    if max_tv is not None and tv > max_tv:
        need = min_samples(cells, max_tv, alpha)
        raise DesignError(f"samples: {case.describe()}: {case.calls} calls detect TV {tv:.3g} at position 0, "
                          f"above --max-tv {max_tv:g}; {math.ceil(need)} calls would reach it")
    return _pass("design", case, f"planned before sampling: position 0 has {cells} pooled cells; {case.calls} "
                 f"calls detect TV {tv:.3g} at alpha {alpha:.2g} with power {1 - DEFAULT_BETA:g}", detectable_tv=tv)


def check(proposer, *, samples: int = 10_000, k: int = 3, suite_seed: int = 0,
          alpha_family: float = ALPHA_FAMILY, max_tv: float | None = None, only: tuple[str, ...] | None = None) -> dict:
    """Every check of one proposer; ``verdict`` is ``fail`` if any check fails, ``pass`` otherwise.

    ``only``: run these cases alone (the budget still counts every planned check, so α per check is the
    same as in the whole run); ``max_tv``: ``DesignError`` if a case's planned position-0 test cannot
    detect this TV.
    """
    decl = Declaration.of(proposer)
    cases = plan(decl, proposer.vocab_size, samples=samples, k=k, suite_seed=suite_seed)
    sampled = [c for c in cases if decl.has_probs and c.params.temperature > 0]
    budget = Budget(alpha_family, max(1, len(sampled) * k))
    if only is not None:
        unknown = set(only) - {c.id for c in cases}
        if unknown:
            raise ValueError(f"only: {sorted(unknown)} are not cases of this proposer ({[c.id for c in cases]})")
        cases = [c for c in cases if c.id in only]
    results = [design(proposer, c, budget.nominal, max_tv) for c in cases if c in sampled]
    for case in cases:
        calls, structure = run_case(proposer, case, decl)
        results += structure
        if structure[0]["status"] != "pass" or not decl.has_probs:
            if case.params.temperature == 0 and not decl.has_probs:
                results.append({"check": "greedy-argmax", "case": case.id, "status": "not_supported",
                                "detail": "point proposals: no q to take the argmax of"})
            continue
        results += rows_checks(case, calls, decl)
        if case in sampled:
            results.append(declared_sampling(proposer, case, calls, decl))
            results += [law_check(case, calls, j, budget.nominal) for j in range(k)]
    failed = any(r["status"] == "fail" for r in results)
    return {"proposer": getattr(proposer, "name", type(proposer).__name__), "declaration": decl.__dict__,
            "samples": samples, "k": k, "suite_seed": suite_seed, "alpha_family": alpha_family,
            "alpha_per_check": budget.alpha, "nominal_alpha": budget.nominal,
            "verdict": "fail" if failed else "pass", "checks": results}


__all__ = ["ALPHA_FAMILY", "DECLARED_TV", "Declaration", "Case", "DesignError", "design", "plan", "run_case", "rows_checks",
           "declared_sampling", "law_check", "check"]
