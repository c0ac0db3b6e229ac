"""Deterministic builders of verification batches and noise, for checks and tests.

Everything is drawn from a ``numpy.random.Generator`` passed in: the global
RNG is never touched, and the same seed builds the same batch.

>>> b = random_batch(np.random.default_rng(0), BatchSpec(batch=3, max_k=2, vocab_size=5))
>>> b.target_logits.shape == (int(b.num_draft_tokens.sum()) + 3, 5)
True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace

import numpy as np

from devices.validate import draft_dtype
from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, SamplerParams, VerifyBatch


@dataclass(frozen=True)
class BatchSpec:
    """What a random batch contains; fractions are per request (or per draft)."""

    batch: int = 8
    max_k: int = 4
    min_k: int = 0                    # each request's K drawn from min_k … max_k (zero_k_fraction still sets some to 0)
    vocab_size: int = 16
    dtype: str = "float64"
    draft_probs: bool = True          # False: point proposals for the whole batch
    greedy_fraction: float = 0.25
    top_k_fraction: float = 0.25
    top_p_fraction: float = 0.25
    placeholder_fraction: float = 0.05  # padding placeholders (-1, no draft: row never read; SPEC §4)
    masked_fraction: float = 0.1      # target logits set to -inf
    zero_k_fraction: float = 0.15
    closeness: float = 1.0            # std of draft logit noise around the target logits
    logit_scale: float = 2.0
    draw: str = "choice"              # drafts: "choice" (one rng.choice per row) or "inverse-cdf" (vectorised)
    withdrawn_fraction: float = 0.0   # drawn drafts then withdrawn (-1, row read; SPEC §4); draft_probs only
    top_k_below_vocab: bool = False   # a request's top-k drawn from 1 .. V − 1 (every one cuts), not 1 .. V

    @property
    def needs(self) -> set[str]:
        """Capabilities a device needs to serve batches of this spec."""
        out = {"draft_probs" if self.draft_probs else "point_proposals"}
        if self.withdrawn_fraction > 0:
            out.add("withdrawn_drafts")
        if self.greedy_fraction > 0:
            out.add("greedy")
        if self.top_k_fraction > 0:
            out.add("top_k")
        if self.top_p_fraction > 0:
            out.add("top_p")
        return out


def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _draw(rng: np.random.Generator, draft_probs: np.ndarray, how: str) -> np.ndarray:
    """One draft id per row of ``draft_probs [N, V]`` → ``[N]`` int64. ``"inverse-cdf"`` is one
    vectorised pass (for 10⁵ requests); ``"choice"`` keeps the streams of the fixed L1 cases."""
    if how == "inverse-cdf":
        cdf = np.cumsum(draft_probs, axis=1)
        return np.minimum((cdf < rng.random(len(cdf))[:, None] * cdf[:, -1:]).sum(axis=1),
                          draft_probs.shape[1] - 1).astype(np.int64)
    return np.array([rng.choice(draft_probs.shape[1], p=row) for row in draft_probs], dtype=np.int64).reshape(-1)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a SPEC §6 dtype name; bfloat16 is the ``ml_dtypes`` package's (numpy has none).

    >>> numpy_dtype("bfloat16").itemsize, numpy_dtype("float16").name
    (2, 'float16')
    """
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def random_batch(rng: np.random.Generator, spec: BatchSpec) -> VerifyBatch:
    """A ragged batch with heterogeneous per-request K and sampling parameters.

    Drafts are drawn from their draft rows (mostly), so acceptance is
    realistic; a few are arbitrary ids (draft prob possibly 0) or padding
    placeholders (``placeholder_fraction``: id -1, their draft rows left random,
    which SPEC §4 never reads). With ``withdrawn_fraction``, some drawn drafts
    are withdrawn (``withdrawn_drafts``).
    """
    if spec.withdrawn_fraction > 0 and not spec.draft_probs:
        raise ValueError("withdrawn_fraction: a withdrawn draft needs its draft row; point proposals have none")
    B, V = spec.batch, spec.vocab_size
    k = rng.integers(spec.min_k, spec.max_k + 1, size=B)
    k[rng.random(B) < spec.zero_k_fraction] = 0
    num_tokens = int(k.sum())
    logits = rng.normal(0.0, spec.logit_scale, size=(num_tokens + B, V))
    logits[rng.random(logits.shape) < spec.masked_fraction] = -np.inf
    dead = ~np.isfinite(logits).any(axis=1)
    logits[dead, rng.integers(0, V, size=int(dead.sum()))] = 0.0
    request_of_draft = np.repeat(np.arange(B), k)
    draft_target_rows = np.arange(num_tokens) + request_of_draft
    finite = np.where(np.isfinite(logits[draft_target_rows]), logits[draft_target_rows], -30.0)
    draft_probs = softmax_rows(finite + rng.normal(0.0, spec.closeness, size=finite.shape))
    ids = _draw(rng, draft_probs, spec.draw)
    arbitrary = rng.random(num_tokens) < 0.1
    ids[arbitrary] = rng.integers(0, V, size=int(arbitrary.sum()))
    padding = rng.random(num_tokens) < spec.placeholder_fraction
    ids[padding] = PLACEHOLDER_TOKEN_ID
    temperature = rng.choice([0.5, 0.7, 1.0, 1.3], size=B)
    temperature[rng.random(B) < spec.greedy_fraction] = 0.0
    top_k = np.where(rng.random(B) < spec.top_k_fraction,
                     rng.integers(1, V if spec.top_k_below_vocab else V + 1, size=B), 0)
    top_p = np.where(rng.random(B) < spec.top_p_fraction, rng.choice([0.5, 0.8, 0.95], size=B), 1.0)
    withdrawn = None
    if spec.withdrawn_fraction > 0:  # drawn last: the streams of the other specs are untouched
        withdrawn = _withdraw(rng, ids, ~arbitrary & ~padding, logits, draft_target_rows, spec.withdrawn_fraction)
    dtype = numpy_dtype(spec.dtype)
    probs = draft_probs.astype(draft_dtype(spec.dtype))  # 16-bit logits pair with float32 draft probs (SPEC §6)
    if probs.dtype == np.float32:  # renormalise in float32 so rows sum to 1 in their own dtype
        probs = probs / probs.sum(axis=1, keepdims=True, dtype=np.float32)
    return VerifyBatch(
        num_draft_tokens=k.astype(np.int64), draft_token_ids=ids,
        draft_probs=probs if spec.draft_probs else None, target_logits=logits.astype(dtype),
        temperature=temperature.astype(np.float64), top_k=top_k.astype(np.int64), top_p=top_p.astype(np.float64),
        seeds=rng.integers(0, 2**63, size=B, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1),
        positions=rng.integers(0, 4096, size=B).astype(np.int64), withdrawn=withdrawn)


