"""The sizes real kernels run at: batch thresholds, real vocabularies, tiny residuals.

Kernels change code path with size — a second launch above a batch limit, a
partial last vocabulary tile, a split grid, a shortcut below a threshold — so a
device correct at the small shapes of ``L1-injected`` can be wrong here. Two
groups:

* ``L1-sizes`` (injected noise, token for token against the reference, SPEC §5.1):
  - ``L1/sizes/batch-B<B>``: one ragged, mixed-mode batch (greedy, top-k,
    top-p, padding placeholders (SPEC §4), K_i from 0 to 4) of each size in ``BATCH_SIZES``
    (each side of every power of two from 32 to 512, and 1024), V = 32;
  - ``L1/sizes/vocab-V<V>``: three requests at each of ``VOCAB_SIZES`` (the
    vocabularies engines ship; tile widths 128 … 16384 ± 1; primes), float32,
    with the target mass and the noise arranged so that the emitted tokens
    land on the last ids, on a tile boundary and elsewhere (``spread_tokens``);
  - ``L1/sizes/filters-V<V>``: top-k (1 … 1000) and top-p at each of ``FILTER_VOCABS``, each
    row's largest logits strided 128 … 4096 ids apart (a top-k that keeps a few candidates per
    lane, tile or thread loses some) and tied across the ``k``-th, the noise arranged so that the
    emitted token shows a kept set one token too large or too small (``filter_batch``);
  - ``L1/sizes/residual-tv<ε>`` and ``…/residual-tiny-tv<ε>``: every request
    rejects (its coin is above the ratio) with a draft row at total variation
    ε ∈ {1e-2 … 1e-7} from its target row, so the residual holds mass ε — on
    one ordinary token, or spread over tokens of probability ~1e-9 that
    float16/bfloat16 flush to zero. The residual is never empty, so SPEC §4's
    fallback to the target row must not be taken: a device that treats a
    residual below a threshold as empty emits from the whole row instead.
  - ``L1/sizes/empty-residual-V<V>``: SPEC §4's empty residual at each of ``EMPTY_VOCABS`` (SPEC
    1.3): every request rejects a draft of target probability 0 whose draft row covers the target
    row, the target's four tokens one in each quarter of the row (different tiles, chunks and
    programs); the step must race the target row across the whole vocabulary
    (``empty_residual_batch``).
  - ``L1/sizes/<edge>-V<V>``: SPEC §4's other empty-residual edges (the cut's, temperature's, withdrawn
    drafts') at each of ``EMPTY_VOCABS`` (SPEC 1.5), their ids spread over tile edges (``empty_edge_checks``).
  - ``L1/sizes/support/<edge>-V<V>`` (SPEC 1.6): for a device without injected noise that draws its own
    randomness, every empty-residual edge at the same vocabularies, each request run under distinct seeds and held
    to its law's exact support (``empty_support_checks``).
* ``L2-sizes`` (the device's own randomness, ``rng`` "seeded" or "philox";
  exact, no statistics): ``L2/sizes/batch-invariance`` — probe requests alone
  and at the first and last row of a batch of every size in ``BATCH_SIZES``
  give the same tokens; ``L2/sizes/determinism`` and
  ``L2/sizes/{seed,position}-sensitivity`` on the largest batch (1024 requests plus the probes).

Every output is first checked for SPEC §7 form (``output_problems``): a
malformed one is a failing ``…/well-formed-output`` check, never a crash.

What each check detects is stated in docs/statistics.md ("Sizes").
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from devices.protocol import Noise, VerifyBatch
from specsim.conformance.core.calls import Malformed, Refusal, call, formed, malformed_result, missing, refused
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.testing.batches import BatchSpec, random_batch, random_noise, select_requests
from specsim.conformance.cases import edges as edge_laws
from specsim.conformance.cases.edges import edge_dtype, edge_form
from specsim.conformance.checks.chain.exact import edge_injected, own_draws
from specsim.testing.edges import EDGES, make_batch
from specsim.testing.embed import embed_at, mapped, spread_ids
from specsim.testing.seeds import case_seed

BATCH_SIZES = (1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1024)
"""Each side of the launch and tile limits kernels use (powers of two), and one batch above 1000."""

REAL_VOCABS = (32000, 32064, 49152, 50257, 128256, 151936, 152064, 256000)
"""Llama-2, Phi-3, StarCoder, GPT-2, Llama-3, Qwen2 (two), Gemma."""

AWKWARD_VOCABS = tuple(w + d for w in (128, 256, 512, 1024, 2048, 4096, 8192, 16384) for d in (-1, 1)) + (
    65521, 100003, 131071)
"""One each side of every tile width from 128 to 16384, and three primes."""

VOCAB_SIZES = REAL_VOCABS + AWKWARD_VOCABS
QUICK_VOCAB_SIZES = (32000, 127, 4097, 65521)
QUICK_BATCH_SIZES = (1, 33, 65, 257)

RESIDUAL_TVS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
"""Total variation between a rejected draft row and its target row: the residual's mass."""

