"""L1-trees' constructed patterns (SPEC §11): the sibling layouts where tree verifiers break.

A random tree batch holds a placeholder among siblings, a duplicate or a
particular sibling order only now and then, and its random coins land where a
wrong rule shows only now and then: a bug that shows for one of them is caught
at one suite seed and missed at the next. Each pattern here is one small tree
(V = 5, depth ≤ 4) built around one layout SPEC §11 names:

* placeholders **before, between and after** real siblings (§11.1: never
  accepted, the residual untouched, the coin unread; sglang adds nothing to
  the running sum ``A``);
* **duplicate** siblings (rrs: the second copy meets the residual the first
  left; sglang: ``t(x)`` counted twice);
* rows drawn **with and without replacement**, and **point proposals**;
* **leaves at every depth** (1 to 4), each reachable;
* an **empty request beside a big one** in the same batch.

With injected noise the pattern is sent many times at once, each copy a
*probe* whose noise is placed from the reference's exact law of that very
tree (``reference.tree.level``): for every sibling a step can try, one coin
just below its acceptance threshold and one just above it (rrs: the
sibling's own ``a_k``; sglang: the level's one coin at each cumulative bound;
relative distance δ ∈ [10⁻⁴, 10⁻³]); a sibling that can never be accepted
(a placeholder, ``r(x) = 0``) gets the coin 0. Wherever a step stops, one
probe per token of the residual makes that token win the race by a relative
δ (``E(v) = r(v)·(1 + δ·rank)``), and tokens outside the residual get a tiny
``E`` so that any mass a wrong residual puts there wins. So every
acceptance threshold that moves by more than δ, and every residual whose
ratios move by more than δ·V, changes some probe's tokens — at every suite
seed; the seed only relabels the vocabulary and draws δ, the ranks and the
unread coins. Greedy patterns (T = 0) need no noise: one probe per choice of
argmax at every reachable node (each sibling's token, token 0, and a token
outside the siblings).

A device that takes no injected noise is held to each pattern's exact law
instead (``step_law``): the pattern repeated ``n`` times under
distinct seeds, exact support, and a goodness-of-fit test at the α of the
edges' family (``exact.edge_alpha``, which counts these tests:
``sampled_patterns``); each check states its detectable TV.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID as PH
from devices.protocol import Noise, TreeBatch
from reference.target import target_probs
from reference.laws import _argmax
from reference.tree import children_of, depths, level
from specsim import stats
from specsim.conformance._common import call
from specsim.conformance.results import CheckResult
from specsim.testing.seeds import case_seed
from specsim.testing.trees import compare_tree, reference_tree_step

V = 5
T_ROOT = (0.30, 0.15, 0.25, 0.20, 0.10)
Q_ROOT = (0.10, 0.35, 0.20, 0.05, 0.30)
T_NODE = (0.10, 0.30, 0.20, 0.25, 0.15)
Q_NODE = (0.25, 0.20, 0.10, 0.15, 0.30)
T_PATH = (0.05, 0.15, 0.60, 0.10, 0.10)
Q_PATH = (0.10, 0.10, 0.70, 0.05, 0.05)
"""Target and drafter rows (V = 5): the root's, an inner node's, and a path node's (its first child,
token 2, accepted with 6/7). No entry of a target row equals the drafter's, no rrs sibling's residual
comes within 10⁻⁶ of its draft row but where both are 0, and every residual a pattern reaches keeps its
positive entries above 10⁻⁶ (``probes`` refuses a pattern that does not): a device's rounding cannot turn
an exact zero of the reference into a positive weight."""

DELTA = (1e-4, 1e-3)
"""The relative distance of a probe's coin from its threshold (and of the race's runner-up), drawn per probe."""
TINY_E = 1e-12
"""``E(v)`` of the tokens outside a probe's residual: any mass a wrong residual puts there wins the race."""
SAMPLES, QUICK_SAMPLES = 4000, 400
"""Repetitions of a pattern under the device's own randomness (its law test)."""


@dataclass(frozen=True)
class PatternTree:
    """One request of a pattern: ``parents``, ``tokens`` ``[N]``; ``target`` ``[N + 1][V]`` target_probs
    per slot (root first); ``draft`` ``[N][V]`` the rows the nodes were drawn from, or None (point)."""

    parents: tuple
    tokens: tuple
    target: tuple
    draft: tuple | None

    @property
    def depth(self) -> int:
        return max(depths(self.parents), default=0)