def _withdraw(rng: np.random.Generator, ids: np.ndarray, drawn: np.ndarray, logits: np.ndarray,
              draft_target_rows: np.ndarray, fraction: float) -> np.ndarray:
    """Withdraw about ``fraction`` of the drafts ``drawn`` from their rows (bool ``[num_tokens]``), as a
    grammar does with a draft it forbids: the id becomes -1 (``ids [num_tokens]``, in place) and the
    token is masked in its target row (``logits [rows, V]``, in place; ``draft_target_rows [num_tokens]``)
    unless that would leave the row without a finite entry. Masking keeps the step lossless (SPEC §4: a
    withdrawn draft of target probability 0 is §3's rejection of it). Returns ``withdrawn [num_tokens]``."""
    withdrawn = drawn & (rng.random(len(ids)) < fraction)
    for n in np.flatnonzero(withdrawn):
        row, x = draft_target_rows[n], ids[n]
        if np.isfinite(np.delete(logits[row], x)).any():
            logits[row, x] = -np.inf
        ids[n] = PLACEHOLDER_TOKEN_ID
    return withdrawn


def random_noise(rng: np.random.Generator, batch: VerifyBatch) -> Noise:
    """Injected noise of SPEC §5.1 for ``batch``."""
    return Noise(uniforms=rng.random(int(batch.num_draft_tokens.sum())),
                 exponentials=rng.exponential(size=(batch.batch_size, batch.vocab_size)) + 1e-300)


