"""The sizes a declaration asks for, and the few-id requests ``declared``'s groups send at them.

``vocab_limits``, ``k_limits``, ``tree_limits``: the values of ``max_vocab_size``, ``max_k`` and
``max_tree_nodes`` a run checks (the core's and the declared ones, capped where a call would not fit
``CALL_BYTES`` or a tree ``TREE_CAP``). ``support_requests``, ``deep_requests``, ``random_requests``,
``law_request``: requests whose target rows put their mass on a few ids (``spread_ids``), so that any
misplaced token lands outside the support; ``assemble`` makes them a ``VerifyBatch`` and
``request_laws`` gives each request's exact law (``edge_laws.request_law``). ``law_cases`` and
``law_tests`` list L3-declared's goodness-of-fit tests for the run's statistical plan (``stat_plan``),
which reads this module and not the groups'.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from devices.protocol import VerifyBatch


CORE_VOCAB = 262_144
"""The core profile's ``max_vocab_size`` (Gemma 3's vocabulary): always checked when declared."""
CORE_K = 8
"""The core profile's ``max_k``: checked beside the declared value."""

CALL_BYTES = 1 << 30
"""The float rows of one call (logits, draft rows, float64 exponentials) are kept at or below this."""
BYTES_PER_ID = 3 * 4 + 2 * 4 + 8
"""One K = 2 request's bytes per vocabulary id: three float32 logits rows, two float32 draft rows, one
float64 exponential."""
VOCAB_CAP = CALL_BYTES // BYTES_PER_ID
"""The largest V checked: one request at this V fills ``CALL_BYTES`` (38 347 922)."""
TREE_CAP = 4096
"""Trees (nodes, depth) and chains (K) are checked up to this; a larger declared limit is checked here."""

SMALL_V = 64
"""The vocabulary of the K, tree and batch checks: the declared V has its own checks."""
BATCH_SIZES = (1, 2, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025)
"""Each side of the sizes where kernels switch paths: a warp, a block, a second launch, a split grid."""
QUICK_BATCH_SIZES = (1, 9, 33, 257)

LAW_SAMPLES, QUICK_LAW_SAMPLES = 240, 60
"""Repetitions of the goodness-of-fit request at a declared V (its cost: one V-wide draw each)."""
DEEP_LAW_SAMPLES, QUICK_DEEP_LAW_SAMPLES = 2000, 200
"""Repetitions of the goodness-of-fit request at the declared ``max_k`` (V = ``SMALL_V``)."""

INJECTED, KEYED, DEVICE_RNG = "injected", "keyed", "device-rng"


# --------------------------------------------------------------------------- the declared sizes

@dataclass(frozen=True)
class Limit:
    """One size checked: ``value``, the ``declared`` value it stands for, and why they differ (or None)."""

    value: int
    declared: int
    capped: str | None = None

    def to_json(self) -> dict:
        return {"checked": self.value, "declared": self.declared} | ({"capped": self.capped} if self.capped else {})


def vocab_limits(caps) -> list[Limit]:
    """V at the core's 262144 (when declared) and at the declared ``max_vocab_size`` (capped at ``VOCAB_CAP``).

    >>> from devices.protocol import Capabilities
    >>> [l.value for l in vocab_limits(Capabilities(True, "none", 1 << 19))]
    [262144, 524288]
    >>> vocab_limits(Capabilities(True, "none", 1 << 30))[1].capped[:40]
    'one request at the declared V = 10737418'
    """
    out = [Limit(min(CORE_VOCAB, caps.max_vocab_size), caps.max_vocab_size)]
    if caps.max_vocab_size > CORE_VOCAB:
        capped = None
        if caps.max_vocab_size > VOCAB_CAP:
            capped = (f"one request at the declared V = {caps.max_vocab_size} needs "
                      f"{caps.max_vocab_size * BYTES_PER_ID / 2**30:.1f} GiB of float rows; checked up to V = "
                      f"{VOCAB_CAP}, where it fills the {CALL_BYTES >> 30} GiB one call may hold")
        out.append(Limit(min(caps.max_vocab_size, VOCAB_CAP), caps.max_vocab_size, capped))
    return out


