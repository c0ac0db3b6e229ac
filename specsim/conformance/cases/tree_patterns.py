"""The constructed sibling patterns of L1-trees (SPEC §11): each pattern's trees, its rows as sent, and
its exact law.

The checks that send them are ``tree_patterns``; the run-wide plan
(``stat_plan``) reads this list to give each pattern law's goodness-of-fit
tests (one per request with more than one outcome, ``law_tests``) their α and
sample count, so a pattern added here is planned and budgeted with no other
change.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID as PH
from reference.target import target_probs
from reference.tree import depths
from specsim.conformance.core.calls import node_limit
from specsim.testing.seeds import case_seed
from specsim.testing.trees import drafted_law

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
"""Every pattern, per scheme: the list the run's plan enumerates (``law_tests``)."""


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



def as_sent(t: PatternTree, dtype: str) -> PatternTree:
    """``t``'s rows as the device receives them: target_probs of the logits in ``dtype`` (§2), draft rows
    rounded to ``dtype``; the probes' thresholds come from these, not from the pattern's decimals."""
    with np.errstate(divide="ignore"):
        logits = np.log(np.array(t.target, np.float64)).astype(dtype).astype(np.float64)
    target = target_probs(logits, 1.0) if len(logits) else logits
    draft = None if t.draft is None else np.array(t.draft, np.float64).reshape(-1, V).astype(dtype).astype(np.float64)
    return PatternTree(t.parents, t.tokens, tuple(tuple(r) for r in target.tolist()),
                       None if draft is None else tuple(tuple(r) for r in draft.tolist()))



def pattern_dtype(caps) -> str:
    """The dtype a pattern is sent in: float64 where declared, else the first declared dtype."""
    return "float64" if "float64" in caps.dtypes else caps.dtypes[0]


def pattern_lacking(caps, pattern: Pattern) -> str | None:
    """What a device of capabilities ``caps`` lacks to be asked ``pattern`` (None if nothing)."""
    if pattern.scheme not in caps.tree_schemes:
        return f"device does not declare tree scheme {pattern.scheme!r}"
    if V > caps.max_vocab_size:
        return f"V={V} > declared max_vocab_size={caps.max_vocab_size}"
    depth = max(t.depth for t in pattern.trees)
    if depth > caps.max_k:
        return f"tree depth {depth} > declared max_k={caps.max_k}"
    nodes = max(len(t.parents) for t in pattern.trees)
    if nodes > caps.tree_node_limit:
        return f"a tree of {nodes} nodes > {node_limit(caps)}"
    if pattern.scheme == "greedy" and not caps.greedy:
        return "greedy requests (temperature 0): the device does not declare greedy"
    point = all(t.draft is None for t in pattern.trees)
    if point and not caps.point_proposals:
        return "point proposals (no draft rows): the device does not declare point_proposals"
    if not point and not caps.draft_probs:
        return "draft rows: the device does not declare draft_probs"
    return None


def seeded_trees(pattern: Pattern, seed: int) -> list[PatternTree]:
    """The pattern's requests under this seed's relabelling of the vocabulary."""
    perm = np.random.default_rng(case_seed(seed, "relabel")).permutation(V)
    return [relabelled(t, perm) for t in pattern.trees]


# --- without injected noise: the pattern's exact law ----------------------------------------------

def step_law(parents: Sequence[int], tokens: Sequence[int], target_rows: Sequence, draft_rows: Sequence | None = None,
             scheme: str = "rrs", threshold_single=1, threshold_acc=1) -> dict[tuple, object]:
    """Exact law of the emitted tuple of one tree step *given its drafts* ``tokens [N]``
    (``specsim.testing.trees.drafted_law``): ``target_rows [N + 1][V]`` each slot's target_probs (root first),
    ``draft_rows [N][V]`` or None (point proposals).

    >>> from fractions import Fraction as F
    >>> t, d = [F(1, 2), F(1, 4), F(1, 4)], [F(1, 4), F(1, 2), F(1, 4)]
    >>> sorted((k, str(p)) for k, p in step_law([-1, -1], [1, 0], [t, t, t], [d, d]).items())[:3]
    [((0, 0), '1/4'), ((0, 1), '1/8'), ((0, 2), '1/8')]
    """
    return drafted_law(parents, tokens, target_rows, draft_rows, scheme, threshold_single, threshold_acc)


def laws(pattern: Pattern, seed: int, dtype: str) -> list[dict]:
    """Each request's exact law of its emitted tuple, from its rows as sent (``step_law``)."""
    return [step_law(list(t.parents), list(t.tokens), t.target, t.draft, pattern.scheme)
            for t in (as_sent(t, dtype) for t in seeded_trees(pattern, seed))]


def law_seed(pattern: Pattern, suite_seed: int) -> int:
    """The seed of the pattern's law check at suite seed ``suite_seed``: its relabelling and device seeds."""
    return case_seed(suite_seed, pattern.check, "law")


def law_test_name(pattern: Pattern, request: int) -> str:
    """The goodness-of-fit test of request ``request``'s law, as the run's plan names it."""
    return f"{pattern.check}/request{request}"


def law_tests(caps) -> list[tuple[str, Pattern, int]]:
    """The pattern laws' goodness-of-fit tests a device of capabilities ``caps`` is asked: (test name,
    pattern, request) per request whose law has more than one outcome, of every sampled pattern (not
    greedy) within the declaration; none with injected noise (each pattern is then exact probes) or
    without randomness of the device's own (``rng='none'``)."""
    if caps.injected_noise or caps.rng == "none":
        return []
    return [(law_test_name(p, i), p, i) for p in PATTERNS if p.scheme != "greedy" and not pattern_lacking(caps, p)
            for i, law in enumerate(laws(p, 0, "float64")) if len(law) > 1]


def samples(quick: bool) -> int:
    """Repetitions of a pattern in its law check (``SAMPLES``; ``QUICK_SAMPLES`` for a quick run)."""
    return QUICK_SAMPLES if quick else SAMPLES


__all__ = ["V", "T_ROOT", "Q_ROOT", "T_NODE", "Q_NODE", "T_PATH", "Q_PATH", "SAMPLES", "QUICK_SAMPLES",
           "PatternTree", "Pattern", "tree", "EMPTY", "SIBLINGS", "WHY", "PATTERNS", "relabelled", "as_sent",
           "pattern_dtype", "pattern_lacking", "seeded_trees", "step_law", "laws", "law_seed", "law_test_name",
           "law_tests", "samples"]
