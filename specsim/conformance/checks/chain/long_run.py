"""L1-long: one device instance called thousands of times in one process, shapes, modes and parameters changing.

Kernels that degrade after N launches — a graph cache that replays a stale
shape, a workspace pool handed out twice, a buffer reused before its last
reader finished, a leaked stream — pass every group that makes a few dozen
calls. This group makes ``CALLS`` calls (``QUICK_CALLS`` with ``--quick``) to
the one device it is given (``SHAPES``): batch 1..300, K from 0 to 4 with
one call in eight up to ``max_k`` (at most 32), V from 2 to 32000 and one
call in 60 above it (``LARGE_VOCABS``, one request), greedy, temperature, top-k, top-p
and mixed batches, point proposals and ``draft_probs``, withdrawn drafts where
declared, float32 and float64 as declared. Every call's shape, parameters and
case seed are a function of the suite seed (``plan``), so a failure replays
with ``specsim conform --groups L1-long --seed N``.

How each call is judged depends on the noise the device declares:

* ``injected`` (``Capabilities.injected_noise``): SPEC §5.1 noise, every call
  compared with the reference token for token (``specsim.judge.compare``;
  SPEC §9's near-tie allowances, capped over all the calls of a check).
  A device that also draws its own randomness gets every fourth call without
  noise, judged as ``keyed`` or ``device-rng`` below.
* ``keyed`` (``rng="philox"``): no noise; the device's own Philox draws of
  SPEC §5.2, every call compared with the reference's keyed streams.
* ``device-rng`` (``rng="seeded"``): no law can be compared token for token,
  so each call is held to what is exact without the device's noise: target
  rows whose mass sits on 2-6 ids spread over the vocabulary (the last id
  among them every other row), so a token placed anywhere else is outside
  the support — an accepted draft of target probability 0, an emitted token
  outside its row's support (after top-k/top-p; a row whose cut is a near tie
  at the dtype's tolerance is held to its unfiltered support), a rejected
  point proposal emitted again — and greedy requests equal to the reference.
  And the RNG contract over time (SPEC §5.2, ``Capabilities.rng``: a seeded
  device is a deterministic function of seed and position per request): every
  tenth call replays an earlier call of the run, the same seeds and positions,
  and must give its tokens (``L1/long/device-rng/replay``).

Results: one check per noise mode and sampling mode (``L1/long/injected/top-k``,
``L1/long/device-rng/replay``), whose detail names the first call that went
wrong by its index in the run ("correct for its first 100 calls, then wrong at
call 101") and whose ``extra["scope"]`` states what it covered: ``{"mode",
"V", "K", "batch", "calls"}`` (largest V, K and batch of its calls).

Cost, measured on the torch CPU device at the default seed as the process's CPU time on one
thread (``OMP_NUM_THREADS=1``; ``time.process_time()`` around ``run_group("L1-long", load("torch"),
Context(quick=...))``): full (3000 calls) 20-22 s with injected noise, 21 s as a black box
(``BlackBox``, ``rng="seeded"``); quick (300 calls) 2.1 s and 3.2 s. The device's step and the
reference's share it; most calls are small (``SHAPES``), the rare large ones hold few requests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from devices.protocol import Noise, VerifyBatch
from reference.target import target_rows
from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import TOLERANCE, compare, output_problems, reference_step, waiver_cap
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.testing.seeds import case_seed

CALLS = 3000
QUICK_CALLS = 300
"""Calls of one run; quick still goes well past the first hundred (a device that degrades after 100
launches is caught by ``--quick`` too)."""

SHAPES: tuple[tuple[float, tuple[int, int], tuple[int, ...], int], ...] = (
    (0.60, (1, 4), (2, 16, 257, 1000), 4),
    (0.15, (5, 32), (2, 16, 257), 4),
    (0.03, (65, 300), (2, 16), 2),
    (0.10, (1, 2), (4096, 32000), 2),
    (0.12, (1, 4), (16, 257), 32),
)
"""The calls' shapes: (share of the calls, batch range, V choices, K cap). K is further capped by
``max_k`` and V by ``max_vocab_size``. Most calls are small: the group is about many calls, and a
CPU device's step grows with B × (K + 1) × V."""

