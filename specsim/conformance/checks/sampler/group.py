"""Group ``L1-sampler``: SPEC §12's whole sampler at every speculative position.

Four kinds of checks (edges first), each ``L1-sampler/...`` and each gated per parameter
and per order profile (a device lacking one gets ``not_supported`` for the
checks that need it, never a silent pass):

- **random** ``L1-sampler/<order>/<parameter>`` (and ``/all``, ``/all-point``,
  ``/all-float32``, ``/all-top-k``: every request sampled with a top-k, ``/declared``: every
  parameter the device declares): random ragged batches (``specsim.testing.batches``) with
  the parameter at realistic strengths, built to act along the drafts, in
  half the requests a repetition loop (``specsim.testing.sampler_params``), compared token for token with the
  reference under injected noise — or, for a device declaring only keyed
  Philox noise (SPEC §5.2), under its own draws;
- **edges** ``L1-sampler/edge/<name>/<order>``: the hand-built cases
  (``specsim.testing.sampler_edges``) with their exact answers (without
  injected noise: their exact law over 400 runs under the device's own
  randomness, ``edge_laws.request_law`` on §12's rows — the support exactly,
  the law by a goodness-of-fit test per request, each a test of the run's
  statistical plan, ``stat_plan``) — a draft the
  mask, allowed ids, a bad word or min_tokens forbid is rejected with
  certainty and never recovered; penalties that zero the draft's target
  probability; a bad word completed by this step's drafts, and bad words
  whose prefix lies in the output, across the step boundary or in the
  drafts; min_tokens crossing inside the step; the bonus row seeing every draft; min_p after
  temperature; the rows where the order profiles differ (each profile's own
  answer); bonus rows below min_tokens with several stop ids; min_p's ties;
  the bias before temperature; repetition on negative logits; the frequency
  penalty counting repeats; allowed ids at the bonus row; §2's tie rules on §12's rows (top-k's and
  top-p's whole tie class kept, greedy ties to the smallest id) in each profile; SPEC §4's empty residual
  through each ban and where a penalty or a bias takes the draft past a cut. Each edge whose logits a dtype
  holds runs again in every other declared logits dtype (``L1-sampler/edge/<name>/<order>/<dtype>``, SPEC
  1.5; ``dtype_twins``). An edge's coins are
  drawn from the run's seed inside the interval where its answer holds;
- **edges at size** ``L1-sampler/edge/<name>/<order>/V<V>`` (injected noise only): each edge
  re-stated at 65537 ids (its tokens at id 0, 2047, 32767 and 65536) and at 151936 (the last four
  ids), every other id ``-inf`` (``specsim.testing.embed``): its exact tokens, mapped;
- **edges at batch sizes** ``L1-sampler/edge/<name>/<order>/batches`` (SPEC 1.9, ``edge_batch_checks``): each
  edge's requests repeated to fill a batch of each size of the ladder, every copy held to its answer; and among
  filler requests, ``.../mixed`` (SPEC 1.11, ``edge_mixed_checks``), the fillers' rows held to the reference in
  ``L1-sampler/edge-neighbours/<name>/<order>/mixed``; both again under the device's own randomness where it takes
  injected noise too, ``.../<order>/keyed/batches`` or ``/seeded/batches`` and ``/keyed/mixed`` or ``/seeded/mixed``
  (SPEC 1.12; among fillers not with ``--quick``);
- **precision** ``L1-sampler/precision`` (``precision.sampler_precision_check``): 4096 requests
  (``--quick`` 1024) with every declared parameter in the declared float32, coins placed
  3–30 × SPEC §9's tolerance from their ratios: 16-bit penalty, bias or min_p arithmetic flips them.

Replay a failure: ``specsim conform --device D --groups L1-sampler --seed N``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from devices.protocol import SAMPLER_ORDERS, SAMPLER_PARAMETERS
from specsim.conformance.core.calls import ask, call, missing
from specsim.judge import stats
from specsim.conformance.cases.edges import (dtype_twins, edge_dtype, sampler_edge_lacking, sampler_edge_laws,
                                             sampler_lacking, sampler_samples)
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.plan import StatPlan, run_plan
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.judge.compare import compare, reference_step
from specsim.testing.edges import make_batch
from specsim.testing.embed import embed_at, mapped
from specsim.testing.sampler_edges import SAMPLER_EDGES
from specsim.testing.sampler_params import close_drafts, random_sampler, repetitive
from specsim.testing.seeds import case_seed

SPEC = BatchSpec(batch=16, max_k=4, vocab_size=64, masked_fraction=0.0)
"""Random cases: 16 requests, K ≤ 4, V = 64; no raw ``-inf`` logits (the bans provide those)."""
QUICK_SPEC = replace(SPEC, batch=4, vocab_size=16)

CASES: dict[str, tuple[tuple, dict]] = {
    **{name: ((name,), {}) for name in SAMPLER_PARAMETERS},
    "all": (SAMPLER_PARAMETERS, {}),
    "all-point": (SAMPLER_PARAMETERS, {"draft_probs": False}),
    "all-float32": (SAMPLER_PARAMETERS, {"dtype": "float32"}),
    "all-top-k": (SAMPLER_PARAMETERS, {"greedy_fraction": 0.0, "top_k_fraction": 1.0, "top_k_below_vocab": True}),
    "all-unfiltered": (tuple(p for p in SAMPLER_PARAMETERS if p != "min_p"), {"top_k_fraction": 0.0,
                                                                            "top_p_fraction": 0.0}),
    "declared": (None, {}),
}
"""Case → (the §12 parameters on, changes to ``SPEC``). ``declared``: every parameter the device declares,
together — a device serving a subset (vLLM serves six of nine) is otherwise never asked them combined.
``all-top-k``: every request sampled and cut by a top-k (with top-p and min_p where drawn), the batch of
an engine serving one sampling setting — a device may decide such filters on the §12 rows without
writing them (the Triton device's fused path), so the suite asks for it apart from the mixed batches.
``all-unfiltered``: every parameter but min_p and no top-k or top-p on any request (greedy ones among
them) — penalties, bans and bias with plain temperature sampling, which a device may fold into its
statistics pass without any cut (the Triton device's fused path again), and which a mixed batch, where
some request always filters, never reaches; its coins sit next to their ratios (``NEAR_COIN_CASES``)."""


def case_params(name: str, caps) -> tuple:
    """The §12 parameters ``name`` turns on for a device of capabilities ``caps``.

    >>> from devices.protocol import Capabilities
    >>> case_params("declared", Capabilities(True, "none", 64, sampler=("bad_words", "min_p")))
    ('bad_words', 'min_p')
    """
    params = CASES[name][0]
    return tuple(caps.sampler) if params is None else params


def _noise_kind(caps) -> str | None:
    """``"injected"``, ``"keyed"`` or None (the device takes neither: no coin-for-coin check)."""
    return "injected" if caps.injected_noise else "keyed" if caps.rng == "philox" else None


def case_changes(name: str, dtypes=("float64",)) -> dict:
    """``CASES[name]``'s changes to ``SPEC``, in float32 when the case names no dtype and the device declares
    no float64 (a float32 engine, vLLM's, is held to its own precision, §9, rather than left unchecked).

    >>> case_changes("bad_words"), case_changes("bad_words", ("float32",)), case_changes("all-point", ("float32",))
    ({}, {'dtype': 'float32'}, {'draft_probs': False, 'dtype': 'float32'})
    """
    changes = dict(CASES[name][1])
    if "dtype" not in changes and "float64" not in dtypes:
        changes["dtype"] = "float32"
    return changes


NEAR_COIN_CASES = ("all-unfiltered",)
"""Cases whose acceptance coins sit next to their ratios (``precision.near_coins``: beyond the dtype's tolerance,
within a few of it): a target probability off by more than that — a softmax sum taken over other entries
than the numerator's, an entry counted twice — flips about half the decisions, where random coins see it
only when one happens to fall between the two ratios."""


def random_case(name: str, order: str, ctx, seed: int, dtypes=("float64",), params=None):
    """The batch and injected noise of one random check (both deterministic in ``seed``; ``dtypes``: the
    device's, for ``case_changes``; ``params``: the §12 parameters, default ``CASES[name]``'s)."""
    from specsim.conformance.checks.sampler.precision import near_coins
    from specsim.judge.compare import TOLERANCE
    params, changes = params or CASES[name][0], case_changes(name, dtypes)
    rng = np.random.default_rng(seed)
    batch = repetitive(rng, close_drafts(rng, random_batch(rng, replace(QUICK_SPEC if ctx.quick else SPEC, **changes))))
    batch = replace(batch, sampler=random_sampler(rng, batch, params, order))
    noise = random_noise(rng, batch)
    if name in NEAR_COIN_CASES:
        noise = near_coins(rng, batch, noise, TOLERANCE[str(np.asarray(batch.target_logits).dtype)])
    return batch, noise


def random_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """The random checks (``only``: the one of that name, for ``run.one_check``)."""
    caps, results, kind = device.capabilities, [], _noise_kind(device.capabilities)
    for order in SAMPLER_ORDERS:
        for case in CASES:
            params = case_params(case, caps)
            name, seed = f"L1-sampler/{order}/{case}", case_seed(ctx.seed, "L1-sampler", order, case)
            if only is not None and name != only:
                continue
            spec = replace(SPEC, **case_changes(case, caps.dtypes))
            why = sampler_lacking(caps, params, order) or missing(caps, spec.needs, dtype=spec.dtype) or \
                (None if kind else "device takes neither injected noise nor the keyed Philox streams")
            if why:
                results.append(CheckResult(name, "L1", "not_supported", why, seed=seed))
                continue
            batch, noise = random_case(case, order, ctx, seed, caps.dtypes, params)
            results.append(judge(name, device, batch, noise if kind == "injected" else None, seed,
                                 note=f" ({', '.join(batch.sampler.given())}; order {order})"))
    return results


def edge_checks(device, ctx) -> list[CheckResult]:
    """``L1-sampler/edge/<name>/<order>`` for every edge and order profile, in the edges' dtype (``edge_dtype``);
    each again in every other declared logits dtype that holds its logits (SPEC 1.5,
    ``L1-sampler/edge/<name>/<order>/<dtype>``, ``dtype_twins``): a dtype's kernel variant that lost a rule fails
    there."""
    caps, results = device.capabilities, []
    dtype = edge_dtype(caps)
    plan = None if caps.injected_noise else run_plan(caps, ctx)
    for edge in SAMPLER_EDGES:
        for order in edge.orders:
            name = f"L1-sampler/edge/{edge.name}/{order}"
            asked = {name: dtype, **{f"{name}/{d}": d for d in dtype_twins(edge, caps)}}
            why = sampler_edge_lacking(caps, edge, order)
            for check, in_dtype in asked.items():
                if why:
                    results.append(CheckResult(check, "L1", "not_supported", why))
                elif caps.injected_noise:
                    results.append(edge_check(device, edge, order, in_dtype, check, ctx))
                else:
                    results.append(edge_law_check(device, edge, order, in_dtype, check, ctx, plan))
    return results


def edge_check(device, edge, order: str, dtype: str, name: str, ctx=None, at=None) -> CheckResult:
    """An edge under injected noise: its exact tokens. Coins with an interval (``SamplerEdge.coins``) are
    drawn inside it from the run's seed, so each seed asks another point where the rule and the bug differ.
    ``at``: ``(V, ids)``, the edge re-stated at vocabulary ``V`` with its tokens at ``ids``
    (``specsim.testing.embed``; L1-sizes' ``sampler-V<V>`` checks)."""
    seed = case_seed(0 if ctx is None else ctx.seed, "L1-sampler", edge.name, order)
    batch, noise = edge.batch(order, dtype, seed=seed)
    expected = edge.expected_in(order)
    if at is not None:
        batch, noise = embed_at(batch, noise, *at)
        expected = [mapped(at[1], list(tokens)) for tokens in expected]   # lists of ints, as emitted
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    # an exact answer: no allowance can change the verdict; the walk names the first contradicted decision, and at a
    # real vocabulary (exact over every id) the V = 4 edge's failure already names it
    cmp = compare(batch, got, reference_step(batch, noise), explain=1 if at is None else 0)
    out = np.asarray(got.output_token_ids)
    emitted = [out[i, : int(got.num_accepted[i]) + 1].tolist() for i in range(batch.batch_size)] \
        if out.shape == (batch.batch_size, batch.max_k + 1) else None
    ok = emitted == expected and cmp.ok
    coins = "" if edge.coins is None else f" (coins {np.round(noise.uniforms, 4).tolist()}, seed {seed})"
    detail = edge.why if ok else f"{edge.why}: expected {expected}, got {emitted}{coins}" + \
        ("" if cmp.ok else f"; {cmp.summary()}")
    status = "pass" if ok else "error" if cmp.status == "error" and emitted == expected else "fail"
    return CheckResult(name, "L1", status, detail, seed=seed, extra={**cmp.extra(), "near_tie_allowances": 0})


def edge_law_check(device, edge, order: str, dtype: str, name: str, ctx, plan: StatPlan) -> CheckResult:
    """An edge for a device without injected noise: asked ``n`` times under distinct seeds (its own
    randomness) and held to its exact law — every emitted sequence with positive exact probability (a
    banned draft never accepted, a banned token never emitted; no α), then, for each request whose law
    has more than one outcome, a goodness-of-fit test at its α in ``plan``: mass a bug moves *inside*
    the support (a bonus row that bans a token it should allow) is seen there."""
    n = sampler_samples(ctx.quick)
    one, _ = edge.batch(order, dtype)
    batch, _ = make_batch(list(edge.requests) * n, dtype=dtype, point=False)
    seed = case_seed(ctx.seed, "L1-sampler", edge.name, order)
    batch = replace(batch, sampler=one.sampler.tiled(n),
                    seeds=np.random.default_rng(seed).integers(0, 2**63, batch.batch_size, dtype=np.uint64))
    got, problem = call(name, "L1", lambda: ask(device, batch, None), device.capabilities)
    if problem:
        return problem
    laws, B = sampler_edge_laws(edge, order), len(edge.requests)
    samples = [[tuple(got.emitted(t * B + i)) for t in range(n)] for i in range(B)]
    for i, law in enumerate(laws):
        for t, emitted in enumerate(samples[i]):
            if emitted not in law:
                return CheckResult(name, "L1", "fail", f"{edge.why}: request {i} emitted {list(emitted)}, which the "
                                   f"exact law gives probability 0 (copy {t} of {n}, seed {seed})", seed=seed)
    tested = [(i, law) for i, law in enumerate(laws) if len(law) > 1]
    worst_tv, p_min, spent = 0.0, 1.0, None
    for i, law in tested:
        seen, keys, alpha = Counter(samples[i]), sorted(law), plan.alpha(f"{name}/request{i}")
        result = stats.gof_test(np.array([seen.get(k, 0) for k in keys]), np.array([law[k] for k in keys]),
                                alpha, what=f"{name} request {i}", seed=seed)
        worst_tv = max(worst_tv, result.detectable_tv)
        if not result.passed:
            shown = ", ".join(f"{list(k)}: {law[k]:.3g} (seen {seen.get(k, 0)})" for k in keys[:6])
            return CheckResult(name, "L3", "fail", f"{edge.why}: request {i}: {result.report()}; the law: {shown}",
                               alpha=alpha, n=n, seed=seed, p_value=result.p_value,
                               detectable_tv=_finite(result.detectable_tv))
        if spent is None or result.p_value < p_min:
            p_min, spent = result.p_value, alpha
    if not tested:
        return CheckResult(name, "L1", "pass", f"{edge.why} — without injected noise: exact support over {n} runs "
                           "(each request's law is one sequence: exact)", seed=seed, n=n)
    return CheckResult(name, "L3", "pass", f"{edge.why} — without injected noise: exact support over {n} runs and a "
                       f"goodness-of-fit test at α={spent:.1e} (detectable TV {worst_tv:.3f}, smallest p={p_min:.3g})",
                       alpha=spent, n=n, seed=seed, p_value=p_min, detectable_tv=_finite(worst_tv))


def _finite(x: float) -> float | None:
    """A detectable TV for a result: None where the pooled law leaves nothing to detect (inf)."""
    return float(x) if np.isfinite(x) else None


def sampler_group(device, ctx, *, stop_at_first_fail: bool = False) -> list[CheckResult]:
    """Every ``L1-sampler`` check: the named edges first (the first failing check names the bug:
    ``specsim mutants`` reports it as the killer), then random cases per parameter and order, the precision check,
    the edges at size, and the edges at every batch size (SPEC 1.9). ``stop_at_first_fail`` (``specsim mutants``): none
    of these parts runs after one with a failing check (the edges at size are most of the group's time)."""
    from specsim.conformance.checks.sampler.precision import SAMPLER_QUICK_REQUESTS, SAMPLER_REQUESTS, sampler_precision_check
    precision = sampler_precision_check(device, seed=ctx.seed,  # called first, reported after the random cases
                                        requests=SAMPLER_QUICK_REQUESTS if ctx.quick else SAMPLER_REQUESTS)
    parts = (lambda: edge_checks(device, ctx), lambda: random_checks(device, ctx), lambda: [precision],
             lambda: _size_checks(device, ctx), lambda: edge_batch_checks(device, ctx),
             lambda: edge_mixed_checks(device, ctx))
    results: list[CheckResult] = []
    for part in parts:
        results += part()
        if stop_at_first_fail and any(r.status in ("fail", "error") for r in results):
            break
    return results


SIZES = ((65537, "spread"), (151936, "tail"))
"""Where the edges are re-stated (``specsim.testing.embed``): at 2^16 + 1 ids with their tokens at
id 0, a tile edge, each side of 2^15 and the last id (2^16); at Qwen2's 151936 on the last ids."""
QUICK_SIZES = ((151936, "tail"),)


def _size_checks(device, ctx) -> list[CheckResult]:
    """``L1-sampler/edge/<edge>/<order>/V<V>``: each edge (injected noise, exact tokens) at a real
    vocabulary, its tokens where kernels change path: a ban, bias, penalty, mask bit or min_p
    decision lost or read at the wrong id past a 16-bit id, a tile, a mask word or a chunk changes
    the tokens. Last in the group, so that a bug the edge shows at V = 4 is named by the edge."""
    from specsim.testing.embed import spread_ids, tail_ids
    caps, results = device.capabilities, []
    dtype = "float64" if "float64" in caps.dtypes else caps.dtypes[0]
    for V, where in QUICK_SIZES if ctx.quick else SIZES:
        for edge in SAMPLER_EDGES:
            for order in edge.orders:
                name = f"L1-sampler/edge/{edge.name}/{order}/V{V}"
                why = sampler_edge_lacking(caps, edge, order) or missing(caps, set(), vocab_size=V, dtype=dtype) or (
                    None if caps.injected_noise else "device does not take injected noise (the edges at size "
                    "compare tokens exactly)")
                if why:
                    results.append(CheckResult(name, "L1", "not_supported", why))
                    continue
                v = edge.batch(order, dtype)[0].vocab_size
                ids = spread_ids(V, v) if where == "spread" else tail_ids(V, v)
                results.append(edge_check(device, edge, order, dtype, name, ctx, at=(V, ids)))
    return results


def edge_batch_checks(device, ctx, only: str | None = None, kind: str = "batches",
                      filler_top_p: bool = True, filler_min_tokens: bool = True) -> list[CheckResult]:
    """``L1-sampler/edge/<edge>/<order>/batches`` and ``.../<order>/<dtype>/batches`` (SPEC 1.9): each edge's requests
    repeated to fill a batch of each size of the ladder (``declared_cases.edge_batch_sizes``), in the edges' dtype and
    in every other declared dtype that holds its logits (``dtype_twins``), every copy held to its request's answer
    (``specsim.conformance.core.batched``): with injected noise its exact tokens (the edge's coins drawn from the
    run's seed as its own check draws them), on the keyed streams the reference's (a device taking no injected
    noise with ``rng = "philox"``), else, under its own randomness, its exact support. A device taking injected noise
    that draws its own randomness too is held so again in that mode (SPEC 1.12, ``batch_modes``' twin:
    ``.../<order>/keyed/<kind>`` on the keyed streams, ``.../<order>/seeded/<kind>`` by support; among fillers
    not with ``--quick``), in the edges' dtype, and since SPEC 1.14 in every other dtype holding its logits too
    (``.../<order>/<dtype>/keyed/<kind>``, ``.../<order>/<dtype>/seeded/<kind>``; not with ``--quick``). A ban, penalty, bias or cut
    kept by the path a few requests take and lost on the one a full batch takes fails here. ``kind="mixed"``: the
    same checks named ``.../mixed`` (SPEC 1.11), the edge's requests among ``sampler_filler``'s at each size of
    ``sampler_mixed_sizes`` (with ``--quick``, 33 alone and no dtype twin), each in a token mode with its
    ``L1-sampler/edge-neighbours/...`` (``batched.neighbours_of``), the filler rows held to the reference's tokens
    (``filler_top_p`` False: every filler's top-p off; ``filler_min_tokens`` False: every filler's ``min_tokens`` 0;
    each for one of ``specsim field``'s experiments)."""
    from specsim.conformance.cases.declared import edge_batch_sizes, sampler_mixed_sizes
    from specsim.conformance.checks.chain.exact import batch_modes
    from specsim.conformance.core.batched import held_among, held_at_sizes, neighbours_of
    caps, results = device.capabilities, []
    dtype, sizes = edge_dtype(caps), (sampler_mixed_sizes if kind == "mixed" else edge_batch_sizes)(ctx)
    modes = {suffix.replace("batches", kind): mode for suffix, mode in batch_modes(caps).items()}
    first = modes.pop(kind)
    twins = not (kind == "mixed" and ctx.quick)   # quick: §12's fillers in one dtype and mode
    for edge in SAMPLER_EDGES:
        for order in edge.orders:
            base = f"L1-sampler/edge/{edge.name}/{order}"
            # the first noise mode, the device's own randomness beside injected noise (SPEC 1.12), then every other
            # dtype holding the edge's logits in the first mode (a quick run asks neither twin among fillers)
            asked = {f"{base}/{kind}": (first, dtype, kind),
                     **{f"{base}/{suffix}": (mode, dtype, suffix) for suffix, mode in modes.items() if twins},
                     **{f"{base}/{d}/{kind}": (first, d, kind) for d in dtype_twins(edge, caps) if twins},
                     **{f"{base}/{d}/{suffix}": (mode, d, suffix) for suffix, mode in modes.items()   # SPEC 1.14
                        for d in dtype_twins(edge, caps) if not ctx.quick}}
            why = sampler_edge_lacking(caps, edge, order)
            for name, (mode, in_dtype, suffix) in asked.items():
                if only not in (None, name, neighbours_of(name)):
                    continue
                if why:
                    results.append(CheckResult(name, "L1", "not_supported", why))
                    continue
                seed = case_seed(ctx.seed, "L1-sampler", edge.name, order)
                batch, noise = edge.batch(order, in_dtype, seed=seed)
                answers = dict(expected=edge.expected_in(order), seed=seed,
                               laws=lambda: sampler_edge_laws(edge, order),
                               support_seed=case_seed(ctx.seed, f"L1-sampler-{suffix}", edge.name, order,
                                                      *(() if in_dtype == dtype else (in_dtype,))))
                if kind == "mixed":
                    filler = sampler_filler(caps, ctx, edge.name, order, batch, in_dtype, filler_top_p,
                                            filler_min_tokens)
                    results += held_among(device, name, mode, batch, noise, filler,
                                          tuple(s for s in sizes if s > batch.batch_size), edge.why, **answers)
                else:
                    results.append(held_at_sizes(device, name, mode, batch, noise, sizes, edge.why, **answers))
    return results


def edge_mixed_checks(device, ctx, only: str | None = None, filler_top_p: bool = True,
                      filler_min_tokens: bool = True) -> list[CheckResult]:
    """``L1-sampler/edge/<edge>/<order>/mixed`` and its dtype twins (SPEC 1.11): ``edge_batch_checks`` of the edges
    among filler requests."""
    return edge_batch_checks(device, ctx, only, kind="mixed", filler_top_p=filler_top_p,
                             filler_min_tokens=filler_min_tokens)


def sampler_filler(caps, ctx, edge_name: str, order: str, batch, dtype: str, with_top_p: bool = True,
                   with_min_tokens: bool = True):
    """(filler requests, their noise) to mix with a §12 edge's ``batch`` in ``order`` (SPEC 1.11): §4's
    (``chain.exact.mixed_filler``: greedy, top-k, top-p and unfiltered among them), requests 0 to 3 with no §12
    parameter (in the joined batch, each field at the value that changes nothing,
    ``testing.batches.neutral_sampler``), the rest with every §12 parameter the device declares in ``order`` at
    ``random_sampler``'s strengths — so that a batch-wide flag the edge's own requests set (every request
    penalised, banned, biased or masked) is unset, and the filler rows, held to the reference, are §12 rows too.
    ``with_top_p``, ``with_min_tokens`` False: the same requests with every top-p off, or every ``min_tokens`` 0
    (``specsim field``'s experiments for a deviation on the filler rows)."""
    from specsim.conformance.checks.chain.exact import mixed_filler
    from specsim.testing.batches import join_requests, select_requests
    filler, noise = mixed_filler(caps, ctx, f"sampler/{edge_name}/{order}", batch, dtype, with_top_p,
                                 masked_fraction=0.0)   # no raw -inf logits: one safe token stays on every row
    params = tuple(p for p in caps.sampler if sampler_lacking(caps, (p,), order) is None)
    if not params or batch.vocab_size < 2:
        return filler, noise
    plain, plain_noise = select_requests(filler, np.arange(4), noise)
    rest, rest_noise = select_requests(filler, np.arange(4, filler.batch_size), noise)
    rng = np.random.default_rng(case_seed(ctx.seed, "edge-mixed-sampler", edge_name, order, dtype))
    sampler = random_sampler(rng, rest, params, order)
    if not with_min_tokens and sampler.min_tokens is not None:
        sampler = replace(sampler, min_tokens=np.zeros_like(sampler.min_tokens))
    return join_requests(plain, replace(rest, sampler=sampler), plain_noise, rest_noise)


def main(argv=None) -> int:
    """``python -m specsim.conformance.checks.sampler.group [--device torch] [--quick] [--threads 1]``: every edge at
    every batch size (SPEC 1.9), §4's and §12's, and among filler requests (SPEC 1.10, 1.11: §4's and §12's), timed."""
    from specsim.conformance.checks.chain.exact import edge_batch_checks as chain_batch_checks
    from specsim.conformance.checks.chain.exact import edge_mixed_checks as chain_mixed_checks
    from specsim.conformance.core.timing import timed_main
    return timed_main("python -m specsim.conformance.checks.sampler.group", main.__doc__,
                      {"L1/edge/*/batches": chain_batch_checks, "L1-sampler/edge/*/batches": edge_batch_checks,
                       "L1/edge/*/mixed": chain_mixed_checks, "L1-sampler/edge/*/mixed": edge_mixed_checks}, argv)


if __name__ == "__main__":
    raise SystemExit(main())