def k_limits(caps) -> list[Limit]:
    """K at the core's 8 and at the declared ``max_k`` (capped at ``TREE_CAP``)."""
    out = [Limit(min(CORE_K, caps.max_k), caps.max_k)]
    if caps.max_k > CORE_K:
        out.append(Limit(min(caps.max_k, TREE_CAP), caps.max_k,
                         None if caps.max_k <= TREE_CAP else f"declared max_k {caps.max_k} is checked at {TREE_CAP}"))
    return out


EVERY_POSITION = 64
"""``empty_positions``: every position below this is checked; past it, each side of every power of two."""


def empty_positions(K: int) -> tuple[int, ...]:
    """The positions of K drafts at which ``L1/declared/<mode>/empty-residual-positions-K<K>`` rejects with an empty
    residual (SPEC 1.7): every one below ``EVERY_POSITION``, past it each side of every power of two, and ``K − 1``
    (one request a position: a request rejects once, so every position of a large K would be quadratic in K).

    >>> empty_positions(8)
    (0, 1, 2, 3, 4, 5, 6, 7)
    >>> empty_positions(200)[60:]
    (60, 61, 62, 63, 64, 65, 127, 128, 129, 199)
    """
    out = set(range(min(K, EVERY_POSITION))) | {K - 1}
    p = EVERY_POSITION
    while p < K:
        out |= {p - 1, p, p + 1}
        p *= 2
    return tuple(sorted(x for x in out if x < K))


DENSE_POSITIONS = 512
"""``between_positions`` (SPEC 1.8): every position below this is checked; past it, each side of every multiple of
``POSITION_TILE``."""
POSITION_TILE = 64


def between_positions(K: int) -> tuple[int, ...]:
    """The positions of K drafts that ``L1/declared/<mode>/empty-residual-between-K<K>`` rejects at (SPEC 1.8): those
    ``empty_positions`` (1.7) leaves out among every position below ``DENSE_POSITIONS`` and, past it, each side of
    every multiple of ``POSITION_TILE`` — where a device walking the positions in tiles of 64 or any multiple of 64
    starts and ends each tile. Empty where 1.7 already checks every position (K ≤ 66).

    >>> between_positions(66), between_positions(68)
    ((), (66,))
    >>> len(between_positions(256)), between_positions(256)[:3], between_positions(256)[-3:]
    (186, (66, 67, 68), (252, 253, 254))
    >>> between_positions(1024)[-6:]
    (895, 896, 897, 959, 960, 961)
    """
    checked = set(empty_positions(K))
    out = set(range(min(K, DENSE_POSITIONS)))
    for p in range(DENSE_POSITIONS, K + 1, POSITION_TILE):
        out |= {p - 1, p, p + 1}
    return tuple(sorted(x for x in out if x < K and x not in checked))


def tree_limits(caps) -> tuple[Limit, Limit]:
    """(nodes, depth) of the declared-limit tree: ``max_tree_nodes`` nodes at depth ``max_k`` (the nodes permitting).
    An undeclared node limit is SPEC §11.1's default (``tree_node_limit``): the tree every device must serve."""
    limit = caps.tree_node_limit
    nodes = Limit(min(limit, TREE_CAP), limit,
                  None if limit <= TREE_CAP else f"declared max_tree_nodes is checked at {TREE_CAP}")
    depth = min(caps.max_k, nodes.value, TREE_CAP)
    return nodes, Limit(depth, caps.max_k, None if depth == caps.max_k else
                        f"depth {depth}: the most {nodes.value} nodes and the {TREE_CAP} cap allow")


def batch_sizes(ctx) -> tuple:
    return QUICK_BATCH_SIZES if ctx.quick else BATCH_SIZES


QUICK_EDGE_BATCH_SIZES = (33, 257)
"""``--quick``'s sizes for an edge repeated to fill a batch (SPEC 1.9): past a warp and past a block; its call at one
request is the edge's own check."""


def edge_batch_sizes(ctx) -> tuple:
    """The sizes an edge is repeated to fill (SPEC 1.9): ``BATCH_SIZES``, or ``QUICK_EDGE_BATCH_SIZES`` with ``--quick``.

    >>> from specsim.conformance.core.context import Context
    >>> edge_batch_sizes(Context(quick=True)), len(edge_batch_sizes(Context()))
    ((33, 257), 23)
    """
    return QUICK_EDGE_BATCH_SIZES if ctx.quick else BATCH_SIZES