LARGE_VOCABS = (50257, 131072, 262144)
LARGE_EVERY = 60
"""One call in ``LARGE_EVERY`` (``injected`` and ``device-rng`` calls) has one request, K <= 2 and a V of
``LARGE_VOCABS`` within ``max_vocab_size``. Keyed calls stay at V <= 32000: the keyed streams of one
request at V = 262144 cost the torch CPU device a second."""

REPLAY_EVERY = 10
"""Black box: one call in this many replays an earlier call of the run (its seeds and positions)."""

MODES = ("greedy", "temperature", "top-k", "top-p", "mixed")
"""Sampling modes: every request greedy, sampled at a temperature alone, with a top-k, with a top-p, or
a mix of them all."""


@dataclass(frozen=True)
class Planned:
    """One call of the run: its index (1-based: the device's ``index``-th call in this group), how it is
    judged (``noise``: ``injected``, ``keyed`` or ``device-rng``), its sampling ``mode``, shape, dtype,
    proposals and case seed; ``replay``: the index of the earlier call it repeats (black box), or 0."""

    index: int
    noise: str
    mode: str
    batch: int
    max_k: int
    vocab_size: int
    dtype: str
    point: bool
    withdrawn: bool
    seed: int
    replay: int = 0

    def describe(self) -> str:
        what = f"replay of call {self.replay}" if self.replay else f"{self.mode}"
        return (f"{what}, B={self.batch}, K<={self.max_k}, V={self.vocab_size}, {self.dtype}, "
                f"{'point proposals' if self.point else 'draft_probs'}{', withdrawn drafts' if self.withdrawn else ''}, "
                f"case seed {self.seed}")


def noise_modes(caps) -> tuple[str, ...]:
    """How this declaration's calls are judged (``()``: the device can be called in none)."""
    own = {"philox": ("keyed",), "seeded": ("device-rng",)}.get(caps.rng, ())
    return ("injected",) + own if caps.injected_noise else own


def _modes(caps) -> list[str]:
    declared = {"greedy": caps.greedy, "top-k": caps.top_k, "top-p": caps.top_p}
    modes = [m for m in MODES if declared.get(m, True)]
    return modes if (caps.greedy and caps.top_k and caps.top_p) else [m for m in modes if m != "mixed"]


def _dtypes(caps) -> list[str]:
    wide = [d for d in ("float32", "float64") if d in caps.dtypes]
    return wide or [caps.dtypes[0]]


def _proposals(caps) -> list[bool]:
    """``point`` values declared: False is ``draft_probs``."""
    return [p for p, declared in ((False, caps.draft_probs), (True, caps.point_proposals)) if declared]


def plan(caps, suite_seed: int, calls: int) -> list[Planned]:
    """The run's calls, a function of the suite seed and the declaration alone."""
    rng = np.random.default_rng(case_seed(suite_seed, "L1-long", "plan"))
    modes, dtypes, proposals = _modes(caps), _dtypes(caps), _proposals(caps)
    judged = noise_modes(caps)
    large = [v for v in LARGE_VOCABS if v <= caps.max_vocab_size]
    shares = np.array([share for share, *_ in SHAPES])
    out: list[Planned] = []
    for index in range(1, calls + 1):
        noise = judged[1] if len(judged) > 1 and index % 4 == 0 else judged[0]
        if noise == "device-rng" and index % REPLAY_EVERY == 0 and out:
            earlier = out[int(rng.integers(0, len(out)))]
            earlier = out[earlier.replay - 1] if earlier.replay else earlier
            out.append(replace(earlier, index=index, replay=earlier.index))
            continue
        _, (low, high), vocabs, k_cap = SHAPES[int(rng.choice(len(SHAPES), p=shares / shares.sum()))]
        vocabs = [v for v in vocabs if v <= caps.max_vocab_size] or [caps.max_vocab_size]
        V, B = vocabs[int(rng.integers(0, len(vocabs)))], int(rng.integers(low, high + 1))
        if large and index % LARGE_EVERY == 7 and noise != "keyed":   # 7: never a keyed call nor a replay
            V, B, k_cap = large[int(rng.integers(0, len(large)))], 1, 2
        cap = min(k_cap, caps.max_k)
        point = proposals[int(rng.integers(0, len(proposals)))]
        withdrawn = caps.withdrawn_drafts and not point and noise != "device-rng" and rng.random() < 0.2
        out.append(Planned(index, noise, modes[int(rng.integers(0, len(modes)))], B, cap, V,
                           dtypes[int(rng.integers(0, len(dtypes)))], point, bool(withdrawn),
                           case_seed(suite_seed, "L1-long", index)))
    return out


