"""Continuous batching over a paged KV pool, with preemption by recompute.

Each step, running requests first (oldest first), then waiting ones (FIFO;
preempted requests go to the front):

* a request's step writes KV for ``num_computed .. L + k − 1`` — the tokens
  not yet cached (the last emitted token, or the whole sequence after a
  preemption) plus its ``k`` cached drafts — and counts all of them against
  ``max_num_batched_tokens`` (drafts included); a tree's ``k`` is its node
  count (each node is a row of the target's forward), its blocks reach its
  depth only (the accepted path is the only part kept in the KV);
* when the pool lacks blocks, the newest running request is preempted (its
  blocks freed, ``num_computed`` reset; its drafts kept); if that is the
  request itself, it waits;
* a round that does not fit the budget is deferred whole, unless
  ``partial_drafts``: then it is verified with as many drafts as fit. Truncating
  a round changes which coins it consumes (SPEC §3), so with
  ``partial_drafts`` a seeded request's tokens depend on the budget; the law
  does not;
* at most ``max_num_seqs`` requests run.

>>> from specsim.engine.kv import BlockPool
>>> from specsim.engine.state import Request, SamplingParams
>>> s = Scheduler(SchedulerConfig(block_size=2, num_blocks=8), BlockPool(8, 2))
>>> s.add(Request("a", [1, 2, 3], SamplingParams(), seed=0))
>>> [(x.request.request_id, x.num_drafts, x.num_new_tokens) for x in s.schedule()]
[('a', 0, 3)]
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from specsim.engine.kv import BlockPool
from specsim.engine.state import Request, Status


@dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 8192
    block_size: int = 16
    num_blocks: int = 4096
    partial_drafts: bool = False

    def __post_init__(self):
        for name in ("max_num_seqs", "max_num_batched_tokens", "block_size", "num_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be >= 1, got {getattr(self, name)}")


@dataclass(frozen=True)
class Scheduled:
    request: Request
    num_drafts: int       # drafts verified this step (<= request.num_spec)
    num_new_tokens: int   # KV slots written this step, drafts included


class Scheduler:
    def __init__(self, config: SchedulerConfig, pool: BlockPool):
        self.config, self.pool = config, pool
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        request.status = Status.WAITING
        self.waiting.append(request)

    # -- state changes --------------------------------------------------------
    def preempt(self, request: Request) -> None:
        """Drop the request's KV (recompute later); keep its tokens and cached drafts."""
        self.running.remove(request)
        self.pool.free(request.block_table)
        request.block_table, request.num_computed, request.hidden = [], 0, None
        request.status = Status.WAITING
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def release(self, request: Request, status: Status) -> None:
        """Finish or abort: free blocks and the draft cache, leave every queue."""
        if request in self.running:
            self.running.remove(request)
        if request in self.waiting:
            self.waiting.remove(request)
        self.pool.free(request.block_table)
        request.block_table, request.hidden = [], None
        request.clear_drafts()
        request.status = status

    # -- one step -------------------------------------------------------------
    def _fit(self, request: Request, budget: int) -> int | None:
        """Drafts to verify within ``budget`` tokens, or None if the round must wait."""
        uncached = request.num_tokens - request.num_computed
        k = request.num_spec
        if uncached + k <= budget:
            return k
        if self.config.partial_drafts and uncached <= budget:
            return budget - uncached
        return None

    def _grow(self, request: Request, k: int) -> bool:
        """Give the request blocks for positions ``< L + k`` (a tree: ``< L +`` the depth of its first ``k``
        nodes, the longest path it may keep); False if the pool is short."""
        need = self.pool.blocks_for(request.num_tokens + request.draft_span(k)) - len(request.block_table)
        if need > self.pool.num_free:
            return False
        request.block_table.extend(self.pool.allocate(max(need, 0)))
        return True

    def schedule(self) -> list[Scheduled]:
        budget, out = self.config.max_num_batched_tokens, []
        i = 0
        while i < len(self.running):
            request = self.running[i]
            k = self._fit(request, budget)
            if k is None:
                i += 1
                continue
            while not self._grow(request, k):
                victim = self.running[-1]
                self.preempt(victim)
                if victim is request:
                    break
            if request.status is not Status.RUNNING:
                continue  # preempted itself; self.running shifted under i
            out.append(self._scheduled(request, k))
            budget -= out[-1].num_new_tokens
            i += 1
        while self.waiting and len(self.running) < self.config.max_num_seqs:
            request = self.waiting[0]
            k = self._fit(request, budget)
            if k is None or not self._grow(request, k):
                break
            self.waiting.popleft()
            request.status = Status.RUNNING
            self.running.append(request)
            out.append(self._scheduled(request, k))
            budget -= out[-1].num_new_tokens
        return out

    @staticmethod
    def _scheduled(request: Request, k: int) -> Scheduled:
        return Scheduled(request, k, request.num_tokens - request.num_computed + k)
