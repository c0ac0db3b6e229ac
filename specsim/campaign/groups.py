"""Calibration of whole conformance groups over many suite seeds (``specsim calibrate --groups``).

A correct device must pass every check at every suite seed but for the
statistical ones' budgeted false fails. Each (group, suite seed, mode) is one
shard (``GroupShard``), a pure function of its fields, so it runs on any
campaign executor; a mode is the device as it declares itself (``declared``:
torch with injected noise, where exact layers judge token for token) or behind
``BlackBox`` (``black-box``: no injected noise, a ``"seeded"`` RNG, so an edge's
law is tested statistically and tree laws by L3-trees).

What the summary holds a run to:

* **exact false fails**: a failing check that spent no α, or an error — never
  noise, so any one fails the run;
* **statistical false fails**: a failing check that spent α. All the
  statistical checks of one device at one suite seed false-fail with
  probability at most ``run_budget(alpha_family)``: the run's statistical
  plan (``specsim.conformance.stats.plan``) splits ``alpha_family`` over every
  one of them (L3-statistical, L3-trees, the edge laws of L1-edges and
  L1-sampler). With ``m`` modes a
  seed has one with probability at most ``p = min(1, m·run_budget)``,
  independently across seeds (each seed derives its own case seeds), so the
  number of seeds with one is held to Binomial(seeds, p): the run fails when
  ``P(Binomial(seeds, p) >= observed) <= level`` (``FALSE_FAIL_LEVEL``). At
  ``alpha_family = 1e-3`` (p = 2e-3 for two modes) and 100 seeds: 0.2
  seeds expected, P(>= 1) = 0.18, P(>= 2) = 0.017, P(>= 3) = 1.1e-3,
  P(>= 4) = 5.4e-5, so up to three seeds pass (each false fail reported
  loudly) and four fail the run;
* **p-values**: every single Cressie–Read test (``calibrated_p_values``; a
  check reporting the smallest p of several tests is not one) is pooled per
  mode and KS-tested against U(0, 1);
* **detectable TV**: each statistical case (a check that spent α), per mode,
  with its α, n and the detectable TV it states (``CheckResult.detectable_tv``).

>>> from specsim.campaign.executors import InProcess
>>> s = calibrate_groups("torch", ["L3-trees"], [0], ["declared"], InProcess(), alpha_family=1e-3, quick=True)
>>> s["exact_false_fails"], s["seeds_with_a_statistical_false_fail"], s["exceeds_bound"]
(0, 0, False)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

MODES = ("declared", "black-box")

FALSE_FAIL_LEVEL = 1e-3
"""The run fails when the seeds with a statistical false fail are this improbable under the family budget."""

_KEPT_EXTRA = ("df", "cells", "test")


@dataclass(frozen=True)
class GroupShard:
    """One group of one correct device at one suite seed, as declared or behind ``BlackBox``."""

    device: str
    group: str
    seed: int
    mode: str
    alpha_family: float
    quick: bool

    @property
    def key(self) -> str:
        return f"{self.group}/{self.seed}/{self.mode}"


def run_group_shard(shard: GroupShard) -> dict:
    """Run the shard's group in this process (one torch thread): its results, trimmed to what the
    summary reads (a check's name, status, p-value, α, n, detectable TV, df and test), and seconds."""
    from devices.registry import load
    from specsim.campaign.executors import one_torch_thread
    from specsim.campaign.tasks import where
    from specsim.conformance.run.runner import Context, run_group
    from specsim.conformance.core.black_box import BlackBox
    with one_torch_thread():
        device = load(shard.device)
        device = BlackBox(device) if shard.mode == "black-box" else device
        start = time.perf_counter()
        results = run_group(shard.group, device, Context(seed=shard.seed, alpha_family=shard.alpha_family,
                                                         quick=shard.quick))
        seconds = time.perf_counter() - start
    trimmed = []
    for r in results:
        d = r.to_json()
        d["detail"] = (r.detail.splitlines() or [""])[0][:300]
        d["extra"] = {k: r.extra[k] for k in _KEPT_EXTRA if k in r.extra}
        trimmed.append(d)
    return {"results": trimmed, "seconds": round(seconds, 3), "where": where()}


def shards(device: str, groups, seeds, modes, alpha_family: float, quick: bool) -> list[GroupShard]:
    """Every shard, seed by seed."""
    return [GroupShard(device, g, s, m, alpha_family, quick) for s in seeds for m in modes for g in groups]


def run_budget(alpha_family: float) -> float:
    """The false-fail budget of every statistical check of one device at one suite seed: the run's
    statistical plan sums to ``alpha_family`` exactly (``stats.plan.run_plan``)."""
    return alpha_family


def false_fail_p(seeds_failing: int, seeds: int, modes: int, alpha_family: float) -> float:
    """``P(Binomial(seeds, min(1, modes·run_budget)) >= seeds_failing)``: how improbable this many seeds
    with a statistical false fail are under the budget.

    >>> [f"{false_fail_p(k, 100, 2, 1e-3):.2g}" for k in range(1, 5)]
    ['0.18', '0.017', '0.0011', '5.4e-05']
    """
    from scipy import stats as st
    if seeds_failing <= 0:
        return 1.0
    return float(st.binom.sf(seeds_failing - 1, seeds, min(1.0, modes * run_budget(alpha_family))))


def summary(done: dict, seeds, modes, alpha_family: float, level: float = FALSE_FAIL_LEVEL) -> dict:
    """The verdict over ``done`` (``GroupShard`` → ``run_group_shard`` result): false fails, the binomial
    bound, KS per mode, each statistical case's α, n and detectable TV."""
    import numpy as np
    from scipy import stats as st
    from specsim.campaign.calibration import calibrated_p_values
    from specsim.conformance.core.results import CheckResult
    seeds, modes = list(seeds), list(modes)
    false_fails, p_by_mode, cases, group_seconds = [], {m: [] for m in modes}, {}, {}
    for shard, r in done.items():
        results = [CheckResult.from_json(d) for d in r["results"]]
        group_seconds[shard.group] = group_seconds.get(shard.group, 0.0) + r["seconds"]
        p_by_mode[shard.mode] += calibrated_p_values(results)
        for c in results:
            if c.status in ("fail", "error"):
                exact = c.status == "error" or c.alpha is None
                false_fails.append({"seed": shard.seed, "mode": shard.mode, "group": shard.group, "check": c.name,
                                    "status": c.status, "exact": exact, "p_value": c.p_value, "alpha": c.alpha,
                                    "detail": c.detail,
                                    "repro": f"specsim conform --groups {shard.group} --seed {shard.seed}"})
            if c.alpha is not None:
                case = cases.setdefault((c.name, shard.mode),
                                        {"check": c.name, "mode": shard.mode, "group": shard.group, "alpha": [],
                                         "n": [], "detectable_tv": [], "p": [], "fails": 0})
                case["alpha"].append(c.alpha)
                case["n"].append(c.n)
                case["detectable_tv"].append(c.detectable_tv)
                case["p"].append(c.p_value)
                case["fails"] += c.status == "fail"
    exact = [f for f in false_fails if f["exact"]]
    statistical_seeds = sorted({f["seed"] for f in false_fails if not f["exact"]})
    bound_p = false_fail_p(len(statistical_seeds), len(seeds), len(modes), alpha_family)
    ks = {}
    for m, ps in p_by_mode.items():
        p = np.array(ps)
        if p.size:
            k = st.kstest(p, "uniform")
            ks[m] = {"p_values": int(p.size), "ks_statistic": float(k.statistic), "ks_p_value": float(k.pvalue),
                     "fraction_below": {str(a): float(np.mean(p <= a)) for a in (0.01, 0.05, 0.1, 0.5)}}
    return {"seeds": len(seeds), "first_seed": min(seeds), "last_seed": max(seeds), "modes": modes,
            "alpha_family": alpha_family, "false_fails": false_fails, "exact_false_fails": len(exact),
            "statistical_false_fails": len(false_fails) - len(exact),
            "seeds_with_a_statistical_false_fail": len(statistical_seeds),
            "expected_seeds_with_a_statistical_false_fail_at_most":
                len(seeds) * min(1.0, len(modes) * run_budget(alpha_family)),
            "false_fail_p": bound_p, "false_fail_level": level, "exceeds_bound": bound_p <= level,
            "ks": ks, "statistical_cases": [_case(c) for c in cases.values()],
            "group_seconds": {g: round(s, 1) for g, s in group_seconds.items()}}


def _case(c: dict) -> dict:
    tv = [x for x in c["detectable_tv"] if x is not None]
    p = [x for x in c["p"] if x is not None]
    return {"check": c["check"], "mode": c["mode"], "group": c["group"], "seeds": len(c["alpha"]),
            "alpha": max(c["alpha"]), "n_min": min((x for x in c["n"] if x is not None), default=None),
            "detectable_tv_min": min(tv, default=None), "detectable_tv_max": max(tv, default=None),
            "detectable_tv_missing": len(c["detectable_tv"]) - len(tv), "smallest_p": min(p, default=None),
            "fails": c["fails"]}


def calibrate_groups(device: str, groups, seeds, modes, executor, *, alpha_family: float, quick: bool,
                     level: float = FALSE_FAIL_LEVEL, progress: bool = False) -> dict:
    """Run every (group, seed, mode) shard through ``executor`` and summarise (``summary``), with ``run``."""
    todo = shards(device, groups, seeds, modes, alpha_family, quick)
    done, start = {}, time.perf_counter()
    for shard, r in executor.map(run_group_shard, todo):
        done[shard] = r
        if progress:
            bad = sum(d["status"] in ("fail", "error") for d in r["results"])
            print(f"  [{len(done)}/{len(todo)}] {shard.key}: {len(r['results'])} checks"
                  f"{f', {bad} FAILING' if bad else ''} ({r['seconds']:.1f}s on {r['where']})",
                  file=sys.stderr, flush=True)
    s = summary(done, seeds, modes, alpha_family, level)
    s["run"] = {**executor.describe(), "shards": len(todo), "wall_seconds": round(time.perf_counter() - start, 1),
                "worker_seconds": round(sum(r["seconds"] for r in done.values()), 1)}
    return s


def markdown(s: dict, groups, device: str) -> str:
    """The statistical cases' table (check, mode, α, n, detectable TV, fails, smallest p), then the false fails."""
    def fmt(x, spec=".3g"):
        return "—" if x is None else format(x, spec)
    lines = [f"Calibration of {device}, groups {', '.join(groups)}, suite seeds {s['first_seed']}–{s['last_seed']} "
             f"({s['seeds']}), modes {', '.join(s['modes'])}, α_family {s['alpha_family']:g}.", "",
             "| check | mode | α | n (least) | detectable TV | seeds failing | smallest p |", "|---|---|---|---|---|---|---|"]
    for c in sorted(s["statistical_cases"], key=lambda c: (c["group"], c["check"], c["mode"])):
        lo, hi = c["detectable_tv_min"], c["detectable_tv_max"]
        tv = ("not stated" if lo is None else fmt(lo) if f"{lo:.3g}" == f"{hi:.3g}" else f"{fmt(lo)}–{fmt(hi)}")
        lines.append(f"| {c['check']} | {c['mode']} | {fmt(c['alpha'])} | {fmt(c['n_min'], 'd')} | {tv} | "
                     f"{c['fails']}/{c['seeds']} | {fmt(c['smallest_p'])} |")
    lines += ["", verdict_line(s)]
    lines += [f"- FALSE FAIL {'(exact) ' if f['exact'] else ''}{f['check']} [{f['mode']}] at seed {f['seed']}: "
              f"{f['detail']} (repro: {f['repro']})" for f in s["false_fails"]]
    return "\n".join(lines)


def verdict_line(s: dict) -> str:
    ks = "; ".join(f"KS [{m}] of {k['p_values']} Cressie–Read p-values D = {k['ks_statistic']:.4f}, "
                   f"p = {k['ks_p_value']:.3g}" for m, k in s["ks"].items())
    return (f"{s['exact_false_fails']} exact false fails; {s['statistical_false_fails']} statistical false fails in "
            f"{s['seeds_with_a_statistical_false_fail']} of {s['seeds']} seeds (at most "
            f"{s['expected_seeds_with_a_statistical_false_fail_at_most']:.3g} expected; binomial "
            f"P = {s['false_fail_p']:.3g}, the run fails at <= {s['false_fail_level']:g})" + (f"; {ks}" if ks else ""))
