"""Device output vs the reference, token for token, with near-tie allowances (SPEC §9).

A request passes when the device emits the reference's tokens. It is
*allowed as near ties* when it emits what the reference would emit after
flipping at most ``MAX_WAIVERS_PER_REQUEST`` near-tie decisions — decisions
whose exact margin is below the declared dtype's tolerance
(``specsim.judge.allowances.explain``), re-walked on the rows the step read
(after SPEC §12's bans, penalties and bias: ``StepResult.processed_logits``)
with every decision kind of SPEC §9 — coins, races, the top-k, top-p and
min_p cuts in the request's order profile, and greedy argmaxes of values
§12 computed; each flip is one near-tie allowance, counted toward the
check's cap. A check fails on any other difference, and also when its
allowances exceed ``waiver_cap(decisions)``: rounding flips a near-tie
rarely, so many flips mean the device computes less precisely than it
declares. A request the exact ladder explains with no flip at all is a
harness error (the float64 reference disagrees with its own ladder), never
a pass. Every comparison reports ``extra()``: the decisions on the
reference's paths, how many are near-ties, and how many near-tie allowances
were used.

The failure message says where (request, position), by how much (expected
vs got, the flips tried, the reference's margins) and how to reproduce (the
case's seed).

>>> import numpy as np
>>> from devices.protocol import VerifyOutput
>>> want = reference_step(_tiny_batch(), None)
>>> got = VerifyOutput(want.output_token_ids.copy(), want.num_accepted.copy())
>>> result = compare(_tiny_batch(), got, want)
>>> result.status, result.extra()
('pass', {'decisions': 3, 'near_ties': 0, 'near_tie_allowances': 0})
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch, VerifyOutput
from reference.verify import KINDS, StepResult, verify
from specsim.judge.allowances import Flip, Request, explain, first_divergence

TOLERANCE = {"float32": 1e-4, "float64": 1e-9, "float16": 1e-4, "bfloat16": 1e-4}
# 16-bit logits: the reference computes from the given values exactly, a device in float32 (SPEC §6).
"""Relative decision margin under which a device may legitimately flip a decision (SPEC §9)."""

MAX_WAIVERS_PER_REQUEST = 2
"""Near-tie allowances per request (SPEC §9). One rounding error flips the decision it is near,
and at most one hidden cut sharing its row (a top-p near-tie changes the row a coin reads). More in
one request means independent near-ties coinciding: at a near-tie rate ≤ 1e-4 per decision, about
1e-8 per request."""

WALK_IDS = 1 << 24
"""The most ids (rows × V) a differing request's exact walk (``reference.exact``, a ``Decimal`` per id) takes where
no decision of the batch lies within tolerance: there no allowance can apply, the walk would only name the first
contradicted decision, and past this it costs minutes a request (V in the tens of millions)."""

WAIVER_RATE = 2e-5
"""Near-tie allowances per decision beyond the first two (``waiver_cap``): 20 per million. The torch
device in float32 flipped none in 2.2 million decisions of the volume check (hpu, npu: none in
0.22 million each), fewer than 3.1 per million at 99.9 % (docs/statistics.md)."""


def waiver_cap(decisions: int) -> int:
    """The most near-tie allowances a check of ``decisions`` decisions may use: ``2 + ⌊decisions × WAIVER_RATE⌋``.

    >>> waiver_cap(40), waiver_cap(300_000)
    (2, 8)
    """
    return 2 + math.floor(decisions * WAIVER_RATE)


def reference_step(batch: VerifyBatch, noise: Noise | None) -> StepResult:
    """The reference's result for ``batch``: with ``noise``, or keyed noise when None."""
    kwargs = {} if noise is None else {"uniforms": noise.uniforms, "exponentials": noise.exponentials}
    if batch.sampler is not None:
        kwargs["sampler"] = batch.sampler.as_kwargs()
    if batch.withdrawn is not None:
        kwargs["withdrawn"] = batch.withdrawn
    return verify(batch.num_draft_tokens, batch.draft_token_ids, batch.draft_probs, batch.target_logits,
                  batch.temperature, batch.top_k, batch.top_p, seeds=batch.seeds, positions=batch.positions, **kwargs)


