"""Layer L1 at volume: 10⁵ injected-noise requests, every decision held to the exact reference (SPEC §9).

The L1 cases hold a few hundred requests: too few to see a device that
computes in lower precision than it declares (bf16 or fp16 intermediates
behind a float32 declaration), whose rounding flips one decision in a few
hundred or thousand. Here ``VOLUME_REQUESTS`` random requests (ragged K ≤ 4,
``V = 64``, greedy, top-k, top-p and padding placeholders (SPEC §4) mixed as declared, in the
device's float32 if it declares it) run in chunks of ``CHUNK``; every
differing request is explained or not by near-tie allowances (SPEC §9),
and the check counts

* ``decisions``: decisions on the reference's paths;
* ``within``: decisions the device flipped within the tolerance (near-tie allowances);
* ``beyond``: requests contradicting a decision *beyond* it, each with the
  margin of its first contradicted decision (``by_margin``: a decade
  histogram; a precision defect sits just past the tolerance, a logic bug
  far from any tie);
* ``tv_bound``: a one-sided Clopper–Pearson upper bound, at ``CONFIDENCE``,
  on the probability that the device's output differs from the reference's
  for a request of this mix. Device and reference share the noise (a
  coupling), so the TV between their output laws is at most that probability.

**Verdict: strict.** Any decision contradicted beyond the tolerance fails
(lower precision than declared is a failure, not a separate status: the
declaration is what SPEC §9's tolerance trusts), and so do near-tie allowances
over ``waiver_cap(decisions)``. A request the reference's own exact ladder
explains with no flip is a harness ``error``. A correct float32 device shows
none of these.

**Size.** The first call (``PROBE`` requests) is the device's warm-up (a
kernel compiles on its first call); the second measures its rate, and the
default run goes to ``VOLUME_REQUESTS`` if that fits ``DEVICE_BUDGET_S``
seconds of device time, else to as many requests as fit, and says so. For
the full figure on a slow device call ``volume_check(device, requests=...,
budget_s=None)`` directly.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

from specsim.conformance.core.calls import ask, call, missing
from specsim.conformance.core.results import CheckResult
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.judge.compare import TOLERANCE, compare, reference_step, waiver_cap
from specsim.testing.seeds import case_seed

VOLUME_REQUESTS = 100_000
CHUNK = 4096
PROBE = 512
"""The first call's size: it measures the device's rate before the budget rule decides the volume."""
DEVICE_BUDGET_S = 240.0
"""Device seconds the default run may spend; the torch device on one CPU core needs about 5. A device
too slow for the full volume in this time is checked on fewer requests, and the check says so in
``extra["volume"]`` (``requested``, ``reached``): the verdict of such a run is PARTIAL (SPEC §10),
never PASS, because its stated power (``tv_bound``) is weaker than the suite's."""
CONFIDENCE = 0.999
QUICK_REQUESTS = 2 * CHUNK
SPEC = BatchSpec(batch=CHUNK, max_k=4, vocab_size=64, draw="inverse-cdf")


def tv_bound(differing: int, requests: int, confidence: float = CONFIDENCE) -> float:
    """One-sided Clopper–Pearson upper bound on P(output differs) from ``differing`` of ``requests``.

    >>> round(tv_bound(0, 100_000), 7)      # no difference in 10⁵ requests: TV ≤ 6.9e-5 at 99.9 %
    6.91e-05
    """
    if differing >= requests:
        return 1.0
    return float(stats.beta.ppf(confidence, differing + 1, requests - differing))