@dataclass(frozen=True)
class Pattern:
    name: str
    scheme: str                 # "rrs", "sglang" or "greedy" (T = 0, any batch scheme)
    trees: tuple                # the batch's requests: one, or an empty one beside a big one
    why: str

    @property
    def check(self) -> str:
        return f"L1/trees/pattern/{self.scheme}/{self.name}"


def _normalised(row) -> tuple:
    total = sum(row)
    return tuple(v / total for v in row)


def tree(parents, tokens, drafting: str = "with", rows: dict | None = None) -> PatternTree:
    """A pattern request: slot 0 gets ``(T_ROOT, Q_ROOT)``, every other slot ``(T_NODE, Q_NODE)`` unless
    ``rows`` names it (slot → (target, drafter)). ``drafting``: ``"with"`` (each sibling carries its
    parent's drafter row), ``"without"`` (that row less the earlier siblings, renormalised) or ``"point"``."""
    rows = rows or {}
    slots = [rows.get(s, (T_ROOT, Q_ROOT) if s == 0 else (T_NODE, Q_NODE)) for s in range(len(parents) + 1)]
    draft, taken = [], {}
    for n, p in enumerate(parents):
        q = list(slots[p + 1][1])
        earlier = taken.setdefault(p, [])
        if drafting == "without":
            q = [0.0 if v in earlier else x for v, x in enumerate(q)]
        draft.append(_normalised(q))
        if tokens[n] != PH:
            earlier.append(tokens[n])
    return PatternTree(tuple(parents), tuple(tokens), tuple(t for t, _ in slots),
                       None if drafting == "point" else tuple(draft))


def _leaves_every_depth(drafting: str) -> PatternTree:
    """Leaves at depths 1, 2, 3 and 4: a path of first children (token 2, accepted with 6/7), each with a
    leaf sibling."""
    return tree((-1, -1, 0, 0, 2, 2, 4), (2, 1, 2, 4, 2, 0, 3), drafting,
                rows={0: (T_PATH, Q_PATH), 1: (T_PATH, Q_PATH), 3: (T_PATH, Q_PATH), 5: (T_PATH, Q_PATH)})


EMPTY = PatternTree((), (), (T_ROOT,), ())
SIBLINGS = {
    "placeholder-first": ((-1, -1, -1, 1, 2), (PH, 1, 2, 4, 0)),
    "placeholder-between": ((-1, -1, -1, 0, 2), (1, PH, 2, 4, 0)),
    "placeholder-last": ((-1, -1, -1, 0, 1), (1, 2, PH, 4, 0)),
    "duplicates": ((-1, -1, -1, 0, 1), (1, 1, 2, 4, 0)),
}
"""Three root siblings and a child under two of them: the layouts of §11.1 that random trees rarely hold."""
WHY = {
    "placeholder-first": "a placeholder before the real siblings: never accepted, residual untouched, coin unread; "
                         "sglang: the level's coin is still the placeholder's, and it adds nothing to A",
    "placeholder-between": "a placeholder between real siblings: the sibling after it meets the residual the one "
                           "before it left",
    "placeholder-last": "a placeholder after the real siblings: the emitted token comes from the residual of the "
                        "last real one",
    "duplicates": "a duplicate sibling: rrs — the second copy meets the residual the first left (r(x) = 0: "
                  "rejected) and its rejection updates the residual again; sglang — t(x) counted twice",
    "with-replacement": "every sibling drawn with replacement: each carries the parent's drafter row",
    "without-replacement": "siblings drawn without replacement: sibling k's row is the parent's less siblings "
                           "0..k-1, and the verifier must use it",
    "point": "point proposals (no draft rows): a sibling is accepted with r(x), the residual loses x",
    "distinct": "three distinct siblings, two with a child: sibling order, the running sum and the residual",
    "leaves-every-depth": "leaves at depths 1 to 4, each reachable: a leaf's bonus comes from its own row",
    "empty-beside-big": "an empty request (root row only) beside a 7-node tree in one batch: row offsets cu[i] + i",
}


