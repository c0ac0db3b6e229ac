"""Request state: tokens, KV bookkeeping, and the cached drafts of the next round.

Seed 003's design: the drafts (and their ``draft_probs``) proposed after a
step live in the request until the step that verifies them. They are keyed by
the round start ``spec_position`` (= the sequence length they were proposed
at), survive preemption and steps where the request is not scheduled, and are
dropped with the request. Because drafting is keyed (``rng.py``), keeping them
across a preemption gives exactly the drafts a fresh proposal would.

>>> r = Request("a", [1, 2], SamplingParams(max_tokens=3), seed=5)
>>> r.num_tokens, r.status
(2, <Status.WAITING: 'waiting'>)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


class Status(enum.Enum):
    WAITING = "waiting"        # never run, or preempted (KV dropped, to recompute)
    RUNNING = "running"        # holds KV blocks
    FINISHED = "finished"      # EOS, max_tokens or max_model_len
    ABORTED = "aborted"


@dataclass(frozen=True)
class SamplingParams:
    """Per-request sampling: ``temperature`` 0 is greedy; ``top_k`` 0 and ``top_p`` 1 are off.

    ``num_speculative_tokens`` None uses the engine's K; ``proposer`` None the
    engine's default proposer; ``ignore_eos`` keeps generating past EOS;
    ``stop_token_ids`` end the request like EOS (and are banned with it while
    ``min_tokens`` is not reached).

    SPEC §12's parameters (each off by default; ``reference/SPEC.md`` §12 states their law):
    ``allowed_token_ids`` (only these), ``bad_words`` (token sequences), ``min_tokens``,
    ``logit_bias`` (``{token id: bias}``), ``repetition_penalty`` (1 off),
    ``frequency_penalty`` and ``presence_penalty`` (0 off), ``min_p`` (0 off), and
    ``grammar`` (a ``specsim.engine.grammar.Grammar``: structured output, one mask per position).
    Lists are kept as tuples; ids are checked against the target's vocabulary by
    ``Engine.add_request`` (``check_vocab``).

    >>> p = SamplingParams(repetition_penalty=1.3, logit_bias={2: -1.0}, bad_words=[[1, 2]])
    >>> p.uses_sampler, p.logit_bias, p.bad_words
    (True, ((2, -1.0),), ((1, 2),))
    >>> SamplingParams(repetition_penalty=0)
    Traceback (most recent call last):
    ...
    ValueError: repetition_penalty: must be finite and > 0 (it divides; 1 means off), got 0
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_tokens: int = 16
    num_speculative_tokens: int | None = None
    proposer: str | None = None
    ignore_eos: bool = False
    stop_token_ids: tuple = ()
    # SPEC §12
    allowed_token_ids: tuple | None = None
    bad_words: tuple | None = None
    min_tokens: int = 0
    logit_bias: tuple | None = None
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    min_p: float = 0.0
    grammar: object | None = None

    def __post_init__(self):
        if not (self.temperature >= 0 and np.isfinite(self.temperature)):
            raise ValueError(f"temperature: must be finite and >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k: must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p: must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: must be >= 1, got {self.max_tokens}")
        if self.num_speculative_tokens is not None and self.num_speculative_tokens < 0:
            raise ValueError(f"num_speculative_tokens: must be >= 0, got {self.num_speculative_tokens}")
        self._check_sampler()

    def _check_sampler(self) -> None:
        """SPEC §12's rules, each error naming the field; lists normalised to tuples (the dataclass is frozen)."""
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("stop_token_ids", _ids("stop_token_ids", self.stop_token_ids))
        if self.allowed_token_ids is not None:
            set_("allowed_token_ids", _ids("allowed_token_ids", self.allowed_token_ids))
            if not self.allowed_token_ids:
                raise ValueError("allowed_token_ids: must list at least one token (None allows all)")
        if self.bad_words is not None:
            words = tuple(_ids(f"bad_words[{i}]", w) for i, w in enumerate(self.bad_words))
            if any(not w for w in words):
                raise ValueError(f"bad_words: each word must have at least one token, got {words}")
            set_("bad_words", words)
        if not (isinstance(self.min_tokens, (int, np.integer)) and 0 <= self.min_tokens <= self.max_tokens):
            raise ValueError(f"min_tokens: must be an integer in [0, max_tokens = {self.max_tokens}], "
                             f"got {self.min_tokens}")
        if self.logit_bias is not None:
            items = self.logit_bias.items() if isinstance(self.logit_bias, Mapping) else self.logit_bias
            bias = tuple(sorted((int(_ids("logit_bias", [t])[0]), float(b)) for t, b in items))
            if not all(np.isfinite(b) for _, b in bias):
                raise ValueError(f"logit_bias: every bias must be finite, got {dict(bias)}")
            set_("logit_bias", bias)
        if not (np.isfinite(self.repetition_penalty) and self.repetition_penalty > 0):
            raise ValueError("repetition_penalty: must be finite and > 0 (it divides; 1 means off), "
                             f"got {self.repetition_penalty}")
        for name in ("frequency_penalty", "presence_penalty"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"{name}: must be finite (0 means off), got {getattr(self, name)}")
        if not 0 <= self.min_p <= 1:
            raise ValueError(f"min_p: must be in [0, 1] (0 means off), got {self.min_p}")

    @property
    def uses_sampler(self) -> bool:
        """Whether any SPEC §12 parameter is on (the step then carries ``VerifyBatch.sampler``)."""
        return (self.allowed_token_ids is not None or bool(self.bad_words) or self.min_tokens > 0
                or bool(self.logit_bias) or self.repetition_penalty != 1 or self.frequency_penalty != 0
                or self.presence_penalty != 0 or self.min_p != 0 or self.grammar is not None)

    def check_vocab(self, vocab_size: int) -> None:
        """Every token id of these parameters in ``[0, vocab_size)`` (ValueError naming the field)."""
        lists = {"stop_token_ids": self.stop_token_ids, "allowed_token_ids": self.allowed_token_ids or (),
                 "bad_words": [t for w in self.bad_words or () for t in w],
                 "logit_bias": [t for t, _ in self.logit_bias or ()]}
        for name, ids in lists.items():
            if any(t >= vocab_size for t in ids):
                raise ValueError(f"{name}: token ids must be in [0, {vocab_size}), got {max(ids)}")


