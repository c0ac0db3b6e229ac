"""Hand-built batches for every edge of SPEC §4, each with the exact answer.

Each edge is a batch, injected noise and the tokens the reference must emit
(asserted against the reference in the property tests, then used to judge
devices). Values are chosen so that float32 and float64 agree exactly:
softmax of equal logits, ratios of small dyadic numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID as PH
from devices.protocol import Noise, VerifyBatch
from devices.validate import draft_dtype
from specsim.testing.batches import numpy_dtype

NEG = -np.inf


@dataclass(frozen=True)
class Request:
    """One request of an edge batch. ``logits``: ``[K+1, V]``; ``draft_rows``: ``[K, V]`` or None."""

    draft_ids: list
    logits: list
    draft_rows: list | None = None
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    uniforms: list | None = None      # [K]
    exponentials: list | None = None  # [V]
    withdrawn: list | None = None     # [K] bool: SPEC §4's withdrawn drafts (their ids -1); None: none


def make_batch(requests: list[Request], dtype: str = "float64", point: bool | None = None) -> tuple[VerifyBatch, Noise]:
    """Assemble requests into a ``VerifyBatch`` and its ``Noise`` (defaults: u = 0.5, E = 1); the batch's
    ``withdrawn`` mask is None unless a request withdraws a draft. ``dtype``: the logits' (SPEC §6; 16-bit logits
    go with float32 ``draft_probs``)."""
    point = all(r.draft_rows is None for r in requests) if point is None else point
    V = len(requests[0].logits[0])
    ids, rows, logits, u, E = [], [], [], [], []
    for r in requests:
        K = len(r.draft_ids)
        ids += list(r.draft_ids)
        logits += list(r.logits)
        if not point:
            rows += list(r.draft_rows) if r.draft_rows is not None else [[1.0 / V] * V] * K
        u += list(r.uniforms) if r.uniforms is not None else [0.5] * K
        E.append(r.exponentials if r.exponentials is not None else [1.0] * V)
    B = len(requests)
    batch = VerifyBatch(
        num_draft_tokens=np.array([len(r.draft_ids) for r in requests], np.int64),
        draft_token_ids=np.array(ids, np.int64).reshape(-1),
        draft_probs=None if point else np.array(rows, draft_dtype(dtype)).reshape(len(ids), V),
        target_logits=np.array(logits, np.float64).astype(numpy_dtype(dtype)), temperature=np.array([r.temperature for r in requests], float),
        top_k=np.array([r.top_k for r in requests], np.int64), top_p=np.array([r.top_p for r in requests], float),
        seeds=np.arange(1, B + 1, dtype=np.uint64), positions=np.zeros(B, np.int64),
        withdrawn=_withdrawn(requests))
    return batch, Noise(np.array(u, float).reshape(-1), np.array(E, float))


def _withdrawn(requests: list[Request]) -> np.ndarray | None:
    """The batch's ``withdrawn`` mask ``[num_tokens]`` (None when no request withdraws a draft)."""
    if all(r.withdrawn is None for r in requests):
        return None
    return np.array([bool(w) for r in requests for w in (r.withdrawn or [False] * len(r.draft_ids))],
                    bool).reshape(-1)


@dataclass(frozen=True)
class Edge:
    name: str
    why: str
    requests: list
    expected: list          # per request: the emitted tokens
    needs: frozenset
    point: bool = False
    float32_exact: bool = True  # False: the answer hinges on a float64 ratio (float32 may round across it)


def _ratio_u() -> tuple[float, float]:
    """The ratio t(x)/d(x) = 0.5/1 = 1/2 exactly (two equal logits; d(x) = 1), and u one ulp below it.

    A dyadic ratio: SPEC §3 compares u with the exact ratio (§9), so the boundary must be a float."""
    ratio = 0.5
    return ratio, float(np.nextafter(ratio, 0))


def _row_without(z: int) -> list:
    """A draft row ``[4]`` with no mass on ``z``, 1/2 on ``z + 1`` and 1/4 on the others (dyadic): against a
    uniform target its residual ``max(t − d, 0)`` is token ``z`` alone, so the token a withdrawn draft's
    residual emits names the row it was read from."""
    row = [0.25] * 4
    row[z], row[(z + 1) % 4] = 0.0, 0.5
    return row


