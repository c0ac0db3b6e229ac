"""The frozen case list of the statistical layer (L3): explicit, committed, never drawn by hypothesis.

A *case* is one heterogeneous batch template: a few requests with their own
K, temperature, top-k/top-p, greedy or not, and how close their drafts are to
the target. The L3 group replicates the template into many independent
trials (fresh seeds and positions per request) and tests what the device
emits against laws computed here, independently, in float64.

The *content* of a case (its logits and draft rows) is a deterministic
function of the case id alone (``content_seed``), so the case list, its
sample sizes and its detectable-TV table are fixed and documented; the suite
seed only changes the drafts, seeds and positions sampled (``stats.case_seed``).

>>> c = CASES[0]
>>> built = build(c)
>>> built.target_logits.shape == (sum(r.k for r in c.requests) + len(c.requests), c.vocab_size)
True
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np

from devices.protocol import VerifyBatch
from reference import laws
from reference.sampler import prefix_rows
from reference.target import target_probs
from specsim.testing.sampler_params import random_sampler


@dataclass(frozen=True)
class Request:
    """One request of a case template.

    - ``k``: draft tokens (0 = bonus only); ``temperature`` 0 = greedy.
    - ``draft``: how the draft rows relate to the target: ``"same"`` (draft =
      target, a = 1), ``"near"`` / ``"mid"`` / ``"far"`` (target logits plus
      Gaussian noise of std 0.3 / 1 / 3), ``"indep"`` (unrelated logits).
    - ``scale``: std of the target logits (large = peaked rows).
    - ``masked``: fraction of target logits set to -inf (zeros of the target).
    - ``draft_zeros``: fraction of draft entries set to 0 (then renormalised).
    - ``ties``: round target logits to this grid (0 = off), so equal values
      (top-k boundary ties, top-p cut ties, greedy argmax ties) are common.
    - ``placeholder``: every draft is the placeholder id -1 (SPEC §4: always
      rejected, rows zero, positions after the first never reached).
    """

    k: int
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    draft: str = "mid"
    scale: float = 2.0
    masked: float = 0.0
    draft_zeros: float = 0.0
    ties: float = 0.0
    placeholder: bool = False


@dataclass(frozen=True)
class Case:
    """A batch template; ``point`` = point proposals (no draft_probs) for the whole batch; ``pit`` = large-V PIT test."""

    id: str
    vocab_size: int
    requests: tuple[Request, ...]
    point: bool = False
    pit: bool = False
    note: str = ""
    sampler: tuple = ()                 # SPEC §12 parameters on (``sampler_params.random_sampler`` builds them)
    order: str = "canonical"            # their order profile


R = Request
CASES: tuple[Case, ...] = (
    Case("v8-hetero", 8, (R(3, 1.0, draft="near"), R(1, 0.7, top_k=3), R(2, 0.0), R(0, 1.3)),
         note="per-request K (incl. 0), T, top-k, greedy mixed in"),
    Case("v8-far", 8, (R(1, 1.0, draft="far"), R(1, 0.5, scale=0.5, draft="indep")), note="drafts far from the target"),
    Case("v8-zeros", 8, (R(2, 1.0, masked=0.35, draft_zeros=0.3), R(1, 0.8, top_p=0.7, scale=1.0, draft_zeros=0.2)),
         note="target zeros (-inf logits), draft zeros, top-p zeros"),
    Case("v8-ties", 8, (R(2, 1.0, top_k=2, ties=1.0), R(1, 0.9, top_p=0.8, scale=1.0, ties=0.5), R(2, 0.0, ties=1.0)),
         note="ties at the top-k boundary, the top-p cut and the greedy argmax"),
    Case("v8-point", 8, (R(1, 1.0, scale=4.0, draft="near"), R(1, 0.7, top_p=0.8, scale=1.5), R(2, 0.0),
                         R(1, 1.0, placeholder=True)), point=True,
         note="point proposals (draft_probs none), a placeholder draft"),
    Case("v16-same", 16, (R(3, 1.0, draft="same"), R(2, 1.5, draft="same")),
         note="draft = target: always accepted, the bonus path carries the law"),
    Case("v32-peaked", 32, (R(2, 0.7, scale=5.0, draft="near"), R(2, 1.0, top_p=0.9, scale=5.0)),
         note="peaked rows"),
    Case("v32-topp", 32, (R(3, 1.0, top_p=0.9, draft="near"), R(1, 0.8, top_k=10, top_p=0.5, scale=1.0)),
         note="top-p, top-k then top-p"),
    Case("v64-temp", 64, (R(2, 0.5, draft="near"), R(2, 1.5, draft="near")),
         note="T far from 1 (temperature bugs are invisible at T = 1)"),
    Case("v128-hetero", 128, (R(1, 1.0, draft="near"), R(0, 0.8, top_k=20), R(1, 0.0)),
         note="mid-size V, heterogeneous"),
    Case("v128-point", 128, (R(1, 0.9, top_p=0.95, scale=5.0, draft="near"), R(1, 1.0, scale=5.0, draft="near")), point=True,
         note="point proposals at mid V"),
    Case("v256-near", 256, (R(2, 1.0, scale=3.0, draft="near"),), note="V = 256, drafts near"),
    Case("v1024-topk", 1024, (R(1, 0.8, scale=3.0, top_k=64, draft="near"),),
         note="V = 1024 with top-k 64"),
    Case("v32768-pit", 32768, (R(1, 1.0, scale=3.0, draft="near"),), pit=True,
         note="large V through randomized PIT + DKWM"),
    Case("v16-sampler", 16, (R(1, 1.0, draft="near"), R(1, 0.8, top_p=0.9, draft="near")),
         sampler=("token_mask", "bad_words", "min_tokens", "logit_bias", "repetition_penalty", "frequency_penalty",
                  "presence_penalty"),
         note="SPEC §12 along the drafts (canonical order): mask, bad words, min_tokens, bias, penalties"),
    Case("v16-sampler-vllm", 16, (R(1, 1.0, draft="near"), R(1, 0.7, top_k=6, draft="near")),
         sampler=("allowed_token_ids", "logit_bias", "repetition_penalty", "presence_penalty", "min_p"),
         order="vllm", note="SPEC §12 in vLLM's order: allowed ids, bias, penalties, min_p before top-k"),
)
"""The committed L3 cases. Changing this list changes the suite: say so in the commit."""

DRAFT_NOISE = {"near": 0.3, "mid": 1.0, "far": 3.0}


def content_seed(case_id: str) -> int:
    """Seed of a case's logits and draft rows: a hash of its id alone, so the content is frozen."""
    return int.from_bytes(hashlib.sha256(f"specsim-L3-content/{case_id}".encode()).digest()[:8], "little") >> 1


