"""SPEC §4's edges for devices that cannot take injected noise: each edge's exact law, sampled.

With injected noise an edge is one exact answer (``exact.edge_group``). A device drawing its own
randomness (``rng`` ``"seeded"`` or ``"philox"``, no injected noise: HF transformers'
``_speculative_sampling``, vLLM's sampler without its hook) is asked the same edge ``n`` times
under distinct seeds, and held to the edge's **law** — the exact distribution of the emitted
tokens given the edge's drafts, computed here from ``reference`` (§2 target processing, §3
acceptance and residual):

* **support, exactly**: every emitted sequence must have positive probability. For most edges
  this is the edge itself — "a token of target probability 0 is never emitted", "a draft with
  draft probability 0 is never accepted", "a placeholder is never accepted", "a withdrawn draft's
  residual comes from its draft row", "the bonus comes from row K" — and where the law is one sequence (greedy, one-hot rows) it is the exact
  answer. No α is spent.
* **the law, statistically**, where it has more than one sequence: a pooled goodness-of-fit test
  (``specsim.judge.stats.gof_test``) per request whose law has more than one sequence, each one test
  of the run-wide statistical plan (``stat_plan``: ``alpha_family`` split evenly over every
  statistical test of the run — these, L1-sampler's SPEC §12 edges, L3's checks — each run at
  a tenth of its share). Each check states its n, α and the smallest total-variation distance
  it detects with power 0.999.

What no sampling can show — which of two exactly tied tokens wins (race and greedy ties are
rules about injected noise and argmax, §3), or that ``u`` equal to the ratio rejects — is the
part of those edges left to L1; their law is still checked here.

A point-proposal edge is stated with one-hot draft rows for a device without point proposals
(SPEC §3: a point proposal accepts and resamples exactly as a one-hot draft row would), so a
draft-probs-only device gets it too (``as_draft_probs``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, SAMPLER_PARAMETERS, VerifyBatch
from reference.sampler import sampler_rows
from reference.target import target_probs
from reference.verify import residual
from specsim.judge import stats
from specsim.conformance.core.calls import missing
from specsim.testing.batches import numpy_dtype
from specsim.testing.edges import Edge, Request, make_batch

SAMPLES, QUICK_SAMPLES = 2000, 400
"""Repetitions of each L1-edges edge under distinct seeds: n = 2000 detects a TV of about 0.1 on the
edges' two-to-four-cell laws at the plan's α (stated per check and in ``stat_plan``)."""

SAMPLER_SAMPLES = 400
"""Runs of each L1-sampler edge for a device without injected noise (a quarter with ``--quick``): exact
support, and a goodness-of-fit test of each request's law where it has more than one outcome (n = 400
detects a TV of about 0.2 on its 3–4-cell laws at the plan's α, stated per check)."""


def samples(quick: bool) -> int:
    """n of each L1-edges law."""
    return QUICK_SAMPLES if quick else SAMPLES


def sampler_samples(quick: bool) -> int:
    """n of each L1-sampler edge law."""
    return SAMPLER_SAMPLES // 4 if quick else SAMPLER_SAMPLES


def edge_form(edge: Edge, caps) -> Edge:
    """The edge as a device of capabilities ``caps`` can be asked it: a point-proposal edge restated with
    one-hot draft rows (``as_draft_probs``, SPEC §3) for a device with draft probabilities only."""
    if edge.point and not caps.point_proposals and caps.draft_probs:
        return as_draft_probs(edge)
    return edge


def own_randomness_twin(caps) -> str | None:
    """How a device taking injected noise is held to each edge a second time, on its own randomness (SPEC 1.3):
    ``"keyed"`` token for token on §5.2's streams (``rng = "philox"``), ``"seeded"`` by the edge's law; None
    for a device without injected noise (its edges are laws already) or without randomness of its own. The
    twin is the check ``L1/edge/<name>/<twin>``."""
    return {"philox": "keyed", "seeded": "seeded"}.get(caps.rng) if caps.injected_noise else None


def edge_dtype(caps) -> str:
    """The logits dtype an edge runs in first: float64 where declared (the reference's own), else the first
    declared."""
    return "float64" if "float64" in caps.dtypes else caps.dtypes[0]


def holds_exactly(edge, dtype: str) -> bool:
    """Whether ``dtype`` holds every logit of ``edge`` (an ``Edge`` or a §12 ``SamplerEdge``) exactly, and its answer
    does not hinge on a float64 ratio (``float32_exact``): then its answer is the same in that dtype, and a device's
    kernel variant for it is held to the edge as stated.

    >>> from specsim.testing.edges import EDGES
    >>> [e.name for e in EDGES if not holds_exactly(e, "bfloat16")]
    ['u-just-below-ratio', 'top-p-cut-ties']
    """
    if dtype != "float64" and not getattr(edge, "float32_exact", True):
        return False
    logits = np.array([v for r in edge.requests for row in r.logits for v in row], dtype=np.float64)
    return bool(np.array_equal(logits.astype(numpy_dtype(dtype)).astype(np.float64), logits))