def _patterns() -> tuple:
    out = []
    plain = ((-1, -1, -1, 0, 1), (1, 2, 4, 4, 0))
    for scheme in ("rrs", "sglang", "greedy"):
        drafting = "with" if scheme == "rrs" else "point"
        if scheme == "rrs":
            draftings = (("with-replacement", "with"), ("without-replacement", "without"), ("point", "point"))
            out += [Pattern(name, scheme, (tree(*plain, d),), WHY[name]) for name, d in draftings]
        else:
            out.append(Pattern("distinct", scheme, (tree(*plain, drafting),), WHY["distinct"]))
        out += [Pattern(name, scheme, (tree(parents, tokens, drafting),), WHY[name])
                for name, (parents, tokens) in SIBLINGS.items()]
        out.append(Pattern("leaves-every-depth", scheme, (_leaves_every_depth(drafting),), WHY["leaves-every-depth"]))
        big = _leaves_every_depth(drafting)
        out.append(Pattern("empty-beside-big", scheme, (replace(EMPTY, draft=None if big.draft is None else ()), big),
                           WHY["empty-beside-big"]))
    return tuple(out)


PATTERNS = _patterns()
"""Every pattern, per scheme: the run-wide list a budget plan enumerates (``sampled_patterns``)."""


# --- one seed's form of a pattern ------------------------------------------------------------

def relabelled(t: PatternTree, perm: np.ndarray) -> PatternTree:
    """``t`` with token v renamed ``perm[v]`` (rows permuted alike; placeholders kept)."""
    def row(r):
        out = [0.0] * len(r)
        for v, x in enumerate(r):
            out[int(perm[v])] = x
        return tuple(out)
    return PatternTree(t.parents, tuple(x if x == PH else int(perm[x]) for x in t.tokens),
                       tuple(row(r) for r in t.target), None if t.draft is None else tuple(row(r) for r in t.draft))


def batch_of(trees: list[PatternTree], scheme: str, dtype: str, logits: list | None = None) -> TreeBatch:
    """The requests ``trees`` as one batch (``logits``: per request ``[N + 1, V]``, default log target)."""
    greedy = scheme == "greedy"
    with np.errstate(divide="ignore"):
        rows = logits if logits is not None else [np.log(np.array(t.target, np.float64)) for t in trees]
    point = all(t.draft is None for t in trees)
    n = len(trees)
    return TreeBatch(
        num_nodes=np.array([len(t.parents) for t in trees], np.int64),
        parents=np.array([p for t in trees for p in t.parents], np.int64),
        draft_token_ids=np.array([x for t in trees for x in t.tokens], np.int64),
        draft_probs=None if point else np.array([r for t in trees for r in t.draft], np.float64).reshape(-1, V)
        .astype(dtype),
        target_logits=np.concatenate(rows).astype(dtype), temperature=np.full(n, 0.0 if greedy else 1.0),
        top_k=np.zeros(n, np.int64), top_p=np.ones(n), seeds=np.arange(1, 2 * n, 2, dtype=np.uint64),
        positions=np.zeros(n, np.int64), scheme="rrs" if greedy else scheme)


def _as_sent(t: PatternTree, dtype: str) -> PatternTree:
    """``t``'s rows as the device receives them: target_probs of the logits in ``dtype`` (§2), draft rows
    rounded to ``dtype``; the probes' thresholds come from these, not from the pattern's decimals."""
    with np.errstate(divide="ignore"):
        logits = np.log(np.array(t.target, np.float64)).astype(dtype).astype(np.float64)
    target = target_probs(logits, 1.0) if len(logits) else logits
    draft = None if t.draft is None else np.array(t.draft, np.float64).reshape(-1, V).astype(dtype).astype(np.float64)
    return PatternTree(t.parents, t.tokens, tuple(tuple(r) for r in target.tolist()),
                       None if draft is None else tuple(tuple(r) for r in draft.tolist()))


# --- probes: noise where a wrong rule shows ------------------------------------------------------

def _delta(rng) -> float:
    return float(rng.uniform(*DELTA))


def _stops(t: PatternTree, scheme: str, rng):
    """Every way a step through ``t`` can end, with coins that straddle each threshold on the way:
    yields ``(coins {node: u}, residual [V])``."""
    kids = children_of(t.parents)

    def visit(slot: int, coins: dict):
        siblings, target = kids[slot], list(t.target[slot])
        tokens = [t.tokens[n] for n in siblings]
        rows = None if t.draft is None else [list(t.draft[n]) for n in siblings]
        p_accept, p_none, residual = level(scheme, target, tokens, rows)
        if scheme == "rrs":
            _refuse_near_ties(target, tokens, rows, slot)
        _refuse_near_zero(residual, slot)
        if scheme == "rrs":
            yield from _rrs_level(visit, siblings, tokens, p_accept, p_none, residual, coins, rng)
        else:
            yield from _sglang_level(visit, siblings, tokens, p_accept, residual, coins, rng)

    yield from visit(0, {})


