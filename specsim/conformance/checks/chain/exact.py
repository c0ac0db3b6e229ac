"""Layer L1: a device given the reference's randomness must emit the reference's tokens.

Three groups: injected noise (SPEC §5.1), keyed Philox noise (§5.2; devices
declaring ``rng="philox"``), and the hand-built edges of §4, each again at every
batch size of the ladder (SPEC 1.9, ``edge_batch_checks``), among filler requests
(1.10, ``edge_mixed_checks``) and among fillers of one kind (1.11, ``edge_kind_checks``). Every case is a
deterministic function of the suite seed and its name, so a failure replays
with ``specsim conform --device ... --seed N --groups GROUP``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specsim.conformance.cases.declared import edge_batch_sizes, edge_kind_sizes, edge_mixed_sizes
from specsim.conformance.core.batched import MIXED_FILLERS, first_four_kinds, held_among, held_at_sizes, neighbours_of
from specsim.conformance.core.calls import ask, call, missing
from specsim.conformance.cases import edges as edge_laws
from specsim.conformance.cases.edges import dtype_twins, edge_dtype, edge_form, own_randomness_twin
from specsim.conformance.core.l1_judge import judge
from specsim.conformance.core.results import CheckResult
from specsim.conformance.stats.plan import StatPlan, run_plan
from specsim.testing.batches import BatchSpec, random_batch, random_noise
from specsim.judge.compare import compare, output_problems, reference_step
from specsim.testing.edges import EDGES, make_batch
from specsim.testing.seeds import case_seed

CASES: dict[str, BatchSpec] = {
    "full-mixed": BatchSpec(),
    "point-mixed": BatchSpec(draft_probs=False),
    "full-sampling-only": BatchSpec(greedy_fraction=0, top_k_fraction=0, top_p_fraction=0),
    "point-sampling-only": BatchSpec(draft_probs=False, greedy_fraction=0, top_k_fraction=0, top_p_fraction=0),
    "greedy-only": BatchSpec(draft_probs=False, greedy_fraction=1.0, top_k_fraction=0, top_p_fraction=0),
    "full-near-drafts": BatchSpec(closeness=0.05, greedy_fraction=0),
    "full-far-drafts": BatchSpec(closeness=4.0, greedy_fraction=0),
    "full-peaked": BatchSpec(logit_scale=8.0),
    "full-long": BatchSpec(max_k=8, batch=6),
    # Withdrawn drafts alone: the other cases hold padding placeholders, so each rule of SPEC §4 has
    # cases of its own, and a device reading every -1 one way fails the other's.
    "full-withdrawn": BatchSpec(withdrawn_fraction=0.25, placeholder_fraction=0.0),
}
"""Case name → what its batches hold (``placeholder_fraction``: padding placeholders, SPEC §4). Each
runs at every vocabulary size and dtype."""

VOCAB_SIZES = (8, 257, 1025)
QUICK_VOCAB_SIZES = (8, 65)
LOW_PRECISION = ("bfloat16", "float16")
"""16-bit logits (SPEC §6) for the devices that declare them: every case at one vocabulary size — what
is new is the input's rounding, which the reference takes exactly, not the device's arithmetic."""


def chain_cases(device, ctx, group: str):
    caps = device.capabilities
    sizes = QUICK_VOCAB_SIZES if ctx.quick else VOCAB_SIZES
    shapes = [(V, dtype) for V in sizes for dtype in ("float32", "float64")] + \
        [(sizes[1], dtype) for dtype in LOW_PRECISION]
    for case, spec in CASES.items():
        for V, dtype in shapes:
            name = f"{group}/{case}/V{V}/{dtype}"
            spec_here = replace(spec, vocab_size=V, dtype=dtype, max_k=min(spec.max_k, caps.max_k),
                                batch=spec.batch if not ctx.quick else min(spec.batch, 6))
            why = missing(caps, spec.needs, vocab_size=V, dtype=dtype)
            seed = case_seed(ctx.seed, name)
            yield name, spec_here, why, seed


def run_cases(device, ctx, group: str, injected: bool, only: str | None = None) -> list[CheckResult]:
    results = []
    for name, spec, why, seed in chain_cases(device, ctx, group):
        if only is not None and name != only:
            continue
        if why:
            results.append(CheckResult(name, "L1", "not_supported", why, seed=seed))
            continue
        rng = np.random.default_rng(seed)
        batch = random_batch(rng, spec)
        results.append(judge(name, device, batch, random_noise(rng, batch) if injected else None, seed))
    return results


def injected_noise_group(device, ctx) -> list[CheckResult]:
    """Random ragged batches with injected noise, token for token (SPEC §5.1)."""
    if not device.capabilities.injected_noise:
        return [CheckResult("L1/injected", "L1", "not_supported", "device does not take injected noise")]
    return run_cases(device, ctx, "L1/injected", injected=True)


def keyed_noise_group(device, ctx) -> list[CheckResult]:
    """Random ragged batches with the device's own Philox draws (SPEC §5.2), token for token."""
    if device.capabilities.rng != "philox":
        return [CheckResult("L1/keyed", "L1", "not_supported",
                            f"device rng is {device.capabilities.rng!r}, not the keyed Philox streams")]
    return run_cases(device, ctx, "L1/keyed", injected=False)