def _spec(p: Planned) -> BatchSpec:
    fractions = {"greedy": (1.0, 0.0, 0.0), "temperature": (0.0, 0.0, 0.0), "top-k": (0.0, 1.0, 0.0),
                 "top-p": (0.0, 0.0, 1.0), "mixed": (0.25, 0.25, 0.25)}[p.mode]
    return BatchSpec(batch=p.batch, max_k=p.max_k, vocab_size=p.vocab_size, dtype=p.dtype, draft_probs=not p.point,
                     greedy_fraction=fractions[0], top_k_fraction=fractions[1], top_p_fraction=fractions[2],
                     placeholder_fraction=0.0 if p.noise == "device-rng" else 0.05,
                     masked_fraction=0.1 if p.vocab_size > 2 else 0.0, draw="inverse-cdf",
                     withdrawn_fraction=0.25 if p.withdrawn else 0.0, top_k_below_vocab=p.vocab_size > 1)


def build(p: Planned) -> tuple[VerifyBatch, Noise | None]:
    """Call ``p``'s batch and noise (None unless ``injected``); black-box batches have sparse targets."""
    rng = np.random.default_rng(p.seed)
    batch = random_batch(rng, _spec(p))
    if p.noise == "device-rng":
        batch = _sparse(rng, batch)
    return batch, random_noise(rng, batch) if p.noise == "injected" else None


def _sparse(rng: np.random.Generator, batch: VerifyBatch) -> VerifyBatch:
    """``batch`` with every target row's mass on 2-6 ids spread over the vocabulary (the last id among
    them every other row), draft rows mostly on that support and partly off it, drafts redrawn from them
    (point proposals: from the support or anywhere): a token outside the support is an exact failure."""
    V, rows = batch.vocab_size, batch.target_logits.shape[0]
    logits = np.full((rows, V), -np.inf)
    for r in range(rows):
        ids = rng.choice(V, size=min(V, int(rng.integers(2, 7))), replace=False)
        if rng.random() < 0.5 and V - 1 not in ids:
            ids[0] = V - 1
        logits[r, ids] = rng.normal(0.0, 2.0, size=len(ids))
    request = np.repeat(np.arange(batch.batch_size), batch.num_draft_tokens)
    target_of_draft = np.arange(len(request)) + request
    support = np.isfinite(logits[target_of_draft])
    if batch.draft_probs is None:
        anywhere = rng.integers(0, V, size=len(request))
        on = np.array([rng.choice(np.flatnonzero(s)) for s in support], dtype=np.int64).reshape(-1)
        drafts, draft_probs = np.where(rng.random(len(request)) < 0.6, on, anywhere), None
    else:
        off = np.zeros((len(request), V))
        off[np.repeat(np.arange(len(request)), 3), rng.integers(0, V, size=3 * len(request))] = 1.0
        weights = np.where(support, np.exp(np.where(support, logits[target_of_draft], 0.0)), 0.0)
        rows_ = 0.6 * weights / weights.sum(axis=1, keepdims=True) + 0.4 * off / off.sum(axis=1, keepdims=True)
        draft_probs = rows_.astype(batch.draft_probs.dtype)
        draft_probs = draft_probs / draft_probs.sum(axis=1, keepdims=True, dtype=draft_probs.dtype)
        cdf = np.cumsum(rows_, axis=1)
        drafts = np.minimum((cdf < rng.random(len(cdf))[:, None] * cdf[:, -1:]).sum(axis=1), V - 1)
    return replace(batch, target_logits=logits.astype(batch.target_logits.dtype), draft_probs=draft_probs,
                   draft_token_ids=np.asarray(drafts, np.int64).reshape(-1), withdrawn=None)