FLOAT32_TVS = (1e-2, 1e-3, 1e-4, 1e-5)
"""For a device without float64: below 1e-5 the float32 rounding of 64 draft and target
probabilities (~6e-8 in all) is no longer small against the residual's mass."""


# --- L1: batches at the thresholds ---------------------------------------------------------

def _dtype(caps) -> str:
    return "float32" if "float32" in caps.dtypes else caps.dtypes[0]


def _batch_spec(caps, B: int) -> BatchSpec:
    return BatchSpec(batch=B, max_k=min(4, caps.max_k), vocab_size=32, dtype=_dtype(caps),
                     draft_probs=caps.draft_probs, greedy_fraction=0.2 if caps.greedy else 0.0,
                     top_k_fraction=0.2 if caps.top_k else 0.0, top_p_fraction=0.2 if caps.top_p else 0.0,
                     draw="inverse-cdf")


def _judge(name: str, device, batch: VerifyBatch, noise: Noise, seed: int | None) -> CheckResult:
    return judge(name, device, batch, noise, seed, note=f" (V={batch.vocab_size})")


def _gate(name: str, caps, needs, *, vocab_size: int = 0, max_k: int = 0, dtype: str | None = None):
    why = missing(caps, needs, vocab_size=vocab_size, max_k=max_k, dtype=dtype) or (
        None if caps.injected_noise else "device does not take injected noise")
    return None if why is None else CheckResult(name, "L1", "not_supported", why)


def batch_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    caps, results = device.capabilities, []
    for B in (QUICK_BATCH_SIZES if ctx.quick else BATCH_SIZES):
        name = f"L1/sizes/batch-B{B}"
        if only is not None and name != only:
            continue
        spec = _batch_spec(caps, B)
        skip = _gate(name, caps, spec.needs, vocab_size=spec.vocab_size, dtype=spec.dtype)
        if skip:
            results.append(skip)
            continue
        seed = case_seed(ctx.seed, name)
        rng = np.random.default_rng(seed)
        batch = random_batch(rng, spec)
        results.append(_judge(name, device, batch, random_noise(rng, batch), seed))
    return results


# --- L1: real and awkward vocabularies --------------------------------------------------

