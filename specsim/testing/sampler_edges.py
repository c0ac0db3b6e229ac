"""Hand-built SPEC §12 edges, each with the exact answer.

Each edge is a batch of ``specsim.testing.edges.Request`` s, the sampler parameters that act on
it, the order profiles it holds in, and the tokens every request must emit (per order profile
where the profiles differ). The values leave wide gaps (no near-tie in float32 or float64): a
banned draft has target probability exactly 0, so it is rejected at ``u = 0`` and its residual
never recovers it, however the exponentials favour it (``E = 0.001`` on the banned token).

Where the answer holds for a whole interval of coins (``SamplerEdge.coins``), the coins are drawn
inside it from the run's seed (``SamplerEdge.batch(..., seed=)``): every seed asks a different
point of the interval, and every point of it separates the rule from the bug the edge is built
against. Without injected noise an edge is its exact law (``specsim.conformance.checks.sampler.group``); each
edge below is built so that the bug it names emits, with probability ≥ 1/3 per run, a sequence
the exact law gives probability 0 (for the torch device's mutants of ``specsim.mutants.zoo.SAMPLER``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from devices.protocol import Noise, SamplerParams, VerifyBatch
from specsim.testing.edges import (Request, band_rejection, empty_residual_row, make_batch, one_hot_logits,
                                   tempered_rejection)

NEG = -np.inf
FAVOUR = 0.001
"""An exponential that makes a token win any race it may enter."""


@dataclass(frozen=True)
class SamplerEdge:
    """One edge: ``requests`` (their logits ``[K + 1, V]``, drafts, default coins and exponentials), the
    ``sampler`` acting on them, ``expected`` per request (or ``{order: per request}`` where the order
    profiles differ), ``needs`` (of ``SAMPLER_PARAMETERS`` and §2's modes), the ``orders`` it holds in,
    and ``coins``: per request, per draft, the interval ``(low, high)`` of coins over which the
    expected answer holds (None: the requests' fixed coins, e.g. ``u = 0``)."""

    name: str
    why: str
    requests: list
    sampler: SamplerParams
    expected: list | dict            # per request: the emitted tokens (a dict: per order profile)
    needs: frozenset                 # of SAMPLER_PARAMETERS (and §2 modes: "top_k", "top_p", "greedy")
    orders: tuple = ("canonical", "vllm")
    coins: tuple | None = None       # per request, per draft: (low, high) with the answer fixed inside

    def batch(self, order: str, dtype: str = "float64", seed: int | None = None) -> tuple[VerifyBatch, Noise]:
        """The edge's batch (its sampler in ``order``) and injected noise; with ``seed`` and ``coins``,
        each coin drawn uniformly inside its interval (deterministic in ``seed``)."""
        batch, noise = make_batch(self.requests, dtype=dtype, point=False)
        if seed is not None and self.coins is not None:
            rng = np.random.default_rng(seed)
            noise = replace(noise, uniforms=np.array([rng.uniform(low, high) for request in self.coins
                                                      for low, high in request], dtype=np.float64))
        return replace(batch, sampler=replace(self.sampler, order=order)), noise

    def expected_in(self, order: str) -> list:
        """Per request, the tokens it must emit in ``order``."""
        return self.expected[order] if isinstance(self.expected, dict) else self.expected


def _ids(*lists) -> tuple:
    return tuple(np.array(ids, dtype=np.int64) for ids in lists)


def _any(*drafts) -> tuple:
    """Coin intervals for requests with these numbers of drafts, each ``[0, 1)``: answers that hold whatever
    the coin (the draft's target probability is 0, or its ratio t(x)/d(x) is at least 1)."""
    return tuple([(0.0, 1.0)] * k for k in drafts)


def _banned(x: int, keep: int) -> list:
    """Target logits ``[4]``: 3 on the draft ``x``, 0 on ``keep``, −inf elsewhere. With ``x`` banned the row is
    one-hot on ``keep`` (the law one sequence: ``x`` rejected, ``keep`` emitted); with ``x`` allowed its target
    probability 0.95 exceeds any draft row's 1/4, so it is accepted whatever the coin."""
    return [3.0 if v == x else 0.0 if v == keep else -np.inf for v in range(4)]


def _covered_after_ban() -> Request:
    """The request of the §12 empty-residual edges whose ban acts on token 3: draft 3 (raw logit 3, the row's
    largest) beside logits ``[-inf, 0, 0, 3]``; with 3 banned the target is ``[0, .5, .5, 0]``, which the draft row
    (``2^-12`` above it, nothing on 3) covers. ``E`` favours 0 and 3 (an argmax of the empty residual, the row
    before the ban) and 2 over 1, so the rule emits 2."""
    return Request([3], [[NEG, 0, 0, 3], Z], [empty_residual_row([0, 0.5, 0.5, 0], 3, 2.0 ** -12)], uniforms=[0.5],
                   exponentials=[1e-4, 1, 0.5, 1e-4])


def _favouring(token: int, vocab_size: int = 5) -> list:
    """Exponentials ``[V]`` that make ``token`` win any race it may enter."""
    return [FAVOUR if v == token else 1.0 for v in range(vocab_size)]


TIE_ALLOWED = [0, 1, 2, 3]
"""The tie edges' allowed ids: token 4, the largest logit, is banned, so the order profile acts on every row."""
TIE_DRAFT_ROWS = [[0.5, 0.1, 0.1, 0.1, 0.2]]
"""The tie edges' draft row ``[1, 5]``: each tied member's draft probability (0.1) is below its target
probability, so a kept member is accepted at every coin and a dropped one (target 0) never is."""
TIE_TOP_P_ROW = list(np.log([0.4, 0.2, 0.2, 0.2, 0.8]))
"""Logits ``[5]`` whose allowed tokens 0–3 have target ``[0.4, 0.2, 0.2, 0.2]``: a tie class at top-p 0.5's cut."""

# --- SPEC 1.6: the empty residual through every penalty, the bias and every cut ------------------------------

CAUSES = ("presence", "frequency", "repetition", "bias")
"""What takes the drafted token's target probability to 0 in a cause-and-cut edge, with a cut after it."""
CUTS = ("top-k", "top-p", "min-p")
_PARAMETER = {"presence": "presence_penalty", "frequency": "frequency_penalty", "repetition": "repetition_penalty",
              "bias": "logit_bias", "top-k": "top_k", "top-p": "top_p", "min-p": "min_p"}


@dataclass(frozen=True)
class _Rejection:
    """One request of a cause-and-cut edge: its temperature (a power of 2), the drafts it accepts first, and the
    tokens of its output (the prompt, for ``repetition``) before the step."""

    temperature: float
    after: tuple
    before: tuple


def _cause_strength(cause: str, top: float, temperature: float) -> tuple[float, float]:
    """(token 4's raw logit, the cause's strength): the cause takes token 4 from the row's largest raw logit to 1,
    ``6T`` under ``top``. The frequency penalty needs both occurrences (counted once, token 4 stays the largest)."""
    if cause == "frequency":
        return top + 6 * temperature + 1, 6 * temperature + 0.5
    strength = {"presence": top, "repetition": top + 1, "bias": -top}[cause]
    return top + 1, strength


def _processed(cause: str, strength: float, logits: list, counts: dict) -> list:
    """``logits`` after the one cause (§12.2; ``counts``: token → occurrences in the output so far, with the prompt for
    ``repetition``): what temperature and the cut act on."""
    out = list(logits)
    for v, n in counts.items():
        if cause == "presence":
            out[v] -= strength
        elif cause == "frequency":
            out[v] -= strength * n
        elif cause == "repetition":
            out[v] = out[v] / strength if out[v] > 0 else out[v] * strength
    if cause == "bias":
        out[4] += strength
    return out


def _cut(cut: str, processed: list, temperature: float) -> float | int:
    """The cut keeping exactly tokens 1, 2, 3 of ``processed`` at ``temperature``: top-k 3; top-p midway between the
    mass of the two likeliest and of the three; min_p ``e^-5`` (its threshold ``5T`` under the largest logit, between
    token 1, ``4T`` under, and token 4, ``6T`` under)."""
    if cut == "top-k":
        return 3
    if cut == "top-p":
        z = np.asarray(processed, dtype=np.float64) / temperature
        t = np.sort(np.exp(z - z.max()) / np.exp(z - z.max()).sum())[::-1]
        return float(t[0] + t[1] + t[2] / 2)
    return float(np.exp(-5.0))


def _rejection(cause: str, cut: str, r: _Rejection) -> tuple[Request, float, float | int]:
    """(request, cause strength, cut value) of one rejection over V = 5 (``band_rejection``): tokens 1, 2, 3 kept at
    ``2T + 1``, ``4T + 1``, ``6T + 1`` (``top``), token 0 at ``1 − T``, and the drafted token 4 taken by the cause to
    1 (positive: the repetition penalty divides it), under the cut."""
    T = r.temperature
    top = 6 * T + 1
    counts: dict = {}
    for v in (*r.before, *r.after):
        counts[v] = counts.get(v, 0) + 1
    assert cause == "bias" or counts.get(4) == (2 if cause == "frequency" else 1), (cause, counts)
    raw4, strength = _cause_strength(cause, top, T)
    logits = [1 - T, 2 * T + 1, 4 * T + 1, top, raw4]
    processed = _processed(cause, strength, logits, counts)
    value = _cut(cut, processed, T)
    request = band_rejection(logits, T, drafted=4, kept=(1, 2, 3), after=r.after, kept_logits=processed,
                             top_k=value if cut == "top-k" else 0, top_p=value if cut == "top-p" else 1.0)
    return request, strength, value


def _cause_cut_edge(cause: str, cut: str, rejections: tuple[_Rejection, _Rejection]) -> SamplerEdge:
    """``empty-residual-<cause>-then-<cut>``: two requests (``_rejection``), the first rejecting at position 0, the second
    after its accepted drafts, each at its own temperature; each emits 2."""
    built = [_rejection(cause, cut, r) for r in rejections]
    strengths = np.array([b[1] for b in built])
    before = tuple(np.array(r.before, dtype=np.int64) for r in rejections)
    sampler = {"presence": dict(presence_penalty=strengths, output_token_ids=before),
               "frequency": dict(frequency_penalty=strengths, output_token_ids=before),
               "repetition": dict(repetition_penalty=strengths, prompt_token_ids=before),
               "bias": dict(logit_bias=np.array([[0.0, 0.0, 0.0, 0.0, s] for s in strengths]))}[cause]
    if cut == "min-p":
        sampler["min_p"] = np.array([b[2] for b in built])
    where = {"presence": "a presence penalty (token 4 in the output so far; this step's accepted draft for the "
                         "second request)",
             "frequency": "a frequency penalty (token 4 twice in the output so far, the second request's second "
                          "time this step's accepted draft; counted once, it stays the largest)",
             "repetition": "a repetition penalty (token 4 in the prompt; this step's accepted draft for the second "
                           "request)", "bias": "a bias"}[cause]
    at = " and ".join(f"T = {r.temperature:g} at position {len(r.after)}" for r in rejections)
    why = (f"SPEC §4's empty residual where {where} and then {cut} leave the target: the drafted token 4, the row's "
           f"largest raw logit, falls to 1, under {cut}'s cut, which keeps tokens 1, 2, 3 of logits 2T + 1, 4T + 1, "
           f"6T + 1, at {at}; the draft row covers t, so draft 4 is rejected and the step emits 2, which the "
           f"exponentials give the row at any temperature within a factor √2 of T. A fallback without the {cause} "
           f"emits 4, one at another temperature 1 or 3, the row before the cut 0 or 4, an argmax of the empty "
           f"residual 0")
    return SamplerEdge(f"empty-residual-{cause}-then-{cut}", why, [b[0] for b in built], SamplerParams(**sampler),
                       [[*r.after, 2] for r in rejections], frozenset({_PARAMETER[cause], _PARAMETER[cut]}),
                       coins=_any(*(len(r.after) + 1 for r in rejections)))


def _rejections(cause: str, low: float, high: float, position: int) -> tuple[_Rejection, _Rejection]:
    """A cause's two rejections: at ``low`` and position 0 (a penalty's token 4 from before the step), at ``high``
    after ``position`` accepted drafts (for a penalty, token 4 the last of them: this step's own output)."""
    if cause == "bias":
        return _Rejection(low, (), ()), _Rejection(high, tuple(v % 5 for v in range(position)), ())
    drafts = (0,) * (position - 1) + (4,)
    return (_Rejection(low, (), (4, 4) if cause == "frequency" else (4,)),
            _Rejection(high, drafts, (4,) if cause == "frequency" else ()))


CAUSE_CUT_PLANS = {
    ("presence", "top-k"): (0.0625, 16.0, 2), ("presence", "top-p"): (0.125, 8.0, 3),
    ("presence", "min-p"): (0.5, 2.0, 4), ("frequency", "top-k"): (0.125, 4.0, 5),
    ("frequency", "top-p"): (0.25, 16.0, 2), ("frequency", "min-p"): (0.0625, 8.0, 3),
    ("repetition", "top-k"): (0.25, 2.0, 4), ("repetition", "top-p"): (0.5, 16.0, 5),
    ("repetition", "min-p"): (0.125, 4.0, 2), ("bias", "top-k"): (0.0625, 2.0, 3),
    ("bias", "top-p"): (0.25, 8.0, 4), ("bias", "min-p"): (0.5, 16.0, 5)}
"""Each cause-and-cut edge (SPEC 1.6): its low and high temperature and its second request's position; together every
cause with every cut, the temperatures 1/16 to 16 and the positions 2 to 5."""
CAUSE_CUT_EDGES = [_cause_cut_edge(cause, cut, _rejections(cause, *plan)) for (cause, cut), plan in
                   CAUSE_CUT_PLANS.items()]


# --- SPEC 1.7: the causes at once, then every cut -------------------------------------------------------------

@dataclass(frozen=True)
class _Together:
    """A family of edges whose causes act on the drafted token 4 at once: ``strengths`` (the repetition penalty as
    given, the others in units of ``T``), token 4's raw logit ``raw`` in units of ``T``, and per cut its low and high
    temperature and its second request's position."""

    name: str
    strengths: dict
    raw: int
    plans: dict


EVERY_CAUSE = _Together("every-cause", {"repetition": 2.0, "frequency": 16.0, "presence": 16.0, "bias": -16.0}, 110,
                        {"top-k": (2.0 ** -5, 8.0, 5), "top-p": (0.25, 32.0, 6), "min-p": (2.0 ** -3, 2.0, 7)})
"""``empty-residual-every-cause-then-<cut>``: token 4 (raw ``110T``, in the output so far twice) falls with all four
to ``−9T`` (canonical: ``110T/2 − 2·16T − 16T − 16T``) or ``−T`` (vllm: ``(110T − 16T)/2 − 48T``), under every cut;
without any one of them, or with the frequency counted once, it is ``7T`` or more in both profiles, above the kept
tokens' ``6T``, so every cut keeps it."""
EVERY_PENALTY = _Together("every-penalty", {"repetition": 2.0, "frequency": 8.0, "presence": 8.0}, 46,
                          {"top-k": (2.0 ** -4, 4.0, 7), "top-p": (2.0 ** -5, 16.0, 5), "min-p": (0.5, 2.0 ** 5, 6)})
"""``empty-residual-every-penalty-then-<cut>``, the three penalties without a bias (what an engine refusing a bias
under speculative decoding serves): token 4 (raw ``46T``, twice in the output) falls to ``23T − 16T − 8T = −T`` in
both profiles; without any one penalty, or with the frequency counted once, it is ``7T`` or more."""
TOGETHER = (EVERY_CAUSE, EVERY_PENALTY)
KEPT_LOGITS = (0, 2, 4, 6)
"""Tokens 0 to 3's logits in units of ``T`` (a power of 2), beside token 4's raw one: seven significant bits at most
in all, so every dtype holds them; the cuts keep 1, 2, 3."""


def _together_processed(family: _Together, temperature: float, order: str, counts: int) -> list:
    """The raw row after ``family``'s causes in ``order`` (§12.2), token 4 ``counts`` times in the output so far; the
    other tokens are in neither the output nor the bias."""
    T, strengths = temperature, family.strengths
    row = [v * T for v in (*KEPT_LOGITS, family.raw)]
    bias, z = strengths.get("bias", 0.0) * T, row[4]
    z = z + bias if order == "vllm" else z
    z = z / strengths["repetition"] if z > 0 else z * strengths["repetition"]
    z -= (strengths["frequency"] * counts + strengths["presence"]) * T
    row[4] = z if order == "vllm" else z + bias
    return row


def _together_rejection(family: _Together, cut: str, temperature: float, after: tuple) -> Request:
    """One request of a together edge (``band_rejection`` over V = 5): the drafted token 4 rejected, the kept tokens
    1, 2, 3 at ``2T, 4T, 6T``; ``after``, its certain drafts."""
    T = temperature
    processed = _together_processed(family, T, "canonical", 2)
    value = _cut(cut, processed, T)
    return band_rejection([v * T for v in (*KEPT_LOGITS, family.raw)], T, drafted=4, kept=(1, 2, 3), after=after,
                          kept_logits=processed, top_k=value if cut == "top-k" else 0,
                          top_p=value if cut == "top-p" else 1.0)


def _times_t(value: float) -> str:
    """``value`` T as the edges' texts write it: ``-T`` for −1, ``-9T`` for −9."""
    return {1.0: "T", -1.0: "-T"}.get(value, f"{value:g}T")


def _together_edge(family: _Together, cut: str) -> SamplerEdge:
    """``empty-residual-<family>-then-<cut>``: request 0 rejects at position 0, token 4 twice in the output before the
    step; request 1 rejects at the plan's position, token 4 drafted twice this step and accepted (the two positions
    before it), none before; each emits 2."""
    low, high, position = family.plans[cut]
    after = (0,) * (position - 2) + (4, 4)
    requests = [_together_rejection(family, cut, low, ()), _together_rejection(family, cut, high, after)]
    temperatures, strengths = np.array([low, high]), family.strengths
    sampler = dict(output_token_ids=_ids([4, 4], []), repetition_penalty=np.full(2, strengths["repetition"]),
                   frequency_penalty=strengths["frequency"] * temperatures,
                   presence_penalty=strengths["presence"] * temperatures)
    if "bias" in strengths:
        sampler["logit_bias"] = np.array([[0.0, 0.0, 0.0, 0.0, strengths["bias"] * T] for T in temperatures])
    if cut == "min-p":
        sampler["min_p"] = np.full(2, _cut("min-p", [], 1.0))
    causes = [c for c in CAUSES if c in strengths]
    ends = {o: _times_t(_together_processed(family, 1.0, o, 2)[4]) for o in ("canonical", "vllm")}
    falls = ends["vllm"] if len(set(ends.values())) == 1 else " or ".join(f"{v} ({o})" for o, v in ends.items())
    what = ("the repetition, frequency and presence penalties" + (" and a bias" if "bias" in strengths else ""))
    why = (f"SPEC §4's empty residual where {what} act on the drafted token together, then {cut}: token 4, the row's "
           f"largest raw logit ({family.raw}T), in the output so far twice (before the step for request 0, at "
           f"T = {low:g}; as this step's accepted drafts for request 1, at T = {high:g} and position {position}), "
           f"falls to {falls}, under {cut}'s cut, which keeps tokens 1, 2, 3 of logits 2T, 4T, 6T; the draft row covers "
           f"t, so draft 4 is rejected and the step emits 2. A fallback without any one of the {len(causes)}, or "
           f"counting the repeat once, keeps token 4 (7T or more) and emits it")
    return SamplerEdge(f"empty-residual-{family.name}-then-{cut}", why, requests, SamplerParams(**sampler),
                       [[2], [*after, 2]], frozenset({*(_PARAMETER[c] for c in causes), _PARAMETER[cut]}),
                       coins=_any(1, position + 1))


TOGETHER_EDGES = [_together_edge(family, cut) for family in TOGETHER for cut in CUTS]

Z = [0.0, 0.0, 0.0, 0.0]
SAMPLER_EDGES = [
    SamplerEdge("mask-forbids-draft",
                "the mask of row 1 bans draft 1 (target logit 3): rejected at u = 0, the residual races 0, 2, 3 "
                "and emits 2; a mask taken from row 0 or applied to the bonus row only would accept it",
                [Request([0, 1], [Z, [0, 3, 0, 0], Z], uniforms=[0, 0], exponentials=[1, FAVOUR, 0.5, 1])],
                SamplerParams(token_mask=np.array([[1, 1, 1, 1], [1, 0, 1, 1], [1, 1, 1, 1]], dtype=bool)),
                [[0, 2]], frozenset({"token_mask"})),
    SamplerEdge("allowed-ids-forbid-draft",
                "allowed ids {0, 2, 3}: draft 1 (target logit 3) is rejected at u = 0 and never recovered; emits 2",
                [Request([1], [[0, 3, 0, 0], Z], uniforms=[0], exponentials=[1, FAVOUR, 0.5, 1])],
                SamplerParams(allowed_token_ids=_ids([0, 2, 3])), [[2]], frozenset({"allowed_token_ids"})),
    SamplerEdge("bad-word-completed-by-drafts",
                "bad word [0, 1, 2] completed by this step's drafts: rows 0, 1 accept, row 2 bans 2 (rejected at "
                "u = 0, emits 3); matching against the pre-step output [] would accept it",
                [Request([0, 1, 2], [[3, 0, 0, 0], [0, 3, 0, 0], [0, 0, 3, 0], Z], uniforms=[0, 0, 0],
                         exponentials=[1, 1, FAVOUR, 0.5])],
                SamplerParams(bad_words=((np.array([0, 1, 2]),),)), [[0, 1, 3]], frozenset({"bad_words"})),
    SamplerEdge("bad-word-at-every-split",
                "bad words whose prefix lies in the output so far, across the step boundary or in the drafts: "
                "[1, 2] and [0, 1, 3] after outputs [1] and [0, 1] ban at row 0; [2, 0, 1] after [2] with draft 0 "
                "= 0, [3, 2, 1, 0] after [3, 2] and [1, 3, 0, 2] after [1] ban at the row their last drafted "
                "prefix token precedes; [0, 3] and [1, 0, 3] inside the drafts. Each banned draft (target logit 3 "
                "beside one token of logit 0) is rejected and that token emitted; matching inside the output or "
                "inside the drafts only, never across, accepts the three spanning ones",
                [Request([2], [_banned(2, keep=0), Z]),
                 Request([3], [_banned(3, keep=2), Z]),
                 Request([0, 1], [one_hot_logits(0), _banned(1, keep=3), Z]),
                 Request([1, 0], [one_hot_logits(1), _banned(0, keep=2), Z]),
                 Request([3, 0, 2], [one_hot_logits(3), one_hot_logits(0), _banned(2, keep=1), Z]),
                 Request([0, 3], [one_hot_logits(0), _banned(3, keep=1), Z]),
                 Request([1, 0, 3], [one_hot_logits(1), one_hot_logits(0), _banned(3, keep=2), Z])],
                SamplerParams(output_token_ids=_ids([1], [0, 1], [2], [3, 2], [1], [], [2]),
                              bad_words=tuple((np.array(w),) for w in ([1, 2], [0, 1, 3], [2, 0, 1], [3, 2, 1, 0],
                                                                       [1, 3, 0, 2], [0, 3], [1, 0, 3]))),
                [[0], [2], [0, 3], [1, 2], [3, 0, 1], [0, 1], [1, 0, 2]], frozenset({"bad_words"}),
                coins=_any(1, 1, 2, 2, 3, 2, 3)),
    SamplerEdge("min-tokens-crossing",
                "min_tokens 2 after output [2], stop [3]: request 0's row 0 (length 1) bans draft 3 (emits 1); "
                "request 1 accepts draft 1, then at length 2 accepts draft 3 and its bonus row emits 3",
                [Request([3], [[0, 0, 0, 3], Z], uniforms=[0], exponentials=[1, 0.5, 1, FAVOUR]),
                 Request([1, 3], [Z, [0, 0, 0, 3], Z], uniforms=[0, 0], exponentials=[1, 0.5, 1, FAVOUR])],
                SamplerParams(output_token_ids=_ids([2], [2]), min_tokens=np.array([2, 2]),
                              stop_token_ids=_ids([3], [3])), [[1], [1, 3, 3]], frozenset({"min_tokens"})),
    SamplerEdge("penalty-zeroes-draft",
                "repetition 2 with top-k 1 on logits [0, 2, 1.5, 0]: token 1, in request 0's prompt or request 1's "
                "draft 0, falls to 1 < 1.5 and top-k removes it — target probability 0, rejected, emits 2",
                [Request([1], [[0, 2, 1.5, 0], Z], top_k=1, uniforms=[0], exponentials=[1, FAVOUR, 1, 1]),
                 Request([1, 1], [[0, 2, 1.5, 0], [0, 2, 1.5, 0], Z], top_k=1, uniforms=[0, 0],
                         exponentials=[1, FAVOUR, 1, 1])],
                SamplerParams(prompt_token_ids=_ids([1], []), repetition_penalty=np.array([2.0, 2.0])),
                [[2], [1, 2]], frozenset({"repetition_penalty", "top_k"})),
    SamplerEdge("bonus-row-sees-all-drafts",
                "presence 5 with top-k 1: drafts [0, 1] are accepted; the bonus row [2, 2.5, 1, 0] sees both, "
                "[−3, −2.5, 1, 0], and emits 2 (seeing fewer drafts it would emit 1)",
                [Request([0, 1], [[3, 0, 0, 0], [0, 3, 0, 0], [2, 2.5, 1, 0]], top_k=1, uniforms=[0, 0])],
                SamplerParams(presence_penalty=np.array([5.0])), [[0, 1, 2]],
                frozenset({"presence_penalty", "top_k"})),
    SamplerEdge("min-p-after-temperature",
                "T = 2, min_p 0.5 on logits [2, 0.8, −5, −5]: after temperature token 1 has e^−0.6 = 0.55 of the "
                "max and is kept (draft 1 accepted; the bonus row emits 1); min_p before temperature "
                "(e^−1.2 = 0.30) would reject it",
                [Request([1], [[2, 0.8, -5, -5], Z], temperature=2.0, uniforms=[0], exponentials=[1, 0.5, 1, 1])],
                SamplerParams(min_p=np.array([0.5])), [[1, 1]], frozenset({"min_p"})),
    SamplerEdge("min-p-after-temperature-dyadic",
                "min-p-after-temperature on logits every dtype holds: T = 2, min_p 0.5 on [2, 0.75, −5, −5]: after "
                "temperature token 1 has e^−0.625 = 0.54 of the max and is kept (draft 1 accepted; the bonus row emits "
                "1); min_p before temperature (e^−1.25 = 0.29) would reject it",
                [Request([1], [[2, 0.75, -5, -5], Z], temperature=2.0, uniforms=[0], exponentials=[1, 0.5, 1, 1])],
                SamplerParams(min_p=np.array([0.5])), [[1, 1]], frozenset({"min_p"})),
    # --- where the two order profiles differ: a penalty meets a bias; min_p meets top-p -------------------
    SamplerEdge("order-penalty-meets-bias",
                "repetition 2 on token 1 (in the prompt), bias +2 on it, top-k 1, row [0, 2, 2.5, 0]: canonical "
                "(penalty, then bias) gives token 1 2/2 + 2 = 3 > 2.5 and accepts draft 1 (bonus 1); vllm (bias, "
                "then penalty) gives (2 + 2)/2 = 2 < 2.5: draft 1 has target probability 0 and token 2 is emitted — "
                "sampled (request 0) and greedy (request 1) alike",
                [Request([1], [[0, 2, 2.5, 0], Z], top_k=1, exponentials=[1, FAVOUR, 0.5, 1]),
                 Request([1], [[0, 2, 2.5, 0], Z], temperature=0.0)],
                SamplerParams(prompt_token_ids=_ids([1], [1]), repetition_penalty=np.array([2.0, 2.0]),
                              logit_bias=np.array([[0, 2.0, 0, 0], [0, 2.0, 0, 0]])),
                {"canonical": [[1, 1], [1, 1]], "vllm": [[2], [2]]},
                frozenset({"repetition_penalty", "logit_bias", "top_k", "greedy"}), coins=_any(1, 1)),
    SamplerEdge("order-min-p-meets-top-p",
                "target [0.4, 0.3, 0.2, 0.1], top-p 0.5, min_p 0.6: canonical (top-p, then min_p) keeps {0, 1} "
                "(3/7 ≥ 0.6 · 4/7) and accepts draft 1 (bonus 1, favoured); vllm (min_p keeps {0, 1}, renormalised "
                "to [4/7, 3/7], then top-p 0.5) keeps token 0 alone: draft 1 rejected, 0 emitted",
                [Request([1], [list(np.log([0.4, 0.3, 0.2, 0.1]))] * 2, top_p=0.5, exponentials=[1, FAVOUR, 1, 1])],
                SamplerParams(min_p=np.array([0.6])), {"canonical": [[1, 1]], "vllm": [[0]]},
                frozenset({"min_p", "top_p"}), coins=_any(1)),
    SamplerEdge("order-min-p-meets-top-p-dyadic",
                "order-min-p-meets-top-p on logits every dtype holds: [0, −0.25, −1, −1] gives t = [.398, .310, "
                ".146, .146]; top-p 0.5, min_p 0.6: canonical (top-p, then min_p) keeps {0, 1} (.310 ≥ 0.6 · .398) "
                "and accepts draft 1 (bonus 1, favoured); vllm (min_p keeps {0, 1}, renormalised to [.562, .438], "
                "then top-p 0.5) keeps token 0 alone: draft 1 rejected, 0 emitted",
                [Request([1], [[0, -0.25, -1, -1]] * 2, top_p=0.5, exponentials=[1, FAVOUR, 1, 1])],
                SamplerParams(min_p=np.array([0.6])), {"canonical": [[1, 1]], "vllm": [[0]]},
                frozenset({"min_p", "top_p"}), coins=_any(1)),
    # --- the bonus row while min_tokens still holds; several stop ids ---------------------------------------
    SamplerEdge("min-tokens-bonus-row-still-short",
                "stop ids [1, 3] (two, not only EOS): request 0 (K = 0, min_tokens 1) and request 1 (drafts [0, 2] "
                "accepted after output [0], min_tokens 4) reach their bonus rows below min_tokens, which ban both "
                "stop ids: each emits 2 though 1 and 3 are favoured; request 2's draft 3 (the second stop id, "
                "logit 3) is banned at its row (length 0 < 2): rejected, 2 emitted",
                [Request([], [Z], exponentials=[1, FAVOUR, 0.5, FAVOUR]),
                 Request([0, 2], [[3, 0, 0, 0], [0, 0, 3, 0], Z], exponentials=[1, FAVOUR, 0.5, FAVOUR]),
                 Request([3], [[0, 0, 0, 3], Z], exponentials=[1, FAVOUR, 0.5, FAVOUR])],
                SamplerParams(output_token_ids=_ids([], [0], []), min_tokens=np.array([1, 4, 2]),
                              stop_token_ids=_ids([1, 3], [1, 3], [1, 3])),
                [[2], [0, 2, 2], [2]], frozenset({"min_tokens"}), coins=_any(0, 2, 1)),
    # --- ties at min_p's threshold are kept -----------------------------------------------------------------
    SamplerEdge("min-p-threshold-ties",
                "min_p 1 with T = 0.5 on [0, 0, −1, −1]: tokens 0 and 1 tie at the threshold (min_p · max) and are "
                "both kept — draft 1 (probability 1/2, ratio 2) is accepted and the bonus row emits 1; a strict "
                "comparison keeps no token",
                [Request([1], [[0, 0, -1, -1], [0, 0, -1, -1]], temperature=0.5, exponentials=[1, 0.5, FAVOUR, 1])],
                SamplerParams(min_p=np.array([1.0])), [[1, 1]], frozenset({"min_p"}), coins=_any(1)),
    # --- T ≠ 1: the bias is added before temperature --------------------------------------------------------
    SamplerEdge("bias-before-temperature",
                "bias +3 on token 1 at T = 2 (row [4, 0, 0, 0]) and +2 at T = 0.5 (row [1.5, 0, 0, 0]), top-k 1: "
                "(z + b)/T keeps token 0 (2 > 1.5) and token 1 (4 > 3), so request 0 rejects draft 1 and emits 0, "
                "request 1 accepts it (bonus 1); z/T + b would keep the other token in each",
                [Request([1], [[4, 0, 0, 0], Z], temperature=2.0, top_k=1),
                 Request([1], [[1.5, 0, 0, 0], Z], temperature=0.5, top_k=1)],
                SamplerParams(logit_bias=np.array([[0, 3.0, 0, 0], [0, 2.0, 0, 0]])), [[0], [1, 1]],
                frozenset({"logit_bias", "top_k"}), coins=_any(1, 1)),
    # --- the repetition penalty multiplies a negative logit -------------------------------------------------
    SamplerEdge("repetition-on-negative-logits",
                "repetition 2 on token 1 (in the prompt), row [−3, −2, −1.5, −3], top-k 1 at T = 0.5 (request 0) "
                "and greedy (request 1): a negative logit is multiplied, −2 · 2 = −4, so token 2 wins — draft 1 "
                "is rejected and 2 emitted; dividing it (−1) would keep token 1 and accept the draft",
                [Request([1], [[-3, -2, -1.5, -3]] * 2, temperature=0.5, top_k=1),
                 Request([1], [[-3, -2, -1.5, -3]] * 2, temperature=0.0)],
                SamplerParams(prompt_token_ids=_ids([1], [1]), repetition_penalty=np.array([2.0, 2.0])),
                [[2], [2]], frozenset({"repetition_penalty", "top_k", "greedy"}), coins=_any(1, 1)),
    # --- the frequency penalty counts every repeat ----------------------------------------------------------
    SamplerEdge("frequency-accumulates-over-drafts",
                "frequency 1, top-k 1 at T = 0.7, rows [0, 2.5, 1, 0]: request 0 drafts [1, 1, 1] — row j sees "
                "token 1 j times, 2.5 − j, so rows 0, 1 accept and row 2 (0.5 < 1) rejects and emits 2; request 1 "
                "(output [1, 1]) meets 0.5 at its first row. Counting a repeat once (presence) would accept every "
                "draft",
                [Request([1, 1, 1], [[0, 2.5, 1, 0]] * 4, temperature=0.7, top_k=1),
                 Request([1], [[0, 2.5, 1, 0]] * 2, temperature=0.7, top_k=1)],
                SamplerParams(output_token_ids=_ids([], [1, 1]), frequency_penalty=np.array([1.0, 1.0])),
                [[1, 1, 2], [2]], frozenset({"frequency_penalty", "top_k"}), coins=_any(3, 1)),
    # --- allowed ids at the bonus row -----------------------------------------------------------------------
    SamplerEdge("allowed-ids-at-the-bonus-row",
                "allowed ids {0, 2}: request 0 (K = 0) and request 1 (drafts [0, 2] accepted) sample their bonus "
                "rows among 0 and 2 only, and emit 2 though 1 and 3 are favoured",
                [Request([], [Z], exponentials=[1, FAVOUR, 0.5, FAVOUR]),
                 Request([0, 2], [[3, 0, 0, 0], [0, 0, 3, 0], Z], exponentials=[1, FAVOUR, 0.5, FAVOUR])],
                SamplerParams(allowed_token_ids=_ids([0, 2], [0, 2])), [[2], [0, 2, 2]],
                frozenset({"allowed_token_ids"}), coins=_any(0, 2)),
    # --- §2's tie rules on §12's rows, in every order profile ------------------------------------------------
    SamplerEdge("top-k-tie-class-kept",
                "top-k 2 on [3, 2, 2, 2] (token 4, logit 9, outside the allowed ids {0, 1, 2, 3}): the k-th value 2 "
                "is tied three ways and the whole class is kept, t = [e, 1, 1, 1]/(e + 3); each request drafts "
                "one member (draft probability 0.1 < 1/(e + 3): accepted whatever the coin) and its bonus row "
                "[1, 1, 1, 0] (k-th value 1 tied at 0, 1, 2) emits the member its exponentials favour. A top-k "
                "keeping exactly k tokens drops two of the drafted members, however it breaks the tie: their "
                "requests reject and emit 0 or the one member kept",
                [Request([x], [[3, 2, 2, 2, 9], [1, 1, 1, 0, 9]], TIE_DRAFT_ROWS, top_k=2,
                         exponentials=_favouring(favoured)) for x, favoured in ((1, 2), (2, 0), (3, 1))],
                SamplerParams(allowed_token_ids=_ids(*[TIE_ALLOWED] * 3)), [[1, 2], [2, 0], [3, 1]],
                frozenset({"allowed_token_ids", "top_k"}), coins=_any(1, 1, 1)),
    SamplerEdge("top-p-tie-class-kept",
                "top-p 0.5 on target [0.4, 0.2, 0.2, 0.2] (token 4 outside the allowed ids {0, 1, 2, 3}): c_1 = 0.4 "
                "< 0.5 ≤ c_2 = 0.6, τ = 0.2, and the three tokens tied at the cut are all kept; each request drafts "
                "one member (draft probability 0.1 < 0.2: accepted whatever the coin) and the bonus row, the same "
                "row, emits the member its exponentials favour. A top-p keeping the sorted prefix (the first m* = 2 "
                "tokens of the sort) drops two of the drafted members, whatever the sort's order among equals: "
                "their requests reject and emit 0 or the one member kept",
                [Request([x], [TIE_TOP_P_ROW, TIE_TOP_P_ROW], TIE_DRAFT_ROWS, top_p=0.5,
                         exponentials=_favouring(favoured)) for x, favoured in ((1, 2), (2, 3), (3, 1))],
                SamplerParams(allowed_token_ids=_ids(*[TIE_ALLOWED] * 3)), [[1, 2], [2, 3], [3, 1]],
                frozenset({"allowed_token_ids", "top_p"}), coins=_any(1, 1, 1)),
    SamplerEdge("top-p-tie-class-kept-dyadic",
                "top-p-tie-class-kept on logits every dtype holds: [1, 0, 0, 0] (token 4, logit 9, outside the allowed "
                "ids {0, 1, 2, 3}) gives t = [e, 1, 1, 1]/(e + 3); top-p 0.5 (c_1 = 0.475 < 0.5 ≤ c_2) keeps the three "
                "tokens tied at 1/(e + 3); each request drafts one member (draft probability 0.1: accepted whatever "
                "the coin) and the bonus row emits the member its exponentials favour. A top-p keeping the sorted "
                "prefix drops two of the drafted members: their requests reject and emit 0 or the one member kept",
                [Request([x], [[1, 0, 0, 0, 9]] * 2, TIE_DRAFT_ROWS, top_p=0.5, exponentials=_favouring(favoured))
                 for x, favoured in ((1, 2), (2, 3), (3, 1))],
                SamplerParams(allowed_token_ids=_ids(*[TIE_ALLOWED] * 3)), [[1, 2], [2, 3], [3, 1]],
                frozenset({"allowed_token_ids", "top_p"}), coins=_any(1, 1, 1)),
    SamplerEdge("greedy-tie-smallest-id",
                "greedy rows on §12's rows (token 4, logit 9, outside the allowed ids {0, 1, 2, 3}): [2, 3, 3, 0] "
                "ties 1 and 2 at the argmax and the smallest id, 1, wins — request 0's draft 2 is rejected and 1 "
                "emitted, request 1's draft 1 accepted and its bonus row [0, 5, 5, 5] emits 1; an argmax taking "
                "the last of the tied ids accepts draft 2 (bonus 3) and rejects draft 1 (emits 2)",
                [Request([2], [[2, 3, 3, 0, 9], [0, 5, 5, 5, 9]], temperature=0.0),
                 Request([1], [[2, 3, 3, 0, 9], [0, 5, 5, 5, 9]], temperature=0.0)],
                SamplerParams(allowed_token_ids=_ids(*[TIE_ALLOWED] * 2)), [[1], [1, 1]],
                frozenset({"allowed_token_ids", "greedy"})),
    SamplerEdge("empty-residual-allowed-ids",
                "SPEC §4's empty residual on §12's rows: allowed ids {1, 2} leave the target [0, .5, .5, 0] of "
                "[0, 0, 0, 3], and the draft row (2^-12 above it) covers it: draft 3, the largest raw logit, is "
                "rejected and the step draws from the allowed row, emitting 2; after an accept, row 1's allowed "
                "row [0, 1, 0, 0] beside d = 1 there (draft 3's 2^-11 beside it) emits 1. A fallback to the row "
                "before §12 emits 3, an argmax of the empty residual 0 (E favours both)",
                [Request([3], [[0, 0, 0, 3], Z], [empty_residual_row([0, 0.5, 0.5, 0], 3, 2.0 ** -12)],
                         uniforms=[0.5], exponentials=[1e-4, 1, 0.5, 1e-4]),
                 Request([1, 3], [[NEG, 0, NEG, NEG], [0, 0, NEG, 3], Z],
                         [[0, 1.0, 0, 0], empty_residual_row([0, 1.0, 0, 0], 3, 0.0)], uniforms=[0.5, 0.5],
                         exponentials=[1e-4, 1, 1, 1e-4])],
                SamplerParams(allowed_token_ids=_ids([1, 2], [1, 2])), [[2], [1, 1]],
                frozenset({"allowed_token_ids"}), coins=_any(1, 2)),
    SamplerEdge("empty-residual-bad-word",
                "SPEC §4's empty residual on §12's rows: the one-token bad word [3] bans draft 3 (raw logit 3), "
                "leaving [0, .5, .5, 0], which its draft row (2^-12 above) covers: rejected, and the step draws from "
                "the banned row, emitting 2, never 3 (the row before the ban) or 0 (an argmax of the empty "
                "residual)",
                [_covered_after_ban()],
                SamplerParams(bad_words=((np.array([3]),),)), [[2]], frozenset({"bad_words"}), coins=_any(1)),
    SamplerEdge("empty-residual-token-mask",
                "SPEC §4's empty residual on §12's rows: row 0's mask bans draft 3 (raw logit 3), leaving "
                "[0, .5, .5, 0], which its draft row (2^-12 above) covers: rejected, and the step draws from the "
                "masked row, emitting 2, never 3 or 0",
                [_covered_after_ban()],
                SamplerParams(token_mask=np.array([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)), [[2]],
                frozenset({"token_mask"}), coins=_any(1)),
    SamplerEdge("empty-residual-min-tokens",
                "SPEC §4's empty residual on §12's rows: min_tokens 2 after output [2] bans the stop token 3 (raw "
                "logit 3) at row 0, leaving [0, .5, .5, 0], which its draft row (2^-12 above) covers: rejected, and "
                "the step draws from the banned row, emitting 2, never 3 or 0",
                [_covered_after_ban()],
                SamplerParams(output_token_ids=_ids([2]), min_tokens=np.array([2]), stop_token_ids=_ids([3])),
                [[2]], frozenset({"min_tokens"}), coins=_any(1)),
    SamplerEdge("empty-residual-penalty-top-k",
                "SPEC §4's empty residual where a penalty, temperature and top-k leave the target: presence penalty 4 "
                "on token 3 (in the output so far: the request's output, then this step's accepted draft 3) takes "
                "its raw logit 3, the row's largest, to -1, below top-k 2's cut of [-1, 0, 1, 3] at T = 0.25; the "
                "draft row covers t = [0, .018, .982, 0], so draft 3 is rejected and the step emits 2. The row "
                "before the penalty emits 3, the penalised row before the cut 0 or 3, the cut row at T = 1 token 1",
                [tempered_rejection([-1, 0, 1, 3], 0.25, kept_logits=[-1, 0, 1, -1], top_k=2),
                 tempered_rejection([-1, 0, 1, 3], 0.25, after=(3,), kept_logits=[-1, 0, 1, -1], top_k=2)],
                SamplerParams(output_token_ids=(np.array([3]), None), presence_penalty=np.array([4.0, 4.0])),
                [[2], [3, 2]], frozenset({"presence_penalty", "top_k"}), coins=_any(1, 2)),
    SamplerEdge("empty-residual-bias-min-p",
                "SPEC §4's empty residual where a bias, temperature and min_p leave the target: bias -16 takes draft "
                "3's raw logit 5, the row's largest, to -11; at T = 4 min_p 0.25 keeps tokens 1 and 2 of "
                "[-8, 2, -2, -11] (t = [0, .731, .269, 0]), which the draft row covers: draft 3 is rejected and the "
                "step emits 2, at the first position and after an accept. The row before the bias emits 3; at T = 1 "
                "min_p keeps token 1 alone",
                [tempered_rejection([-8, 2, -2, 5], 4.0, kept_logits=[-8, 2, -2, -11]),
                 tempered_rejection([-8, 2, -2, 5], 4.0, after=(1,), kept_logits=[-8, 2, -2, -11])],
                SamplerParams(logit_bias=np.array([[0, 0, 0, -16.0]] * 2), min_p=np.array([0.25, 0.25])),
                [[2], [1, 2]], frozenset({"logit_bias", "min_p"}), coins=_any(1, 2)),
    *CAUSE_CUT_EDGES,
    *TOGETHER_EDGES,
]
"""The edges by name; ``specsim.conformance.checks.sampler.group`` runs each in every order it holds in."""