def dtype_twins(edge, caps) -> tuple[str, ...]:
    """The other declared dtypes ``edge`` (an ``Edge`` or a §12 ``SamplerEdge``) runs in too, each the check
    ``L1/edge/<name>/<dtype>`` or ``L1-sampler/edge/<name>/<order>/<dtype>``: every declared dtype but
    ``edge_dtype`` that ``holds_exactly`` its logits. The empty-residual edges of §4 since SPEC 1.4; every other
    edge since 1.5: a dtype's kernel variant (16-bit loads, a float32 path) that lost a rule the float64 path keeps
    is caught edge by edge, not only at volume (``L1-16bit``)."""
    first = edge_dtype(caps)
    return tuple(d for d in caps.dtypes if d != first and holds_exactly(edge, d))


def as_draft_probs(edge: Edge) -> Edge:
    """``edge`` with one-hot draft rows in place of point proposals (SPEC §3); a full edge unchanged.

    >>> from specsim.testing.edges import EDGES
    >>> e = as_draft_probs(next(e for e in EDGES if e.name == "race-tie"))
    >>> e.point, e.requests[0].draft_rows, sorted(e.needs)
    (False, [[1.0, 0.0, 0.0, 0.0]], ['draft_probs'])
    """
    if not edge.point:
        return edge
    requests = []
    for r in edge.requests:
        V = len(r.logits[0])
        rows = [[1.0 / V] * V if x == PLACEHOLDER_TOKEN_ID else [float(v == x) for v in range(V)]
                for x in r.draft_ids]
        requests.append(dataclasses.replace(r, draft_rows=rows))
    return dataclasses.replace(edge, requests=requests, point=False,
                               needs=frozenset(edge.needs - {"point_proposals"}) | {"draft_probs"})


def request_law(r: Request, point: bool, target=None) -> dict[tuple, float]:
    """The exact law of request ``r``'s emitted tokens given its drafts (SPEC §2, §3, §4).
    ``target``: its rows' ``target_probs`` ``[K + 1, V]`` (default: §2 of ``r.logits``; SPEC §12's
    rows for a sampler edge, where a greedy row is the one-hot of the processed argmax).

    >>> request_law(Request([0], [[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0]]), point=False)
    {(1,): 0.5, (0, 0): 0.25, (0, 1): 0.25}
    >>> request_law(Request([-1], [[0.0, 0.0, -np.inf], [0.0, 0.0, 0.0]], [[0.5, 0.0, 0.5]], withdrawn=[True]), False)
    {(1,): 1.0}
    """
    rows = np.asarray(r.logits, dtype=np.float64)  # [K + 1, V]
    if r.temperature == 0:   # given §12's rows, each is the one-hot of its processed argmax
        greedy = [int(np.argmax(row)) for row in (rows if target is None else np.asarray(target))]
        j = next((j for j, x in enumerate(r.draft_ids) if x != greedy[j]), len(r.draft_ids))
        return {tuple(r.draft_ids[:j]) + (greedy[j],): 1.0}
    # Row j's target is made once the walk reaches it, and once per distinct row: a request rejected with certainty
    # at position j of K (the declared positions checks: one-hot rows before it) costs a few rows, not K + 1.
    made: dict[bytes, np.ndarray] = {}

    def row_target(j: int) -> np.ndarray:  # [V]
        if target is not None:
            return target[j]
        key = rows[j].tobytes()
        if key not in made:
            made[key] = target_probs(rows[j], r.temperature, r.top_k, r.top_p)
        return made[key]

    law: dict[tuple, float] = {}
    mass = 1.0
    for j, x in enumerate(r.draft_ids):
        draft = None if point else np.asarray(r.draft_rows[j], dtype=np.float64)  # [V]
        t = row_target(j)
        w = residual(x, t, draft, withdrawn=bool(r.withdrawn and r.withdrawn[j]))
        w = w / w.sum()
        accept = _acceptance(x, t, draft)
        for y in np.flatnonzero(w > 0):
            _add(law, tuple(r.draft_ids[:j]) + (int(y),), mass * (1 - accept) * float(w[y]))
        mass *= accept
        if mass == 0:
            return law
    t = row_target(len(r.draft_ids))
    for y in np.flatnonzero(t > 0):
        _add(law, tuple(r.draft_ids) + (int(y),), mass * float(t[y]))
    return law


def _acceptance(x: int, target: np.ndarray, draft: np.ndarray | None) -> float:
    """P(accept draft ``x``): ``min(1, t(x)/d(x))``, ``t(x)`` for a point proposal, 0 if undrawable (§4)."""
    if x == PLACEHOLDER_TOKEN_ID or target[x] == 0 or (draft is not None and not draft[x] > 0):
        return 0.0
    return float(target[x]) if draft is None else min(1.0, float(target[x] / draft[x]))


