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
(``stat_plan.run_plan``: ``ctx.alpha_family`` split evenly over every
statistical test of the run, each run at a tenth of its share). The trial
count of a case comes from the planner (``stat_plan.make_plan``) so that every
position, bonus included, detects worst-case TV ``TARGET_TV`` with power 1-β at
that α; the plan asserts this design.
Expected laws come from ``reference`` (float64, raw logits and parameters),
never from the device.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, UnsupportedCall, VerifyBatch
from reference.laws import num_accepted_law
from specsim.judge import stats
from specsim.conformance._common import Refusal, ask, refused
from specsim.conformance.cases import CASES, Built, Case
from specsim.conformance.results import CheckResult
# The planner's names are re-exported for this module's callers.
from specsim.conformance.stat_plan import (BETA, MAX_TRIALS, PIT_TRIALS, QUICK_PIT_TRIALS, QUICK_TRIALS, TARGET_TV,
                                           CasePlan, Plan, case_missing, check_names, make_plan, reach, run_plan,
                                           tested_positions)

MAX_FLOATS_PER_CALL = 20_000_000
"""Bound on the floats of one verify call (logits + draft rows), to bound memory."""

SHARD_TRIALS = 20_000
"""Trials of one shard (``shard_sizes``); part of the draw, so changing it changes the suite's samples."""


# --------------------------------------------------------------------------- shards of trials

def shard_sizes(plan: CasePlan, shard_trials: int = SHARD_TRIALS) -> list[int]:
    """The trials of each shard of a case: ``shard_trials`` each, the last one the rest.

    A shard is a pure function of (suite seed, case, shard index) and its
    size; merging shards is exact addition of integer counts, so the verdict
    is the same whatever ran them, in whatever order (``specsim.campaign``).

    >>> plan = CasePlan(CASES[0], None, 2 * SHARD_TRIALS + 5)
    >>> shard_sizes(plan) == [SHARD_TRIALS, SHARD_TRIALS, 5]
    True
    """
    full, rest = divmod(plan.trials, shard_trials)
    return [shard_trials] * full + ([rest] if rest else [])


def shard_seed(suite_seed: int, case_id: str, index: int) -> int:
    """The seed of one shard's drafts, request seeds and positions: (suite seed, case, index) alone."""
    return stats.case_seed(suite_seed, case_id, "shard", index)


def _sample_drafts(rng: np.random.Generator, rows: np.ndarray, n: int) -> np.ndarray:
    """``[n, K]`` draft ids, column j drawn from ``rows[j]`` (``[K, V]``) by inverse CDF."""
    K, V = rows.shape
    out = np.empty((n, K), dtype=np.int64)
    for j in range(K):
        cum = np.cumsum(rows[j])
        out[:, j] = np.minimum(np.searchsorted(cum, rng.random(n) * cum[-1], side="right"), V - 1)
    return out


def _floats_per_trial(built: Built) -> int:
    return built.target_logits.size + (0 if built.case.point else built.draft_rows.size)


def _tiles(built: Built, dtype_name: str, n: int) -> tuple:
    """The parts of ``n`` trials' batch that every call of a case repeats, built once and read-only.

    At a real vocabulary the logits and draft rows are nearly all of what
    crosses the protocol (``n × (rows + B + K) × V`` floats); tiling them anew
    for every call would cost more than many devices' step. Returns
    ``(num_draft_tokens [n·B], draft_probs [n·K, V] | None, target_logits
    [n·(K+B), V], temperature [n·B], top_k [n·B], top_p [n·B])``.
    """
    cache = built.__dict__.setdefault("_tiles", {})  # at most two sizes: the full call and a shard's last one
    if (dtype_name, n) in cache:
        return cache[(dtype_name, n)]
    dtype = np.dtype(dtype_name)
    parts = (np.tile(built.num_draft_tokens, n),
             None if built.case.point else np.tile(built.draft_rows.astype(dtype), (n, 1)),
             np.tile(built.target_logits.astype(dtype), (n, 1)),
             np.tile(built.temperature, n), np.tile(built.top_k, n), np.tile(built.top_p, n))
    for a in parts:
        if a is not None:
            a.flags.writeable = False  # a device must not mutate its input; a shared tile would carry it over
    if len(cache) >= 2:
        cache.pop(next(iter(cache)))
    cache[(dtype_name, n)] = parts
    return parts