def request_rows(batch: VerifyBatch, order) -> tuple[np.ndarray, np.ndarray]:
    """The rows of requests ``order`` (in that order, repeats allowed): their draft tokens' indices
    ``[sum K]`` (into ``draft_token_ids``, ``draft_probs``, the uniforms) and their target rows' ``[sum K + len(order)]``
    (into ``target_logits`` and SPEC §12's ``token_mask``).

    >>> b = VerifyBatch(np.array([2, 1]), np.zeros(3, int), None, np.zeros((5, 4)), np.ones(2), np.zeros(2, int),
    ...                 np.ones(2))
    >>> [r.tolist() for r in request_rows(b, [1, 1, 0])]
    [[2, 2, 0, 1], [3, 4, 3, 4, 0, 1, 2]]
    """
    cu = batch.request_offsets()
    draft = [np.arange(cu[i], cu[i + 1]) for i in order]
    target = [np.arange(cu[i] + i, cu[i + 1] + i + 1) for i in order]
    return (np.concatenate(draft).astype(np.int64) if draft else np.zeros(0, np.int64),
            np.concatenate(target).astype(np.int64) if target else np.zeros(0, np.int64))


def select_sampler(sampler, order, target_rows: np.ndarray):
    """SPEC §12's parameters of requests ``order`` (``request_rows``' ``target_rows`` for ``token_mask``);
    None stays None."""
    if sampler is None:
        return None

    def pick(name, value):
        if value is None or name == "order":
            return value
        if name == "token_mask":
            return value[target_rows]
        if isinstance(value, (tuple, list)):
            return tuple(value[i] for i in order)
        return np.asarray(value)[order]
    return type(sampler)(**{name: pick(name, value) for name, value in sampler.as_kwargs().items()})


def select_requests(batch: VerifyBatch, order, noise: Noise | None = None):
    """The batch of requests ``order`` (any order; a request may appear more than once), with their noise and
    SPEC §12 parameters.

    Used for batch-invariance checks (a request's result must not change when its neighbours do) and for
    an edge repeated to fill a batch of a given size.
    """
    order = np.asarray(order, dtype=np.int64)
    draft, target = request_rows(batch, order)
    sub = replace(batch, num_draft_tokens=batch.num_draft_tokens[order], draft_token_ids=batch.draft_token_ids[draft],
                  withdrawn=None if batch.withdrawn is None else batch.withdrawn[draft],
                  draft_probs=None if batch.draft_probs is None else batch.draft_probs[draft],
                  target_logits=batch.target_logits[target], temperature=batch.temperature[order],
                  top_k=batch.top_k[order], top_p=batch.top_p[order],
                  seeds=None if batch.seeds is None else batch.seeds[order],
                  positions=None if batch.positions is None else batch.positions[order],
                  sampler=select_sampler(batch.sampler, order, target))
    sub_noise = None if noise is None else Noise(noise.uniforms[draft], noise.exponentials[order])
    return sub, sub_noise