def _refuse_near_zero(residual, slot: int) -> None:
    small = [r for r in residual if 0 < r < 1e-6]
    if small:
        raise ValueError(f"pattern rows: the residual at slot {slot} has a positive entry {small[0]:.3g} < 1e-6; "
                         "a device's rounding could make it 0 (choose rows without near-coincidences)")


def _refuse_near_ties(target, tokens, rows, slot: int) -> None:
    """Each rrs sibling's ``r − d`` must be exactly 0 only where both are 0, and otherwise at least 10⁻⁶
    away from 0: a device's rounding of a near-tie would flip ``max(r − d, 0)`` between 0 and positive."""
    for k, x in enumerate(tokens):
        if x == PH:
            continue
        r = level("rrs", target, tokens[:k], None if rows is None else rows[:k])[2]
        d = [float(v == x) for v in range(len(r))] if rows is None else rows[k]
        close = [v for v in range(len(r)) if abs(r[v] - d[v]) < 1e-6 and (r[v] > 0 or d[v] > 0)]
        if close:
            raise ValueError(f"pattern rows: at slot {slot}, sibling {k}'s residual and draft row nearly tie at "
                             f"token {close[0]} ({r[close[0]]:.6g} vs {d[close[0]]:.6g}); a device's rounding could "
                             "flip max(r - d, 0) there (choose rows without near-coincidences)")


def _rrs_level(visit, siblings, tokens, p_accept, p_none, residual, coins, rng):
    """rrs: sibling k's own coin, once just below ``a_k`` (then down its subtree) and once just above."""
    reach, before = 1.0, {}
    for k, node in enumerate(siblings):
        if reach <= 0:
            return
        a = p_accept[k] / reach
        reach -= p_accept[k]
        if tokens[k] == PH or a <= 0:
            before[node] = 0.0            # never accepted, whatever the coin: the coin 0 shows a rule that would
            continue
        yield from visit(node + 1, {**coins, **before, node: a * (1 - _delta(rng))})
        if a >= 1 - 1e-9:
            return                        # always accepted: the later siblings are unreachable
        before[node] = a + (1 - a) * _delta(rng)
    if p_none > 0:
        yield {**coins, **before}, residual


def _sglang_level(visit, siblings, tokens, p_accept, residual, coins, rng):
    """sglang: the level's one coin (its first child's) just below and just above every cumulative bound;
    the other siblings' coins 0 (unread)."""
    bounds = np.cumsum(p_accept).tolist() if len(siblings) else []
    inner = sorted({b for b in bounds if 1e-9 < b < 1 - 1e-9})
    candidates = [x for b in inner for x in (b * (1 - _delta(rng)), b + (1 - b) * _delta(rng))] or [float(rng.random())]
    for u in candidates:
        here = {**coins, **{n: 0.0 for n in siblings}}
        if siblings:
            here[siblings[0]] = u
        k = next((k for k, b in enumerate(bounds) if u < b), None)
        if k is None:
            yield here, residual
        else:
            yield from visit(siblings[k] + 1, here)


def _race(residual, rng) -> list[np.ndarray]:
    """One exponentials row ``[V]`` per token of ``residual``'s support, that token winning by a relative δ."""
    support = [v for v, r in enumerate(residual) if r > 0]
    out = []
    for winner in support:
        order = [winner] + [int(v) for v in rng.permutation([v for v in support if v != winner])]
        E = np.full(len(residual), TINY_E)
        delta = _delta(rng)
        for rank, v in enumerate(order):
            E[v] = residual[v] * (1 + delta * rank)
        out.append(E)
    return out


def probes(t: PatternTree, scheme: str, rng) -> list[tuple[np.ndarray, np.ndarray]]:
    """Noise for copies of ``t`` (its rows as sent): ``[(uniforms [N], exponentials [V])]``, every threshold
    straddled and every stop's residual raced token by token. Unread coins are uniform."""
    out = []
    for coins, residual in _stops(t, scheme, rng):
        u = rng.random(len(t.parents))
        for node, c in coins.items():
            u[node] = c
        out += [(u.copy(), E) for E in _race(residual, rng)]
    return out


