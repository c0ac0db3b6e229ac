"""The step loop: schedule → write KV → target forward → verify (device) → commit → propose.

>>> from specsim.engine.models import ToyLM
>>> from specsim.engine.proposers import DraftModelProposer
>>> from specsim.judge.reference_device import ReferenceDevice
>>> target = ToyLM(8, order=2, seed=3)
>>> engine = Engine(target, DraftModelProposer(target.mixed(0.8, seed=4)), device=ReferenceDevice(),
...                 num_speculative_tokens=3, seed=0)
>>> _ = engine.add_request("a", [1, 2, 3], SamplingParams(temperature=0, max_tokens=6))
>>> out = engine.run()
>>> len(out["a"]), engine.metrics.num_drafts > 0
(6, True)

One step (``step``):

1. forced preemptions (``preempt_at``), then ``Scheduler.schedule``;
2. write the step's tokens (uncached tokens + cached drafts) into the paged KV;
3. the target reads each row's context **from the KV** → logits and features;
4. one ``device.verify`` per proposal kind (with ``draft_probs`` / point):
   ``VerifyBatch`` with ``seeds`` and ``positions = L`` (SPEC §5.2), noise None;
5. commit: trim at EOS / ``max_tokens`` / ``max_model_len``, record metrics,
   finish and free, keep the feature of the row that produced the last token;
6. propose the next round's drafts for the verified requests (Top1 rules,
   drafts capped so no position reaches ``max_model_len``) and cache them.

Trees (SPEC §11; a proposer with ``propose_tree``, e.g. ``TreeProposer``):
the request's cached drafts are a tree's nodes (``Request.spec_parents``),
each a row of the target's forward and a token of the step's budget. Step 2
writes no node into the paged KV: the target reads a node's context from the
KV up to ``L`` and from its path above it (tree attention); step 4 is one
``device.verify_tree`` (scheme rrs, point proposals, keyed noise at seed and
``L``) for the step's tree requests; before the commit the accepted path's
tokens are written at ``L ..`` (``_write_accepted_paths``: KV slots for the
accepted path only, blocks to the tree's depth). ``num_speculative_tokens``
caps a tree's depth. A device without ``tree_schemes`` raises
``UnsupportedCall`` at the first tree step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from devices.protocol import SAMPLER_ORDERS, TreeBatch, VerifyBatch
from specsim.engine.kv import BlockPool, KVError
from specsim.engine.metrics import SpecDecodeMetrics
from specsim.engine.models import ToyLM
from specsim.engine.proposers import Proposer, top1_propose
from specsim.engine.rng import request_seed
from specsim.engine.sampling import RequestSampler, sampler_params
from specsim.engine.scheduler import Scheduled, Scheduler, SchedulerConfig
from specsim.engine.state import Request, SamplingParams, Status

__all__ = ["Engine", "EngineError", "SamplingParams", "StepOutput"]


class EngineError(RuntimeError):
    """An engine invariant broke (a bug in the engine, never bad user input)."""


@dataclass(frozen=True)
class StepOutput:
    step: int
    new_tokens: dict[str, list[int]]   # request id -> tokens emitted this step
    finished: list[str]


def _load_device(device):
    if isinstance(device, str):
        from devices.registry import load
        return load(device)
    return device


class Engine:
    """A simulated serving engine around one ``target`` and any verification ``device``.

    - ``proposer``: None (no speculation), a proposer, or ``{name: proposer}``
      (the first is the default; a request picks one by ``params.proposer``).
    - ``device``: a device object or a registry name (``"torch"``).
    - ``num_speculative_tokens``: K, per request overridable.
    - ``seed``: derives the seeds of requests added without one.
    - ``max_model_len``: default per-request limit on prompt + output length.
    - ``preempt_at``: ``{step: [request ids] or n}`` — force those (or the ``n``
      newest running) requests out at the start of that step.
    - ``sampler_order``: SPEC §12's order profile (``"canonical"`` or ``"vllm"``) of every
      ``VerifyBatch.sampler`` the engine builds for requests with §12 parameters.
    """

    def __init__(self, target: ToyLM, proposer: Proposer | Mapping[str, Proposer] | None = None, *,
                 device="torch", num_speculative_tokens: int = 0, scheduler: SchedulerConfig | None = None,
                 seed: int = 0, max_model_len: int | None = None,
                 preempt_at: Mapping[int, Sequence[str] | int] | None = None, check_invariants: bool = False,
                 sampler_order: str = "canonical"):
        self.target, self.device = target, _load_device(device)
        if sampler_order not in SAMPLER_ORDERS:
            raise ValueError(f"sampler_order: must be one of {SAMPLER_ORDERS}, got {sampler_order!r}")
        self.sampler_order = sampler_order
        if proposer is None:
            self.proposers: dict[str, Proposer] = {}
        elif isinstance(proposer, Mapping):
            self.proposers = dict(proposer)
        else:
            self.proposers = {proposer.name: proposer}
        for name, p in self.proposers.items():
            if p.vocab_size != target.vocab_size:
                raise ValueError(f"proposer {name!r}: vocab_size {p.vocab_size} != target's {target.vocab_size}")
        self.default_proposer = next(iter(self.proposers), None)
        if num_speculative_tokens < 0:
            raise ValueError(f"num_speculative_tokens: must be >= 0, got {num_speculative_tokens}")
        self.k = num_speculative_tokens if self.proposers else 0
        self.config = scheduler or SchedulerConfig()
        self.pool = BlockPool(self.config.num_blocks, self.config.block_size)
        self.scheduler = Scheduler(self.config, self.pool)
        self.seed = seed
        self.max_model_len = max_model_len or target.max_position
        self.preempt_at = dict(preempt_at or {})
        self.check = check_invariants
        self.requests: dict[str, Request] = {}
        self.metrics = SpecDecodeMetrics(self.k)
        self.step_index = 0
        self._retired: set[str] = set()

    # -- requests -------------------------------------------------------------
    def add_request(self, request_id: str, prompt: Sequence[int], params: SamplingParams | None = None, *,
                    seed: int | None = None, max_model_len: int | None = None) -> Request:
        params = params or SamplingParams()
        if request_id in self.requests:
            raise ValueError(f"request_id: {request_id!r} already added")
        prompt = [int(t) for t in prompt]
        if not prompt or min(prompt) < 0 or max(prompt) >= self.target.vocab_size:
            raise ValueError(f"prompt: must be non-empty with ids in [0, {self.target.vocab_size}), got {prompt}")
        mml = max_model_len or self.max_model_len
        if mml > self.target.max_position:
            raise ValueError(f"max_model_len: {mml} exceeds the target's max_position {self.target.max_position}")
        if len(prompt) >= mml:
            raise ValueError(f"prompt: length {len(prompt)} leaves no room below max_model_len {mml}")
        k = self._max_drafts(params)   # a tree's nodes count against the token budget; its depth (<= K) in blocks
        longest = min(len(prompt) + params.max_tokens, mml) - 1 + (0 if self.config.partial_drafts else k)
        if longest > self.config.max_num_batched_tokens or self.pool.blocks_for(
                longest - (0 if self.config.partial_drafts else k - self._k_of(params))) > self.config.num_blocks:
            raise ValueError(f"request {request_id!r}: a recompute of up to {longest} tokens could never be "
                             f"scheduled (max_num_batched_tokens {self.config.max_num_batched_tokens}, "
                             f"{self.config.num_blocks} blocks of {self.config.block_size})")
        if params.proposer is not None and params.proposer not in self.proposers:
            raise ValueError(f"params.proposer: {params.proposer!r} is not one of {sorted(self.proposers)}")
        self._check_sampler(params)
        request = Request(request_id, prompt, params,
                          request_seed(self.seed, request_id) if seed is None else int(seed), mml)
        if params.uses_sampler:
            request.sampler = RequestSampler.of(params, order=self.sampler_order, eos_id=self.target.eos_id)
        self.requests[request_id] = request
        self.scheduler.add(request)
        return request

    def _check_sampler(self, params: SamplingParams) -> None:
        """SPEC §12's parameters against this target: ids in its vocabulary, a grammar over it."""
        params.check_vocab(self.target.vocab_size)
        g = params.grammar
        if g is not None and (g.vocab_size != self.target.vocab_size or g.eos_id != self.target.eos_id):
            raise ValueError(f"params.grammar: its vocabulary ({g.vocab_size} pieces, end token {g.eos_id}) must be "
                             f"the target's ({self.target.vocab_size} tokens, eos_id {self.target.eos_id})")

    def _k_of(self, params: SamplingParams) -> int:
        if not self.proposers:
            return 0
        return self.k if params.num_speculative_tokens is None else params.num_speculative_tokens

    def _max_drafts(self, params: SamplingParams) -> int:
        """The most drafts one round of a request holds: K, or a tree proposer's node count."""
        proposer = self.proposers.get(params.proposer or self.default_proposer)
        if hasattr(proposer, "propose_tree") and self._k_of(params):
            return proposer.max_nodes
        return self._k_of(params)

    def abort(self, request_id: str) -> None:
        request = self.requests[request_id]
        if not request.done:
            self.scheduler.release(request, Status.ABORTED)
            request.finish_reason = "abort"

    def preempt(self, request_id: str) -> bool:
        """Force a running request out (KV dropped, drafts kept); False if it is not running."""
        request = self.requests[request_id]
        if request.status is not Status.RUNNING:
            return False
        self.scheduler.preempt(request)
        return True

    def has_unfinished(self) -> bool:
        return bool(self.scheduler.waiting or self.scheduler.running)

    def outputs(self) -> dict[str, list[int]]:
        return {rid: list(r.output) for rid, r in self.requests.items()}

    def run(self, max_steps: int = 1_000_000) -> dict[str, list[int]]:
        idle = 0
        while self.has_unfinished():
            out = self.step()
            idle = 0 if out.new_tokens else idle + 1
            if idle > 2 or self.step_index > max_steps:
                raise EngineError(f"no progress at step {self.step_index}: "
                                  f"{len(self.scheduler.waiting)} waiting, {len(self.scheduler.running)} running")
        return self.outputs()

    # -- the step -------------------------------------------------------------
    def step(self) -> StepOutput:
        self.step_index += 1
        self._forced_preemptions()
        scheduled = self.scheduler.schedule()
        if not scheduled:
            return StepOutput(self.step_index, {}, [])
        tables = self._block_tables(scheduled)
        self._write_kv(scheduled, tables)
        logits, hidden = self._target_forward(scheduled, tables)
        results = self._verify(scheduled, logits)
        self._write_accepted_paths(scheduled, tables, results)
        new_tokens, finished = self._commit(scheduled, results, hidden)
        self._propose([s.request for s in scheduled if not s.request.done])
        if self.check:
            self.check_invariants()
        return StepOutput(self.step_index, new_tokens, finished)

    def _forced_preemptions(self) -> None:
        what = self.preempt_at.get(self.step_index)
        if what is None:
            return
        if isinstance(what, int):
            for request in self.scheduler.running[::-1][:what]:
                self.scheduler.preempt(request)
        else:
            for rid in what:
                self.preempt(rid)

    def _block_tables(self, scheduled: list[Scheduled]) -> np.ndarray:
        """``[batch, max blocks]`` int64, zero-padded: the step's block tables as one array."""
        width = max(len(s.request.block_table) for s in scheduled)
        tables = np.zeros((len(scheduled), width), np.int64)
        for i, s in enumerate(scheduled):
            tables[i, :len(s.request.block_table)] = s.request.block_table
        return tables

    def _slots(self, tables: np.ndarray, owner: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Slots of ``positions`` (any shape) of requests ``owner`` (same shape) under ``tables``."""
        bs = self.pool.block_size
        blocks = positions // bs
        if blocks.size and (blocks >= tables.shape[1]).any():
            raise KVError("a position falls outside its request's block table")
        return tables[owner, blocks] * bs + positions % bs

    def _write_kv(self, scheduled: list[Scheduled], tables: np.ndarray) -> None:
        tokens, starts, counts = [], [], []
        for s in scheduled:
            r = s.request
            chain = s.num_drafts if r.spec_parents is None else 0  # a tree's nodes stay out of the paged KV
            end = r.num_tokens + chain  # positions r.num_computed .. end - 1
            if end - 1 >= r.max_model_len:
                raise EngineError(f"{r.request_id}: KV slot at position {end - 1} >= max_model_len {r.max_model_len}")
            tokens.extend(r.tokens_from(r.num_computed))
            if chain:
                tokens.extend(r.spec_token_ids[:s.num_drafts].tolist())
            starts.append(r.num_computed)
            counts.append(end - r.num_computed)
            r.max_slot_position = max(r.max_slot_position, end - 1)
        counts = np.array(counts)
        owner = np.repeat(np.arange(len(scheduled)), counts)
        positions = np.repeat(np.array(starts) - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
        self.pool.tokens[self._slots(tables, owner, positions)] = tokens

    def _target_forward(self, scheduled: list[Scheduled], tables: np.ndarray):
        """Rows predicting positions ``L .. L + k`` of each request → logits ``[rows, V]``, features ``[rows, H]``.

        Each row's context (the ``order`` tokens before its position) is read from the paged KV; a tree
        node's row reads the KV below ``L`` and its own path from ``L`` on (``_tree_rows``).
        """
        n = self.target.order
        counts = np.array([s.num_drafts + 1 for s in scheduled])
        lengths = np.array([s.request.num_tokens for s in scheduled])
        owner = np.repeat(np.arange(len(scheduled)), counts)
        predicted = np.repeat(lengths - (np.cumsum(counts) - counts), counts) + np.arange(counts.sum())
        on_path, path_tokens = self._tree_rows(scheduled, counts, predicted)
        if n:
            pos = predicted[:, None] - n + np.arange(n)[None, :]        # [rows, n]
            inside = pos >= 0
            from_path = on_path[:, None] & (pos >= lengths[owner][:, None])  # [rows, n]: a node's own path
            slots = self._slots(tables, np.broadcast_to(owner[:, None], pos.shape),
                                np.where(inside & ~from_path, pos, 0))
            windows = np.where(inside, np.where(from_path, path_tokens(pos, lengths[owner]), self.pool.tokens[slots]),
                               self.target.vocab_size)
            if (windows < 0).any():
                raise KVError("target read an unwritten (or freed) KV slot")
            keys = self.target.keys_of(windows)
        else:
            keys = np.zeros(len(owner), np.int64)
        return self.target.logits_at(keys, predicted), (self.target.hidden_at(keys) if self._wants_hidden() else None)

    @staticmethod
    def _tree_rows(scheduled: list[Scheduled], counts: np.ndarray, predicted: np.ndarray):
        """Tree requests' rows: sets ``predicted`` ``[rows]`` of node rows to ``L + depth`` (in place) and
        returns ``(is_tree_row [rows] bool, path_tokens)``, where ``path_tokens(pos, L)`` (``[rows, n]`` each)
        gives each node row's path token at positions ``pos >= L`` (the row's own draft and its ancestors)."""
        starts = np.cumsum(counts) - counts
        is_tree, paths = np.zeros(len(predicted), bool), {}
        for s, start in zip(scheduled, starts):
            r = s.request
            if r.spec_parents is None or not s.num_drafts:
                continue
            is_tree[start:start + s.num_drafts + 1] = True
            for node, (parent, token) in enumerate(zip(r.spec_parents[:s.num_drafts], r.spec_token_ids)):
                paths[start + 1 + node] = (paths[start + 1 + parent] if parent >= 0 else []) + [int(token)]
                predicted[start + 1 + node] = r.num_tokens + len(paths[start + 1 + node])
            paths[start] = []

        def path_tokens(pos: np.ndarray, L: np.ndarray) -> np.ndarray:
            out = np.full(pos.shape, -1, np.int64)
            for row, path in paths.items():
                ahead = pos[row] - L[row]
                use = (ahead >= 0) & (ahead < len(path))
                out[row, use] = np.array(path, np.int64)[ahead[use]]
            return out
        return is_tree, path_tokens

    def _write_accepted_paths(self, scheduled: list[Scheduled], tables: np.ndarray, results) -> None:
        """A tree request's accepted path (its first ``num_accepted`` emitted tokens) into the KV at ``L ..``:
        the only nodes that keep KV slots (blocks to the tree's depth were given by the scheduler)."""
        for i, (s, (emitted, accepted)) in enumerate(zip(scheduled, results)):
            r = s.request
            if r.spec_parents is None or not accepted:
                continue
            positions = r.num_tokens + np.arange(accepted)
            if positions[-1] >= r.max_model_len:
                raise EngineError(f"{r.request_id}: KV slot at position {positions[-1]} >= max_model_len "
                                  f"{r.max_model_len}")
            self.pool.tokens[self._slots(tables, np.full(accepted, i), positions)] = emitted[:accepted]
            r.max_slot_position = max(r.max_slot_position, int(positions[-1]))

    def _wants_hidden(self) -> bool:
        return any(p.name == "eagle" for p in self.proposers.values())

    def _verify(self, scheduled: list[Scheduled], logits: np.ndarray) -> list[tuple[list[int], int]]:
        """Verify, one device call per proposal kind (draft_probs is batch-level) → (emitted, num_accepted)."""
        starts = np.concatenate([[0], np.cumsum([s.num_drafts + 1 for s in scheduled])])
        groups: dict[bool | str, list[int]] = {True: [], False: [], "tree": []}
        for i, s in enumerate(scheduled):
            tree = s.num_drafts > 0 and s.request.spec_parents is not None
            groups["tree" if tree else s.num_drafts > 0 and s.request.spec_draft_probs is not None].append(i)
        results: list = [None] * len(scheduled)
        for with_probs, members in groups.items():
            if not members:
                continue
            group, rows = [scheduled[i] for i in members], [logits[starts[i]:starts[i + 1]] for i in members]
            if with_probs == "tree":
                out = self.device.verify_tree(self._tree_batch(group, rows))
            else:
                out = self.device.verify(self._batch(group, rows, with_probs))
            for row, i in enumerate(members):
                results[i] = (out.emitted(row), int(out.num_accepted[row]))
        return results

    def _batch(self, group: list[Scheduled], rows: list[np.ndarray], with_probs: bool) -> VerifyBatch:
        reqs = [s.request for s in group]
        ks = np.array([s.num_drafts for s in group], np.int64)
        drafts = [r.spec_token_ids[:s.num_drafts] for r, s in zip(reqs, group) if s.num_drafts]
        probs = [r.spec_draft_probs[:s.num_drafts] for r, s in zip(reqs, group) if s.num_drafts and with_probs]
        V = self.target.vocab_size
        # Hand the device the precision it declares (an Ascend or HPU runner gives its sampler fp32):
        # float64 when it takes it, else its first dtype. A cast, never a renormalisation.
        dtype = np.float64 if "float64" in self.device.capabilities.dtypes else np.dtype(self.device.capabilities.dtypes[0])
        return VerifyBatch(
            num_draft_tokens=ks,
            draft_token_ids=np.concatenate(drafts).astype(np.int64) if drafts else np.zeros(0, np.int64),
            draft_probs=(np.concatenate(probs) if probs else np.zeros((0, V))).astype(dtype) if with_probs else None,
            target_logits=np.concatenate(rows).astype(dtype),
            temperature=np.array([r.params.temperature for r in reqs], np.float64),
            top_k=np.array([r.params.top_k for r in reqs], np.int64),
            top_p=np.array([r.params.top_p for r in reqs], np.float64),
            seeds=np.array([r.seed for r in reqs], np.uint64),
            positions=np.array([r.num_tokens for r in reqs], np.int64),
            sampler=self._sampler(group))

    def _sampler(self, group: list[Scheduled]):
        """SPEC §12's ``SamplerParams`` of one verify call (None when no request uses them): each request's
        prompt and committed output, and a grammar request's masks along its drafts (the matcher keeps the
        drafts it took until ``_commit`` rolls it back to the accepted prefix)."""
        entries = []
        for s in group:
            r = s.request
            grammar = None if r.sampler is None else r.sampler.grammar
            drafts = [] if not s.num_drafts else r.spec_token_ids[:s.num_drafts].tolist()
            entries.append((r.sampler, r.prompt, r.output, len(drafts),
                            None if grammar is None else grammar.masks_along(drafts)))
        return sampler_params(entries, self.target.vocab_size, self.sampler_order)

    def _tree_batch(self, group: list[Scheduled], rows: list[np.ndarray]) -> TreeBatch:
        """SPEC §11's batch of the step's tree requests: point proposals (top-k siblings), scheme rrs,
        keyed noise at (seed, ``L``); ``rows``: each request's ``[N_i + 1, V]`` target logits."""
        reqs = [s.request for s in group]
        if any(getattr(r.params, "uses_sampler", False) for r in reqs):
            raise ValueError("params: SPEC §12's sampler parameters are not defined for trees (SPEC §11)")
        caps = self.device.capabilities
        dtype = np.float64 if "float64" in caps.dtypes else np.dtype(caps.dtypes[0])
        return TreeBatch(
            num_nodes=np.array([s.num_drafts for s in group], np.int64),
            parents=np.concatenate([r.spec_parents[:s.num_drafts] for r, s in zip(reqs, group)]).astype(np.int64),
            draft_token_ids=np.concatenate([r.spec_token_ids[:s.num_drafts] for r, s in zip(reqs, group)]
                                           ).astype(np.int64),
            draft_probs=None, target_logits=np.concatenate(rows).astype(dtype),
            temperature=np.array([r.params.temperature for r in reqs], np.float64),
            top_k=np.array([r.params.top_k for r in reqs], np.int64),
            top_p=np.array([r.params.top_p for r in reqs], np.float64),
            seeds=np.array([r.seed for r in reqs], np.uint64),
            positions=np.array([r.num_tokens for r in reqs], np.int64), scheme="rrs")

    def _commit(self, scheduled, results, hidden):
        new_tokens, finished = {}, []
        row = 0
        for s, (emitted, accepted) in zip(scheduled, results):
            r = s.request
            kept = self._trim(r, emitted)
            self.metrics.record(s.num_drafts, accepted, len(kept))
            if r.sampler is not None and r.sampler.grammar is not None:
                r.sampler.grammar.commit(accepted, kept)   # back to the accepted prefix, then the emitted token
            r.output.extend(kept)
            new_tokens[r.request_id] = kept
            if hidden is not None:
                r.hidden = hidden[row + len(kept) - 1]
            row += s.num_drafts + 1
            r.clear_drafts()
            if r.finish_reason is not None:
                self.scheduler.release(r, Status.FINISHED)
                finished.append(r.request_id)
            else:
                r.num_computed = r.num_tokens - 1  # every token but the newest is in the KV
        return new_tokens, finished

    def _trim(self, r: Request, emitted: list[int]) -> list[int]:
        """The emitted tokens the request keeps; sets ``finish_reason`` when it stops."""
        kept = []
        for t in emitted:
            kept.append(t)
            if t == self.target.eos_id and not r.params.ignore_eos or t in r.params.stop_token_ids:
                r.finish_reason = "stop"
            elif len(r.output) + len(kept) >= r.params.max_tokens or r.num_tokens + len(kept) >= r.max_model_len:
                r.finish_reason = "length"
            if r.finish_reason:
                break
        return kept

    def _propose(self, requests: list[Request]) -> None:
        by_proposer: dict[str, list[Request]] = {}
        for r in requests:
            name = r.params.proposer or self.default_proposer
            if name is not None:
                by_proposer.setdefault(name, []).append(r)
        for name, group in by_proposer.items():
            if hasattr(self.proposers[name], "propose_tree"):
                self._propose_trees(self.proposers[name], group)
                continue
            # Cap: drafts at positions L .. L+k-1 and the bonus at L+k must stay below max_model_len.
            ks = np.array([max(0, min(self._k_of(r.params), r.max_model_len - 1 - r.num_tokens)) for r in group])
            ids, probs, lens = top1_propose(self.proposers[name], group, ks)
            for b, r in enumerate(group):
                k = int(lens[b])
                r.set_drafts(ids[b, :k].copy() if k else None, None if probs is None or not k else probs[b, :k].copy())

    def _propose_trees(self, proposer, group: list[Request]) -> None:
        """Each request's tree, at most K levels deep and short of ``max_model_len`` (its deepest node at
        ``L + depth − 1``, the emitted token at ``L + depth``); the drafter's law at the request's temperature
        (1 for greedy requests: the siblings are its top-k either way)."""
        for r in group:
            depth = max(0, min(self._k_of(r.params), r.max_model_len - 1 - r.num_tokens))
            if depth == 0:
                r.clear_drafts()
                continue
            parents, ids = proposer.propose_tree(r.tokens, r.params.temperature or 1.0, max_depth=depth)
            r.set_drafts(ids, None, parents=parents)

    # -- invariants -----------------------------------------------------------
    def check_invariants(self) -> None:
        """Raise ``EngineError``/``KVError`` if any bookkeeping invariant is broken."""
        sched = self.scheduler
        self.pool.check({r.request_id: r.block_table for r in sched.running})
        if len(sched.running) > self.config.max_num_seqs:
            raise EngineError(f"{len(sched.running)} running > max_num_seqs {self.config.max_num_seqs}")
        queued = {id(r) for r in sched.running} | {id(r) for r in sched.waiting}
        if len(queued) != len(sched.running) + len(sched.waiting):
            raise EngineError("a request is queued twice")
        for rid, r in self.requests.items():
            if rid in self._retired:
                continue
            _check_request(r, id(r) in queued, self.pool, self.target)
            if r.done:
                self._retired.add(rid)  # a finished request never changes again: check it once


def _check_request(r: Request, queued: bool, pool: BlockPool, target: ToyLM) -> None:
    vocab_size, eos = target.vocab_size, target.eos_id
    def fail(why: str):
        raise EngineError(f"{r.request_id} ({r.status.value}): {why}")

    if r.done:
        if queued or r.block_table or r.spec_token_ids is not None or r.spec_draft_probs is not None:
            fail("a finished request still holds a queue slot, blocks or drafts")
    elif not queued:
        fail("an unfinished request is in no queue")
    if r.status is Status.WAITING and (r.block_table or r.num_computed):
        fail("a waiting request holds KV")
    if r.status is Status.RUNNING:
        if r.num_computed != r.num_tokens - 1:
            fail(f"num_computed {r.num_computed} != num_tokens - 1 = {r.num_tokens - 1}")
        if pool.blocks_for(r.num_computed) > len(r.block_table):
            fail(f"{len(r.block_table)} blocks cannot hold {r.num_computed} computed tokens")
    if r.spec_token_ids is not None:
        k = len(r.spec_token_ids)
        if r.spec_position != r.num_tokens:
            fail(f"stale drafts: proposed at length {r.spec_position}, sequence now {r.num_tokens}")
        if not 1 <= r.draft_span(k) <= r.max_model_len - 1 - r.num_tokens:
            fail(f"{k} drafts reaching {r.draft_span(k)} past length {r.num_tokens} would pass max_model_len "
                 f"{r.max_model_len}")
        if r.spec_draft_probs is not None and r.spec_draft_probs.shape != (k, vocab_size):
            fail(f"draft_probs shape {r.spec_draft_probs.shape} != {(k, vocab_size)}")
    if r.max_slot_position >= r.max_model_len:
        fail(f"KV slot written at position {r.max_slot_position} >= max_model_len {r.max_model_len}")
    if r.num_tokens > r.max_model_len or len(r.output) > r.params.max_tokens:
        fail(f"{len(r.output)} output tokens pass max_tokens {r.params.max_tokens} or max_model_len")
    if eos is not None and not r.params.ignore_eos and eos in r.output[:-1]:
        fail("tokens emitted after EOS")