def one_hot_logits(x: int, vocab_size: int = 4) -> list:
    """Target logits ``[V]`` of target probability 1 on ``x``: a draft ``x`` is accepted whatever its coin."""
    return [0.0 if v == x else NEG for v in range(vocab_size)]


def after_certain(drafts: list, request: Request) -> Request:
    """``request`` with ``drafts`` before its own, each accepted with certainty (``one_hot_logits`` target rows,
    one-hot draft rows, coin 0.5): its own drafts then sit at positions ``len(drafts)`` onwards."""
    V = len(request.logits[0])
    own = len(request.draft_ids)
    return replace(request, draft_ids=list(drafts) + list(request.draft_ids),
                   logits=[one_hot_logits(x, V) for x in drafts] + list(request.logits),
                   draft_rows=None if request.draft_rows is None else
                   [[float(v == x) for v in range(V)] for x in drafts] + list(request.draft_rows),
                   uniforms=[0.5] * len(drafts) + list(request.uniforms if request.uniforms is not None else [0.5] * own),
                   withdrawn=None if request.withdrawn is None else [False] * len(drafts) + list(request.withdrawn))


def _withdrawn_chain(positions: str, zero: list, drafts: list, favour: int) -> Request:
    """A request of K = ``len(positions)`` over V = 4: ``"A"`` a draft (``drafts[j]``) the target accepts with
    certainty, ``"W"`` a withdrawn draft (uniform target row), ``"R"`` a real draft after a withdrawal (never
    verified); draft row j is ``_row_without(zero[j])``. ``favour``: the token the exponentials favour — what
    reading the withdrawn draft as padding (its residual the uniform row) would emit."""
    ids = [PH if kind == "W" else x for kind, x in zip(positions, drafts)]
    logits = [one_hot_logits(x) if kind == "A" else [0.0] * 4 for kind, x in zip(positions, drafts)] + [[0.0] * 4]
    return Request(ids, logits, [_row_without(z) for z in zero], uniforms=[0.5] * len(ids),
                   exponentials=[0.01 if v == favour else 1.0 for v in range(4)],
                   withdrawn=[kind == "W" for kind in positions])


def empty_residual_row(target: list, drafted: int, extra: float) -> list:
    """A draft row ``[V]`` at or above ``target`` everywhere — ``target`` plus ``extra`` on every token the
    target holds — with ``2^-11`` on ``drafted`` (0 when ``extra`` is not 0): ``max(t − d, 0)`` is empty while
    the row sums within §6's ``1e-3`` of 1, the rounding §4 names (a confident drafter's float32 row with
    ``d = 1`` where ``t = 1`` and its other entries still positive). Dyadic, so float32 holds it exactly, and
    ``extra`` (``2^-12`` ≈ 2.4e-4) keeps the residual empty for a target computed within §9's ``1e-4``."""
    row = [v + extra if v > 0 else 0.0 for v in target]
    row[drafted] = 0.0 if extra else 2.0 ** -11
    return row


def covering(logits: list, temperature: float, kept: list, drafted: int) -> list:
    """A draft row ``[V]`` covering a tempered target: ``softmax(logits[kept] / temperature)`` on ``kept`` (the tokens
    the cut, min_p or §12 leave), each rounded up to float32 then ``2^-12`` above (``empty_residual_row``), nothing
    on ``drafted``. The kept values differ, so the row before temperature (or at another one) is another law, which
    an empty-residual edge at ``T ≠ 1`` tells from ``t``; float32 (the draft rows' dtype with 16-bit logits, §6)
    holds the row exactly, so it covers ``t`` by ``2^-12`` in every logits dtype."""
    z = np.array([logits[v] for v in kept], dtype=np.float64) / temperature
    w = np.exp(z - z.max())
    target = [0.0] * len(logits)
    for v, p in zip(kept, w / w.sum()):
        up = np.float32(p)
        target[v] = float(up if up >= p else np.nextafter(up, np.float32(np.inf)))
    return empty_residual_row(target, drafted, 2.0 ** -12)