def join_requests(first: VerifyBatch, second: VerifyBatch, first_noise: Noise | None = None,
                  second_noise: Noise | None = None):
    """One batch of ``first``'s requests then ``second``'s (same V, logits dtype and proposal form), with their noise
    (both or neither). A batch without ``withdrawn`` joins one with it as withdrawing nothing; keys (``seeds``,
    ``positions``) are kept only where both have them. SPEC §12's parameters (one order profile where both have
    them) are joined field by field, a field one side lacks given there its value that changes nothing
    (``neutral_sampler``). Used to mix an edge's requests with filler requests (``select_requests`` then lays out
    any mix of the two).

    >>> a = random_batch(np.random.default_rng(0), BatchSpec(batch=2, vocab_size=5))
    >>> b = random_batch(np.random.default_rng(1), BatchSpec(batch=3, vocab_size=5))
    >>> j, _ = join_requests(a, b)
    >>> j.batch_size, j.target_logits.shape[0] == a.target_logits.shape[0] + b.target_logits.shape[0]
    (5, True)
    """
    if first.vocab_size != second.vocab_size or first.target_logits.dtype != second.target_logits.dtype:
        raise ValueError(f"join_requests: both batches need one V and logits dtype, got {first.vocab_size} "
                         f"{first.target_logits.dtype} and {second.vocab_size} {second.target_logits.dtype}")
    if (first.draft_probs is None) != (second.draft_probs is None):
        raise ValueError("join_requests: both batches need draft_probs, or neither (point proposals)")
    if first.sampler is not None and second.sampler is not None and first.sampler.order != second.sampler.order:
        raise ValueError(f"join_requests: both batches' SPEC §12 parameters need one order profile, got "
                         f"{first.sampler.order!r} and {second.sampler.order!r}")
    if (first_noise is None) != (second_noise is None):
        raise ValueError("join_requests: noise for both batches, or for neither")

    def both(a, b):
        return None if a is None and b is None else np.concatenate([a, b])

    def withdrawn(batch):
        return np.zeros(int(batch.num_draft_tokens.sum()), bool) if batch.withdrawn is None else batch.withdrawn

    keyed = first.seeds is not None and second.seeds is not None
    joined = replace(first, num_draft_tokens=both(first.num_draft_tokens, second.num_draft_tokens),
                     draft_token_ids=both(first.draft_token_ids, second.draft_token_ids),
                     draft_probs=both(first.draft_probs, second.draft_probs),
                     target_logits=both(first.target_logits, second.target_logits),
                     temperature=both(first.temperature, second.temperature), top_k=both(first.top_k, second.top_k),
                     top_p=both(first.top_p, second.top_p),
                     withdrawn=None if first.withdrawn is None and second.withdrawn is None
                     else np.concatenate([withdrawn(first), withdrawn(second)]),
                     seeds=both(first.seeds, second.seeds) if keyed else None,
                     positions=both(first.positions, second.positions)
                     if first.positions is not None and second.positions is not None else None,
                     sampler=join_samplers(first, second))
    noise = None if first_noise is None else Noise(both(first_noise.uniforms, second_noise.uniforms),
                                                   both(first_noise.exponentials, second_noise.exponentials))
    return joined, noise


def neutral_sampler(batch: VerifyBatch, name: str):
    """SPEC §12's parameter ``name`` for every request of ``batch`` at the value that changes nothing: no history,
    no stop id, every token allowed (a ``None`` per request for ``allowed_token_ids``), no bad word, ``min_tokens``
    0, a zero bias, repetition 1, frequency, presence and min_p 0.

    >>> b = random_batch(np.random.default_rng(0), BatchSpec(batch=2, vocab_size=3))
    >>> neutral_sampler(b, "allowed_token_ids"), neutral_sampler(b, "repetition_penalty").tolist()
    ((None, None), [1.0, 1.0])
    """
    B, V = batch.batch_size, batch.vocab_size
    if name in ("prompt_token_ids", "output_token_ids", "stop_token_ids"):
        return tuple(np.zeros(0, np.int64) for _ in range(B))
    if name == "allowed_token_ids":
        return (None,) * B
    if name == "bad_words":
        return ((),) * B
    if name == "token_mask":
        return np.ones((int(np.sum(batch.num_draft_tokens)) + B, V), bool)
    if name == "min_tokens":
        return np.zeros(B, np.int64)
    if name == "logit_bias":
        return np.zeros((B, V))
    if name in ("repetition_penalty", "frequency_penalty", "presence_penalty", "min_p"):
        return np.full(B, 1.0 if name == "repetition_penalty" else 0.0)
    raise ValueError(f"neutral_sampler: name must be a SPEC §12 field of SamplerParams, got {name!r}")


def join_samplers(first: VerifyBatch, second: VerifyBatch):
    """``join_requests``' SPEC §12 parameters: None where neither batch has any; else each field either side gives,
    ``first``'s requests then ``second``'s, a side without it given ``neutral_sampler``'s value."""
    given = [b.sampler for b in (first, second) if b.sampler is not None]
    if not given:
        return None
    joined = {"order": given[0].order}
    for field in dataclasses.fields(SamplerParams):
        name = field.name
        if name == "order" or all(getattr(s, name) is None for s in given):
            continue
        a, b = (getattr(x.sampler, name) if x.sampler is not None and getattr(x.sampler, name) is not None
                else neutral_sampler(x, name) for x in (first, second))
        joined[name] = tuple(a) + tuple(b) if isinstance(a, tuple) else np.concatenate([np.asarray(a), np.asarray(b)])
    return SamplerParams(**joined)