def edge_group(device, ctx, only: str | None = None, *, stop_at_first_fail: bool = False) -> list[CheckResult]:
    """Every SPEC §4 edge, for every profile it can be stated for: with injected noise, its exact
    expected tokens (no near-tie allowance; a float32 run of an edge that is a float64-scale
    near-tie is compared with SPEC §9's near-tie allowances instead); without, its exact law sampled under the device's
    own randomness (``edge_laws``: exact support, and a goodness-of-fit test per request whose
    law has more than one outcome, at its α in the run's plan, ``stat_plan``). A device taking injected
    noise that also draws its own randomness runs each edge a second time on it (SPEC 1.3): on §5.2's keyed
    streams (``rng = "philox"``) token for token with the reference's (``L1/edge/<name>/keyed``), on unkeyed
    draws (``"seeded"``) by the edge's law (``L1/edge/<name>/seeded``): that path is other code, held to every
    edge too. Each edge whose logits a dtype holds runs in every other declared logits dtype as well
    (``L1/edge/<name>/<dtype>``, ``edge_laws.dtype_twins``: the empty-residual edges since SPEC 1.4, every other
    since 1.5). Then every edge at every batch size of the ladder (SPEC 1.9, ``edge_batch_checks``). ``only``:
    that one check's name. ``stop_at_first_fail`` (``specsim mutants``): the batch sizes are not run after an edge's
    own check failed (the first failing check is the same)."""
    caps, results = device.capabilities, []
    dtype = edge_dtype(caps)
    own = own_randomness_twin(caps)
    plan = run_plan(caps, ctx) if not caps.injected_noise or own == "seeded" else None
    for edge in EDGES:
        name = f"L1/edge/{edge.name}"
        twin = f"{name}/{own}" if own else None
        in_dtypes = {f"{name}/{d}": d for d in dtype_twins(edge, caps)}
        wanted = [n for n in (name, twin, *in_dtypes) if n is not None and only in (None, n)]
        form, refused = _askable(caps, edge, wanted)
        results += refused
        for check in wanted if form else ():
            results.append(_edge_check(device, ctx, edge, form, check, in_dtypes.get(check, dtype), plan,
                                       keyed=check == twin and own == "keyed", law=check == twin and own == "seeded"))
    if stop_at_first_fail and any(r.status in ("fail", "error") for r in results):
        return results
    return (results + edge_batch_checks(device, ctx, only) + edge_mixed_checks(device, ctx, only)
            + edge_kind_checks(device, ctx, only))


def _askable(caps, edge, wanted) -> tuple:
    """(``edge`` as a device of ``caps`` is asked it, no results), or, where it lacks what the edge needs, (None, a
    ``not_supported`` result for each check named in ``wanted``); (None, none) where nothing is wanted."""
    form = edge_form(edge, caps)
    why = missing(caps, form.needs) if wanted else None
    if not wanted or why:
        return None, [CheckResult(n, "L1", "not_supported", why) for n in wanted] if why else []
    return form, []