@dataclass
class Built:
    """A case made concrete (``rows`` = Σ K_i, B = len(requests)).

    - ``num_draft_tokens`` ``[B]``; ``target_logits`` ``[rows + B, V]`` float64;
    - ``draft_rows`` ``[rows, V]``: the law each draft is sampled from (for a
      point-proposal case this is the drafter's law, not passed to the device);
    - ``temperature``, ``top_k``, ``top_p`` ``[B]``;
    - ``target`` ``[rows + B, V]``: ``target_probs`` from the raw logits
      (``reference.target``), zeros for greedy rows;
    - ``acceptance``: per request, ``[K_i]`` acceptance probabilities a_j (with SPEC §12 rows, which
      depend on the drafts: the probability of accepting draft j given drafts 0..j−1 were accepted);
    - ``sampler``: the case's SPEC §12 parameters for one trial; then ``target`` row j is the law of
      the token at position j given the position is reached (a mixture over the prefixes), from the
      exact step law (``with_sampler``).
    """

    case: Case
    num_draft_tokens: np.ndarray
    target_logits: np.ndarray
    draft_rows: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    target: np.ndarray
    acceptance: list = field(default_factory=list)
    sampler: object = None   # ``devices.protocol.SamplerParams`` of one trial (SPEC §12), or None

    def target_row(self, i: int, j: int) -> int:
        cu = np.concatenate([[0], np.cumsum(self.num_draft_tokens)])
        return int(cu[i] + i + j)

    def draft_row(self, i: int, j: int) -> int:
        return int(np.concatenate([[0], np.cumsum(self.num_draft_tokens)])[i] + j)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _target_logits(rng: np.random.Generator, r: Request, V: int) -> np.ndarray:
    z = rng.normal(0.0, r.scale, V)
    if r.ties:
        z = np.round(z / r.ties) * r.ties
    if r.masked:
        masked = rng.random(V) < r.masked
        masked[np.argmax(z)] = False  # keep a finite value in every row
        z[masked] = -np.inf
    return z


def _draft_row(rng: np.random.Generator, r: Request, z: np.ndarray, target: np.ndarray) -> np.ndarray:
    V = len(z)
    if r.draft == "same" and r.temperature > 0:
        return target.copy()
    T = r.temperature if r.temperature > 0 else 1.0
    base = np.where(np.isfinite(z), z, -30.0) / T if r.draft != "indep" else rng.normal(0.0, r.scale, V) / T
    logits = base + rng.normal(0.0, DRAFT_NOISE.get(r.draft, 1.0), V)
    row = target_probs(logits, 1.0, r.top_k, r.top_p)  # the drafter uses the request's filters too
    if r.draft_zeros:
        zero = rng.random(V) < r.draft_zeros
        zero[np.argmax(row)] = False
        row = np.where(zero, 0.0, row)
        row = row / row.sum()
    return row