def tempered_rejection(logits: list, temperature: float, *, after: tuple = (), kept_logits: list | None = None,
                       top_k: int = 0, top_p: float = 1.0) -> Request:
    """A request whose draft 3 (target probability 0 once the sampling parameters act on ``logits`` ``[4]``) is
    rejected with an empty residual of a tempered target over tokens 1 and 2: its draft row ``covering``
    ``kept_logits`` (the logits as §12 leaves them; default ``logits``) at ``temperature``. ``after``: drafts
    accepted with certainty before it (``after_certain``). The exponentials favour 0 and 3 (the empty residual's
    argmax, the row before the parameters) and, by 8, the less likely of 1 and 2: at ``T = 0.25`` (logits 1
    apart) the rule emits the likelier, at ``T = 4`` (4 apart) the less likely, and the row at ``T = 1`` the
    other one in both."""
    kept = logits if kept_logits is None else kept_logits
    exponentials = [1e-4, 1.0, 1.0, 1e-4]
    exponentials[1 if kept[1] < kept[2] else 2] = 0.125
    request = Request([3], [logits, [0.0] * 4], [covering(kept, temperature, [1, 2], 3)], temperature=temperature,
                      top_k=top_k, top_p=top_p, uniforms=[0.5], exponentials=exponentials)
    return after_certain(list(after), request)


BAND = float(np.sqrt(2.0))
"""``band_rejection``'s reach: the factor within which a fallback's temperature still emits its answer."""


def band_rejection(logits: list, temperature: float, *, drafted: int, kept: tuple, after: tuple = (),
                   kept_logits: list | None = None, top_k: int = 0, top_p: float = 1.0) -> Request:
    """A request whose draft ``drafted`` (target probability 0 once the sampling parameters act on ``logits`` ``[V]``)
    is rejected with an empty residual of a tempered target over the three tokens ``kept`` (``a, b, c``), whose
    logits as §12 leaves them (``kept_logits``; default ``logits``) are ``base``, ``base + 2T`` and ``base + 4T``: at
    ``T``, ``t ∝ e^0, e^2, e^4`` on them, the draft row ``covering`` it. The exponentials ``e^-√2, 1, e^2√2`` on
    ``a, b, c`` and ``1e-4`` on every other token make ``b`` win the race over the row at any temperature within a
    factor ``BAND`` (√2) of ``T`` — ``a`` over a hotter row, ``c`` over a colder one, another token over a row that
    holds it (an argmax of the empty residual, the row before a cut or a penalty): for a row at ``T'``, the scores'
    logarithms are ``√2``, ``2T/T'`` and ``4T/T' − 2√2``. ``after``: drafts accepted with certainty before it
    (``after_certain``)."""
    row = logits if kept_logits is None else kept_logits
    a, b, c = kept
    assert row[b] - row[a] == row[c] - row[b] == 2 * temperature, (row, kept, temperature)
    request = Request([drafted], [list(logits), [0.0] * len(logits)], [covering(row, temperature, list(kept), drafted)],
                      temperature=temperature, top_k=top_k, top_p=top_p, uniforms=[0.5],
                      exponentials=_band_exponentials(len(logits), kept))
    return after_certain(list(after), request)


def _band_exponentials(vocab_size: int, kept: tuple) -> list:
    """``band_rejection``'s exponentials ``[V]``: ``e^-√2, 1, e^2√2`` on ``kept`` (``a, b, c``), ``1e-4`` elsewhere."""
    exponentials = [1e-4] * vocab_size
    a, b, c = kept
    exponentials[a], exponentials[b], exponentials[c] = float(np.exp(-BAND)), 1.0, float(np.exp(2.0 * BAND))
    return exponentials


def temperature_band(temperature: float, *, after: tuple = ()) -> Request:
    """``band_rejection`` over logits ``[-inf, 0, 2T, 4T]`` (exact in 16-bit for ``T`` a power of 2): draft 0, of
    logit ``-inf``, rejected; the step emits 2."""
    return band_rejection([NEG, 0.0, 2.0 * temperature, 4.0 * temperature], temperature, drafted=0, kept=(1, 2, 3),
                          after=after)