def select_step(batch: VerifyBatch, want: StepResult, order) -> StepResult:
    """The reference's result for ``select_requests(batch, order)`` (requests in that order, repeats allowed), taken
    from ``want``, its result for ``batch``: a request's result is a function of its own rows, noise, seed and
    position alone (SPEC §5), so each copy of a request is its result again, at its new index."""
    from specsim.testing.batches import request_rows
    order = np.asarray(order, dtype=np.int64)
    draft, target = request_rows(batch, order)
    d = want.decisions
    by_request = [np.flatnonzero(d.request == i) for i in range(batch.batch_size)]
    taken = [by_request[i] for i in order]
    at = np.concatenate(taken).astype(np.int64) if taken else np.zeros(0, np.int64)
    new_request = np.repeat(np.arange(len(order)), [len(t) for t in taken])
    decisions = replace(d, request=new_request.astype(d.request.dtype), position=d.position[at], kind=d.kind[at],
                        margin=d.margin[at])
    width = int(np.max(batch.num_draft_tokens[order], initial=0)) + 1
    return replace(want, output_token_ids=want.output_token_ids[order, :width], num_accepted=want.num_accepted[order],
                   decisions=decisions, uniforms=want.uniforms[draft], exponentials=want.exponentials[order],
                   processed_logits=want.processed_logits[target], computed=want.computed[target])


@dataclass
class Comparison:
    """One batch's verdict. ``waived`` holds the requests allowed as near ties and ``waivers`` the
    near-tie allowances they used (one per flipped decision, each counted toward ``cap``)."""

    mismatches: list[str] = field(default_factory=list)   # real failures, one line each
    waived: list[str] = field(default_factory=list)       # requests allowed as near ties, one line each
    structure: list[str] = field(default_factory=list)    # shape, dtype, padding problems
    errors: list[str] = field(default_factory=list)       # the reference disagrees with its exact ladder
    decisions: int = 0                                    # decisions on the reference's paths
    near_ties: int = 0                                    # of them, with 0 < margin < tolerance
    waivers: int = 0                                      # near-tie allowances: flips used by `waived`
    cap: int = 0                                          # waiver_cap(decisions)
    beyond: list[Flip] = field(default_factory=list)      # first contradicted decision of each unexplained request

    @property
    def over_cap(self) -> bool:
        return self.waivers > self.cap

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.structure and not self.over_cap and not self.errors

    @property
    def status(self) -> str:
        """The check's status: ``"error"`` where the harness cannot judge (the reference disagrees
        with its own exact ladder), else ``"pass"`` or ``"fail"``."""
        return "error" if self.errors else "pass" if self.ok else "fail"

    def extra(self) -> dict:
        """What every check reports about its decisions (SPEC §9)."""
        return {"decisions": self.decisions, "near_ties": self.near_ties, "near_tie_allowances": self.waivers}

    def summary(self, limit: int = 5) -> str:
        lines = self.errors + self.structure + self.mismatches
        if self.over_cap:
            lines = [f"{self.waivers} near-tie allowances exceed the cap of {self.cap} for {self.decisions} "
                     "decisions (SPEC §9): near-ties flip this often only when a device computes less precisely "
                     "than it declares"] + lines + self.waived
        more = len(lines) - limit
        text = "\n".join(lines[:limit]) + (f"\n... and {more} more" if more > 0 else "")
        if self.waived and not self.over_cap:
            text += (f"\n({len(self.waived)} request(s) allowed as near ties: {self.waivers} near-tie "
                     f"decision(s) flipped, cap {self.cap}, SPEC §9)")
        return text.strip()


def returned_type_problem(got: object, method: str = "verify", expected: str = "VerifyOutput") -> str | None:
    """Why what ``method`` returned is no ``expected`` (None: it has ``output_token_ids`` and ``num_accepted``):
    read before anything else of a device's output, so that a wrong type is a named failure, never an
    ``AttributeError`` deep in a group.

    >>> returned_type_problem((np.zeros((1, 2)), np.zeros(1)))
    'verify must return VerifyOutput (got tuple)'
    """
    if all(hasattr(got, a) for a in ("output_token_ids", "num_accepted")):
        return None
    return f"{method} must return {expected} (got {type(got).__name__})"