def greedy_probes(t: PatternTree) -> list[np.ndarray]:
    """Logits ``[N + 1, V]`` for greedy copies of ``t``: at every reachable slot, one copy per argmax choice —
    each real sibling's token, tokens 0 and V - 1, and the smallest token outside the siblings — the path to the slot
    following argmaxes set on its tokens."""
    kids = children_of(t.parents)
    with np.errstate(divide="ignore"):
        base = np.log(np.array(t.target, np.float64))
    base = np.where(np.isfinite(base), base, -30.0)
    out = []

    def argmax_at(logits, slot, token):
        logits[slot, token] = logits[slot].max() + 1.0

    def visit(slot: int, logits: np.ndarray):
        siblings = kids[slot]
        real = [t.tokens[n] for n in siblings if t.tokens[n] != PH]
        outside = next((v for v in range(V) if v not in real), None)
        for choice in dict.fromkeys(real + [0, V - 1] + ([outside] if outside is not None else [])):
            here = logits.copy()
            argmax_at(here, slot, choice)
            k = next((n for n in siblings if t.tokens[n] == choice), None)
            if k is None:
                out.append(here)
            else:
                visit(k + 1, here)

    visit(0, base)
    return out


# --- the checks ------------------------------------------------------------------------------

def _dtype(caps) -> str:
    return "float64" if "float64" in caps.dtypes else caps.dtypes[0]


def _lacking(caps, pattern: Pattern) -> str | None:
    if pattern.scheme not in caps.tree_schemes:
        return f"device does not declare tree scheme {pattern.scheme!r}"
    if V > caps.max_vocab_size:
        return f"V={V} > declared max_vocab_size={caps.max_vocab_size}"
    depth = max(t.depth for t in pattern.trees)
    if depth > caps.max_k:
        return f"tree depth {depth} > declared max_k={caps.max_k}"
    return None


def _seeded_trees(pattern: Pattern, seed: int) -> list[PatternTree]:
    """The pattern's requests under this seed's relabelling of the vocabulary."""
    perm = np.random.default_rng(case_seed(seed, "relabel")).permutation(V)
    return [relabelled(t, perm) for t in pattern.trees]


def probe_batch(pattern: Pattern, seed: int, dtype: str) -> tuple[TreeBatch, Noise]:
    """Every probe of the pattern's requests in one batch (the requests' probes interleaved), with its noise."""
    rng = np.random.default_rng(seed)
    trees = _seeded_trees(pattern, seed)
    sent = [_as_sent(t, dtype) for t in trees]
    if pattern.scheme == "greedy":
        per_tree = [[(i, logits) for logits in greedy_probes(t)] for i, t in enumerate(sent)]
    else:
        per_tree = [[(i, noise) for noise in probes(t, pattern.scheme, rng)] for i, t in enumerate(sent)]
    count = max(len(p) for p in per_tree)
    chosen = [p[k % len(p)] for k in range(count) for p in per_tree]
    if pattern.scheme == "greedy":
        batch = batch_of([trees[i] for i, _ in chosen], "greedy", dtype, logits=[x for _, x in chosen])
        return batch, Noise(rng.random(int(batch.num_nodes.sum())), np.ones((batch.batch_size, V)))
    batch = batch_of([trees[i] for i, _ in chosen], pattern.scheme, dtype)
    uniforms = np.concatenate([u for _, (u, _) in chosen])
    return batch, Noise(uniforms, np.stack([E for _, (_, E) in chosen]))


def _exact(device, pattern: Pattern, ctx, dtype: str) -> CheckResult:
    name, seed = pattern.check, case_seed(ctx.seed, pattern.check)
    batch, noise = probe_batch(pattern, seed, dtype)
    injected = noise if device.capabilities.injected_noise else None    # greedy reads no noise
    got, problem = call(name, "L1", lambda: device.verify_tree(batch, injected))
    if problem:
        return problem
    problems = compare_tree(got, reference_tree_step(batch, injected),
                            repro=f" [specsim conform --groups L1-trees --seed {ctx.seed}]")
    design = ("one probe per argmax choice at every reachable node" if pattern.scheme == "greedy" else
              "every threshold straddled by a relative δ ≤ 1e-3, every residual raced token by token")
    detail = (f"{pattern.why}: {len(problems)} of {batch.batch_size} probes differ: " + "; ".join(problems[:3])
              if problems else f"{pattern.why} — {batch.batch_size} probes agree ({design})")
    return CheckResult(name, "L1", "fail" if problems else "pass", detail, seed=seed)