def batch_modes(caps) -> dict[str, str]:
    """How each edge is held at the batch ladder (SPEC 1.9), check suffix → mode (``specsim.conformance.core.batched``):
    ``batches`` in the device's first noise mode — injected noise's tokens, else the keyed streams' (``rng =
    "philox"``), else its own randomness' support — and, for a device taking injected noise that draws its own
    randomness too, ``<twin>/batches`` in that mode as its edge's twin (``own_randomness_twin``).

    >>> from devices.protocol import Capabilities
    >>> batch_modes(Capabilities(injected_noise=True, rng="philox", max_vocab_size=8))
    {'batches': 'injected', 'keyed/batches': 'keyed'}
    >>> batch_modes(Capabilities(injected_noise=False, rng="seeded", max_vocab_size=8))
    {'batches': 'support'}
    """
    first = "injected" if caps.injected_noise else "keyed" if caps.rng == "philox" else "support"
    own = own_randomness_twin(caps)
    return {"batches": first, **({f"{own}/batches": "keyed" if own == "keyed" else "support"} if own else {})}


def edge_batch_checks(device, ctx, only: str | None = None, kind: str = "batches",
                      filler_top_p: bool = True) -> list[CheckResult]:
    """``L1/edge/<name>/batches``, ``L1/edge/<name>/<twin>/batches`` and ``L1/edge/<name>/<dtype>/batches`` (SPEC 1.9):
    every edge's requests repeated to fill a batch of each size of the ladder (``declared_cases.edge_batch_sizes``),
    each copy held to its request's answer (``specsim.conformance.core.batched``): in the edges' dtype (``edge_dtype``) in
    each mode of ``batch_modes``, and in every other declared dtype that holds the edge's logits (``dtype_twins``) in
    the first (``L1/edge/<name>/<dtype>/batches``) and, since SPEC 1.14, in the twin's
    (``L1/edge/<name>/<dtype>/<twin>/batches``: a kernel variant per dtype and noise source is held at every
    size). ``kind="mixed"``: the same checks named ``.../mixed`` (SPEC 1.10), the edge's requests mixed with
    filler requests (``mixed_filler``) at each size of ``edge_mixed_sizes`` that holds them and one filler, each in
    a token mode with its ``L1/edge-neighbours/...`` (``batched.neighbours_of``), the filler rows held to the
    reference's tokens (``filler_top_p`` False: every filler's top-p off, for ``specsim field``'s experiment). After every
    edge's own checks, so that a rule lost at any size or in any mix is named by its edge first."""
    caps, results = device.capabilities, []
    first_dtype, sizes = edge_dtype(caps), (edge_mixed_sizes if kind == "mixed" else edge_batch_sizes)(ctx)
    modes = {suffix.replace("batches", kind): mode for suffix, mode in batch_modes(caps).items()}
    first = modes[kind]
    for edge in EDGES:
        asked = {f"L1/edge/{edge.name}/{suffix}": (mode, first_dtype) for suffix, mode in modes.items()}
        # every other dtype holding the edge's logits: in the first mode (1.9), then in the twin's (1.14)
        asked |= {f"L1/edge/{edge.name}/{d}/{suffix}": (mode, d) for suffix, mode in modes.items()
                  for d in dtype_twins(edge, caps)}
        wanted = {n: how for n, how in asked.items() if only in (None, n, neighbours_of(n))}
        form, refused = _askable(caps, edge, wanted)
        results += refused
        for check, (mode, dtype) in wanted.items() if form else ():
            if kind == "mixed":
                results += _edge_among(device, ctx, edge, form, check, mode, dtype, sizes, filler_top_p)
            else:
                results.append(_edge_at_sizes(device, ctx, edge, form, check, mode, dtype, sizes))
    return results


def edge_mixed_checks(device, ctx, only: str | None = None, filler_top_p: bool = True) -> list[CheckResult]:
    """``L1/edge/<name>/mixed`` and its twins (SPEC 1.10): ``edge_batch_checks`` of the edges among filler requests."""
    return edge_batch_checks(device, ctx, only, kind="mixed", filler_top_p=filler_top_p)