def _check_structure(batch: VerifyBatch, got: VerifyOutput) -> list[str]:
    wrong_type = returned_type_problem(got)
    if wrong_type:
        return [wrong_type]
    width = batch.max_k + 1
    out, acc = np.asarray(got.output_token_ids), np.asarray(got.num_accepted)
    problems = []
    if out.shape != (batch.batch_size, width):
        problems.append(f"output_token_ids: shape {out.shape}, expected {(batch.batch_size, width)} (SPEC §7)")
    if acc.shape != (batch.batch_size,):
        problems.append(f"num_accepted: shape {acc.shape}, expected {(batch.batch_size,)} (SPEC §7)")
    if out.dtype.kind not in "iu" or acc.dtype.kind not in "iu":
        problems.append(f"outputs must be integer arrays, got {out.dtype} and {acc.dtype}")
    return problems


def output_problems(batch: VerifyBatch, got: VerifyOutput, limit: int = 3) -> list[str]:
    """What makes ``got`` malformed for ``batch`` whatever the noise (SPEC §7), for the groups that
    have no reference step to compare with (L2, L3): shapes and dtypes, then per request
    ``0 ≤ num_accepted ≤ K_i``, accepted ids equal to the drafts, the emitted id in ``[0, V)``,
    ``-1`` after it. At most ``limit`` request lines. Empty: well formed.

    >>> from devices.protocol import VerifyBatch, VerifyOutput
    >>> b = VerifyBatch(np.array([1]), np.array([0]), None, np.zeros((2, 3)), np.array([1.0]), np.array([0]),
    ...                 np.array([1.0]))
    >>> output_problems(b, VerifyOutput(np.array([[0, 3]]), np.array([1])))
    ['request 0: emitted token 3 outside [0, V=3) (row [0, 3], num_accepted 1)']
    """
    problems = _check_structure(batch, got)
    if problems:
        return problems
    out, acc = np.asarray(got.output_token_ids), np.asarray(got.num_accepted)
    K, drafts, cu, V = batch.num_draft_tokens, np.asarray(batch.draft_token_ids), batch.request_offsets(), batch.vocab_size
    for i in range(batch.batch_size):
        n, row = int(acc[i]), out[i].tolist()
        where = f"(row {row}, num_accepted {n})"
        if not 0 <= n <= K[i]:
            problems.append(f"request {i}: num_accepted {n} outside [0, K_i={K[i]}] {where}")
        elif row[:n] != drafts[cu[i]: cu[i] + n].tolist():
            problems.append(f"request {i}: accepted ids {row[:n]} are not its drafts {drafts[cu[i]: cu[i] + n].tolist()}")
        elif not 0 <= row[n] < V:
            problems.append(f"request {i}: emitted token {row[n]} outside [0, V={V}) {where}")
        elif any(t != PLACEHOLDER_TOKEN_ID for t in row[n + 1:]):
            problems.append(f"request {i}: padding after the emitted token is not {PLACEHOLDER_TOKEN_ID} {where}")
        if len(problems) >= limit:
            break
    return problems


def request_inputs(batch: VerifyBatch, want: StepResult, i: int) -> Request:
    """Request ``i`` as the reference step read it, for ``waivers.explain``: its drafts (and which are
    withdrawn), its rows of ``want.processed_logits`` (after SPEC §12's bans, penalties and bias: the
    logits its filters saw) and which of them §12 computed, its parameters (with §12's min_p and order
    profile) and the noise the step used."""
    cu = batch.request_offsets()
    d, rows = slice(int(cu[i]), int(cu[i + 1])), slice(int(cu[i]) + i, int(cu[i + 1]) + i + 1)
    sampler = batch.sampler
    min_p = 0.0 if sampler is None or sampler.min_p is None else float(sampler.min_p[i])
    return Request(np.asarray(batch.draft_token_ids)[d], None if batch.draft_probs is None else batch.draft_probs[d],
                   want.processed_logits[rows], float(batch.temperature[i]), int(batch.top_k[i]),
                   float(batch.top_p[i]), want.uniforms[d], want.exponentials[i],
                   None if batch.withdrawn is None else np.asarray(batch.withdrawn, bool)[d], min_p,
                   "canonical" if sampler is None else sampler.order, want.computed[rows])