def _trial_batch(built: Built, drafts: list, rng: np.random.Generator, n: int, dtype) -> VerifyBatch:
    """``n`` copies of the template, request-major inside a trial, each request with its own seed and position."""
    B = len(built.num_draft_tokens)
    ids = np.concatenate([d for d in drafts], axis=1) if drafts else np.zeros((n, 0), np.int64)
    k, draft_probs, logits, temperature, top_k, top_p = _tiles(built, np.dtype(dtype).name, n)
    return VerifyBatch(
        num_draft_tokens=k, draft_token_ids=ids.reshape(-1), draft_probs=draft_probs, target_logits=logits,
        temperature=temperature, top_k=top_k, top_p=top_p,
        seeds=rng.integers(0, 2**64, size=n * B, dtype=np.uint64),
        positions=rng.integers(0, 2**31, size=n * B, dtype=np.int64),
        sampler=None if built.sampler is None else built.sampler.tiled(n),
    )


@dataclass
class Tally:
    """What trials of one case produced: integer counts only, so shards merge by addition.

    - ``counts``: (i, j) -> ``[V]`` int64, the token request i emitted at position j;
    - ``accepted``: i -> ``[K_i + 1]`` int64, its ``num_accepted``;
    - ``violations``: (i, what) -> int, trials breaking an exact rule (no α);
    - ``examples``: (i, what) -> str, one instance, from the lowest shard that saw one;
    - ``n``: trials.

    >>> a, b = Tally(n=2), Tally(n=3)
    >>> a.violations[(0, "pos0: tokens outside [0, V)")] = 1; a.examples[(0, "pos0: tokens outside [0, V)")] = "[9]"
    >>> merged = Tally.merged([a, b]); merged.n, merged.describe(0)
    (5, ['pos0: tokens outside [0, V): 1 trials (e.g. [9])'])
    """

    counts: dict = field(default_factory=dict)
    accepted: dict = field(default_factory=dict)
    violations: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    n: int = 0

    def add(self, other: "Tally") -> None:
        """Add ``other``'s counts to these (``other`` from a later shard: examples already here are kept)."""
        for key, c in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + c
        for key, c in other.accepted.items():
            self.accepted[key] = self.accepted.get(key, 0) + c
        for key, c in other.violations.items():
            self.violations[key] = self.violations.get(key, 0) + c
            self.examples.setdefault(key, other.examples.get(key, ""))
        self.n += other.n

    @classmethod
    def merged(cls, tallies) -> "Tally":
        """The exact sum of shard tallies given in shard-index order."""
        out = cls()
        for t in tallies:
            out.add(t)
        return out

    def violate(self, i: int, what: str, trials: int, example: str) -> None:
        self.violations[(i, what)] = self.violations.get((i, what), 0) + int(trials)
        self.examples.setdefault((i, what), example)

    def describe(self, i: int) -> list[str]:
        """Request i's exact-rule violations, one line each."""
        return [f"{what}: {c} trials (e.g. {self.examples.get((j, what), '')})"
                for (j, what), c in self.violations.items() if j == i]

    def to_json(self) -> dict:
        """Sparse integer counts: ``{"counts": {"i,j": [[ids], [counts]]}, ...}``."""
        def sparse(c):
            c = np.asarray(c)
            nz = np.flatnonzero(c)
            return [int(c.size), nz.tolist(), c[nz].astype(np.int64).tolist()]
        return {"n": self.n,
                "counts": {f"{i},{j}": sparse(c) for (i, j), c in self.counts.items()},
                "accepted": {str(i): sparse(c) for i, c in self.accepted.items()},
                "violations": [[i, what, c, self.examples.get((i, what), "")]
                               for (i, what), c in self.violations.items()]}

    @classmethod
    def from_json(cls, doc: dict) -> "Tally":
        def dense(v):
            out = np.zeros(v[0], np.int64)
            out[np.asarray(v[1], np.int64)] = v[2]
            return out
        t = cls(n=int(doc["n"]))
        t.counts = {tuple(int(x) for x in k.split(",")): dense(v) for k, v in doc["counts"].items()}
        t.accepted = {int(k): dense(v) for k, v in doc["accepted"].items()}
        for i, what, c, example in doc["violations"]:
            t.violations[(int(i), what)] = int(c)
            t.examples[(int(i), what)] = example
        return t