def bonus_band(temperature: float) -> Request:
    """A request of no drafts whose bonus row is ``temperature_band``'s target, ``[-inf, 0, 2T, 4T]``, with its
    exponentials (SPEC 1.7): the row at ``T`` emits 2, a row at a temperature off by more than a factor √2 1 or 3."""
    return Request([], [[NEG, 0.0, 2.0 * temperature, 4.0 * temperature]], temperature=temperature,
                   exponentials=_band_exponentials(4, (1, 2, 3)))


BAND_TEMPERATURES = tuple(2.0 ** e for e in (-5, -3, -1, 1, 3, 5))
"""``empty-residual-temperature-band``'s temperatures, one a request, the i-th rejecting at position i."""
BAND_ACCEPTED = (1, 2, 3, 1, 2)
"""The drafts its requests accept first (request i the first i)."""
FAR_TEMPERATURES = tuple(2.0 ** e for e in (-9, -7, 7, 9))
"""``empty-residual-temperature-far``'s temperatures (SPEC 1.7), past the band's 1/32 and 32, request i rejecting at
position i."""
BONUS_TEMPERATURES = tuple(2.0 ** e for e in range(-9, 10, 2))
"""``bonus-row-temperature-band``'s temperatures (SPEC 1.7): 2^-9 to 2^9, within a factor 2 of any temperature
between."""


def band_at_position(position: int, num_drafts: int) -> Request:
    """A request of ``num_drafts`` drafts of token 0 whose draft at ``position`` is rejected with
    ``temperature_band``'s empty residual, at the band temperature ``BAND_TEMPERATURES[position % 6]`` (SPEC 1.7):
    the drafts before it accepted with certainty, those after it never verified (``with_trailing``). Token 0 is the
    rejected draft too (target logit ``-inf``), so a fallback read from another row (the one-hot row of an accepted
    0) or to the draft emits a token the request's exact law gives probability 0, and a fallback at another
    temperature a token the band's exponentials refuse."""
    band = temperature_band(BAND_TEMPERATURES[position % len(BAND_TEMPERATURES)], after=(0,) * position)
    return with_trailing(band, num_drafts - position - 1)


def with_trailing(request: Request, count: int) -> Request:
    """``request`` with ``count`` more drafts of token 0 after its own (one-hot target and draft rows, coin 0.5),
    its bonus row last: drafts a step never verifies once an earlier one is rejected."""
    if count <= 0:
        return request
    V = len(request.logits[0])
    row = [float(v == 0) for v in range(V)]
    return replace(request, draft_ids=list(request.draft_ids) + [0] * count,
                   logits=list(request.logits[:-1]) + [one_hot_logits(0, V)] * count + [request.logits[-1]],
                   draft_rows=None if request.draft_rows is None else list(request.draft_rows) + [row] * count,
                   uniforms=list(request.uniforms if request.uniforms is not None else [0.5] * len(request.draft_ids))
                   + [0.5] * count,
                   withdrawn=None if request.withdrawn is None else list(request.withdrawn) + [False] * count)