def _ids(name: str, values) -> tuple:
    """``values`` as a tuple of non-negative ints (ValueError naming ``name`` otherwise)."""
    try:
        ids = tuple(int(v) for v in values)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a sequence of token ids, got {values!r}") from None
    if any(v != w for v, w in zip(ids, values)) or any(v < 0 for v in ids):
        raise ValueError(f"{name}: token ids must be integers >= 0, got {values!r}")
    return ids


@dataclass(eq=False)  # identity: queues find *this* request, never an equal-looking one
class Request:
    request_id: str
    prompt: list[int]
    params: SamplingParams
    seed: int
    max_model_len: int = 1 << 30
    output: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    finish_reason: str | None = None
    # KV: tokens at positions < num_computed are in the cache, in these blocks.
    block_table: list[int] = field(default_factory=list)
    num_computed: int = 0
    # The target's hidden feature of the row that produced the last token (EAGLE input).
    hidden: np.ndarray | None = None
    # Cached drafts for the round starting at spec_position (seed 003).
    spec_token_ids: np.ndarray | None = None     # [K_i] int64
    spec_draft_probs: np.ndarray | None = None   # [K_i, V] float64, or None for point proposals
    spec_parents: np.ndarray | None = None       # [K_i] int64: the drafts are a tree (SPEC §11.1); None: a chain
    spec_position: int = -1
    num_preemptions: int = 0
    max_slot_position: int = -1                  # the highest position ever written to KV
    sampler: object | None = None                # SPEC §12: a specsim.engine.sampling.RequestSampler, or None

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    def tokens_from(self, start: int) -> list[int]:
        """``tokens[start:]`` without copying the whole sequence."""
        if start >= len(self.prompt):
            return self.output[start - len(self.prompt):]
        return self.prompt[start:] + self.output

    @property
    def num_tokens(self) -> int:
        return len(self.prompt) + len(self.output)

    @property
    def num_spec(self) -> int:
        return 0 if self.spec_token_ids is None else len(self.spec_token_ids)

    @property
    def done(self) -> bool:
        return self.status in (Status.FINISHED, Status.ABORTED)

    def set_drafts(self, token_ids: np.ndarray | None, draft_probs: np.ndarray | None,
                   parents: np.ndarray | None = None) -> None:
        """Cache this round's drafts ``[K_i]`` and their ``draft_probs`` ``[K_i, V]`` (or None);
        ``parents`` ``[K_i]`` makes them a tree's nodes (SPEC §11.1: -1 the root, else an earlier node)."""
        if token_ids is None or len(token_ids) == 0:
            self.clear_drafts()
            return
        self.spec_token_ids, self.spec_draft_probs, self.spec_parents = token_ids, draft_probs, parents
        self.spec_position = self.num_tokens

    def clear_drafts(self) -> None:
        self.spec_token_ids = self.spec_draft_probs = self.spec_parents = None
        self.spec_position = -1

    def draft_span(self, k: int) -> int:
        """Positions past ``L`` the first ``k`` drafts reach: ``k`` for a chain, their depth for a tree
        (the KV slots a step may keep: a tree keeps its accepted path only).

        >>> r = Request("a", [1], SamplingParams(), seed=0)
        >>> r.set_drafts(np.array([3, 4, 5]), None, parents=np.array([-1, -1, 0]))
        >>> r.draft_span(2), r.draft_span(3)
        (1, 2)
        """
        if self.spec_parents is None or k == 0:
            return k
        depth: list[int] = []
        for p in self.spec_parents[:k]:
            depth.append(1 + (depth[p] if p >= 0 else 0))
        return max(depth)