def _tally_chunk(t: Tally, built: Built, drafts: list, out, n: int) -> None:
    B = len(built.num_draft_tokens)
    V = built.target_logits.shape[1]
    width = int(built.num_draft_tokens.max()) + 1
    ids, acc = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    if ids.ndim != 2 or ids.shape[0] != n * B or acc.shape != (n * B,):  # malformed: a violation, not a crash
        for i in range(B):
            t.violate(i, "output shape", n, f"output_token_ids {ids.shape}, num_accepted {acc.shape}; "
                                            f"expected ({n * B}, {width}) and ({n * B},) (SPEC §7)")
        return
    ids, acc = ids.reshape(n, B, -1), acc.reshape(n, B)
    for i, r in enumerate(built.case.requests):
        m = acc[:, i]
        if ids.shape[2] != width:
            t.violate(i, "output width", n, f"{ids.shape[2]}, expected {width}")
            continue
        outside = (m < 0) | (m > r.k)
        if outside.any():
            t.violate(i, f"num_accepted outside 0..{r.k}", int(outside.sum()), str(sorted(set(m[outside].tolist()))[:5]))
            m = np.clip(m, 0, r.k)
        d = drafts[i]
        row_ids = ids[:, i, :]
        pad = ((np.arange(width)[None, :] > m[:, None]) & (row_ids != PLACEHOLDER_TOKEN_ID)).any(axis=1)
        if pad.any():
            t.violate(i, "tokens after the last emitted one", int(pad.sum()), str(row_ids[np.argmax(pad)].tolist()))
        for j in range(r.k + 1):
            emitted = m >= j
            tok = row_ids[emitted, j]
            if j < r.k:
                acc_here = m > j
                wrong = row_ids[acc_here, j] != d[acc_here, j]
                if wrong.any():
                    first = int(np.argmax(wrong))
                    t.violate(i, f"pos{j}: accepted tokens differ from the draft", int(wrong.sum()),
                              f"emitted {int(row_ids[acc_here, j][first])}, drafted {int(d[acc_here, j][first])}")
            out_of_range = (tok < 0) | (tok >= V)
            if out_of_range.any():
                t.violate(i, f"pos{j}: tokens outside [0, V)", int(out_of_range.sum()),
                          str(np.unique(tok[out_of_range])[:5].tolist()))
                tok = tok[~out_of_range]
            if r.temperature == 0:
                continue
            t.counts[(i, j)] = t.counts.get((i, j), 0) + np.bincount(tok, minlength=V)
        if r.temperature == 0:  # the deterministic greedy path from the drafts
            logits = built.target_logits[[built.target_row(i, j) for j in range(r.k + 1)]]
            best = np.argmax(logits, axis=1)
            match = d == best[None, :r.k] if r.k else np.zeros((n, 0), bool)
            expect_m = np.where(match.all(axis=1), r.k, np.argmin(match, axis=1)) if r.k else np.zeros(n, np.int64)
            wrong = (m != expect_m) | (row_ids[np.arange(n), expect_m] != best[expect_m])
            if wrong.any():
                first = int(np.flatnonzero(wrong)[0])
                t.violate(i, "greedy: trials off the argmax path", int(wrong.sum()),
                          f"accepted {int(m[first])}, expected {int(expect_m[first])}, "
                          f"emitted {row_ids[first].tolist()}, argmax {best.tolist()}")
        if r.k:
            t.accepted[i] = t.accepted.get(i, 0) + np.bincount(m, minlength=r.k + 1)[: r.k + 1]


def template_batch(built: Built, dtype) -> VerifyBatch:
    """One trial's batch (draft ids: each row's most likely token), the template ``verify_repeated`` tiles."""
    cache = built.__dict__.setdefault("_template", {})
    name = np.dtype(dtype).name
    if name not in cache:
        ids = np.argmax(built.draft_rows, axis=1).astype(np.int64)
        for i, r in enumerate(built.case.requests):
            if r.placeholder:
                ids[built.draft_row(i, 0): built.draft_row(i, 0) + r.k] = PLACEHOLDER_TOKEN_ID
        cache[name] = VerifyBatch(built.num_draft_tokens, ids,
                                  None if built.case.point else built.draft_rows.astype(dtype),
                                  built.target_logits.astype(dtype), built.temperature, built.top_k, built.top_p,
                                  np.zeros(len(built.num_draft_tokens), np.uint64),
                                  np.zeros(len(built.num_draft_tokens), np.int64))
    return cache[name]