def _outside_support(batch: VerifyBatch, got) -> str | None:
    """The first emitted token no draw of SPEC §3 can give for ``batch`` (sparse targets), or None.

    Greedy requests must equal the reference's argmax path; a sampled request's accepted drafts must
    have target probability > 0, its emitted token must lie in its row's support, and a rejected
    point proposal cannot be emitted again."""
    T, top_k, top_p = (np.asarray(a) for a in (batch.temperature, batch.top_k, batch.top_p))
    k, cu = batch.num_draft_tokens, batch.request_offsets()
    row_request = np.repeat(np.arange(batch.batch_size), k + 1)
    logits = np.asarray(batch.target_logits, np.float64)
    probs, cuts = target_rows(logits, np.where(T > 0, T, 1.0)[row_request], top_k[row_request], top_p[row_request])
    tolerance = TOLERANCE.get(batch.target_logits.dtype.name, 1e-4)
    near = (cuts["top_k"] < tolerance) | (cuts["top_p"] < tolerance)
    allowed = np.where(near[:, None], np.isfinite(logits), probs > 0)
    drafts, want = np.asarray(batch.draft_token_ids), None
    for i in range(batch.batch_size):
        emitted, n = got.emitted(i), int(got.num_accepted[i])
        if T[i] == 0:
            want = want or reference_step(batch, None)
            expected = want.output_token_ids[i, : want.num_accepted[i] + 1].tolist()
            if emitted != expected:
                return f"request {i} (greedy): expected {expected}, got {emitted}"
            continue
        base = int(cu[i]) + i
        for j, token in enumerate(emitted):
            if not allowed[base + j, token]:
                what = "accepted draft" if j < n else "emitted token"
                return (f"request {i} (T={T[i]:g}, top_k={top_k[i]}, top_p={top_p[i]:g}): {what} {token} at position "
                        f"{j} has target probability 0 (support {np.flatnonzero(allowed[base + j]).tolist()})")
        if batch.draft_probs is None and n < k[i] and emitted[n] == drafts[cu[i] + n]:
            return f"request {i}: the rejected point proposal {emitted[n]} at position {n} was emitted again"
    return None


@dataclass
class _Check:
    """One check's running state: its calls so far, the largest shapes, the first failure."""

    name: str
    noise: str
    calls: int = 0
    V: int = 0
    K: int = 0
    batch: int = 0
    decisions: int = 0
    waivers: int = 0
    failed: CheckResult | None = None
    wrong_at: Planned | None = None

    def saw(self, p: Planned, batch: VerifyBatch) -> None:
        self.calls += 1
        self.V, self.batch = max(self.V, batch.vocab_size), max(self.batch, batch.batch_size)
        self.K = max(self.K, int(np.max(batch.num_draft_tokens, initial=0)))

    def scope(self) -> dict:
        return {"mode": self.noise, "V": self.V, "K": self.K, "batch": self.batch, "calls": self.calls}

    def fail(self, p: Planned, status: str, why: str, seed_of_suite: int) -> None:
        self.wrong_at = p
        self.failed = CheckResult(self.name, "L1", status, f"({p.describe()}): {why} "
                                  f"[repro: specsim conform --groups L1-long --seed {seed_of_suite}]", seed=p.seed)

    def result(self, total: int, first_wrong: int) -> CheckResult:
        scope = {"scope": self.scope()}
        if self.failed is not None:
            p = self.wrong_at
            if self.failed.status == "not_supported":
                said = f"call {p.index} is outside the declaration "
            elif p.index == first_wrong:
                said = f"correct for its first {p.index - 1} calls, then wrong at call {p.index} "
            else:
                said = (f"correct in its {self.calls - 1} calls of this check before call {p.index}, then wrong at "
                        f"call {p.index} (the run's first wrong call was {first_wrong}) ")
            return replace(self.failed, detail=said + self.failed.detail, extra={**self.failed.extra, **scope})
        if self.waivers > waiver_cap(self.decisions):
            return CheckResult(self.name, "L1", "fail", f"{self.waivers} near-tie allowances over {self.calls} calls "
                               f"exceed the cap of {waiver_cap(self.decisions)} for {self.decisions} decisions (SPEC §9)",
                               extra={**scope, "decisions": self.decisions, "near_tie_allowances": self.waivers})
        said = {"injected": "agree with the reference token for token",
                "keyed": "agree with the reference's keyed Philox streams token for token",
                "device-rng": "emit only tokens inside their rows' supports, greedy requests the reference's"}
        detail = (f"{self.calls} calls of {total} in one process, largest B={self.batch}, K={self.K}, V={self.V}: "
                  + ("every replay gave the tokens of the call it repeats" if self.name.endswith("/replay")
                     else said[self.noise]))
        extra = {**scope, "decisions": self.decisions, "near_tie_allowances": self.waivers} if self.decisions else scope
        return CheckResult(self.name, "L1", "pass", detail, extra=extra)