def edge_mixed_sizes(ctx) -> tuple:
    """The sizes of an edge's batches among filler requests (SPEC 1.10): the sizes of ``BATCH_SIZES`` one past a
    power of two, the first of each path a larger batch takes (the mix's flags do not change with the size, and
    each size range between two switches holds one of them), or ``QUICK_EDGE_BATCH_SIZES`` with ``--quick``.

    >>> from specsim.conformance.core.context import Context
    >>> edge_mixed_sizes(Context()), edge_mixed_sizes(Context(quick=True))
    ((2, 9, 33, 65, 129, 257, 513, 1025), (33, 257))
    """
    if ctx.quick:
        return QUICK_EDGE_BATCH_SIZES
    return tuple(s for s in BATCH_SIZES if s > 1 and (s - 1) & (s - 2) == 0)


QUICK_KIND_MIXED_SIZES = (33,)


def edge_kind_sizes(ctx) -> tuple:
    """The sizes of an edge among fillers of one kind (SPEC 1.11): 33 and 257, one each side of the 64 requests where
    kernels split most often (each kind sets the batch's flags at every size; 1.10's mix holds the other sizes), or
    ``QUICK_KIND_MIXED_SIZES`` with ``--quick``.

    >>> from specsim.conformance.core.context import Context
    >>> edge_kind_sizes(Context()), edge_kind_sizes(Context(quick=True))
    ((33, 257), (33,))
    """
    return QUICK_KIND_MIXED_SIZES if ctx.quick else QUICK_EDGE_BATCH_SIZES


QUICK_SAMPLER_MIXED_SIZES = (33,)
"""A ``--quick`` run's sizes of §12's edges among fillers (SPEC 1.11): a §12 filler row costs the reference and
the device several §4 rows (its bans, penalties and history), and a quick run asks every §12 edge's fillers once."""


def sampler_mixed_sizes(ctx) -> tuple:
    """The sizes of a §12 edge among filler requests (SPEC 1.11): ``edge_mixed_sizes``, or
    ``QUICK_SAMPLER_MIXED_SIZES`` with ``--quick`` (where the edge's dtype twins are not asked either).

    >>> from specsim.conformance.core.context import Context
    >>> sampler_mixed_sizes(Context()) == edge_mixed_sizes(Context()), sampler_mixed_sizes(Context(quick=True))
    (True, (33,))
    """
    return QUICK_SAMPLER_MIXED_SIZES if ctx.quick else edge_mixed_sizes(ctx)


def scope(mode: str, V: int, K: int, batch: int, tree_nodes: int = 0) -> dict:
    """``extra["scope"]`` of a law-checking result: the sizes it checked in its noise mode."""
    return {"mode": mode, "V": int(V), "K": int(K), "batch": int(batch), "tree_nodes": int(tree_nodes)}


# --------------------------------------------------------------------------- few-id supports