def mixed_filler(caps, ctx, edge_name: str, batch, dtype: str, with_top_p: bool = True, masked_fraction: float = 0.1):
    """(``MIXED_FILLERS`` random requests, their noise) to mix with an edge's ``batch`` (SPEC 1.10): its V, logits
    dtype and proposal form, drafts up to ``min(max_k, 8)``, and, of what the device declares, a greedy request, a
    request cut by top-k, one cut by top-p and one unfiltered (requests 0 to 3; the rest drawn as
    ``random_batch`` draws them, but without padding placeholders, which are edges of their own) — so that a batch
    flag (all greedy, all random, no request filtered) the edge's own requests would set is unset, and a mixed
    batch's path runs with the edge's requests on it. ``with_top_p`` False: the same requests with every top-p off
    (``specsim field``'s experiment for a deviation of top-p on the filler rows). ``masked_fraction``: of the
    target logits, those set to ``-inf`` (0 for §12's fillers, whose bans provide them: ``sampler.group``)."""
    spec = BatchSpec(batch=MIXED_FILLERS, max_k=min(caps.max_k, 8), vocab_size=batch.vocab_size, dtype=dtype,
                     draft_probs=batch.draft_probs is not None, placeholder_fraction=0.0,
                     masked_fraction=masked_fraction,
                     greedy_fraction=0.25 if caps.greedy else 0.0,
                     top_k_fraction=0.25 if caps.top_k else 0.0, top_p_fraction=0.25 if caps.top_p else 0.0,
                     top_k_below_vocab=batch.vocab_size > 1)
    rng = np.random.default_rng(case_seed(ctx.seed, "edge-mixed", edge_name, dtype))
    filler = first_four_kinds(random_batch(rng, spec), caps.greedy, caps.top_k, caps.top_p)
    if not with_top_p:
        filler = replace(filler, top_p=np.ones_like(filler.top_p))
    return filler, random_noise(rng, filler)


FILLER_KINDS = ("greedy", "sampled", "top-k", "top-p")
"""The kinds of SPEC 1.11's fillers of one kind (``kind_filler``): every filler greedy, or sampled with no filter, or
cut by top-k, or cut by top-p. With an edge's own requests each sets another combination of the batch-wide flags
(some greedy, some sampled, some filtered) than 1.10's mix, which sets them all."""


def edge_kind_checks(device, ctx, only: str | None = None, filler_top_p: bool = True) -> list[CheckResult]:
    """``L1/edge/<name>/mixed-<kind>`` for each kind of ``FILLER_KINDS`` (SPEC 1.11): every edge among 16 fillers all
    of that kind (``kind_filler``), at each size of ``edge_kind_sizes`` that holds its requests and one filler, in
    the edges' dtype and the device's first noise mode (``batch_modes``), laid out as 1.10's (``batched.held_among``):
    every copy held to its request's answer, and, in a token mode, the fillers' rows to the reference's tokens
    (``L1/edge-neighbours/<name>/mixed-<kind>``). A path chosen by one mix of requests — greedy requests beside
    sampled ones and no filter, say — that loses an edge's rule fails here. A device taking injected noise that draws
    its own randomness too is held so again in that mode (SPEC 1.13, ``batch_modes``' twin; with ``--quick`` too):
    ``L1/edge/<name>/keyed/mixed-<kind>`` with its neighbours on the keyed streams, ``.../seeded/mixed-<kind>`` by
    each copy's exact support. ``filler_top_p`` False: every filler's top-p off (``specsim field``'s experiment)."""
    caps, results = device.capabilities, []
    dtype, sizes = edge_dtype(caps), edge_kind_sizes(ctx)
    modes = [(suffix[: -len("batches")], mode) for suffix, mode in batch_modes(caps).items()]   # ("", first), twin
    for edge in EDGES:
        for (twin, mode), kind in ((m, k) for m in modes for k in FILLER_KINDS):
            name = f"L1/edge/{edge.name}/{twin}mixed-{kind}"
            if only not in (None, name, neighbours_of(name)):
                continue
            form, refused = _askable(caps, edge, [name])
            results += refused
            if form is None:
                continue
            batch, noise = make_batch(form.requests, dtype=dtype, point=form.point)
            if kind == "top-k" and batch.vocab_size < 2:
                continue   # no top-k cuts below V = 1: there is no such batch
            filler = kind_filler(caps, ctx, edge.name, batch, dtype, kind, filler_top_p)
            if isinstance(filler, str):
                results.append(CheckResult(name, "L1", "not_supported", filler))
                continue
            results += held_among(device, name, mode, batch, noise, filler,
                                  tuple(s for s in sizes if s > batch.batch_size), edge.why,
                                  **_answers_of(ctx, edge, form, dtype, f"edge-mixed-{kind}"))
    return results