def _verify_repeated(device, built: Built, drafts: list, rng: np.random.Generator, n: int, dtype):
    """The ``n`` trials through ``device.verify_repeated``: the draws of ``_trial_batch``, the same result as
    ``verify``, but only ids, seeds and positions cross the protocol per call (the rows once, as the template)."""
    B = len(built.num_draft_tokens)
    ids = np.concatenate(drafts, axis=1).reshape(-1) if drafts else np.zeros(0, np.int64)
    seeds = rng.integers(0, 2**64, size=n * B, dtype=np.uint64)       # drawn as _trial_batch draws them
    positions = rng.integers(0, 2**31, size=n * B, dtype=np.int64)
    template = template_batch(built, dtype)
    try:
        return device.verify_repeated(template, n, ids, seeds, positions)
    except UnsupportedCall as e:  # judged on the template: V, K, dtype and modes are the call's, B is never declared
        raise Refusal(e, template, None, what=f"verify_repeated of this template tiled {n} times") from e


REPEATED_CALL_FACTOR = 16
"""``verify_repeated`` calls hold this many times the trials of a ``verify`` call: their rows are tiled on the
device, so the host memory bound ``MAX_FLOATS_PER_CALL`` does not apply (at V = 128256: 400 trials, ~1.2 GB)."""


def run_shard(device, plan: CasePlan, suite_seed: int, index: int, shard_trials: int = SHARD_TRIALS,
              repeated: bool = False) -> Tally:
    """Shard ``index`` of a case through ``device``: its trials in calls of at most ``MAX_FLOATS_PER_CALL``.

    Everything drawn here comes from ``shard_seed(suite_seed, case, index)``,
    so the shard's counts depend on nothing else (not on which worker runs it).
    ``repeated``: call the device's optional ``verify_repeated`` (the sign-off
    profile at a real vocabulary, where each trial's rows are megabytes).

    A refusal (``UnsupportedCall``) is raised as ``_common.Refusal`` carrying the call; the call is
    never retried smaller. The case was asked only because the declaration covers its V, K, dtype
    and modes, and batch size is never a declared limit, so a refusal here contradicts the
    declaration: ``statistical_group`` records it as a ``fail`` (``_common.refused``). A device with
    a batch limit of its own splits the call itself.
    """
    repeated = repeated and hasattr(device, "verify_repeated") and plan.built.sampler is None  # §12 rows: verify
    built = plan.built
    trials = shard_sizes(plan, shard_trials)[index]
    rng = np.random.default_rng(shard_seed(suite_seed, plan.case.id, index))
    dtype = np.float32 if "float32" in device.capabilities.dtypes else np.float64
    chunk = max(1, min(trials, MAX_FLOATS_PER_CALL // _floats_per_trial(built)
                       * (REPEATED_CALL_FACTOR if repeated else 1)))
    t = Tally()
    done = 0
    while done < trials:
        n = min(chunk, trials - done)
        drafts = [np.full((n, r.k), PLACEHOLDER_TOKEN_ID, np.int64) if r.placeholder else
                  _sample_drafts(rng, built.draft_rows[built.draft_row(i, 0): built.draft_row(i, 0) + r.k], n)
                  for i, r in enumerate(built.case.requests)]
        if repeated:
            out = _verify_repeated(device, built, drafts, rng, n, dtype)
            _tally_chunk(t, built, drafts, out, n)
            done += n
            continue
        batch = _trial_batch(built, drafts, rng, n, dtype)
        out = ask(device, batch)
        _tally_chunk(t, built, drafts, out, n)
        done += n
    t.n = done
    return t


def run_trials(device, plan: CasePlan, suite_seed: int) -> Tally:
    """Every shard of the case, in this process, in order: the in-process campaign."""
    return Tally.merged(run_shard(device, plan, suite_seed, s) for s in range(len(shard_sizes(plan))))


# --------------------------------------------------------------------------- verdicts

def _stat_result(name: str, res, plan: Plan, seed: int, design_tv: float | None, extra: dict) -> CheckResult:
    detectable = getattr(res, "detectable_tv", None)
    if detectable is None:
        detectable = getattr(res, "detectable_ks", None)
    return CheckResult(
        name=name, layer="L3", status="pass" if res.passed else "fail", detail=res.report(),
        p_value=float(res.p_value), alpha=plan.alpha(name), n=int(res.n),
        statistic=float(getattr(res, "statistic", getattr(res, "ks", 0.0))),
        detectable_tv=None if detectable is None or not math.isfinite(detectable) else float(detectable),
        seed=seed, extra={"alpha_share": plan.shares[name], "family_tests": plan.family_tests,
                          "alpha_family": plan.alpha_family, "design_detectable": design_tv, **extra})