def spread_tokens(V: int) -> np.ndarray:
    """The ids a vocabulary case steers its emissions to: the last three ids, the id just before the
    last 128-wide tile, the first id of the last 1024-wide tile, the middle and the first.

    >>> spread_tokens(5000).tolist()
    [4999, 4998, 4997, 4991, 4096, 2500, 0]
    """
    picks = [V - 1, V - 2, V - 3, (V - 1) // 128 * 128 - 1, (V - 1) // 1024 * 1024, V // 2, 0]
    return np.array([min(max(p, 0), V - 1) for p in picks], dtype=np.int64)


def vocab_batch(rng: np.random.Generator, V: int, caps) -> tuple[VerifyBatch, Noise]:
    """Three sampled requests (K = 2, 1, 0) at vocabulary V, float32 logits, whose emissions land on
    ``spread_tokens(V)``: each emission row puts most of its mass on one steered id, the draft
    rows put theirs elsewhere (so drafts are rejected and the residual keeps the steered id), and
    the steered id's exponential is small. Rows ``[4 + 3, V]``; ``V`` up to 256000 in float64 numpy."""
    K = np.array([min(2, caps.max_k), min(1, caps.max_k), 0], dtype=np.int64)
    B, N = len(K), int(K.sum())
    steer = rng.choice(spread_tokens(V), size=B)
    logits = rng.normal(0.0, 1.0, size=(N + B, V))
    cu = np.concatenate([[0], np.cumsum(K)])
    for i in range(B):  # every target row of request i favours its steered id (so emission lands there)
        logits[cu[i] + i: cu[i + 1] + i + 1, steer[i]] += 12.0
    draft_ids = rng.integers(0, V, size=N)
    draft_probs = None
    if caps.draft_probs:
        draft_logits = rng.normal(0.0, 1.0, size=(N, V))
        draft_logits[np.arange(N), draft_ids] += 12.0  # the draft believes in its own id
        e = np.exp(draft_logits - draft_logits.max(axis=1, keepdims=True))
        draft_probs = (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
        draft_probs /= draft_probs.sum(axis=1, keepdims=True, dtype=np.float32)
    exps = rng.exponential(size=(B, V)) + 1e-300
    exps[np.arange(B), steer] = 1e-3
    batch = VerifyBatch(num_draft_tokens=K, draft_token_ids=draft_ids, draft_probs=draft_probs,
                        target_logits=logits.astype(np.float32), temperature=np.ones(B),
                        top_k=np.zeros(B, dtype=np.int64), top_p=np.ones(B),
                        seeds=np.arange(1, B + 1, dtype=np.uint64), positions=np.zeros(B, dtype=np.int64))
    return batch, Noise(rng.random(N), exps)


def _per_vocab(device, ctx, only: str | None, kind: str, vocabs, needs: set, make) -> list[CheckResult]:
    """``L1/sizes/<kind>-V<V>`` for each of ``vocabs``: ``make(rng, V, caps)``'s batch and noise
    judged against the reference, seeded by the check's name, gated on ``needs``."""
    caps, results = device.capabilities, []
    for V in vocabs:
        name = f"L1/sizes/{kind}-V{V}"
        if only is not None and name != only:
            continue
        skip = _gate(name, caps, needs, vocab_size=V, dtype="float32")
        if skip:
            results.append(skip)
            continue
        seed = case_seed(ctx.seed, name)
        batch, noise = make(np.random.default_rng(seed), V, caps)
        results.append(_judge(name, device, batch, noise, seed))
    return results


def vocab_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    needs = {"draft_probs" if device.capabilities.draft_probs else "point_proposals"}
    return _per_vocab(device, ctx, only, "vocab", QUICK_VOCAB_SIZES if ctx.quick else VOCAB_SIZES, needs, vocab_batch)


# --- L1: top-k and top-p at real vocabularies ----------------------------------------------

FILTER_VOCABS = (4097, 16385, 32000, 65521, 128256, 151936, 256000)
"""Past one 2048- and 4096-wide tile, the vocabularies engines ship, a prime."""
QUICK_FILTER_VOCABS = (4097, 32000)

FILTER_REQUESTS = ((50, 1.0, 2048, False), (20, 0.9, 1024, False), (256, 1.0, 4096, False), (1, 1.0, 128, False),
                   (1000, 0.95, 2048, False), (50, 1.0, 2048, True))
"""``(top_k, top_p, stride, ties)`` a request: its ``top_k + 8`` largest logits sit ``stride`` ids
apart (then in the next residue), from the last id down; ``ties`` makes four of them equal across
the ``k``-th (top-k keeps ``k + 2``). ``top_p < 1``: cut in the middle of a kept token's
probability (no near tie)."""


def strided_ids(V: int, stride: int, count: int) -> np.ndarray:
    """``count`` distinct ids ``stride`` apart, residue by residue, from the residue of the last id.

    >>> strided_ids(10, 4, 5).tolist()
    [1, 5, 9, 2, 6]
    """
    out, residue = [], (V - 1) % stride
    while len(out) < count:
        out += range(residue % stride, V, stride)
        residue += 1
    return np.array(out[:count], dtype=np.int64)


def filter_batch(rng: np.random.Generator, V: int, caps) -> tuple[VerifyBatch, Noise]:
    """One bonus-row request a ``FILTER_REQUESTS`` entry at vocabulary ``V`` (float32 logits, T = 1):
    each row's largest logits strided so that a top-k keeping a few entries per lane, tile or
    thread loses some, and the injected noise so that the emitted token tells the kept set: the
    largest logit the filters drop has the smallest exponential (a device keeping it emits it), the
    least likely kept token (of tied copies, the highest id) the next smallest (a device dropping it
    emits another). Top-p without a ``top_p`` capability: 1."""
    from reference.target import target_rows
    B = len(FILTER_REQUESTS)
    logits = rng.normal(0.0, 0.5, size=(B, V))
    top_k, top_p = np.zeros(B, dtype=np.int64), np.ones(B)
    exps = rng.exponential(size=(B, V)) + 1e-300
    for i, (k, p, stride, ties) in enumerate(FILTER_REQUESTS):
        k = min(k, V - 9)
        ids = strided_ids(V, stride, k + 8)
        levels = 10.0 - 6.0 * np.arange(k + 8) / (k + 8)
        if ties:
            levels[max(k - 2, 0): k + 2] = levels[max(k - 2, 0)]
        logits[i, ids] = levels
        logits[i] = logits[i].astype(np.float32)
        top_k[i] = k
        if p < 1 and caps.top_p:
            probs = np.sort(target_rows(logits[i:i + 1], np.ones(1), top_k[i:i + 1], np.ones(1))[0][0])[::-1]
            cum = np.cumsum(probs[probs > 0])
            m = max(1, int(np.searchsorted(cum, p)))
            top_p[i] = 0.5 * (cum[m - 1] + cum[m]) if m < len(cum) else 1.0
        kept = target_rows(logits[i:i + 1], np.ones(1), top_k[i:i + 1], top_p[i:i + 1])[0][0] > 0
        exps[i, np.flatnonzero(~kept)[np.argmax(logits[i, ~kept])]] = 1e-30
        least = np.flatnonzero(kept & (logits[i] == logits[i, kept].min()))
        exps[i, least[-1]] = 1e-20  # of tied copies the highest id: a top-k ranking ties by id drops it
    batch = VerifyBatch(num_draft_tokens=np.zeros(B, dtype=np.int64), draft_token_ids=np.zeros(0, dtype=np.int64),
                        draft_probs=np.zeros((0, V), dtype=np.float32) if caps.draft_probs else None,
                        target_logits=logits.astype(np.float32), temperature=np.ones(B), top_k=top_k, top_p=top_p,
                        seeds=np.arange(1, B + 1, dtype=np.uint64), positions=np.zeros(B, dtype=np.int64))
    return batch, Noise(np.zeros(0), exps)


def filter_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    needs = {"top_k"} | ({"draft_probs"} if device.capabilities.draft_probs else {"point_proposals"})
    return _per_vocab(device, ctx, only, "filters", QUICK_FILTER_VOCABS if ctx.quick else FILTER_VOCABS, needs,
                      filter_batch)


# --- L1: an empty residual at real vocabularies ----------------------------------------------

EMPTY_VOCABS = (4097, 32000, 128256)
"""Past one tile, a shipped vocabulary, a large one: the target's tokens in four quarters of the row."""
QUICK_EMPTY_VOCABS = (4097,)


def empty_residual_batch(rng: np.random.Generator, V: int, caps) -> tuple[VerifyBatch, Noise]:
    """Three requests at vocabulary ``V`` (float32), each rejecting a draft ``x`` of target probability 0 whose draft
    row is at or above the target row everywhere (SPEC §4: the residual is empty; draw from ``t``). The target is
    1/4 on one id in each quarter of the row (``V/8``, ``3V/8``, ``5V/8``, ``7V/8``: other tiles and chunks), -inf
    elsewhere. Request 0 drafts the last id with draft probability 0, its row ``2^-12`` above the target on its
    four ids; request 1 drafts id 1 with draft probability ``2^-12``, its row ``2^-13`` above; request 2 accepts
    a first draft with certainty and rejects at position 1 as request 0 does (row 1's target, row 1's draft
    row). Every row sums within §6's ``1e-3`` of 1 and sits at least ``2^-13`` (above §9's ``1e-4``) over the
    target. The exponentials favour id 0, the drafted ids and a random one of the four: a device racing the
    empty residual, the whole row or the draft row emits another token than the reference's race over ``t``."""
    support = np.array([V // 8, 3 * V // 8, 5 * V // 8, 7 * V // 8])
    target = np.full(V, -np.inf)
    target[support] = 0.0

    def covering(extra: float, x: int, dx: float) -> np.ndarray:
        row = np.zeros(V)
        row[support] = 0.25 + extra
        row[x] = dx
        return row

    certain = np.full(V, -np.inf)
    certain[2] = 0.0
    one_hot = np.zeros(V)
    one_hot[2] = 1.0
    logits = np.stack([target, target, target, target, certain, target, target])
    rows = np.stack([covering(2.0 ** -12, V - 1, 0.0), covering(2.0 ** -13, 1, 2.0 ** -12), one_hot,
                     covering(2.0 ** -12, V - 1, 0.0)])
    exps = rng.exponential(size=(3, V)) + 1e-300
    exps[:, [0, 1, V - 1]] = 1e-30
    for i in range(3):
        exps[i, support[rng.integers(4)]] = 1e-20
    batch = VerifyBatch(num_draft_tokens=np.array([1, 1, 2], dtype=np.int64),
                        draft_token_ids=np.array([V - 1, 1, 2, V - 1], dtype=np.int64),
                        draft_probs=rows.astype(np.float32), target_logits=logits.astype(np.float32),
                        temperature=np.ones(3), top_k=np.zeros(3, dtype=np.int64), top_p=np.ones(3),
                        seeds=np.arange(1, 4, dtype=np.uint64), positions=np.zeros(3, dtype=np.int64))
    return batch, Noise(np.full(4, 0.5), exps)


def empty_residual_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    return _per_vocab(device, ctx, only, "empty-residual", QUICK_EMPTY_VOCABS if ctx.quick else EMPTY_VOCABS,
                      {"draft_probs"}, empty_residual_batch)


# --- L1: the empty-residual edges at real vocabularies (SPEC 1.5) ----------------------------------

SIZED_EDGES = tuple(e for e in EDGES if e.name.startswith("empty-residual-"))
"""SPEC §4's empty-residual edges but the plain one (``L1/sizes/empty-residual-V<V>`` holds that at size): the
cut's, temperature's and withdrawn drafts'."""


def empty_edge_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1/sizes/<edge>-V<V>`` (SPEC 1.5): each of ``SIZED_EDGES`` re-stated at each of ``EMPTY_VOCABS``, its four
    ids spread over the ids where kernels change path (``embed.spread_ids``: id 0, each side of a tile edge, of
    2^15 and 2^16, the last id), every other id ``-inf`` (``embed.embed_at``): its exact tokens, mapped. The cut,
    the temperature and the fallback to ``t`` then run over many tiles and chunks, as they do at a real
    vocabulary: a fallback, a top-k or a top-p kept set taken from the first tile alone is caught."""
    caps, results = device.capabilities, []
    dtype = edge_dtype(caps)
    for edge, form, V, name in _edges_at_size(SIZED_EDGES, caps, ctx, only, "L1/sizes/{edge}-V{V}"):
        skip = _gate(name, caps, form.needs, vocab_size=V, dtype=dtype)
        if skip:
            results.append(skip)
            continue
        batch, noise = make_batch(form.requests, dtype=dtype, point=form.point)
        ids = spread_ids(V, batch.vocab_size)
        batch, noise = embed_at(batch, noise, V, ids)
        expected = [mapped(ids, list(tokens)) for tokens in edge.expected]
        results.append(edge_injected(device, edge, name, batch, noise, dtype, expected, explain=0))
    return results


def _edges_at_size(edges, caps, ctx, only: str | None, pattern: str):
    """``(edge, its form for caps, V, check name)`` for each of ``edges`` at each of ``EMPTY_VOCABS`` (the quick ones
    with ``--quick``), the name ``pattern`` formatted; ``only``: just the check of that name."""
    for edge in edges:
        form = edge_form(edge, caps)
        for V in QUICK_EMPTY_VOCABS if ctx.quick else EMPTY_VOCABS:
            name = pattern.format(edge=edge.name, V=V)
            if only is None or name == only:
                yield edge, form, V, name


# --- L1: the empty residual at size under the device's own randomness (SPEC 1.6) -------------------

SUPPORT_SAMPLES, QUICK_SUPPORT_SAMPLES = 32, 8
"""Runs of each request of an empty-residual edge at size under a device's own randomness
(``empty_support_checks``). The law's support is exact, so no α is spent: a fallback that emits a token of target
probability 0 on a run with probability q is missed with probability (1 − q)^n — below 1.4% for q = 1/8 at n = 32;
one that recovers id 0, the drafted token or a token the cut removed on every run (q = 1) is never missed."""

SUPPORT_EDGES = tuple(e for e in EDGES if e.name == "empty-residual") + SIZED_EDGES
"""Every §4 empty-residual edge: ``empty-residual`` and ``SIZED_EDGES``."""


def empty_support_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1/sizes/support/<edge>-V<V>`` (SPEC 1.6), for a device that draws its own randomness and takes no injected
    noise (one that does is held to each edge's exact tokens at size: ``empty_edge_checks``, ``L1/sizes/empty-
    residual-V<V>``): each of ``SUPPORT_EDGES`` re-stated at each of ``EMPTY_VOCABS`` as ``empty_edge_checks`` states
    it, its ids spread over tile edges, 2^15, 2^16 and the last id, each request run ``SUPPORT_SAMPLES`` times under
    distinct seeds (one call a request); every emitted sequence must lie in the support of the request's exact law
    (``edges.request_law``, mapped). Its law beyond the support is held at V = 4 (``L1/edge/<edge>``)."""
    caps, results = device.capabilities, []
    dtype = edge_dtype(caps)
    n = QUICK_SUPPORT_SAMPLES if ctx.quick else SUPPORT_SAMPLES
    for _, form, V, name in _edges_at_size(SUPPORT_EDGES, caps, ctx, only, "L1/sizes/support/{edge}-V{V}"):
        why = missing(caps, form.needs, vocab_size=V, dtype=dtype) or _own_draws_lacking(caps)
        results.append(CheckResult(name, "L1", "not_supported", why) if why else
                       _support_at(device, ctx, form, name, V, n, dtype))
    return results


def _own_draws_lacking(caps) -> str | None:
    if caps.injected_noise:
        return ("device takes injected noise: each edge's exact tokens at this size are L1/sizes/<edge>-V<V> "
                "(L1/sizes/empty-residual-V<V> for the plain one)")
    if caps.rng == "none":
        return "device draws no randomness of its own (rng 'none')"
    return None


def _support_at(device, ctx, edge, name: str, V: int, n: int, dtype: str) -> CheckResult:
    """Each request of ``edge`` (at vocabulary 4) ``n`` times at ``V``, one call a request: the check's result (the
    first request with a sequence outside its law's support fails it)."""
    ids = spread_ids(V, len(edge.requests[0].logits[0]))
    seed = case_seed(ctx.seed, name)
    for i, request in enumerate(edge.requests):
        law = {tuple(mapped(ids, list(k))): p for k, p in edge_laws.request_law(request, edge.point).items()}
        one = replace(edge, requests=[request])
        batch, _ = embed_at(edge_laws.repeated(one, n, dtype, seed + i), None, V, ids)
        emitted, problem = own_draws(device, name, batch, seed)
        if problem:
            return problem
        outside = Counter(tuple(e) for e in emitted if tuple(e) not in law)
        if outside:
            return CheckResult(name, "L1", "fail", (
                f"{edge.why} — at V={V} (ids {ids.tolist()}), request {i}: emitted {sorted(outside)[:3]} "
                f"({sum(outside.values())} of {n} runs under the device's own randomness), which the exact law gives "
                f"probability 0; the law: {edge_laws.show_law(law)} (repro: specsim conform --groups L1-sizes "
                f"--seed {ctx.seed})"), seed=seed, n=n)
    return CheckResult(name, "L1", "pass", f"{edge.why} — at V={V}, under the device's own randomness: every one of "
                       f"{n} runs of each request in the exact law's support", seed=seed, n=n)


# --- L1: rejections with small residual mass ----------------------------------------------

def small_residual_batch(rng: np.random.Generator, tv: float, tiny: bool, dtype: str,
                         requests: int = 6, V: int = 257) -> tuple[VerifyBatch, Noise]:
    """``requests`` requests of one draft each, every one rejected, with residual mass exactly ``tv``.

    Target row ``t`` = softmax of float64 logits (T = 1, no filters); the draft row ``d`` moves
    ``tv`` of mass onto the draft id ``x`` from the residual token(s): one ordinary token
    (``tiny`` False), or 8 tokens whose target probability is about ``tv / 8`` (``tiny`` True;
    their logits are set to make ``t`` so), all of which the draft drops: the residual is then
    spread over ids of probability 1.25e-3 … 1.25e-8 — below float16's smallest normal (6.1e-5)
    from ``tv`` = 1e-4 on, and flushed to zero by float16 at 1e-7. The coin lies midway between the
    ratio ``t(x)/d(x)`` and 1: a rejection. The residual ``max(t − d, 0)`` is positive only on
    the residual token(s): its mass is ``tv`` up to the dtype's rounding, never empty, so SPEC
    §4's fallback to ``t`` must not be taken. Shapes: logits ``[2 * requests, V]``, draft probs
    ``[requests, V]`` (``dtype``; the target row is recomputed from the stored logits so the
    moved mass is exact in that dtype's values).
    """
    B = requests
    logits = rng.normal(0.0, 1.0, size=(2 * B, V))
    x = rng.integers(0, V // 2, size=B)
    takers = [rng.choice(np.arange(V // 2, V), size=8 if tiny else 1, replace=False) for _ in range(B)]
    if tiny:  # residual tokens get probability ~ tv / 8 each (≥ TINY) in the target row
        for i in range(B):
            rest = np.delete(np.arange(V), takers[i])
            base = np.log(np.exp(logits[2 * i, rest]).sum())
            share = tv / 8
            logits[2 * i, takers[i]] = base + np.log(share / (1 - 8 * share)) + rng.normal(0, 1e-3, 8)
    np_dtype = np.dtype(dtype)
    logits = logits.astype(np_dtype)
    rows = logits.astype(np.float64)[0::2]
    t = np.exp(rows - rows.max(axis=1, keepdims=True))
    t /= t.sum(axis=1, keepdims=True)
    d = t.copy()
    for i in range(B):
        take = np.minimum(t[i, takers[i]], tv / len(takers[i]))  # the residual mass: exactly what is taken
        d[i, takers[i]] -= take
        d[i, x[i]] += take.sum()
    d = d.astype(np_dtype)
    ratio = t[np.arange(B), x] / d[np.arange(B), x].astype(np.float64)
    uniforms = (ratio + 1.0) / 2  # above the ratio: every draft is rejected
    batch = VerifyBatch(num_draft_tokens=np.ones(B, dtype=np.int64), draft_token_ids=x.astype(np.int64),
                        draft_probs=d, target_logits=logits, temperature=np.ones(B),
                        top_k=np.zeros(B, dtype=np.int64), top_p=np.ones(B),
                        seeds=np.arange(1, B + 1, dtype=np.uint64), positions=np.zeros(B, dtype=np.int64))
    return batch, Noise(uniforms, rng.exponential(size=(B, V)) + 1e-300)


def residual_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    caps, results = device.capabilities, []
    dtype = "float64" if "float64" in caps.dtypes else _dtype(caps)
    for tiny in (False, True):
        for tv in (RESIDUAL_TVS if dtype == "float64" else FLOAT32_TVS):
            name = f"L1/sizes/residual-{'tiny-' if tiny else ''}tv{tv:.0e}"
            if only is not None and name != only:
                continue
            skip = _gate(name, caps, {"draft_probs"}, vocab_size=257, dtype=dtype)
            if skip:
                results.append(skip)
                continue
            seed = case_seed(ctx.seed, name)
            batch, noise = small_residual_batch(np.random.default_rng(seed), tv, tiny, dtype)
            results.append(_judge(name, device, batch, noise, seed))
    return results


def sizes_group(device, ctx, only: str | None = None) -> list[CheckResult]:
    """``L1-sizes``: batch thresholds, real and awkward vocabularies, small residuals (module docstring);
    ``only``: just the check of that name."""
    # Cheapest first: a mutant hunt stops at the group's end, but a slow device (an interpreter) reaches
    # the 256000-wide vocabularies last.
    return (residual_checks(device, ctx, only) + batch_checks(device, ctx, only) + vocab_checks(device, ctx, only)
            + filter_checks(device, ctx, only) + empty_residual_checks(device, ctx, only)
            + empty_edge_checks(device, ctx, only) + empty_support_checks(device, ctx, only))


# --- L2: the device's own randomness at every batch size --------------------------------------

PROBES = (0, 1, 2)
"""Requests of the largest batch run alone and at the first and last row of every smaller batch."""


def _rows(out, order) -> dict[int, list[int]]:
    ids, acc = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    return {int(r): ids[j, : int(acc[j]) + 1].tolist() for j, r in enumerate(order)}


def keyed_batch(ctx, caps) -> VerifyBatch:
    B = max(QUICK_BATCH_SIZES if ctx.quick else BATCH_SIZES) + len(PROBES)  # the largest batch plus the probes
    seed = case_seed(ctx.seed, "L2/sizes")
    batch = random_batch(np.random.default_rng(seed), replace(_batch_spec(caps, B), placeholder_fraction=0.0))
    # Every probe samples: a greedy probe would pass whatever the device keys its noise by.
    return replace(batch, temperature=np.where(np.isin(np.arange(B), PROBES), 1.0, batch.temperature))


def rng_size_checks(device, ctx, results: list | None = None) -> list[CheckResult]:
    """The L2-sizes checks, each appended to ``results`` (a new list if None) as it is decided."""
    caps = device.capabilities
    results = [] if results is None else results
    spec = _batch_spec(caps, 1)
    if caps.rng == "none":
        return [CheckResult("L2/sizes", "L2", "not_supported", "device draws no randomness of its own")]
    why = missing(caps, spec.needs, vocab_size=spec.vocab_size, dtype=spec.dtype)
    if why:
        return [CheckResult("L2/sizes", "L2", "not_supported", why)]
    batch = keyed_batch(ctx, caps)
    B = batch.batch_size
    everything = np.arange(B)
    first, problem = call("L2/sizes/determinism", "L2", lambda: formed(device, batch), caps)
    if problem:
        return results + [problem]
    base = _rows(first, everything)
    again = _rows(formed(device, batch), everything)
    differ = [i for i in everything if again[i] != base[i]]
    results.append(CheckResult("L2/sizes/determinism", "L2", "fail" if differ else "pass",
                               f"B={B}: request(s) {differ[:5]} changed between two identical calls" if differ
                               else f"B={B}: two identical calls agree"))
    alone = {p: _rows(formed(device, select_requests(batch, [p])[0]), [p])[p] for p in PROBES}
    bad = []
    for size in (QUICK_BATCH_SIZES if ctx.quick else BATCH_SIZES):
        others = list(range(len(PROBES), len(PROBES) + size - 1))  # size - 1 non-probes: a batch of exactly size
        for p in PROBES:
            for order in ([p] + others, others + [p]):  # the probe at the first row, then the last
                got = _rows(formed(device, select_requests(batch, order)[0]), order)[p]
                if got != alone[p]:
                    bad.append(f"request {p} at row {order.index(p)} of a batch of {len(order)}: {got} vs {alone[p]} alone")
                    break
    results.append(CheckResult("L2/sizes/batch-invariance", "L2", "fail" if bad else "pass",
                               f"{len(bad)} probe placement(s) changed a request's tokens, e.g. {bad[0]} "
                               "(randomness or rows keyed by batch row or batch size? docs/bugs.md #7, #38, #40)" if bad
                               else f"probes {list(PROBES)} alone = at the first and last row of batches of "
                                    f"{', '.join(map(str, QUICK_BATCH_SIZES if ctx.quick else BATCH_SIZES))}"))
    sampled = [i for i in everything if batch.temperature[i] > 0]
    for what, field in (("seed", "seeds"), ("position", "positions")):
        values = getattr(batch, field)
        moved = _rows(formed(device, replace(batch, **{field: values + (np.uint64(1) if field == "seeds" else 1)})),
                      everything)
        same = [i for i in sampled if moved[i] == base[i]]
        stuck = bool(sampled) and len(same) == len(sampled)  # every one: the key ignores it (L2-rng's rule)
        results.append(CheckResult(f"L2/sizes/{what}-sensitivity", "L2", "fail" if stuck else "pass",
                                   f"B={B}: {len(sampled) - len(same)} of {len(sampled)} sampled requests changed "
                                   f"when every {what} moved by one" + (" — the key ignores it" if stuck else "")))
    return results


def rng_sizes_group(device, ctx) -> list[CheckResult]:
    """``L2-sizes``: determinism, batch invariance and key sensitivity at every batch size. A refusal
    of any of its calls (each inside the declaration: batch size is never a declared limit) is the
    failing check ``L2/sizes/refused``, after the checks decided before it."""
    results: list[CheckResult] = []
    try:
        return rng_size_checks(device, ctx, results)
    except Malformed as e:
        return [malformed_result("L2", e)]
    except Refusal as r:
        return results + [refused("L2/sizes/refused", "L2", r, device.capabilities)]


__all__ = ["BATCH_SIZES", "VOCAB_SIZES", "RESIDUAL_TVS", "FLOAT32_TVS", "sizes_group", "rng_sizes_group", "spread_tokens",
           "vocab_batch", "small_residual_batch"]