EDGES: list[Edge] = [
    Edge("u0-zero-target-full", "§4 u = 0 never accepts a token top-k removed (vLLM #23803, SGLang #35771)",
         [Request([0], [[0, 5, 1], [0, 0, 0]], [[0.5, 0.25, 0.25]], top_k=1, uniforms=[0.0])],
         [[1]], frozenset({"draft_probs", "top_k"})),
    Edge("u0-masked-point", "§4 u = 0 never accepts a -inf (masked) token",
         [Request([2], [[0, 0, NEG], [0, 0, 0]], uniforms=[0.0], exponentials=[1, 2, 1])],
         [[0]], frozenset({"point_proposals"}), point=True),
    Edge("u-just-below-ratio", "§3 accept iff u < ratio (just below: accepted)",
         [Request([1], [[0, 0], [0, NEG]], [[0.0, 1.0]], uniforms=[_ratio_u()[1]])],
         [[1, 0]], frozenset({"draft_probs"}), float32_exact=False),
    Edge("u-equal-ratio", "§3 acceptance is strict: u == ratio rejects",
         [Request([1], [[0, 0], [0, NEG]], [[0.0, 1.0]], uniforms=[_ratio_u()[0]])],
         [[0]], frozenset({"draft_probs"})),
    Edge("draft-prob-zero", "§4 d(x) = 0: rejected; x stays in the residual",
         [Request([1], [[0, 0, 0, 0], [0, 0, 0, 0]], [[0.5, 0.0, 0.5, 0.0]], uniforms=[0.0],
                  exponentials=[1, 0.01, 1, 1])],
         [[1]], frozenset({"draft_probs"})),
    Edge("placeholder-full", "§4 padding placeholder -1: rejected, never indexed, its draft row (NaN here) never read",
         [Request([PH, 2], [[0, 1, 2], [0, 0, 0], [0, 0, 0]], [[np.nan] * 3, [0.2, 0.3, 0.5]],
                  uniforms=[0.0, 0.0], exponentials=[0.01, 1, 1])],
         [[0]], frozenset({"draft_probs"})),
    Edge("placeholder-point", "§4 padding placeholder with point proposals: residual is the full target row",
         [Request([PH], [[0, 0, 0], [0, 0, 0]], uniforms=[0.0], exponentials=[1, 1, 0.5])],
         [[2]], frozenset({"point_proposals"}), point=True),
    Edge("k0-random-and-greedy", "§4 K = 0: one token from the bonus row",
         [Request([], [[0, 1, 0]], exponentials=[1, 1, 0.1]), Request([], [[0, 1, 0]], temperature=0.0)],
         [[2], [1]], frozenset({"point_proposals", "greedy"}), point=True),
    Edge("bonus-from-last-row", "§3 all accepted: bonus from row K, not K-1 (the bonus-wrong-row mutant)",
         [Request([0, 1], [[0, NEG, NEG], [NEG, 0, NEG], [NEG, NEG, 0]], [[1, 0, 0], [0, 1, 0]],
                  uniforms=[0.0, 0.0])],
         [[0, 1, 2]], frozenset({"draft_probs"})),
    Edge("greedy-argmax-tie", "§2 greedy ties go to the smallest id",
         [Request([2, 0], [[1, 3, 3, 0], [0, 0, 0, 0], [0, 0, 0, 0]], temperature=0.0)],
         [[1]], frozenset({"greedy", "point_proposals"}), point=True),
    Edge("greedy-bonus", "§3 greedy: all drafts match → bonus argmax of the last row",
         [Request([1, 0], [[0, 2, 1], [5, 0, 0], [0, 0, 7]], temperature=0.0)],
         [[1, 0, 2]], frozenset({"greedy", "point_proposals"}), point=True),
    Edge("top-k-boundary-ties", "§2 top-k keeps every token tied with the k-th value",
         [Request([2], [[3, 2, 2, 1], [0, 0, 0, 0]], top_k=2, uniforms=[1e-9])],
         [[2, 0]], frozenset({"top_k", "point_proposals"}), point=True),
    Edge("top-p-cut-ties", "§2 top-p keeps every token tied with the cut",
         [Request([3], [list(np.log([0.4, 0.2, 0.2, 0.2])), [0, 0, 0, 0]], top_p=0.5, uniforms=[1e-9])],
         [[3, 0]], frozenset({"top_p", "point_proposals"}), point=True),
    Edge("top-p-cut-ties-dyadic", "§2 top-p keeps every token tied with the cut, on logits every dtype holds: "
         "[1, 0, 0, 0] gives t = [e, 1, 1, 1]/(e + 3), and top-p 0.5 (c_1 = 0.475 < 0.5 ≤ c_2) keeps the whole class "
         "tied at 1/(e + 3): draft 3 accepted; a sorted prefix keeps two tokens",
         [Request([3], [[1, 0, 0, 0], [0, 0, 0, 0]], top_p=0.5, uniforms=[1e-9])],
         [[3, 0]], frozenset({"top_p", "point_proposals"}), point=True),
    Edge("top-p-reaches-p", "§2 top-p keeps the smallest set whose mass reaches p, where the classes are nearly "
         "equal (SPEC 1.8): logits [0, -1/16, -1/8, -inf] give t = [0.354, 0.333, 0.313, 0] (c_2 = 0.687); top-p 0.74 "
         "keeps all three (a cut stopping short of p, as a pivot search can, keeps two and emits 0) and top-p 0.64 keeps "
         "two (a cut past p keeps three and emits 2); the exponentials favour token 2",
         [Request([], [[0, -0.0625, -0.125, NEG]], top_p=0.74, exponentials=[1, 1, 0.01, 1]),
          Request([], [[0, -0.0625, -0.125, NEG]], top_p=0.64, exponentials=[1, 1, 0.01, 1])],
         [[2], [0]], frozenset({"top_p", "point_proposals"}), point=True),
    Edge("race-tie", "§3 race ties go to the smallest id",
         [Request([0], [[0, 0, 0, 0], [0, 0, 0, 0]], uniforms=[0.9])],
         [[1]], frozenset({"point_proposals"}), point=True),
    Edge("recovered-after-an-accept", "§3 a rejection at position 1: the race over the residual of row 1",
         [Request([0, 1], [[0, NEG, NEG, NEG], [0, 0, 0, 0], [0, 0, 0, 0]], [[1, 0, 0, 0], [0, 1, 0, 0]],
                  uniforms=[0.0, 0.9], exponentials=[1, 1, 0.5, 1])],
         [[0, 2]], frozenset({"draft_probs"})),
    Edge("vocab-one", "V = 1: every draft accepted, bonus 0",
         [Request([0, 0], [[0], [0], [0]], [[1.0], [1.0]], uniforms=[0.999, 0.999])],
         [[0, 0, 0]], frozenset({"draft_probs"})),
    Edge("heterogeneous-rows", "§1 rows belong to the right request: cu[i] + i offsets (vLLM #14645)",
         [Request([0], [[0, NEG, NEG], [NEG, 0, NEG]], [[1, 0, 0]], uniforms=[0.0]),
          Request([], [[NEG, NEG, 0]]),
          Request([2, 2], [[NEG, NEG, 0], [NEG, NEG, 0], [0, NEG, NEG]], [[0, 0, 1], [0, 0, 1]], uniforms=[0.0, 0.0])],
         [[0, 1], [2], [2, 2, 0]], frozenset({"draft_probs"})),
    Edge("withdrawn-draft", "§4 a withdrawn draft (-1, drawn from its row [.5, 0, .5] against target [.5, .5, 0]): "
         "rejected, residual max(t − d, 0) = [0, .5, 0] from its row, not t (padding's; E favours token 0)",
         [Request([PH], [[0, 0, NEG], [0, 0, 0]], [[0.5, 0.0, 0.5]], uniforms=[0.0], exponentials=[0.01, 1, 1],
                  withdrawn=[True]),
          Request([0, PH], [[0, NEG, NEG], [0, 0, NEG], [0, 0, 0]], [[1, 0, 0], [0.5, 0.0, 0.5]], uniforms=[0.0, 0.0],
                  exponentials=[0.01, 1, 1], withdrawn=[False, True])],
         [[1], [0, 1]], frozenset({"draft_probs", "withdrawn_drafts"})),
    Edge("withdrawn-every-position", "§4 withdrawals at every position of K = 3 chains — first (and a second "
         "later), middle, last, two in a row — each rejected with its residual from its own draft row; a draft row's "
         "residual is the one token it holds no mass on, different from its neighbours', so a row read off by one, "
         "or through a cursor not advanced past an earlier withdrawal, emits another token",
         [_withdrawn_chain("WRW", [2, 1, 1], [PH, 3, PH], favour=0),
          _withdrawn_chain("AWR", [3, 2, 0], [2, PH, 3], favour=0),
          _withdrawn_chain("AAW", [3, 0, 1], [1, 3, PH], favour=3),
          _withdrawn_chain("AWW", [2, 0, 2], [3, PH, PH], favour=2)],
         [[2], [2, 2], [1, 3, 1], [3, 0]], frozenset({"draft_probs", "withdrawn_drafts"})),
    Edge("empty-residual", "§4 an empty residual (d ≥ t everywhere: a rejected draft of target probability 0) "
         "draws from t, never token 0 or the drafted token: d(x) = 0 (E favours 2 in t = [0, .5, .5, 0]); d(x) > 0 "
         "beside d = 1 where t = 1; the same at position 1 after an accept, from row 1's t, not row 0's",
         [Request([3], [[NEG, 0, 0, NEG], [0, 0, 0, 0]], [empty_residual_row([0, 0.5, 0.5, 0], 3, 2.0 ** -12)],
                  uniforms=[0.5], exponentials=[1e-4, 1, 0.5, 1e-4]),
          Request([3], [[NEG, NEG, 0, NEG], [0, 0, 0, 0]], [empty_residual_row([0, 0, 1.0, 0], 3, 0.0)],
                  uniforms=[0.5], exponentials=[1e-4, 1, 1, 1e-4]),
          Request([0, 3], [[0, NEG, NEG, NEG], [NEG, 0, NEG, NEG], [0, 0, 0, 0]],
                  [[1.0, 0, 0, 0], empty_residual_row([0, 1.0, 0, 0], 3, 0.0)], uniforms=[0.5, 0.5],
                  exponentials=[1e-4, 1, 1, 1e-4])],
         [[2], [2], [0, 1]], frozenset({"draft_probs"})),
    Edge("empty-residual-withdrawn", "§4 a withdrawn draft whose row leaves an empty residual (d = 1 where t = 1, "
         "the withdrawn token's 2^-11 beside it) draws from t",
         [Request([PH], [[NEG, NEG, 0, NEG], [0, 0, 0, 0]], [empty_residual_row([0, 0, 1.0, 0], 3, 0.0)],
                  uniforms=[0.5], exponentials=[1e-4, 1, 1, 1e-4], withdrawn=[True])],
         [[2]], frozenset({"draft_probs", "withdrawn_drafts"})),
    Edge("empty-residual-top-k", "§2/§4 an empty residual where top-k leaves the target: the drafted token has a finite "
         "logit but lies past the cut, and the draft row covers the cut row ([0, 0, 1, 0] at top-k 1 of [0, 1, 3, 1]; "
         "[0, .5, .5, 0] at top-k 2 of [0, 2, 2, 1], the k-th value's tie kept): draws from the cut row, never token 0 "
         "or the row before the cut (E favours 0 and 3)",
         [Request([3], [[0, 1, 3, 1], [0, 0, 0, 0]], [empty_residual_row([0, 0, 1.0, 0], 3, 0.0)], top_k=1,
                  uniforms=[0.5], exponentials=[1e-4, 1, 1, 1e-4]),
          Request([3], [[0, 2, 2, 1], [0, 0, 0, 0]], [empty_residual_row([0, 0.5, 0.5, 0], 3, 2.0 ** -12)], top_k=2,
                  uniforms=[0.5], exponentials=[1e-4, 1, 0.5, 1e-4])],
         [[2], [2]], frozenset({"draft_probs", "top_k"})),
    Edge("empty-residual-top-p", "§2/§4 an empty residual where top-p leaves the target: top-p 0.9 keeps one token "
         "(softmax of [0, 0, 4, 0] gives it 0.948), the drafted token's finite logit past the cut, the draft row "
         "covering the cut row; at the first position and after an accept, from row 1's cut row (E favours 0 and 3)",
         [Request([3], [[0, 0, 4, 0], [0, 0, 0, 0]], [empty_residual_row([0, 0, 1.0, 0], 3, 0.0)], top_p=0.9,
                  uniforms=[0.5], exponentials=[1e-4, 1, 1, 1e-4]),
          Request([1, 3], [[NEG, 0, NEG, NEG], [0, 4, 0, 0], [0, 0, 0, 0]],
                  [[0, 1.0, 0, 0], empty_residual_row([0, 1.0, 0, 0], 3, 0.0)], top_p=0.9, uniforms=[0.5, 0.5],
                  exponentials=[1e-4, 1, 1, 1e-4])],
         [[2], [1, 1]], frozenset({"draft_probs", "top_p"})),
    Edge("empty-residual-temperature", "§2/§4 an empty residual of a tempered target: t = softmax(z / T) over two "
         "tokens of different logits, which the draft row (2^-12 above) covers; at T = 0.25 ([-inf, 0, 1, -inf]: "
         "t = [0, .018, .982, 0]) the step emits 2, and after an accept at T = 4 ([-inf, 4, 0, -inf]: t = "
         "[0, .731, .269, 0]) it emits 2; a fallback to softmax(z), the row before temperature, emits 1 in both, "
         "an argmax of the empty residual 0 (E favours 0 and the drafted 3)",
         [tempered_rejection([NEG, 0, 1, NEG], 0.25), tempered_rejection([NEG, 4, 0, NEG], 4.0, after=(0,))],
         [[2], [0, 2]], frozenset({"draft_probs"})),
    Edge("empty-residual-top-k-temperature", "§2/§4 an empty residual where temperature and top-k leave the target: "
         "top-k 2 of [-1, 0, 1, -.5] at T = 0.25 (t = [0, .018, .982, 0]) and, after an accept, of [-4, 4, 0, -2] "
         "at T = 4 (t = [0, .731, .269, 0]), the drafted 3's logit finite before the cut, the draft row covering "
         "the cut row: the step emits 2 in both; the cut row at T = 1 emits 1, the row before the cut 0 or 3",
         [tempered_rejection([-1, 0, 1, -0.5], 0.25, top_k=2),
          tempered_rejection([-4, 4, 0, -2], 4.0, after=(0,), top_k=2)],
         [[2], [0, 2]], frozenset({"draft_probs", "top_k"})),
    Edge("empty-residual-top-p-temperature", "§2/§4 an empty residual where temperature and top-p leave the target: "
         "top-p 0.99 of [-1, 0, 1, -1] at T = 0.25 keeps {1, 2} (at T = 1 it keeps all four) and top-p 0.9 of "
         "[-8, 4, 0, -8] at T = 4, after an accept, keeps {1, 2} (at T = 1 token 1 alone), the draft row covering "
         "the cut row: the step emits 2 in both; the row before temperature emits 0, 3 or 1",
         [tempered_rejection([-1, 0, 1, -1], 0.25, top_p=0.99),
          tempered_rejection([-8, 4, 0, -8], 4.0, after=(0,), top_p=0.9)],
         [[2], [0, 2]], frozenset({"draft_probs", "top_p"})),
    Edge("empty-residual-temperature-band", "§2/§4 an empty residual of a tempered target at temperatures 1/32 to 32: "
         "six requests, at T = 2^-5, 2^-3, 2^-1, 2, 2^3, 2^5, the i-th rejecting at position i, each over logits "
         "[-inf, 0, 2T, 4T] (t ∝ [0, 1, e^2, e^4]) whose draft row covers t; the exponentials make each emit 2 from "
         "the row at T and from no row at a temperature off by more than a factor √2 (a hotter row emits 1, a colder "
         "one 3): a fallback at T = 1, or with T clamped to a range, is caught at every temperature it changes",
         [temperature_band(T, after=BAND_ACCEPTED[:i]) for i, T in enumerate(BAND_TEMPERATURES)],
         [[*BAND_ACCEPTED[:i], 2] for i in range(len(BAND_TEMPERATURES))], frozenset({"draft_probs"})),
    Edge("empty-residual-temperature-far", "§2/§4 the band's empty residual past it: four requests at T = 2^-9, "
         "2^-7, 2^7, 2^9, the i-th rejecting at position i, each over logits [-inf, 0, 2T, 4T] whose draft row covers "
         "t; each emits 2 from the row at T and from no row at a temperature off by more than a factor √2: a fallback "
         "whose temperature is clamped to [0.01, 100] passes the band and fails here",
         [temperature_band(T, after=BAND_ACCEPTED[:i]) for i, T in enumerate(FAR_TEMPERATURES)],
         [[*BAND_ACCEPTED[:i], 2] for i in range(len(FAR_TEMPERATURES))], frozenset({"draft_probs"})),
    Edge("bonus-row-temperature-band", "§2 a row sampled at its own temperature from 2^-9 to 2^9: ten requests of no "
         "drafts, at T = 2^k for odd k from -9 to 9, each bonus row [-inf, 0, 2T, 4T] (t ∝ [0, 1, e^2, e^4] at every "
         "T); the exponentials make each emit 2 from the row at T and from no row at a temperature off by more than a "
         "factor √2 (a hotter row emits 1, a colder one 3): a temperature clamped to a range, or rounded, is caught "
         "on every row, not only the fallback's",
         [bonus_band(T) for T in BONUS_TEMPERATURES], [[2]] * len(BONUS_TEMPERATURES),
         frozenset({"point_proposals"}), point=True),
]
"""Every SPEC §4 edge and the tie rules of §2/§3 (see each ``why``)."""