def case_results(cp: CasePlan, tally: Tally, plan: Plan, seed: int) -> list[CheckResult]:
    """A case's checks from its merged tally, each statistical one at its α in ``plan``."""
    built, case = cp.built, cp.case
    out = []
    pit_rng = np.random.default_rng(seed ^ 0x5EED)
    for i, r in enumerate(case.requests):
        bad = tally.describe(i)
        if r.temperature == 0:
            out.append(CheckResult(f"L3/{case.id}/r{i}/greedy-exact", "L3", "fail" if bad else "pass",
                                   "; ".join(bad[:3]) if bad else f"{tally.n} trials on the argmax path",
                                   n=tally.n, seed=seed))
            continue
        support_bad = []
        for j in range(r.k + 1):
            row = built.target[built.target_row(i, j)]
            counts = tally.counts.get((i, j), np.zeros(len(row)))
            sup = stats.support_check(counts, row, what=f"pos{j}", seed=seed)
            if not sup.passed:
                support_bad.append(sup.report())
            name = f"L3/{case.id}/r{i}/pos{j}" + ("-bonus" if j == r.k else "")
            if j not in tested_positions(r):  # unreachable: any token here is an exact failure (above)
                continue
            if case.pit:
                tokens = np.repeat(np.arange(len(row)), np.asarray(counts, np.int64))  # by id: order-free
                tokens = tokens[row[tokens] > 0]  # support failures are counted exactly above
                res = stats.dkwm_test(stats.pit_values(tokens, row, pit_rng), plan.alpha(name), what=name, seed=seed)
                out.append(_stat_result(name, res, plan, seed, cp.design_tv.get(name),
                                        {"test": "randomized PIT + DKWM", "detectable_metric": "PIT KS distance"}))
            else:
                res = stats.gof_test(counts, row, plan.alpha(name), what=name, seed=seed)
                out.append(_stat_result(name, res, plan, seed, cp.design_tv.get(name),
                                        {"test": "pooled Cressie-Read 2/3", **res.extra()}))
        if r.k:
            law = np.array(num_accepted_law(built.acceptance[i]), dtype=np.float64)
            counts = tally.accepted.get(i, np.zeros(r.k + 1))
            sup = stats.support_check(counts, law, what="num_accepted", seed=seed)
            if not sup.passed:
                support_bad.append(sup.report())
            name = f"L3/{case.id}/r{i}/accepted"
            res = stats.gof_test(counts, law, plan.alpha(name), what=name, seed=seed)
            out.append(_stat_result(name, res, plan, seed, None,
                                    {"test": "accepted-count law, pooled Cressie-Read 2/3",
                                     "expected_law": law.tolist(), "observed": np.asarray(counts).tolist(),
                                     **res.extra()}))
        problems = bad + support_bad
        out.append(CheckResult(f"L3/{case.id}/r{i}/exact", "L3", "fail" if problems else "pass",
                               "; ".join(problems[:3]) if problems else
                               f"support, token range, accepted = drafts, padding: all hold over {tally.n} trials",
                               n=tally.n, seed=seed))
    return out


def _missing(device, case: Case) -> list[str]:
    return case_missing(device.capabilities, case)


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


NO_RANDOMNESS = CheckResult("L3/statistical", "L3", "not_supported",
                            "the device cannot draw its own randomness (capabilities.rng = 'none')")


def not_supported(device, cp: CasePlan) -> list[CheckResult]:
    """The case's checks as ``not_supported`` if the device's capabilities lack what it needs; else []."""
    missing = _missing(device, cp.case)
    return [CheckResult(n, "L3", "not_supported", f"needs {', '.join(missing)}") for n in cp.checks] if missing else []


def case_verdicts(cp: CasePlan, tally: Tally, plan: Plan, suite_seed: int, seconds: float,
                  shard_trials: int = SHARD_TRIALS) -> list[CheckResult]:
    """A case's checks from its merged tally (``case_results``), with its trials, time and size noted."""
    found = case_results(cp, tally, plan, stats.case_seed(suite_seed, cp.case.id))
    for r in found:
        r.extra.setdefault("trials", tally.n)
        r.extra.setdefault("case_seconds", round(seconds, 2))
        r.extra.setdefault("quick", plan.quick)
        r.extra.setdefault("shards", len(shard_sizes(cp, shard_trials)))
    return found


def mark_holm(results: list[CheckResult], plan: Plan) -> None:
    """For the report: Holm's step-down at the level of the group's checks together (same gate as
    Bonferroni, names more failures)."""
    measured = [r for r in results if r.p_value is not None]
    if measured:
        rejected = stats.holm([r.p_value for r in measured], plan.holm_alpha)
        for r, rej in zip(measured, rejected):
            r.extra["holm_rejected"] = bool(rej)
