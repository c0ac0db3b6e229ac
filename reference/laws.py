"""SPEC §8: exact laws of one step, by enumeration, and their closed forms.

Rows are ``target_probs`` (already through SPEC §2) and the rows drafts are
drawn from. Each may be an array or a function of the drafted prefix (a
tuple of ids) returning one, so prefix-dependent targets are covered. With
``exact=True`` arithmetic is ``fractions.Fraction``: no rounding anywhere.

Worked example — V = 2, K = 1, target [3/4, 1/4], draft [1/4, 3/4]: draft 0
is always accepted, draft 1 with probability (1/4)/(3/4) = 1/3; on rejection
the residual [1/2, 0]/(1/2) emits 0. Bonus row uniform.

>>> from fractions import Fraction as F
>>> law = emitted_law([[F(3, 4), F(1, 4)], [F(1, 2), F(1, 2)]], [[F(1, 4), F(3, 4)]], "full", exact=True)
>>> {k: str(v) for k, v in sorted(law.items())}
{(0,): '1/2', (0, 0): '1/8', (0, 1): '1/8', (1, 0): '1/8', (1, 1): '1/8'}
>>> str(acceptance_probability([F(3, 4), F(1, 4)], [F(1, 4), F(3, 4)]))
'1/2'
>>> expected_emitted_tokens([0.5])
1.5
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from typing import Callable, Sequence, Union

Row = Union[Sequence, Callable[[tuple], Sequence]]


def acceptance_probability(target_probs, draft_probs):
    """Full rejection sampling: ``Σ_v min(target, draft)`` = 1 − TV (``[V]`` each)."""
    return sum(min(t, d) for t, d in zip(target_probs, draft_probs))


def point_acceptance_probability(target_probs, drafter_probs):
    """Point proposals drawn from ``drafter_probs``: ``Σ_v drafter(v)·target(v)``."""
    return sum(t * d for t, d in zip(target_probs, drafter_probs))


def num_accepted_law(acceptance_probs) -> list:
    """``P(num_accepted = m)``, m = 0..K, for independent per-position acceptance ``a_j``.

    >>> [round(x, 4) for x in num_accepted_law([0.5, 0.5])]
    [0.5, 0.25, 0.25]
    """
    law, reach = [], 1
    for a in acceptance_probs:
        law.append(reach * (1 - a))
        reach = reach * a
    return law + [reach]


def expected_emitted_tokens(acceptance_probs):
    """``Σ_{m=0}^{K} Π_{i<m} a_i``; for i.i.d. a this is ``(1 − a^{K+1}) / (1 − a)``."""
    total, reach = 1, 1
    for a in acceptance_probs:
        reach = reach * a
        total = total + reach
    return total


def _row(rows: Sequence[Row], j: int, prefix: tuple, exact: bool) -> list:
    row = rows[j](prefix) if callable(rows[j]) else rows[j]
    return [Fraction(x) for x in row] if exact else [float(x) for x in row]


def greedy_row(row: list) -> list:
    """The law a greedy step reads from ``row`` ``[V]``: one-hot at its argmax (ties: smallest id), in its number type.
    A greedy step is then a point proposal's on this row: the argmax's draft is accepted, any other rejected."""
    best = max(range(len(row)), key=lambda v: (row[v], -v))
    return [type(row[0])(v == best) for v in range(len(row))]


def spread(law: dict, prefix: tuple, mass, row) -> None:
    """Add ``mass · row[y]`` to the law of ``prefix + (y,)`` for every token of positive weight."""
    for y in (y for y, w in enumerate(row) if w):
        law[prefix + (y,)] += mass * row[y]


def normalised(w: list, fallback: list) -> list:
    """``w`` ``[V]`` normalised to sum 1; ``fallback`` where ``w`` has no mass."""
    total = sum(w)
    return [x / total for x in w] if total > 0 else fallback


def _emission(scheme: str, x: int, target: list, draft: list) -> tuple:
    """(acceptance probability of draft x, law of the token emitted on rejection); greedy reads ``greedy_row``."""
    if scheme != "full":
        return target[x], normalised([0 * t if v == x else t for v, t in enumerate(target)], target)
    ratio = min(1, target[x] / draft[x])
    return ratio, normalised([max(t - d, 0) for t, d in zip(target, draft)], target)


def emitted_law(target_rows: Sequence[Row], draft_rows: Sequence[Row], scheme: str = "full",
                exact: bool = False, withdrawn=None, withdrawn_as_padding: bool = False) -> dict[tuple, object]:
    """Exact law of the tuple of tokens one step emits (its length − 1 is ``num_accepted``).

    - ``target_rows``: K+1 rows ``[V]`` of target_probs (the last is the bonus row);
      for ``scheme="greedy"`` only their argmax matters.
    - ``draft_rows``: K rows ``[V]`` the drafts are drawn from. In ``"full"`` the
      verifier also sees them; in ``"point"`` and ``"greedy"`` it does not.
    - ``withdrawn``: None, or K sets of ids (or functions of the prefix): a draft drawn into set j is
      withdrawn (SPEC §4), rejected, and the token drawn from ``max(t − d, 0)`` (greedy: the argmax);
      ``withdrawn_as_padding``: from ``t`` instead, the padding rule's bias. Not for ``"point"``.
    """
    if scheme not in ("full", "point", "greedy"):
        raise ValueError(f"scheme: must be 'full', 'point' or 'greedy', got {scheme!r}")
    K = len(draft_rows)
    if len(target_rows) != K + 1:
        raise ValueError(f"target_rows: need K + 1 = {K + 1} rows (one per draft plus the bonus row), got {len(target_rows)}")
    if withdrawn is not None and scheme == "point":
        raise ValueError("withdrawn: a point proposal cannot be withdrawn (its verifier has no draft row; SPEC §4)")
    law: dict[tuple, object] = defaultdict(lambda: Fraction(0) if exact else 0.0)

    def walk(j: int, prefix: tuple, mass) -> None:
        target = _row(target_rows, j, prefix, exact)
        target = greedy_row(target) if scheme == "greedy" else target
        if j == K:  # every draft accepted: the bonus row
            spread(law, prefix, mass, target)
            return
        draft = _row(draft_rows, j, prefix, exact)
        gone = () if withdrawn is None else withdrawn[j](prefix) if callable(withdrawn[j]) else withdrawn[j]
        for x, d in enumerate(draft):
            if not d:
                continue
            a, rejected = _emission(scheme, x, target, draft)
            if x in gone:  # rejected with certainty; §3's residual (greedy: the argmax), or padding's t
                a, rejected = 0 * d, target if withdrawn_as_padding else rejected
            if a:
                walk(j + 1, prefix + (x,), mass * d * a)
            if a != 1:
                spread(law, prefix, mass * d * (1 - a), rejected)

    walk(0, (), Fraction(1) if exact else 1.0)
    return dict(law)


def conditional_token_laws(law: dict[tuple, object]) -> dict[tuple, dict[int, object]]:
    """From an emitted law: prefix → {token: P(prefix emitted, position reached, token)}.

    Losslessness (SPEC §3) says each of these, normalised, is the target row
    at that prefix.
    """
    out: dict[tuple, dict[int, object]] = defaultdict(lambda: defaultdict(int))
    for seq, mass in law.items():
        for j in range(len(seq)):
            out[seq[:j]][seq[j]] += mass
    return {k: dict(v) for k, v in out.items()}


def lossless_error(law: dict[tuple, object], target_rows: Sequence[Row], greedy: bool = False):
    """Largest |P(token | prefix reached) − target(token | prefix)| over every reached prefix.

    0 exactly (Fractions) or to rounding (floats) for a lossless scheme.
    """
    exact = isinstance(next(iter(law.values())), Fraction)
    worst = Fraction(0) if exact else 0.0
    for prefix, tokens in conditional_token_laws(law).items():
        target = _row(target_rows, len(prefix), prefix, exact)
        target = greedy_row(target) if greedy else target
        total = sum(tokens.values())
        for y, t in enumerate(target):
            worst = max(worst, abs(tokens.get(y, 0) / total - t))
    return worst


def num_accepted_from_law(law: dict[tuple, object], K: int) -> list:
    """The law of ``num_accepted`` (m = 0..K) read off an emitted law."""
    out = [0] * (K + 1)
    for seq, mass in law.items():
        out[len(seq) - 1] = out[len(seq) - 1] + mass
    return out
