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
    engine's default proposer; ``ignore_eos`` keeps generating past EOS.
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    max_tokens: int = 16
    num_speculative_tokens: int | None = None
    proposer: str | None = None
    ignore_eos: bool = False

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