def spread_ids(V: int) -> list[int]:
    """The ids a support batch puts its mass on: the last three, each side of 2^15 … 2^24 (below V), the
    last 128-wide tile's first id, the middle, the first two; sorted, distinct.

    >>> spread_ids(64)
    [0, 1, 32, 61, 62, 63]
    >>> spread_ids(262144)[-5:]
    [131072, 262016, 262141, 262142, 262143]
    """
    picks = [V - 1, V - 2, V - 3, (V - 1) // 128 * 128, V // 2, 0, 1]
    picks += [p for b in (15, 16, 17, 18, 20, 24) for p in (2 ** b - 1, 2 ** b) if 2 ** b < V]
    return sorted({p for p in picks if 0 <= p < V})


def _outside(support: list[int], near: int, V: int) -> int:
    """An id outside ``support``, next to ``near`` where possible (a misread by one lands on it)."""
    for d in (1, -1, 2, -2, 3, -3):
        if 0 <= near + d < V and near + d not in support:
            return near + d
    return next(v for v in range(V) if v not in support)


@dataclass
class Req:
    """One request of a few-id batch: its drafts, rows (``[K + 1]`` supports and logits), draft rows, mode."""

    drafts: list
    supports: list          # [K + 1] lists of ids with finite logits
    levels: list            # [K + 1] lists of their logits
    draft_rows: list | None  # [K] dicts id -> draft probability, or None (point proposals)
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    what: str = "sampled"

    @property
    def K(self) -> int:
        return len(self.drafts)


def logits_dtype(caps) -> str:
    return "float32" if "float32" in caps.dtypes else caps.dtypes[0]


def cast_logits(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16)
    return x if x.dtype == np.dtype(dtype) else x.astype(dtype)


def assemble(reqs: list[Req], V: int, dtype: str, point: bool, seeds=None) -> VerifyBatch:
    """The requests as one ``VerifyBatch``: logits ``-inf`` off each row's support (float ``dtype``), draft
    rows (float32, or the logits' dtype when float64) zero off theirs; ``seeds`` ``[B]`` (default 1 … B)."""
    B, N = len(reqs), sum(r.K for r in reqs)
    draft_dtype = "float64" if dtype == "float64" else "float32"
    logits = np.full((N + B, V), -np.inf, dtype=draft_dtype)  # built at the width it is sent in (16-bit: cast below)
    rows = None if point else np.zeros((N, V), dtype=draft_dtype)
    row, drow = 0, 0
    for r in reqs:
        for ids, lv in zip(r.supports, r.levels):
            logits[row, ids] = lv
            row += 1
        for j in range(r.K):
            if rows is not None:
                for x, p in r.draft_rows[j].items():
                    rows[drow, x] = p
            drow += 1
    if rows is not None:
        rows /= rows.sum(axis=1, keepdims=True, dtype=rows.dtype)
    seeds = np.arange(1, B + 1, dtype=np.uint64) if seeds is None else np.asarray(seeds, dtype=np.uint64)
    return VerifyBatch(np.array([r.K for r in reqs], np.int64), np.array([x for r in reqs for x in r.drafts], np.int64),
                       rows, cast_logits(logits, dtype), np.array([r.temperature for r in reqs]),
                       np.array([r.top_k for r in reqs], np.int64), np.array([r.top_p for r in reqs]),
                       seeds, (np.arange(B, dtype=np.int64) * 7) % 4096)


def request_laws(batch: VerifyBatch) -> list[dict]:
    """Each request's exact law of emitted sequences (``edge_laws.request_law``) from the values the device
    is given (its logits and draft rows in float64); a batch with SPEC §12's parameters takes its rows from
    ``reference.sampler.sampler_rows``."""
    from specsim.conformance.cases.edges import request_law
    from specsim.testing.edges import Request
    logits = np.asarray(batch.target_logits).astype(np.float64)
    probs = None if batch.draft_probs is None else np.asarray(batch.draft_probs).astype(np.float64)
    sampler = getattr(batch, "sampler", None)
    rows = None
    if sampler is not None and sampler.given():
        from reference.sampler import sampler_rows
        rows = sampler_rows(logits, batch.num_draft_tokens, batch.draft_token_ids, batch.temperature, batch.top_k,
                            batch.top_p, **sampler.as_kwargs())
    cu = batch.request_offsets()
    out = []
    for i in range(batch.batch_size):
        k0, k1 = int(cu[i]), int(cu[i + 1])
        r = Request(list(map(int, batch.draft_token_ids[k0:k1])), logits[k0 + i:k1 + i + 1],
                    None if probs is None else probs[k0:k1], float(batch.temperature[i]), int(batch.top_k[i]),
                    float(batch.top_p[i]))
        out.append(request_law(r, probs is None, None if rows is None else rows[k0 + i:k1 + i + 1]))
    return out


def per_call(reqs: list[Req], V: int) -> list[list[Req]]:
    """``reqs`` in consecutive calls whose float rows stay within ``CALL_BYTES`` (``BYTES_PER_ID`` a request)."""
    size = max(1, CALL_BYTES // (V * BYTES_PER_ID))
    return [reqs[i:i + size] for i in range(0, len(reqs), size)]


def _pick_modes(caps) -> list[str]:
    modes = ["reject-outside", "accept-inside", "bonus"]
    modes += ["greedy"] * caps.greedy + ["top-k"] * caps.top_k + ["top-p"] * caps.top_p
    return modes


def support_requests(V: int, caps) -> list[Req]:
    """One request per ``spread_ids(V)`` id, that id dominant (~0.9 of the row), two other spread ids beside
    it (never a neighbour), modes in turn: a draft outside the support (rejected with certainty), drafts
    inside it, a bonus-only request, greedy, top-k = 2 cutting a drafted id, top-p = 0.8 keeping the
    dominant id alone."""
    pool = spread_ids(V)
    P, step = len(pool), max(2, len(pool) // 3)
    modes, k2, k1 = _pick_modes(caps), min(2, caps.max_k), min(1, caps.max_k)
    out = []
    for a, dominant in enumerate(pool):
        support = [dominant, pool[(a + step) % P], pool[(a + 2 * step) % P]]
        mode = modes[a % len(modes)]
        levels = [3.0, 0.5, 0.0]
        outside = _outside(support, dominant, V)
        if mode == "reject-outside":
            drafts = [outside, support[1]][:k2]
        elif mode == "accept-inside":
            drafts = [dominant, support[1]][:k2]
        elif mode == "greedy":
            drafts = [dominant, support[2]][:k2]
        elif mode in ("top-k", "top-p"):
            drafts = [support[2] if mode == "top-k" else support[1]][:k1]
        else:
            drafts = []
        K = len(drafts)
        rows = [{x: 0.6} | {s: 0.2 for s in support[1:] if s != x} | ({dominant: 0.2} if x != dominant else {})
                for x in drafts]
        out.append(Req(drafts, [support] * (K + 1), [levels] * (K + 1), rows if caps.draft_probs else None,
                       temperature=0.0 if mode == "greedy" else 1.0, top_k=2 if mode == "top-k" else 0,
                       top_p=0.8 if mode == "top-p" else 1.0, what=mode))
    return out


def law_request(V: int, caps) -> Req:
    """The goodness-of-fit request at vocabulary V: K = 2 (``max_k`` permitting), three ids (the last, the
    middle, the second) with logits 1, 0.5, 0; the first draft the last id at draft probability 0.8 (accepted
    about half the time), the second the middle id: 7 emitted sequences."""
    support = [V - 1, V // 2, 1]
    drafts = [V - 1, V // 2][:min(2, caps.max_k)]
    rows = [{x: 0.8} | {s: 0.1 for s in support if s != x} for x in drafts]
    K = len(drafts)
    return Req(drafts, [support] * (K + 1), [[1.0, 0.5, 0.0]] * (K + 1), rows if caps.draft_probs else None,
               what="law")


def deep_request(K: int, V: int, caps, *, rejected_at_last: bool, law: bool = False) -> Req:
    """A request of K drafts whose first K − 1 are accepted with certainty (one-hot rows on them), then:
    ``rejected_at_last`` — the last draft outside its row's three ids (rejected with certainty); ``law`` —
    the last draft inside them at draft probability 0.8 (accepted about half the time); else accepted
    with certainty too. The bonus row holds three ids."""
    rng = np.random.default_rng(K * 7919 + V)
    drafts = [int(x) for x in rng.integers(0, V, K)]
    support3 = [V - 1, V // 2, 1]
    supports = [[x] for x in drafts[:-1]] if K else []
    levels = [[0.0] for _ in drafts[:-1]] if K else []
    rows = [{x: 1.0} for x in drafts[:-1]] if K else []
    if K:
        if rejected_at_last:
            drafts[-1] = _outside(support3, V // 2, V)
            supports.append(support3)
            levels.append([1.0, 0.5, 0.0])
            rows.append({drafts[-1]: 0.6, V - 1: 0.4})
        elif law:
            drafts[-1] = V - 1
            supports.append(support3)
            levels.append([1.0, 0.5, 0.0])
            rows.append({V - 1: 0.8, V // 2: 0.1, 1: 0.1})
        else:
            supports.append([drafts[-1]])
            levels.append([0.0])
            rows.append({drafts[-1]: 1.0})
    supports.append(support3)
    levels.append([1.0, 0.5, 0.0])
    what = "last draft rejected" if rejected_at_last else "law" if law else "every draft accepted"
    return Req(drafts, supports, levels, rows if caps.draft_probs else None, what=what)


K_LADDER = (9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025)
"""Draft counts each side of the powers of two past the core's 8: the check at a declared ``max_k`` holds a
request of every one below it, so a path that switches at some K between 8 and ``max_k`` is reached."""


def deep_requests(K: int, caps, V: int = SMALL_V) -> list[Req]:
    """K = ``K`` requests: every draft accepted, the last rejected, and (greedy declared) a greedy copy; above
    the core's 8, one request (last draft rejected) at each ``K_LADDER`` value between 8 and ``K``."""
    out = [deep_request(K, V, caps, rejected_at_last=False), deep_request(K, V, caps, rejected_at_last=True)]
    if caps.greedy:
        out.append(dataclasses.replace(deep_request(K, V, caps, rejected_at_last=True), temperature=0.0,
                                       what="greedy, last draft rejected"))
    return out + [deep_request(k, V, caps, rejected_at_last=True) for k in K_LADDER if CORE_K < k < K]


def random_requests(rng, B: int, V: int, caps) -> list[Req]:
    """``B`` requests of K in 0 … min(4, max_k), each row on three non-adjacent ids drawn at random, drafts
    inside or outside them, a fifth greedy, a fifth top-k (1 or 2), a fifth top-p = 0.7 (where declared)."""
    out = []
    kmax = min(4, caps.max_k)
    for _ in range(B):
        K = int(rng.integers(0, kmax + 1))
        supports, levels = [], []
        for _ in range(K + 1):
            while True:
                ids = sorted(int(x) for x in rng.choice(V, 3, replace=False))
                if np.diff(ids).min() > 1:
                    break
            supports.append(ids)
            levels.append(list(rng.normal(0.0, 1.0, 3)))
        drafts = [int(rng.choice(supports[j])) if rng.random() < 0.6 else _outside(supports[j], supports[j][0], V)
                  for j in range(K)]
        rows = [{x: 0.5} | {s: 0.5 / 3 for s in supports[j] if s != x} for j, x in enumerate(drafts)]
        kind = rng.random()
        mode = ("greedy" if kind < 0.2 and caps.greedy else "top-k" if kind < 0.4 and caps.top_k
                else "top-p" if kind < 0.6 and caps.top_p else "sampled")
        out.append(Req(drafts, supports, levels, rows if caps.draft_probs else None,
                       temperature=0.0 if mode == "greedy" else 1.0,
                       top_k=int(rng.integers(1, 3)) if mode == "top-k" else 0, top_p=0.7 if mode == "top-p" else 1.0,
                       what=mode))
    return out


# --------------------------------------------------------------------------- every declared variant at the limits

LARGEST_BATCH = BATCH_SIZES[-1]
"""The batch of a variant's call at the ladder's top (SPEC 1.15): batch size is never a declared limit, and any is
served, so each variant is asked at the largest size the ladder asks at all."""
TREE_V_NODES = 8
"""Nodes of the tree a tree variant is asked at the declared V with (SPEC 1.15)."""
VARIANT_VOCAB_CAP = VOCAB_CAP // 8
"""The largest V each variant is asked at (SPEC 1.15; 4 793 490, where one request fills an eighth of
``CALL_BYTES``): a run asks some 80 variants there, and on an NVIDIA H200's host one such call at V = 4194304 takes
8–10 s (the reference's rows), so a declared V of 2^31 checked per variant at ``VOCAB_CAP`` would take hours. The
declared V itself is still checked at ``VOCAB_CAP`` in the logits' first dtype (``vocab_limits``)."""


def variant_vocab_limit(caps) -> Limit:
    """The V every chain variant is asked at (SPEC 1.15): ``vocab_limits``' largest, capped at ``VARIANT_VOCAB_CAP``.

    >>> from devices.protocol import Capabilities
    >>> variant_vocab_limit(Capabilities(True, "none", 4194304)).value, variant_vocab_limit(Capabilities(True, "none", 2**31 - 1)).value
    (4194304, 4793490)
    """
    top = vocab_limits(caps)[-1]
    if top.value <= VARIANT_VOCAB_CAP:
        return top
    return Limit(VARIANT_VOCAB_CAP, caps.max_vocab_size, f"each variant is checked up to V = {VARIANT_VOCAB_CAP} "
                                                         f"(the declared V itself up to {top.value}, in one dtype)")


def tree_vocab_limit(caps) -> Limit:
    """The V a tree variant is asked at (SPEC 1.15): ``variant_vocab_limit``, capped where one tree of ``TREE_V_NODES``
    nodes (``TREE_V_NODES + 1`` rows, ``BYTES_PER_ID`` / 3 bytes a row and id) would pass ``CALL_BYTES``.

    >>> from devices.protocol import Capabilities
    >>> tree_vocab_limit(Capabilities(True, "none", 262144)).value
    262144
    >>> tree_vocab_limit(Capabilities(True, "none", 1 << 30)).value
    4793490
    """
    top = variant_vocab_limit(caps)
    cap = CALL_BYTES // ((TREE_V_NODES + 1) * (BYTES_PER_ID // 3))
    if top.value <= cap:
        return top
    return Limit(cap, caps.max_vocab_size, f"one tree of {TREE_V_NODES} nodes at V = {cap} fills the "
                                           f"{CALL_BYTES >> 30} GiB one call may hold")


def variant_v_requests(V: int, caps) -> list[Req]:
    """The requests of a variant's call at vocabulary V (SPEC 1.15): ``support_requests(V)``, the last id's first,
    taken in turn until their supports hold every ``spread_ids(V)`` id — the last ids, each side of every power of two
    from 2^15, the last tile's first id — in a few requests, not one per id (each variant asks this at the declared V).

    >>> from devices.torch_device import CAPABILITIES as caps
    >>> reqs = variant_v_requests(262144, caps)
    >>> len(reqs), reqs[0].supports[-1][0], sorted({x for r in reqs for x in r.supports[-1]}) == spread_ids(262144)
    (4, 262143, True)
    """
    covered, out = set(), []
    for r in reversed(support_requests(V, caps)):
        if not set(r.supports[-1]) <= covered:
            out.append(r)
            covered |= set(r.supports[-1])
    return out


def as_kind(reqs: list[Req], kind: str, caps) -> list[Req]:
    """``reqs`` as requests of one kind of call (``scope.KINDS``' chain kinds but §12's): ``sampled`` (T = 1, no
    filter), ``greedy`` (T = 0) or ``filtered`` (T = 1; top-k = 2 and top-p = 0.8 in turn, as declared). Their rows
    and drafts are kept, so each request still rejects, accepts or reaches its bonus row as built.

    >>> from devices.torch_device import CAPABILITIES as caps
    >>> [(r.temperature, r.top_k, r.top_p) for r in as_kind(support_requests(64, caps)[:3], "filtered", caps)]
    [(1.0, 2, 1.0), (1.0, 0, 0.8), (1.0, 2, 1.0)]
    """
    if kind not in ("sampled", "greedy", "filtered"):
        raise ValueError(f"kind: {kind!r} is not a kind as_kind makes (sampled, greedy, filtered)")
    out = []
    for i, r in enumerate(reqs):
        cut_k = caps.top_k and (i % 2 == 0 or not caps.top_p)
        params = {"greedy": dict(temperature=0.0, top_k=0, top_p=1.0),
                  "filtered": dict(temperature=1.0, top_k=2 if cut_k else 0, top_p=1.0 if cut_k else 0.8),
                  "sampled": dict(temperature=1.0, top_k=0, top_p=1.0)}[kind]
        out.append(dataclasses.replace(r, **params, what=f"{r.what}, {kind}"))
    return out


def variant_limits(caps, variant: str) -> dict[str, int]:
    """The sizes SPEC 1.15's limit checks ask ``variant`` (``"<dtype> <kind> <form>"``) at: V and K (a tree's depth)
    at the declared limits as ``variant_vocab_limit``, ``k_limits``, ``tree_limits`` and ``tree_vocab_limit`` cap them, a
    tree's nodes at ``max_tree_nodes``, the batch at ``LARGEST_BATCH``.

    >>> from devices.torch_device import CAPABILITIES as caps
    >>> variant_limits(caps, "float16 greedy point"), variant_limits(caps, "float32 tree draft")
    ({'V': 262144, 'K': 256, 'batch': 1025}, {'V': 262144, 'K': 256, 'batch': 1025, 'tree_nodes': 1024})
    """
    if variant.split()[1] == "tree":
        nodes, depth = tree_limits(caps)
        return {"V": tree_vocab_limit(caps).value, "K": depth.value, "batch": LARGEST_BATCH, "tree_nodes": nodes.value}
    return {"V": variant_vocab_limit(caps).value, "K": k_limits(caps)[-1].value, "batch": LARGEST_BATCH}


# --------------------------------------------------------------------------- L3-declared: goodness of fit

@dataclass(frozen=True)
class LawCase:
    """One goodness-of-fit test: its check name, the request, its vocabulary, n, and the sizes it stands for."""

    check: str
    req: Req = field(compare=False)
    V: int
    n: int
    K: int
    declared: dict = field(compare=False, default_factory=dict)

    @property
    def what(self) -> str:
        return f"V={self.V}" if "vocab" in self.check else f"K={self.K}"


def law_cases(caps, quick: bool) -> list[LawCase]:
    """The goodness-of-fit tests a device of capabilities ``caps`` is asked (none without its own randomness):
    one per declared V (``law_request``), one at the declared ``max_k`` (``deep_request`` with ``law``)."""
    if caps.rng == "none":
        return []
    out = [LawCase(f"L3/declared/law/vocab-V{lim.value}", law_request(lim.value, caps), lim.value,
                   QUICK_LAW_SAMPLES if quick else LAW_SAMPLES, min(2, caps.max_k), lim.to_json())
           for lim in vocab_limits(caps)]
    deepest = k_limits(caps)[-1]
    if deepest.value >= 1:
        out.append(LawCase(f"L3/declared/law/K{deepest.value}", deep_request(deepest.value, SMALL_V, caps,
                                                                             rejected_at_last=False, law=True),
                           SMALL_V, QUICK_DEEP_LAW_SAMPLES if quick else DEEP_LAW_SAMPLES, deepest.value,
                           deepest.to_json()))
    return out


def case_law(case: LawCase, caps) -> dict:
    """The exact law of the case's request (emitted sequence -> probability)."""
    return request_laws(assemble([case.req], case.V, logits_dtype(caps), not caps.draft_probs))[0]


def law_tests(caps, quick: bool) -> list[tuple[str, str, list, int]]:
    """(test name, check, law's probabilities in key order, n) of each goodness-of-fit test, for ``stat_plan``."""
    out = []
    for case in law_cases(caps, quick):
        law = case_law(case, caps)
        out.append((case.check, case.check, [law[k] for k in sorted(law)], case.n))
    return out


__all__ = ["CORE_VOCAB", "CORE_K", "CALL_BYTES", "BYTES_PER_ID", "VOCAB_CAP", "TREE_CAP", "SMALL_V", "BATCH_SIZES",
           "QUICK_BATCH_SIZES", "QUICK_EDGE_BATCH_SIZES", "edge_batch_sizes", "LAW_SAMPLES", "QUICK_LAW_SAMPLES",
           "DEEP_LAW_SAMPLES", "QUICK_DEEP_LAW_SAMPLES",
           "INJECTED", "KEYED", "DEVICE_RNG", "K_LADDER", "logits_dtype", "cast_logits", "Limit", "vocab_limits",
           "k_limits", "EVERY_POSITION", "empty_positions", "DENSE_POSITIONS", "POSITION_TILE",
           "between_positions", "tree_limits", "batch_sizes", "scope", "spread_ids", "Req",
           "assemble", "request_laws",
           "per_call", "support_requests", "law_request", "deep_request", "deep_requests", "random_requests",
           "LawCase", "law_cases", "case_law", "law_tests", "LARGEST_BATCH", "TREE_V_NODES", "VARIANT_VOCAB_CAP", "variant_vocab_limit", "tree_vocab_limit",
           "variant_v_requests", "as_kind", "variant_limits"]