# --- without injected noise: the pattern's exact law ----------------------------------------------

def step_law(parents: Sequence[int], tokens: Sequence[int], target_rows: Sequence, draft_rows: Sequence | None = None,
             scheme: str = "rrs", threshold_single=1, threshold_acc=1) -> dict[tuple, object]:
    """Exact law of the emitted tuple of one tree step *given its drafts* ``tokens [N]`` (SPEC §11.2–§11.4:
    ``reference.tree.level`` at every slot the walk can reach): ``target_rows [N + 1][V]`` each slot's
    target_probs (root first), ``draft_rows [N][V]`` or None (point proposals).

    >>> from fractions import Fraction as F
    >>> t, d = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]
    >>> sorted((k, str(p)) for k, p in step_law([-1, -1], [1, 0], [t, t, t], [d, d]).items())[:3]
    [((0, 0), '1/4'), ((0, 1), '1/8'), ((0, 2), '1/8')]
    """
    kids, law = children_of(parents), defaultdict(int)

    def walk(slot: int, prefix: tuple, mass) -> None:
        siblings, target = kids[slot], list(target_rows[slot])
        if scheme == "greedy":
            target = [type(target[0])(v == _argmax(target)) for v in range(len(target))]
        rows = None if draft_rows is None else [list(draft_rows[n]) for n in siblings]
        p_accept, p_none, residual = level(scheme, target, [tokens[n] for n in siblings], rows, threshold_single,
                                           threshold_acc)
        for k in (k for k, pk in enumerate(p_accept) if pk):
            walk(siblings[k] + 1, prefix + (tokens[siblings[k]],), mass * p_accept[k])
        for y in (y for y, r in enumerate(residual) if r and p_none):
            law[prefix + (y,)] += mass * p_none * residual[y]

    walk(0, (), 1)
    return dict(law)


def laws(pattern: Pattern, seed: int, dtype: str) -> list[dict]:
    """Each request's exact law of its emitted tuple, from its rows as sent (``step_law``)."""
    return [step_law(list(t.parents), list(t.tokens), t.target, t.draft, pattern.scheme)
            for t in (_as_sent(t, dtype) for t in _seeded_trees(pattern, seed))]


def statistical(pattern: Pattern) -> int:
    """How many goodness-of-fit tests the pattern's law check runs (requests with more than one outcome)."""
    if pattern.scheme == "greedy":
        return 0
    return sum(len(law) > 1 for law in laws(pattern, 0, "float64"))


def sampled_patterns(caps) -> int:
    """How many pattern-law tests a device is asked (no injected noise, the pattern within its capabilities):
    they share the edges' family budget with L1-edges' and L1-sampler's (``exact.edge_alpha``)."""
    if caps.injected_noise:
        return 0
    return sum(statistical(p) for p in PATTERNS if not _lacking(caps, p))