def build(case: Case) -> Built:
    """Make the case's arrays from ``content_seed(case.id)`` (deterministic)."""
    rng = np.random.default_rng(content_seed(case.id))
    V = case.vocab_size
    logits, drafts, targets, acceptance = [], [], [], []
    for r in case.requests:
        rows = [_target_logits(rng, r, V) for _ in range(r.k + 1)]
        probs = [target_probs(z, r.temperature, r.top_k, r.top_p) if r.temperature > 0 else np.zeros(V)
                 for z in rows]
        draft = [_draft_row(rng, r, rows[j], probs[j]) for j in range(r.k)]
        if r.placeholder:
            draft = [np.zeros(V) for _ in range(r.k)]
            a = [0.0] * r.k
        elif r.temperature > 0 and case.point:
            a = [float(np.dot(d, t)) for d, t in zip(draft, probs)]
        elif r.temperature > 0:
            a = [float(np.minimum(d, t).sum()) for d, t in zip(draft, probs)]
        else:
            a = [float(d[np.argmax(z)]) for d, z in zip(draft, rows)]  # greedy: P(draft == argmax)
        logits += rows
        targets += probs
        drafts += draft
        acceptance.append(np.array(a))
    k = np.array([r.k for r in case.requests], dtype=np.int64)
    built = Built(case, k, np.array(logits), np.array(drafts).reshape(-1, V),
                  np.array([r.temperature for r in case.requests]), np.array([r.top_k for r in case.requests]),
                  np.array([r.top_p for r in case.requests]), np.array(targets), acceptance)
    return with_sampler(built, rng) if case.sampler else built


def with_sampler(built: Built, rng: np.random.Generator) -> Built:
    """``built`` with its case's SPEC §12 parameters (``random_sampler`` on the template whose drafts are
    each row's most likely token, so bad words and stop tokens meet likely drafts) and the laws they
    imply: each request's exact step law (``reference.laws.emitted_law`` over ``prefix_rows``), read as
    the law of the token at each reached position and the acceptance rate at each position."""
    case = built.case
    ids = np.argmax(built.draft_rows, axis=1).astype(np.int64)
    template = VerifyBatch(built.num_draft_tokens, ids, built.draft_rows, built.target_logits, built.temperature,
                           built.top_k, built.top_p)
    sampler = random_sampler(rng, template, case.sampler, case.order)
    starts = np.concatenate([[0], np.cumsum(built.num_draft_tokens)])
    target, acceptance = built.target.copy(), []
    for i, r in enumerate(case.requests):
        rows = slice(built.target_row(i, 0), built.target_row(i, r.k) + 1)
        mine = {name: _one_request(value, i, rows) for name, value in sampler.as_kwargs().items()}
        law = laws.emitted_law(prefix_rows(built.target_logits[rows], r.temperature, r.top_k, r.top_p, **mine),
                               built.draft_rows[starts[i]: starts[i + 1]].tolist(), "full")
        reach = np.cumsum(laws.num_accepted_from_law(law, r.k)[::-1])[::-1]   # P(num_accepted >= j)
        acceptance.append(np.array([reach[j + 1] / reach[j] if reach[j] > 0 else 0.0 for j in range(r.k)]))
        for prefix, tokens in laws.conditional_token_laws(law).items():
            target[rows.start + len(prefix)] = 0.0
        for prefix, tokens in laws.conditional_token_laws(law).items():
            for y, mass in tokens.items():
                target[rows.start + len(prefix), y] += mass
        target[rows] /= np.maximum(target[rows].sum(axis=1, keepdims=True), 1e-300)
    return replace(built, target=target, acceptance=acceptance, sampler=sampler)


def _one_request(value, i: int, rows: slice):
    """A ``SamplerParams`` field restricted to request ``i`` (``rows``: its target rows)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return value[i: i + 1]
    return value[rows] if value.ndim == 2 and value.dtype == np.bool_ else value[i: i + 1]


def capability_needs(case: Case) -> set[str]:
    """Capability flags (``devices.protocol.Capabilities``) a device needs to run ``case``."""
    needs = {"point_proposals" if case.point else "draft_probs"}
    for r in case.requests:
        if r.temperature == 0:
            needs.add("greedy")
        if r.top_k:
            needs.add("top_k")
        if r.top_p < 1:
            needs.add("top_p")
    return needs