def kind_filler(caps, ctx, edge_name: str, batch, dtype: str, kind: str, with_top_p: bool = True):
    """(``MIXED_FILLERS`` random requests all of ``kind``, their noise) to mix with an edge's ``batch`` (SPEC 1.11;
    ``FILLER_KINDS``): its V, logits dtype and proposal form, drafts up to ``min(max_k, 8)``, no padding
    placeholders; or, where the device does not declare the kind, why (``batch`` of V ≥ 2 for ``"top-k"``).
    ``with_top_p`` False: the same requests with every top-p off."""
    needs = {"greedy": "greedy", "top-k": "top_k", "top-p": "top_p"}.get(kind)
    if needs is not None and not getattr(caps, needs):
        return f"device does not declare {needs}: no filler of kind {kind!r}"
    spec = BatchSpec(batch=MIXED_FILLERS, max_k=min(caps.max_k, 8), vocab_size=batch.vocab_size, dtype=dtype,
                     draft_probs=batch.draft_probs is not None, placeholder_fraction=0.0,
                     greedy_fraction=1.0 if kind == "greedy" else 0.0, top_k_fraction=1.0 if kind == "top-k" else 0.0,
                     top_p_fraction=1.0 if kind == "top-p" else 0.0, top_k_below_vocab=batch.vocab_size > 1)
    rng = np.random.default_rng(case_seed(ctx.seed, "edge-mixed", edge_name, dtype, kind))
    filler = random_batch(rng, spec)
    noise = random_noise(rng, filler)
    return (filler if with_top_p else replace(filler, top_p=np.ones_like(filler.top_p))), noise


def _edge_at_sizes(device, ctx, edge, form, name: str, mode: str, dtype: str, sizes) -> CheckResult:
    """One edge in ``dtype`` at every size of ``sizes``, in ``mode`` (``batch_modes``): its exact tokens, but for a
    float32 run of a float64-scale near-tie (the reference's with SPEC §9's allowances)."""
    batch, noise = make_batch(form.requests, dtype=dtype, point=form.point)
    return held_at_sizes(device, name, mode, batch, noise, sizes, edge.why, **_answers_of(ctx, edge, form, dtype,
                                                                                        "edge-batches"))


def _edge_among(device, ctx, edge, form, name: str, mode: str, dtype: str, sizes,
                filler_top_p: bool = True) -> list[CheckResult]:
    """``_edge_at_sizes`` among ``mixed_filler``'s requests, at the sizes that hold the edge's requests and one
    filler (SPEC 1.10): the edge's check, and in a token mode its neighbours' (``batched.held_among``)."""
    batch, noise = make_batch(form.requests, dtype=dtype, point=form.point)
    filler = mixed_filler(device.capabilities, ctx, edge.name, batch, dtype, with_top_p=filler_top_p)
    return held_among(device, name, mode, batch, noise, filler, tuple(s for s in sizes if s > batch.batch_size),
                      edge.why, **_answers_of(ctx, edge, form, dtype, "edge-mixed"))


def _answers_of(ctx, edge, form, dtype: str, stream: str) -> dict:
    """What an edge's copies are held to: its exact tokens (but for a float32 run of a float64-scale near-tie,
    None: the reference's with SPEC §9's allowances), its requests' exact laws, and the seed of its own draws."""
    near_tie = dtype == "float32" and not edge.float32_exact
    return dict(expected=None if near_tie else edge.expected, seed=None,
                laws=lambda: [edge_laws.request_law(r, form.point) for r in form.requests],
                support_seed=case_seed(ctx.seed, stream, edge.name))