def _law_check(device, pattern: Pattern, ctx, dtype: str, alpha: float) -> CheckResult:
    name, seed = pattern.check, case_seed(ctx.seed, pattern.check, "law")
    n = QUICK_SAMPLES if ctx.quick else SAMPLES
    trees = _seeded_trees(pattern, seed)
    batch = batch_of(trees * n, pattern.scheme, dtype)
    batch = replace(batch, seeds=np.random.default_rng(seed).integers(0, 2**63, batch.batch_size, dtype=np.uint64))
    got, problem = call(name, "L1", lambda: device.verify_tree(batch, None))
    if problem:
        return problem
    emitted = [tuple(got.emitted(i)) for i in range(batch.batch_size)]
    worst_tv, p_min, spent = 0.0, 1.0, None
    for i, law in enumerate(laws(pattern, seed, dtype)):
        seen = Counter(emitted[i::len(trees)])
        outside = {k: c for k, c in seen.items() if k not in law}
        if outside:
            return CheckResult(name, "L1", "fail", f"{pattern.why}: request {i} emitted {sorted(outside)[:3]} "
                               f"({sum(outside.values())} of {n}), which the exact law gives probability 0 "
                               f"[specsim conform --groups L1-trees --seed {ctx.seed}]", seed=seed, n=n)
        if len(law) > 1:
            keys = sorted(law)
            res = stats.gof_test(np.array([seen.get(k, 0) for k in keys]), np.array([law[k] for k in keys]), alpha,
                                 what=f"{name} request {i}", seed=seed)
            worst_tv, p_min, spent = max(worst_tv, res.detectable_tv), min(p_min, res.p_value), alpha
            if not res.passed:
                return CheckResult(name, "L3", "fail", f"{pattern.why}: {res.report()} [specsim conform --groups "
                                   f"L1-trees --seed {ctx.seed}]", p_value=res.p_value, alpha=alpha, n=n,
                                   statistic=res.statistic, detectable_tv=res.detectable_tv, seed=seed,
                                   extra=res.extra())
    said = (f"exact support and a goodness-of-fit test at α={alpha:.1e}, n={n}, detectable TV {worst_tv:.3f}, "
            f"smallest p={p_min:.3g}" if spent else f"exact: every one of {n} samples in the law's support")
    return CheckResult(name, "L3" if spent else "L1", "pass", f"{pattern.why} — without injected noise, {said}",
                       p_value=p_min if spent else None, alpha=spent, n=n,
                       detectable_tv=worst_tv if spent else None, seed=seed)


def pattern_checks(device, ctx, only: str | None = None) -> list[CheckResult]:
    """Every pattern the device's schemes allow: exact probes with injected noise (and always for greedy),
    else the pattern's law under the device's own randomness. ``only``: that one check's name.

    >>> from devices.registry import load
    >>> from specsim.conformance.runner import Context
    >>> [r.status for r in pattern_checks(load("torch"), Context(quick=True), only="L1/trees/pattern/rrs/duplicates")]
    ['pass']
    """
    from specsim.conformance.exact import edge_alpha
    caps, results = device.capabilities, []
    dtype = _dtype(caps)
    alpha = None if caps.injected_noise else edge_alpha(caps, ctx)
    for pattern in PATTERNS:
        if only is not None and pattern.check != only:
            continue
        why = _lacking(caps, pattern)
        if why:
            results.append(CheckResult(pattern.check, "L1", "not_supported", why))
        elif caps.injected_noise or pattern.scheme == "greedy":
            results.append(_exact(device, pattern, ctx, dtype))
        elif caps.rng == "none":
            results.append(CheckResult(pattern.check, "L1", "not_supported",
                                       "device takes no injected noise and draws none of its own (rng='none')"))
        else:
            results.append(_law_check(device, pattern, ctx, dtype, alpha))
    return results


def design(caps, ctx) -> list[tuple[str, int, str]]:
    """Per pattern: (check, probes sent with injected noise, what a device without injected noise is held
    to — its law tests' design detectable TV at the edges' α, or "exact" for greedy)."""
    from specsim.conformance.exact import edge_alpha
    alpha, n = edge_alpha(caps, ctx), QUICK_SAMPLES if ctx.quick else SAMPLES
    out = []
    for pattern in PATTERNS:
        seed = case_seed(ctx.seed, pattern.check)
        count = probe_batch(pattern, seed, "float64")[0].batch_size
        if pattern.scheme == "greedy":
            out.append((pattern.check, count, "exact"))
            continue
        tvs = [stats.min_detectable_tv(stats.design_cells(np.array(list(law.values())), n), n, alpha)
               for law in laws(pattern, seed, "float64")]
        out.append((pattern.check, count, f"TV {max(tvs):.3f} (n={n}, α={alpha:.2e})"))
    return out


__all__ = ["PATTERNS", "Pattern", "PatternTree", "tree", "probes", "greedy_probes", "probe_batch", "step_law", "laws",
           "sampled_patterns", "pattern_checks", "design"]


if __name__ == "__main__":      # python -m specsim.conformance.tree_patterns [--quick]: the patterns' design
    import sys

    from devices.torch_device import CAPABILITIES
    from specsim.conformance.runner import Context
    black_box = replace(CAPABILITIES, injected_noise=False, rng="seeded")
    for check, count, held in design(black_box, Context(quick="--quick" in sys.argv)):
        print(f"{check:<44} {count:>4} probes   without injected noise: {held}")