REFERENCE_DISAGREES = ("the exact ladder (reference.exact), walking the device's path with no flip, emits the "
                       "device's tokens: the float64 reference disagrees with its own ladder (a harness error, "
                       "SPEC §9), not a verdict on the device")


def emission(batch: VerifyBatch, want: StepResult, i: int, pos: int) -> str:
    """What the reference emits at position ``pos`` of request ``i``, named as SPEC §3 names it.

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> b = SimpleNamespace(num_draft_tokens=np.array([3]), temperature=np.array([1.0]))
    >>> emission(b, SimpleNamespace(num_accepted=np.array([3])), 0, 3)
    'the bonus token after all 3 drafts were accepted (SPEC §3: sampled from row 3, the target past the last draft)'
    >>> emission(b, SimpleNamespace(num_accepted=np.array([1])), 0, 1)
    'the recovered token at position 1, where draft 1 was rejected (SPEC §3: sampled from the residual of row 1)'
    """
    k, accepted = int(batch.num_draft_tokens[i]), int(want.num_accepted[i])
    greedy = float(batch.temperature[i]) == 0
    if pos < accepted:
        return f"accepted draft {pos} (SPEC §3: {'it equals the argmax of row ' + str(pos) if greedy else 'its coin fell under the ratio target/draft'})"
    if pos > accepted:
        return f"padding after the emitted token (SPEC §7: PLACEHOLDER_TOKEN_ID from position {accepted + 1})"
    if accepted == k:
        return (f"the bonus token after all {k} drafts were accepted (SPEC §3: "
                f"{'the argmax of' if greedy else 'sampled from'} row {k}, the target past the last draft)")
    return (f"the recovered token at position {pos}, where draft {pos} was rejected (SPEC §3: "
            + (f"the argmax of row {pos})" if greedy else f"sampled from the residual of row {pos})"))


def _describe(batch: VerifyBatch, want: StepResult, i: int, row: list[int], n: int, pos: int, padding_ok: bool) -> str:
    """Where request ``i`` differs: parameters, first differing position and what the reference emits there
    (an accepted draft, a recovered or a bonus token), expected vs got."""
    expected = want.output_token_ids[i, : want.num_accepted[i] + 1].tolist()
    return (f"request {i} (K={batch.num_draft_tokens[i]}, T={batch.temperature[i]:g}, top_k={batch.top_k[i]}, "
            f"top_p={batch.top_p[i]:g}): position {pos}, {emission(batch, want, i, pos)}: expected token "
            f"{expected[pos] if pos < len(expected) else '(none)'}, got {row[pos] if pos < len(row) else '(none)'}; "
            f"expected {expected} with {want.num_accepted[i]} accepted, got row {row} with num_accepted={n}"
            + ("" if padding_ok else " (bad num_accepted or padding)"))


def _explain_request(batch: VerifyBatch, want: StepResult, i: int, emitted: list[int], n: int,
                     pos: int, tol: float) -> tuple[str, str, list[Flip]]:
    """Why well-formed request ``i`` differs, as ``(outcome, note, flips)``: ``"allowed"`` with the
    near-tie flips that explain it; ``"mismatch"`` with its first contradicted decision (margin inf
    where none is named); ``"error"`` where the reference disagrees with its own exact ladder."""
    request = request_inputs(batch, want, i)
    flips = explain(request, emitted, n, tolerance=tol, budget=MAX_WAIVERS_PER_REQUEST)
    if flips == []:
        return "error", f"; {REFERENCE_DISAGREES}", []
    if flips:
        return "allowed", f"; allowed as near ties: {', '.join(map(str, flips))}", flips
    first = first_divergence(request, emitted, n)
    why = f"no {MAX_WAIVERS_PER_REQUEST} near-tie flips below margin {tol:g} explain it" + (
        "" if batch.temperature[i] > 0 else " (a greedy argmax flips only to the runner-up of values §12 computed)")
    return "mismatch", f"; first contradicted decision: {first}; {why}", [first or Flip("output", pos, float("inf"))]