def _tokens(out) -> list[list[int]]:
    return [out.emitted(i) for i in range(len(np.asarray(out.num_accepted)))]


def long_run_group(device, ctx) -> list[CheckResult]:
    """``CALLS`` calls (``QUICK_CALLS`` quick) of ``device`` in this process, judged as the module says."""
    caps = device.capabilities
    if not noise_modes(caps):
        return [CheckResult("L1/long", "L1", "not_supported",
                            "device takes no injected noise and draws no randomness of its own (rng='none')")]
    calls = plan(caps, ctx.seed, QUICK_CALLS if ctx.quick else CALLS)
    checks: dict[str, _Check] = {}
    kept: dict[int, list[list[int]]] = {}          # black box: tokens of the calls a replay may repeat
    for p in calls:
        name = f"L1/long/{p.noise}/{'replay' if p.replay else p.mode}"
        check = checks.setdefault(name, _Check(name, p.noise))
        if check.failed is not None:
            continue
        batch, noise = build(p)
        got, problem = call(name, "L1", lambda: ask(device, batch, noise), caps)
        check.saw(p, batch)
        if problem is not None:
            check.fail(p, problem.status, problem.detail, ctx.seed)
            continue
        _judge(check, p, batch, noise, got, kept, ctx.seed)
    first_wrong = min((c.wrong_at.index for c in checks.values()
                       if c.wrong_at is not None and c.failed.status != "not_supported"), default=0)
    order = [f"L1/long/{n}/{m}" for n in ("injected", "keyed", "device-rng") for m in MODES + ("replay",)]
    return [checks[name].result(len(calls), first_wrong) for name in order if name in checks]


def _judge(check: _Check, p: Planned, batch, noise, got, kept: dict, suite_seed: int) -> None:
    if p.noise in ("injected", "keyed"):
        cmp = compare(batch, got, reference_step(batch, noise), repro=f" [call {p.index}, case seed {p.seed}]")
        check.decisions, check.waivers = check.decisions + cmp.decisions, check.waivers + cmp.waivers
        if not cmp.ok:
            check.fail(p, cmp.status, cmp.summary(limit=3), suite_seed)
        return
    broken = output_problems(batch, got)
    if broken:
        check.fail(p, "fail", "malformed output (SPEC §7): " + "; ".join(broken), suite_seed)
        return
    if p.replay:
        before, now = kept.get(p.replay), _tokens(got)
        if before is not None and before != now:
            i = next(i for i, (a, b) in enumerate(zip(before, now)) if a != b)
            check.fail(p, "fail", f"same seeds and positions as call {p.replay}, different tokens: request {i} "
                       f"gave {before[i]} then {now[i]} (SPEC §5.2: a seeded device is a function of seed and position)",
                       suite_seed)
        return
    kept[p.index] = _tokens(got)
    wrong = _outside_support(batch, got)
    if wrong:
        check.fail(p, "fail", wrong, suite_seed)


__all__ = ["CALLS", "QUICK_CALLS", "Planned", "build", "long_run_group", "noise_modes", "plan"]
