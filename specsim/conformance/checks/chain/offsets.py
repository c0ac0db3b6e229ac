"""L1-offsets: calls whose rows cross 2^31 and 2^32 elements, judged past the boundary.

A kernel that forms a row's offset as ``row * V`` in 32-bit integers reads the wrong memory once
``row * V`` passes 2^31 (signed) or 2^32 (unsigned): vLLM 0.33.0's V1 rejection kernels index
``target_probs`` and ``draft_probs`` by ``token_idx * vocab_size`` with ``token_idx`` from the int32
``cu_num_draft_tokens``, so past ``num_tokens · V ≥ 2^31`` (about 16.7k rows at V = 128256) every
request reads another row. No other group's call reaches that size. Each check here makes one call
(``Crossing``) whose rows cross one boundary in one index space:

* ``target-rows``: the rows of ``target_logits`` (``num_tokens + batch`` rows);
* ``draft-rows``: the rows of the draft tokens (``num_tokens`` rows): ``draft_probs`` where the device
  declares them (point proposals otherwise), and the target rows of drafts as an engine that keeps
  bonus rows apart indexes them.

The call holds ``bulk`` requests before the boundary, then the request whose rows straddle it and
``FOLLOW`` requests after it (``Layout``); with injected noise every other judged request's coins lie below
0.05, so its walk goes deep and a draft row read from the wrong place shows as a rejection. The bulk is cheap to make and never judged: every bulk row
is one-hot on id 0 (target and draft), its drafts are 0. The judged requests' rows put their mass on a
few ids (2-6, never 0, spread over the vocabulary), their drafts mostly inside that support, and
their modes mix sampled, greedy and top-k requests. A kernel that reads a bulk row in place of a
judged one emits or accepts id 0, which no judged row allows. Only the judged requests are held to
the reference, from a copy of their rows taken before the call (``select_requests``): the
reference's cost is theirs, not the call's.

How they are judged depends on the noise the device declares (one mode per call, the first of):
``injected`` (given noise, token for token against the reference, SPEC §9's near-tie allowances),
``keyed`` (``rng="philox"``: the reference's keyed streams, token for token), ``device-rng``
(``rng="seeded"``: every emitted token and accepted draft inside its row's support, greedy requests
equal to the reference).

Memory: the call at 2^31 elements needs ≥ 4 GiB (16-bit logits) and ≥ 8 GiB (float32); the group
runs a boundary only when its call fits the run's per-call budget (``Context.call_bytes``:
``specsim conform --call-bytes SIZE``, 1 GiB by default). Otherwise that check is ``not_supported``,
naming the bytes needed and the option, and the verdict's scope lists the boundaries not checked
(``extra["unchecked"]``). GPU vendors run the group with ``--call-bytes 40GiB`` (docs/vendor-guide.md).

The boundaries, the vocabulary and the draft length are parameters of ``crossing_checks``, so the
same code runs at a small boundary (2^16 elements) in the tests.

Results: ``L1/offsets/<mode>/<space>-2^<n>`` (``L1/offsets/injected/draft-rows-2^31``); each result's
``extra["scope"]`` is ``{"mode", "V", "K", "batch", "elements"}`` and ``extra["crossing"]`` the layout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from devices.protocol import Noise, VerifyBatch, VerifyOutput
from specsim.conformance.core.calls import ask, call
from specsim.conformance.core.context import DEFAULT_CALL_BYTES
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import compare, output_problems, reference_step
from specsim.testing.batches import select_requests
from specsim.testing.seeds import case_seed

BOUNDARIES = (2**31, 2**32)
"""Element counts a call crosses: int32 offsets wrap past the first, uint32 ones past the second."""
VOCAB = 128_256
"""The vocabulary of the calls (Llama 3's; not a divisor of either boundary, so a row straddles it),
capped by ``max_vocab_size``."""
K = 8
"""Drafts of every request (capped by ``max_k``): more drafts per request, fewer ``[batch, V]``
exponentials."""
FOLLOW = 4
"""Judged requests after the one that straddles the boundary."""
SPACES = ("target-rows", "draft-rows")
"""The index spaces a call crosses: ``target_logits``' rows, or the draft tokens' rows."""
MODES = ("sampled", "greedy", "top-k", "sampled", "sampled")
"""The judged requests' modes in turn (greedy and top-k where declared, else sampled)."""


@dataclass(frozen=True)
class Crossing:
    """One call: ``elements`` (the boundary), the index ``space`` crossing it, its ``vocab`` and ``k``
    (drafts per request), logits ``dtype``, whether it sends ``draft_probs``, and its noise ``mode``."""

    elements: int
    space: str
    vocab: int
    k: int
    dtype: str
    draft_probs: bool
    mode: str
    greedy: bool = True
    top_k: bool = True

    @property
    def name(self) -> str:
        power = self.elements.bit_length() - 1
        size = f"2^{power}" if self.elements == 1 << power else str(self.elements)
        return f"L1/offsets/{self.mode}/{self.space}-{size}"

    @property
    def rows_per_request(self) -> int:
        """Rows a request holds in this crossing's index space."""
        return self.k + 1 if self.space == "target-rows" else self.k

    def layout(self) -> "Layout":
        """The requests: the boundary's element ``elements`` lies in row ``elements // vocab`` of the space."""
        straddling = (self.elements // self.vocab) // self.rows_per_request
        return Layout(bulk=straddling, judged=FOLLOW + 1)

    def call_bytes(self) -> int:
        """The bytes of the call's arrays: logits, draft rows, exponentials (``injected``)."""
        batch = self.layout().batch
        logits = batch * (self.k + 1) * self.vocab * np.dtype(_numpy_dtype(self.dtype)).itemsize
        drafts = batch * self.k * self.vocab * np.dtype(_draft_dtype(self.dtype)).itemsize if self.draft_probs else 0
        exponentials = batch * self.vocab * 8 if self.mode == "injected" else 0
        return int(logits + drafts + exponentials)


@dataclass(frozen=True)
class Layout:
    """``bulk`` requests before the boundary, then ``judged`` requests: the straddling one and those after."""

    bulk: int
    judged: int

    @property
    def batch(self) -> int:
        return self.bulk + self.judged

    def judged_requests(self) -> np.ndarray:
        return np.arange(self.bulk, self.batch)


def noise_mode(caps) -> str:
    """The one noise mode a crossing is judged in: ``injected``, else ``keyed``, else ``device-rng``."""
    if caps.injected_noise:
        return "injected"
    return "keyed" if caps.rng == "philox" else "device-rng"


def logits_dtype(caps) -> str:
    """The narrowest declared logits dtype: a 16-bit one halves the call's bulk."""
    return next(d for d in ("float16", "bfloat16", "float32", "float64") if d in caps.dtypes)


def crossings(caps, boundaries=BOUNDARIES, vocab: int = VOCAB, k: int = K) -> list[Crossing]:
    """Every call of the group for this declaration: each boundary in each space."""
    V, K_ = min(vocab, caps.max_vocab_size), min(k, caps.max_k)
    mode, dtype = noise_mode(caps), logits_dtype(caps)
    def sends_draft_probs(space: str) -> bool:   # target rows: point proposals where declared (fewer bytes)
        return caps.draft_probs and (space == "draft-rows" or not caps.point_proposals)
    return [Crossing(elements, space, V, K_, dtype, sends_draft_probs(space), mode, caps.greedy, caps.top_k)
            for elements in boundaries for space in SPACES]


def _numpy_dtype(dtype: str):
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return np.dtype(dtype)


def _draft_dtype(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


# --------------------------------------------------------------------------- building one call

def _support(rng: np.random.Generator, V: int, draft: int | None) -> np.ndarray:
    """2-6 ids of a judged row, never 0 (the bulk's id), the last id in about half the rows, ``draft``
    among them when given."""
    ids = set(int(x) for x in rng.integers(1, V, size=int(rng.integers(2, 7))))
    if rng.random() < 0.5:
        ids.add(V - 1)
    if draft is not None:
        ids.add(draft)
    return np.array(sorted(ids), np.int64)


def _judged_rows(rng: np.random.Generator, c: Crossing, batch: dict, request: int) -> None:
    """Fill ``request``'s rows of ``batch`` (the arrays, written in place): the first draft inside its target
    row's support, the others in about four positions of five; logits and draft rows on a few ids."""
    V, k = c.vocab, c.k
    first_target, first_draft = request * (k + 1), request * k
    for j in range(k + 1):
        draft = int(rng.integers(1, V)) if j < k else None
        inside = j == 0 or rng.random() < 0.8   # the first draft always: a steered request accepts it
        ids = _support(rng, V, draft if j < k and inside else None)
        z = np.full(V, -np.inf)
        z[ids] = rng.normal(0.0, 2.0, len(ids))
        if draft is not None and np.isfinite(z[draft]):
            z[draft] += 2.0   # accepted more often than not: the walk goes down the request's rows
        batch["target"][first_target + j] = z.astype(batch["target"].dtype)
        if j < k:
            batch["drafts"][first_draft + j] = draft
            if batch["draft_probs"] is not None:
                row = np.zeros(V)
                row[draft] = 0.6   # the rest of the draft row on ids the target may not allow: rejections too
                row[_support(rng, V, None)] += 0.4
                batch["draft_probs"][first_draft + j] = row / row.sum()


def build(c: Crossing, seed: int) -> tuple[VerifyBatch, Noise | None]:
    """The crossing's call: bulk rows one-hot on id 0, the judged requests' rows drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    lay, V, k = c.layout(), c.vocab, c.k
    B = lay.batch
    target = np.empty((B * (k + 1), V), _numpy_dtype(c.dtype))
    target[:] = -np.inf
    target[:, 0] = 0.0
    draft_probs = None
    if c.draft_probs:
        draft_probs = np.zeros((B * k, V), _draft_dtype(c.dtype))
        draft_probs[:, 0] = 1.0
    arrays = {"target": target, "draft_probs": draft_probs, "drafts": np.zeros(B * k, np.int64)}
    temperature, top_k = np.ones(B), np.zeros(B, np.int64)
    for n, i in enumerate(lay.judged_requests()):
        _judged_rows(rng, c, arrays, int(i))
        mode = MODES[n % len(MODES)]
        temperature[i] = 0.0 if mode == "greedy" and c.greedy else 1.0
        top_k[i] = 2 if mode == "top-k" and c.top_k else 0
    batch = VerifyBatch(np.full(B, k, np.int64), arrays["drafts"], draft_probs, target, temperature, top_k,
                        np.ones(B), seeds=np.arange(1, B + 1, dtype=np.uint64) * np.uint64(0x9E3779B1),
                        positions=np.full(B, 7, np.int64))
    if c.mode != "injected":
        return batch, None
    exponentials = np.ones((B, V))
    judged = lay.judged_requests()
    exponentials[judged] = rng.exponential(size=(len(judged), V)) + 1e-300
    uniforms = np.full(B * k, 0.5)
    coins = rng.random((len(judged), k))
    coins[::2] *= 0.05   # every other request steered deep: each draft a coin can accept is accepted, so a
    uniforms[judged[0] * k:] = coins.reshape(-1)   # draft row read from the wrong place shows as a rejection
    return batch, Noise(uniforms, exponentials)


# --------------------------------------------------------------------------- judging the requests past it

def _outside_support(sub: VerifyBatch, got: VerifyOutput, want) -> str | None:
    """The first token no draw of SPEC §3 can give for ``sub`` (rows on a few ids), or None: a sampled
    request's emitted tokens lie in the finite ids of their rows; a greedy request equals the reference."""
    logits = np.asarray(sub.target_logits, np.float64)
    cu = sub.request_offsets()
    for i in range(sub.batch_size):
        emitted, base = got.emitted(i), int(cu[i]) + i
        if sub.temperature[i] == 0:
            expected = want.output_token_ids[i, : want.num_accepted[i] + 1].tolist()
            if emitted != expected:
                return f"request {i} (greedy): expected {expected}, got {emitted}"
            continue
        for j, token in enumerate(emitted):
            if not np.isfinite(logits[base + j, token]):
                what = "accepted draft" if j < int(got.num_accepted[i]) else "emitted token"
                return (f"request {i}: {what} {token} at position {j} has target probability 0 (support "
                        f"{np.flatnonzero(np.isfinite(logits[base + j])).tolist()})")
    return None


def _part(got: VerifyOutput, requests: np.ndarray, width: int) -> VerifyOutput:
    out = np.asarray(got.output_token_ids)
    return VerifyOutput(out[requests][:, :width], np.asarray(got.num_accepted)[requests])


def _where(c: Crossing) -> str:
    lay = c.layout()
    return (f"{lay.batch} requests of K={c.k} at V={c.vocab}, {c.dtype} logits"
            f"{', draft_probs' if c.draft_probs else ', point proposals'}; the {c.space} cross {c.elements} elements "
            f"in request {lay.bulk}, requests {lay.bulk}..{lay.batch - 1} judged; request i below is request "
            f"{lay.bulk} + i of the call")


def judge_crossing(device, c: Crossing, seed: int) -> CheckResult:
    """One crossing's call, its judged requests held to the reference (token for token, or their support)."""
    batch, noise = build(c, seed)
    requests = c.layout().judged_requests()
    sub, sub_noise = select_requests(batch, requests, noise)   # copies, taken before the device sees the call
    got, problem = call(c.name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    del batch, noise
    if problem is not None:
        problem.detail = f"({_where(c)}): {problem.detail}"
        return _scoped(problem, c)
    broken = output_problems(sub, _part(got, requests, sub.max_k + 1))
    want = reference_step(sub, sub_noise)
    if broken:
        return _scoped(CheckResult(c.name, "L1", "fail", f"({_where(c)}): malformed output (SPEC §7): "
                                   + "; ".join(broken), seed=seed), c)
    part = _part(got, requests, sub.max_k + 1)
    if c.mode in ("injected", "keyed"):
        cmp = compare(sub, part, want, repro=f" [{c.name}, seed {seed}]")
        detail = (f"({_where(c)}): the requests past the boundary differ from the reference: {cmp.summary(limit=3)}"
                  if not cmp.ok else f"{len(requests)} requests past the boundary agree ({_where(c)})")
        return _scoped(CheckResult(c.name, "L1", cmp.status, detail, seed=seed, extra=cmp.extra()), c)
    wrong = _outside_support(sub, part, want)
    if wrong:
        return _scoped(CheckResult(c.name, "L1", "fail", f"({_where(c)}): {wrong} (a row read from the wrong offset?)",
                                   seed=seed), c)
    return _scoped(CheckResult(c.name, "L1", "pass", f"{len(requests)} requests past the boundary inside their "
                               f"rows' support, greedy ones equal to the reference ({_where(c)})", seed=seed), c)


def _scoped(result: CheckResult, c: Crossing) -> CheckResult:
    lay = c.layout()
    result.extra = dict(result.extra or {}) | {
        "scope": {"mode": c.mode, "V": c.vocab, "K": c.k, "batch": lay.batch, "elements": c.elements},
        "crossing": {"space": c.space, "elements": c.elements, "dtype": c.dtype, "draft_probs": c.draft_probs,
                     "bulk": lay.bulk, "judged": lay.judged, "bytes": c.call_bytes()}}
    return result


def too_large(c: Crossing, budget: int) -> CheckResult:
    """A crossing whose call does not fit ``budget`` bytes: ``not_supported``, with the bytes and the option."""
    power = c.elements.bit_length() - 1
    result = CheckResult(c.name, "L1", "not_supported",
                         f"crossing 2^{power} elements ({c.space}) needs {_gib(c.call_bytes())} in one call; this run "
                         f"allows {_gib(budget)} per call: --call-bytes")
    result.extra = {"unchecked": {"space": c.space, "elements": c.elements, "bytes": c.call_bytes(),
                                  "budget": budget}}
    return result


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


def crossing_checks(device, seed: int, budget: int, boundaries=BOUNDARIES, vocab: int = VOCAB,
                    k: int = K, only: str | None = None) -> list[CheckResult]:
    """Every crossing of ``boundaries`` (element counts) at ``vocab`` and ``k`` for ``device`` (``only``: the one
    so named): judged where its call fits ``budget`` bytes, else ``not_supported`` (``too_large``)."""
    out = []
    for c in crossings(device.capabilities, boundaries, vocab, k):
        if only is not None and c.name != only:
            continue
        if c.call_bytes() > budget:
            out.append(too_large(c, budget))
            continue
        out.append(judge_crossing(device, c, case_seed(seed, c.name)))
    return out


def offsets_group(device, ctx, only: str | None = None) -> list[CheckResult]:
    """L1-offsets: ``BOUNDARIES`` at ``VOCAB`` within the run's per-call budget (``ctx.call_bytes``); ``only``: the
    one check so named (``specsim replay``)."""
    caps = device.capabilities
    if caps.max_k < 1:
        return [CheckResult("L1/offsets", "L1", "not_supported", "declared max_k = 0: no draft rows to cross")]
    return crossing_checks(device, ctx.seed, getattr(ctx, "call_bytes", DEFAULT_CALL_BYTES), only=only)


def _power(text: str) -> int:
    """``"2^31"`` or ``"2147483648"`` as an int."""
    base, caret, exponent = text.partition("^")
    return int(base) ** int(exponent) if caret else int(text)


def main(argv=None) -> int:
    """``python -m specsim.conformance.checks.chain.offsets --device triton --seeds 0-19 --call-bytes 6GiB
    [--black-box] [--boundaries 2^31,2^32] [--vocab 128256] [--only NAME]``: the group's checks at each seed, one
    line each, and their counts; exit 1 where a check did not pass (a correct device passes them all). ``--only``
    runs the one crossing so named, so that each crossing can have a process of its own: a kernel that reads
    outside its tensors may leave the process's CUDA context unusable for the crossings after it."""
    import argparse
    import time

    from devices.registry import load
    from specsim.conformance.core.black_box import BlackBox
    from specsim.conformance.core.context import parse_bytes
    p = argparse.ArgumentParser(prog="python -m specsim.conformance.checks.chain.offsets", description=main.__doc__)
    p.add_argument("--device", default="torch")
    p.add_argument("--seeds", default="0-0", help="A-B, inclusive (default 0-0)")
    p.add_argument("--call-bytes", default="1GiB")
    p.add_argument("--black-box", action="store_true", help="the device as BlackBox: no injected noise, its own draws")
    p.add_argument("--boundaries", default=",".join(f"2^{b.bit_length() - 1}" for b in BOUNDARIES))
    p.add_argument("--vocab", type=int, default=VOCAB)
    p.add_argument("--only", default=None, metavar="NAME",
                   help="the one check so named, e.g. L1/offsets/injected/draft-rows-2^31")
    args = p.parse_args(argv)
    first, _, last = args.seeds.partition("-")
    device = load(args.device)
    device = BlackBox(device) if args.black_box else device
    boundaries = tuple(_power(b) for b in args.boundaries.split(","))
    counts: dict[str, int] = {}
    for seed in range(int(first), int(last or first) + 1):
        started = time.perf_counter()
        found = crossing_checks(device, seed, parse_bytes(args.call_bytes), boundaries, args.vocab, only=args.only)
        if not found:
            p.error(f"--only {args.only!r}: no crossing of {device.name} at these boundaries has that name "
                    f"(they are: {', '.join(c.name for c in crossings(device.capabilities, boundaries, args.vocab))})")
        for r in found:
            counts[r.status] = counts.get(r.status, 0) + 1
            print(f"seed {seed:3}  {r.status:13} {r.name}: {r.detail.splitlines()[0][:240]}")
        print(f"seed {seed:3}  {time.perf_counter() - started:.1f} s", flush=True)
    print(f"{device.name}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    return 0 if set(counts) <= {"pass"} else 1


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["BOUNDARIES", "VOCAB", "K", "FOLLOW", "SPACES", "Crossing", "Layout", "build", "crossings",
           "crossing_checks", "judge_crossing", "noise_mode", "offsets_group", "too_large"]