def _add(law: dict, key: tuple, p: float) -> None:
    if p > 0:
        law[key] = law.get(key, 0.0) + p


def repeated(edge: Edge, n: int, dtype: str, seed: int) -> VerifyBatch:
    """The edge's requests, each ``n`` times (request-major), under distinct seeds, position 0."""
    batch, _ = make_batch([r for r in edge.requests for _ in range(n)], dtype=dtype, point=edge.point)
    seeds = np.random.default_rng(seed).integers(0, 2**63, batch.batch_size, dtype=np.uint64)
    return dataclasses.replace(batch, seeds=seeds)


def judge(edge: Edge, emitted: list[list[int]], n: int, alphas: dict, seed: int) -> tuple:
    """(status, detail, α, p-value, detectable TV) of ``emitted`` (``len(edge.requests) * n`` sequences,
    request-major). ``alphas``: request index → the level of its goodness-of-fit test (``stat_plan``;
    every request whose law has more than one sequence). α, p and TV are those of the test that decided
    (the failing one, else the one of smallest p); all None where no test ran (exact)."""
    worst_tv, p_min, spent = 0.0, None, None
    for i, r in enumerate(edge.requests):
        law = request_law(r, edge.point)
        seen = Counter(tuple(s) for s in emitted[i * n:(i + 1) * n])
        outside = {k: c for k, c in seen.items() if k not in law}
        if outside:
            return "fail", (f"request {i}: emitted {sorted(outside)[:3]} ({sum(outside.values())} of {n} samples), "
                            f"which the exact law gives probability 0; the law: {show_law(law)}"), None, None, None
        if len(law) > 1:
            keys = sorted(law)
            result = stats.gof_test(np.array([seen.get(k, 0) for k in keys]), np.array([law[k] for k in keys]),
                                    alphas[i], what=f"{edge.name} request {i}", seed=seed)
            worst_tv = max(worst_tv, result.detectable_tv)
            if not result.passed:
                return ("fail", f"request {i}: {result.report()}; the law: {show_law(law)}", alphas[i],
                        result.p_value, result.detectable_tv)
            if p_min is None or result.p_value < p_min:
                p_min, spent = result.p_value, alphas[i]
    kind = (f"law checked: exact support and a goodness-of-fit test at α={spent:.1e}, n={n}, detectable TV "
            f"{worst_tv:.3f}, smallest p={p_min:.3g}" if spent is not None else f"exact: every one of {n} samples "
            "in the law's one sequence" if all(len(request_law(r, edge.point)) == 1 for r in edge.requests)
            else f"exact support over {n} samples")
    return ("pass", f"{edge.why} — without injected noise, {kind}", spent, p_min,
            worst_tv if spent is not None else None)


def show_law(law: dict) -> str:
    """A law's four likeliest sequences, for a failure's detail."""
    return ", ".join(f"{list(k)}: {p:.3g}" for k, p in sorted(law.items(), key=lambda kv: -kv[1])[:4])


# --------------------------------------------------------------------------- SPEC §12 edges (L1-sampler)

def sampler_lacking(caps, params, order: str) -> str | None:
    """Why a device of capabilities ``caps`` cannot be asked §12 parameters ``params`` in ``order`` (None: it can)."""
    if not params:
        return "device declares no sampler parameter"
    absent = [p for p in params if p not in caps.sampler]
    if absent:
        return f"device does not declare sampler {', '.join(absent)}"
    if order not in caps.sampler_orders:
        return f"device does not declare sampler order {order!r}"
    return None


def sampler_edge_lacking(caps, edge, order: str) -> str | None:
    """Why the device cannot be asked §12 ``edge`` (``specsim.testing.sampler_edges``) in ``order`` (None: it can)."""
    sampler_needs = [n for n in edge.needs if n in SAMPLER_PARAMETERS]
    return sampler_lacking(caps, sampler_needs, order) or \
        missing(caps, {"draft_probs"} | (set(edge.needs) - set(SAMPLER_PARAMETERS)))


def sampler_edge_laws(edge, order: str) -> list[dict]:
    """Each request's exact law of emitted tokens given its drafts, with SPEC §12's rows
    (``reference.sampler.sampler_rows``; ``request_law``'s enumeration)."""
    batch, _ = edge.batch(order)
    rows = sampler_rows(batch.target_logits, batch.num_draft_tokens, batch.draft_token_ids, batch.temperature,
                        batch.top_k, batch.top_p, **batch.sampler.as_kwargs())
    starts = np.concatenate([[0], np.cumsum(batch.num_draft_tokens + 1)])   # each request's rows
    cu = np.concatenate([[0], np.cumsum(batch.num_draft_tokens)])           # each request's drafts
    return [request_law(dataclasses.replace(r, draft_rows=batch.draft_probs[cu[i]: cu[i + 1]]), False,
                        rows[starts[i]: starts[i + 1]]) for i, r in enumerate(edge.requests)]