def _edge_check(device, ctx, edge, form, name: str, dtype: str, plan, keyed: bool, law: bool) -> CheckResult:
    """One check of ``edge`` in ``dtype``: its law for a device without injected noise (or its ``/seeded`` twin),
    its keyed streams' tokens (``/keyed``), else its injected noise's exact tokens."""
    if law or not device.capabilities.injected_noise:
        return _edge_law(device, ctx, form, name, dtype, plan)
    batch, noise = make_batch(form.requests, dtype=dtype, point=form.point)
    if keyed:
        return judge(name, device, batch, None, None, note=f": {edge.why}, on the keyed streams")
    return edge_injected(device, edge, name, batch, noise, dtype)


def edge_injected(device, edge, name: str, batch, noise, dtype: str, expected: list | None = None,
                  explain: int = 1) -> CheckResult:
    """One edge with its injected noise: its exact expected tokens (no near-tie allowance), or, for a float32 run
    of an edge that is a float64-scale near-tie, the reference's tokens with SPEC §9's allowances. ``expected``:
    per request, the tokens (default ``edge.expected``; the mapped ones for an edge re-stated at a vocabulary,
    ``specsim.testing.embed``). ``explain``: how many differing requests a failure walks for its first
    contradicted decision (``compare``; 0 at a real vocabulary, where the walk is exact over every id)."""
    expected = edge.expected if expected is None else expected
    got, problem = call(name, "L1", lambda: ask(device, batch, noise), device.capabilities)
    if problem:
        return problem
    near_tie = dtype == "float32" and not edge.float32_exact   # a near-tie of the float64 kind: SPEC §9 applies
    cmp = compare(batch, got, reference_step(batch, noise), explain=None if near_tie else explain)
    if near_tie:
        return CheckResult(name, "L1", cmp.status, edge.why if cmp.ok else f"{edge.why}: {cmp.summary()}",
                           extra=cmp.extra())
    width = batch.max_k + 1
    emitted = [np.asarray(got.output_token_ids)[i, : int(got.num_accepted[i]) + 1].tolist()
               if np.asarray(got.output_token_ids).shape == (batch.batch_size, width) else None
               for i in range(batch.batch_size)]
    ok = emitted == expected
    detail = edge.why if ok else f"{edge.why}: expected {expected}, got {emitted} (num_accepted {list(map(int, got.num_accepted))})"
    return CheckResult(name, "L1", "pass" if ok else "fail", detail, extra={**cmp.extra(), "near_tie_allowances": 0})


def own_draws(device, name: str, batch, seed: int) -> tuple[list | None, CheckResult | None]:
    """``batch`` asked without injected noise: (each request's emitted tokens, None), or (None, the check's result)
    where the call raised, was refused, or gave an output of the wrong form (SPEC §7)."""
    got, problem = call(name, "L1", lambda: ask(device, batch, None), device.capabilities)
    if problem:
        return None, problem
    broken = output_problems(batch, got)
    if broken:
        return None, CheckResult(name, "L1", "fail", "; ".join(broken[:3]), seed=seed)
    return [got.emitted(i) for i in range(batch.batch_size)], None


def _edge_law(device, ctx, edge, name: str, dtype: str, plan: StatPlan) -> CheckResult:
    """One edge asked ``n`` times under the device's own randomness, held to its exact law (each request's
    goodness-of-fit test at its α in ``plan``)."""
    n = edge_laws.samples(ctx.quick)
    seed = case_seed(ctx.seed, "edge-law", edge.name)
    batch = edge_laws.repeated(edge, n, dtype, seed)
    emitted, problem = own_draws(device, name, batch, seed)
    if problem:
        return problem
    alphas = {i: plan.alpha(f"{name}/request{i}") for i, r in enumerate(edge.requests)
              if len(edge_laws.request_law(r, edge.point)) > 1}
    status, detail, spent, p_value, tv = edge_laws.judge(edge, emitted, n, alphas, seed)
    layer = "L3" if spent is not None else "L1"
    return CheckResult(name, layer, status, f"{detail} (repro: specsim conform --groups L1-edges --seed {ctx.seed})",
                       alpha=spent, n=n, seed=seed, p_value=p_value,
                       detectable_tv=tv if tv is not None and np.isfinite(tv) else None)