def compare(batch: VerifyBatch, got: VerifyOutput, want: StepResult, *, tolerance: float | None = None,
            repro: str = "", explain: int | None = None) -> Comparison:
    """Compare request by request; a differing request is allowed as near ties if at most
    ``MAX_WAIVERS_PER_REQUEST`` near-tie flips (margin below ``tolerance``) of SPEC §9's decisions,
    decided exactly, explain it, re-walked on the rows the step read (SPEC §9, §12.5). ``explain``: walk at most
    that many differing requests and count the rest as mismatches unexplained — for a check whose answer is exact
    (an edge), where no allowance applies and the walk, exact over every id of the row, only names the first
    contradicted decision. A request past ``WALK_IDS`` ids is not walked where no decision is within tolerance (no
    allowance could apply): a mismatch, saying so."""
    tol = TOLERANCE[str(batch.target_logits.dtype)] if tolerance is None else tolerance
    margins, kinds = want.decisions.margin, want.decisions.kind
    result = Comparison(structure=_check_structure(batch, got), decisions=len(margins),
                        near_ties=int(((margins > 0) & (margins < tol) & (kinds != KINDS.index("greedy"))).sum()),
                        cap=waiver_cap(len(margins)))
    if result.structure:
        return result
    out, acc = np.asarray(got.output_token_ids), np.asarray(got.num_accepted)
    same = (out == want.output_token_ids).all(axis=1) & (acc == want.num_accepted)
    K = batch.num_draft_tokens
    no_near_tie = not (margins < tol).any()   # then no allowance can explain a difference: a walk only names it
    for i in np.flatnonzero(~same):
        expected = want.output_token_ids[i, : want.num_accepted[i] + 1].tolist()
        row, n = out[i].tolist(), int(acc[i])
        emitted = row[: n + 1] if 0 <= n <= K[i] else row
        padding_ok = 0 <= n <= K[i] and all(t == PLACEHOLDER_TOKEN_ID for t in row[n + 1:])
        pos = next((j for j, (a, b) in enumerate(zip(emitted, expected)) if a != b), min(len(emitted), len(expected)))
        line = _describe(batch, want, i, row, n, pos, padding_ok)
        walk = padding_ok and (explain is None or explain > 0)
        costly = walk and no_near_tie and (K[i] + 1) * batch.vocab_size > WALK_IDS
        outcome, note, flips = (
            ("mismatch", f"; not walked exactly: no decision of the batch is within tolerance {tol:g}, so no "
                         f"near-tie allowance applies, and its {K[i] + 1} rows of {batch.vocab_size} ids are past "
                         f"the exact walk's {WALK_IDS} ids", [Flip("output", pos, float("inf"))]) if costly else
            _explain_request(batch, want, i, emitted, n, pos, tol) if walk else
            ("mismatch", "", [Flip("output", pos, float("inf"))]))
        explain = None if explain is None else explain - walk
        if outcome == "allowed":
            result.waived.append(f"{line}{note}{repro}")
            result.waivers += len(flips)
        elif outcome == "error":
            result.errors.append(f"{line}{note}{repro}")
        else:
            result.beyond.append(flips[0])
            result.mismatches.append(f"{line}{note}{repro}")
    return result


def _tiny_batch() -> VerifyBatch:
    return VerifyBatch(np.array([1, 0]), np.array([2]), None, np.log(np.full((3, 3), 1 / 3)),
                       np.array([1.0, 0.0]), np.zeros(2, np.int64), np.ones(2),
                       seeds=np.array([1, 2], np.uint64), positions=np.array([0, 0]))