@dataclass
class Tally:
    """Counts over the chunks; ``by_margin`` maps a margin decade (``"1e-3"``, ``"inf"``) to a count."""

    requests: int = 0
    decisions: int = 0
    near_ties: int = 0
    within: int = 0
    beyond: int = 0
    differing_requests: int = 0
    errors: list = field(default_factory=list)
    by_margin: dict = field(default_factory=dict)
    examples: list = field(default_factory=list)
    device_s: float = 0.0
    reference_s: float = 0.0

    def add(self, batch, cmp, seconds: float, reference_seconds: float) -> None:
        self.requests += batch.batch_size
        self.decisions, self.near_ties = self.decisions + cmp.decisions, self.near_ties + cmp.near_ties
        self.within += cmp.waivers
        self.beyond += len(cmp.mismatches) + len(cmp.structure)
        self.differing_requests += len(cmp.waived) + len(cmp.mismatches) + len(cmp.errors)
        self.errors += cmp.errors
        for flip in cmp.beyond:
            decade = ("inf" if not math.isfinite(flip.margin) else "tie" if flip.margin == 0
                      else f"1e{math.floor(math.log10(flip.margin))}")
            self.by_margin[decade] = self.by_margin.get(decade, 0) + 1
        self.examples += (cmp.structure + cmp.mismatches)[: max(0, 3 - len(self.examples))]
        self.device_s += seconds
        self.reference_s += reference_seconds

    def per_million(self, count: int) -> float:
        return 1e6 * count / max(self.decisions, 1)

    def extra(self) -> dict:
        return {"requests": self.requests, "decisions": self.decisions, "near_ties": self.near_ties,
                "near_tie_allowances": self.within, "beyond": self.beyond,
                "within_per_million": round(self.per_million(self.within), 3),
                "beyond_per_million": round(self.per_million(self.beyond), 3),
                "differing_requests": self.differing_requests,
                "tv_bound": tv_bound(self.differing_requests, self.requests), "confidence": CONFIDENCE,
                "by_margin": dict(sorted(self.by_margin.items())), "device_seconds": round(self.device_s, 3),
                "reference_seconds": round(self.reference_s, 3)}


def volume_spec(caps, dtype: str, chunk: int, point: bool) -> BatchSpec:
    """The chunk's mix: the modes the device declares, point proposals on every other chunk."""
    return replace(SPEC, batch=chunk, dtype=dtype, draft_probs=not point, max_k=min(SPEC.max_k, caps.max_k),
                   greedy_fraction=SPEC.greedy_fraction if caps.greedy else 0.0,
                   top_k_fraction=SPEC.top_k_fraction if caps.top_k else 0.0,
                   top_p_fraction=SPEC.top_p_fraction if caps.top_p else 0.0)


def volume_check(device, *, seed: int, requests: int = VOLUME_REQUESTS, budget_s: float | None = DEVICE_BUDGET_S,
                 dtype: str | None = None, name: str = "L1/volume", place=None, note: str = "",
                 chunk: int = CHUNK) -> CheckResult:
    """Run up to ``requests`` injected-noise requests in chunks (see the module docstring).

    ``place``: None, or ``(rng, batch, noise, tolerance) -> noise`` moving the random noise next to the decisions
    it drives (``checks.chain.placed.placed_noise``); ``note`` then says how, in the result's detail. ``chunk``:
    requests per call after the probe (draft probabilities and point proposals alternate by chunk)."""
    caps = device.capabilities
    dtype = dtype or ("float32" if "float32" in caps.dtypes else caps.dtypes[0])
    schemes = [point for point, mode in ((False, "draft_probs"), (True, "point_proposals")) if getattr(caps, mode)]
    why = missing(caps, (), vocab_size=SPEC.vocab_size, dtype=dtype) or (
        None if caps.injected_noise else "device does not take injected noise") or (
        None if schemes else "device declares neither draft_probs nor point_proposals")
    check_seed = case_seed(seed, name, dtype)
    if why:
        return CheckResult(name, "L1", "not_supported", why, seed=check_seed)
    tally, target, calls = Tally(), requests, 0
    rng = np.random.default_rng(check_seed)
    while tally.requests < target:
        size = min(PROBE if tally.requests == 0 else chunk, target - tally.requests)
        batch = random_batch(rng, volume_spec(caps, dtype, size, schemes[(tally.requests // chunk) % len(schemes)]))
        noise = random_noise(rng, batch)
        if place is not None:
            noise = place(rng, batch, noise, TOLERANCE[dtype])
        start = time.perf_counter()
        got, problem = call(name, "L1", lambda: ask(device, batch, noise), caps)
        if problem:
            return problem
        device_s, start = time.perf_counter() - start, time.perf_counter()
        cmp = compare(batch, got, reference_step(batch, noise), repro=f" [{name}, seed {check_seed}]")
        tally.add(batch, cmp, device_s, time.perf_counter() - start)
        calls += 1
        # The rate is the second call's: the first pays what a device pays once (a kernel's compilation, its
        # allocations), which the rest of the run does not repeat.
        if calls == 2 and budget_s is not None:
            rate = batch.batch_size / max(device_s, 1e-9)
            projected = tally.device_s + (requests - tally.requests) / rate
            if projected > budget_s:
                target = max(tally.requests, int(tally.requests + (budget_s - tally.device_s) * rate))
                note += (f"; volume reduced to {target} requests: the device ran {rate:,.0f} requests/s after its "
                         f"first call, {requests} would take {projected:.0f} s > {budget_s:g} s")
    return volume_verdict(name, tally, dtype, check_seed, note, requested=requests)


LOGIC_MARGIN = 0.1
"""A contradicted decision this far (in probability) or further from its tie is logic, not rounding: a 16-bit
intermediate behind a float32 declaration moves a decision by a few 2⁻⁸ at most (margins up to about 0.02-0.05);
a wrong row, index or formula flips decisions anywhere."""


def _diagnosis(by_margin: dict) -> str:
    """Precision or logic, from where the contradicted decisions sit (margin decades, ``Tally.by_margin``).

    >>> _diagnosis({"1e-1": 613, "1e-6": 145})
    '613 of 758 contradicted decisions sit 0.1 or more from their tie, a logic error (a wrong row, index, formula or order); the other 145 sit close to theirs, as when the device computes below its declared precision'
    >>> _diagnosis({"1e-3": 9})
    'every contradicted decision sits within 0.1 of its tie: the device computes below its declared precision'
    """
    def far(decade: str) -> bool:
        return decade == "inf" or (decade.startswith("1e") and 10.0 ** int(decade[2:]) >= LOGIC_MARGIN)
    total = sum(by_margin.values())
    logic = sum(n for d, n in by_margin.items() if far(d))
    if logic == 0:
        return (f"every contradicted decision sits within {LOGIC_MARGIN:g} of its tie: the device computes below its "
                "declared precision")
    if logic == total:
        return (f"every contradicted decision sits {LOGIC_MARGIN:g} or more from its tie: a logic error (a wrong row, "
                "index, formula or order), not precision")
    return (f"{logic} of {total} contradicted decisions sit {LOGIC_MARGIN:g} or more from their tie, a logic error (a "
            f"wrong row, index, formula or order); the other {total - logic} sit close to theirs, as when the device "
            "computes below its declared precision")


def volume_verdict(name: str, tally: Tally, dtype: str, seed: int, note: str, requested: int) -> CheckResult:
    extra, cap = tally.extra(), waiver_cap(tally.decisions)
    extra["volume"] = {"requested": int(requested), "reached": int(tally.requests)}
    figure = (f"{tally.requests} requests, {tally.decisions} decisions ({tally.near_ties} near-ties below "
              f"{TOLERANCE[dtype]:g}): {extra['beyond_per_million']:g} per million differ beyond the {dtype} "
              f"margin, {extra['within_per_million']:g} within it (near-tie allowances, cap {cap}); "
              f"TV ≤ {extra['tv_bound']:.2g} at {CONFIDENCE:.1%} (device {tally.device_s:.1f} s, reference and comparison "
              f"{tally.reference_s:.1f} s){note}")
    if tally.errors:
        return CheckResult(name, "L1", "error", f"{figure}. {len(tally.errors)} request(s) the harness cannot "
                           "judge\n" + "\n".join(tally.errors[:3]), seed=seed, n=tally.requests, extra=extra)
    if tally.beyond:
        return CheckResult(name, "L1", "fail", f"{figure}. {tally.beyond} request(s) contradict a decision beyond "
                           f"the {dtype} margin (first contradicted margins by decade {extra['by_margin']}): "
                           f"{_diagnosis(tally.by_margin)}\n" + "\n".join(tally.examples),
                           seed=seed, n=tally.requests, extra=extra)
    if tally.within > cap:
        return CheckResult(name, "L1", "fail", f"{figure}. {tally.within} near-tie allowances exceed the cap of "
                           f"{cap} (SPEC §9): near-ties flip this often only below the declared precision", seed=seed,
                           n=tally.requests, extra=extra)
    return CheckResult(name, "L1", "pass", figure, seed=seed, n=tally.requests, extra=extra)


def volume_group(device, ctx) -> list[CheckResult]:
    """The volume check at the default size (``QUICK_REQUESTS`` with ``--quick``)."""
    return [volume_check(device, seed=ctx.seed, requests=QUICK_REQUESTS if ctx.quick else VOLUME_REQUESTS)]
