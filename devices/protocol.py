"""The device protocol: what a verification device takes, returns and declares.

A *device* is anything that runs one speculative verification step for a
ragged batch of requests: the torch device, the Triton kernels, a vendor's
NPU kernel. The semantics every device must implement are stated in
``reference/SPEC.md``; this module is only the calling convention, written so
that a vendor can implement it from this file and the spec alone.

Everything crossing the protocol is numpy: a vendor needs no torch to plug
in, and the conformance harness needs no knowledge of the device's tensors.

Layout (flattened ragged batch, vLLM's convention)::

    num_draft_tokens = [2, 0, 3]          # K_i per request, batch = 3
    draft_token_ids  = [a0 a1 | c0 c1 c2] # [num_tokens = 5]
    target_logits rows (num_tokens + batch = 8):
        0: a0's position   1: a1's position   2: request 0 bonus
        3: request 1 bonus
        4: c0   5: c1   6: c2   7: request 2 bonus

Request ``i`` owns target rows ``cu[i] + i .. cu[i] + i + K_i`` (the last is
its bonus row) and draft rows ``cu[i] .. cu[i] + K_i - 1``, where ``cu`` is
the exclusive cumulative sum of ``num_draft_tokens``.

A minimal device::

    from devices.protocol import Capabilities, VerifyBatch, Noise, VerifyOutput

    class MyDevice:
        name = "my-npu"
        capabilities = Capabilities(injected_noise=True, rng="none",
                                    max_vocab_size=262_144)   # the core profile needs >= 262,144
        def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
            ...

    def make_device() -> MyDevice:   # registered as "my_pkg.my_mod:make_device"
        return MyDevice()
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np

PLACEHOLDER_TOKEN_ID = -1
"""A draft id that must not be verified (always rejected), and the padding
value of ``VerifyOutput.output_token_ids``. As a draft it is **padding** (no
draft: its row is never read, the residual is the target row) unless
``VerifyBatch.withdrawn`` marks it a **withdrawn draft** (drawn from its draft
row, then withdrawn: the residual is ``max(target − draft, 0)`` from that row);
SPEC §4."""

RngKind = Literal["philox", "seeded", "none"]

TREE_SCHEMES = ("greedy", "rrs", "sglang")
"""Tree verification a device may declare (SPEC §11): greedy (§11.2, the batch's T = 0
requests), multi-draft recursive rejection sampling (§11.3), SGLang's target-only tree
sampling with thresholds as SPEC §11.4 defines it (the algorithm; no device runs SGLang's kernel)."""

DEFAULT_MAX_TREE_NODES = 64
"""``Capabilities.max_tree_nodes`` when a device does not say: EAGLE-2's published configuration drafts
60 nodes per request (depth 6, 10 children per expanded node), rounded up to a power of two."""

SAMPLER_PARAMETERS = ("token_mask", "allowed_token_ids", "bad_words", "min_tokens", "logit_bias",
                      "repetition_penalty", "frequency_penalty", "presence_penalty", "min_p")
"""The optional sampler parameters of SPEC §12; a device declares those it serves in
``Capabilities.sampler`` (absent: ``UnsupportedCall`` when given)."""

SAMPLER_ORDERS = ("canonical", "vllm")
"""The order profiles of SPEC §12; a device declares those it serves in ``Capabilities.sampler_orders``."""


class InvalidInput(ValueError):
    """Bad input: the message names the argument and the rule it broke."""


class UnsupportedCall(Exception):
    """The device cannot serve this call (a declared limit, a dtype, a mode).

    Raise it only for something the capabilities declare absent: a call past
    ``max_k`` or ``max_vocab_size``, an undeclared dtype, mode, tree scheme or
    sampler parameter (``devices.validate.check_call`` raises exactly these).
    The conformance harness records a refused call outside the declaration as
    ``not_supported``, and a refused call inside it — any batch size (never a
    declared limit), a V up to ``max_vocab_size``, a declared mode — as
    ``fail`` (SPEC §10).
    """

    def __init__(self, requirement: str, got: object = None):
        self.requirement = requirement
        self.got = got
        super().__init__(f"{requirement}" + ("" if got is None else f" (got {got!r})"))


@dataclass(frozen=True)
class Capabilities:
    """What a device declares it can do; checks outside it are ``not_supported``.

    - ``injected_noise``: ``verify(batch, noise)`` honours given noise exactly
      (SPEC §5.1), so the device can be checked token for token (layer L1).
    - ``rng``: how the device draws its own randomness when ``noise`` is None:
      ``"philox"`` — the keyed Philox streams of SPEC §5.2, bit for bit, so its
      tokens equal the reference's for the same seeds; ``"seeded"`` — its own
      generator, but a deterministic function of (seed, position) per request,
      so determinism and batch invariance are checked and the output law is
      checked statistically; ``"none"`` — cannot draw (injected noise only).
    - ``greedy``, ``draft_probs``, ``point_proposals``, ``top_k``, ``top_p``:
      the modes of SPEC §3 and §2 the device implements.
    - ``max_k``: the largest ``num_draft_tokens`` of one request.
    - ``max_vocab_size``: the largest V.
    - ``dtypes``: dtypes accepted for ``target_logits``, of float16, bfloat16
      (numpy arrays of the ``ml_dtypes`` package's dtype), float32, float64;
      ``draft_probs`` are the logits' dtype, or float32 with 16-bit logits
      (SPEC §6). An undeclared dtype raises ``UnsupportedCall``.
    - ``tree_schemes``: the tree verification of SPEC §11 the device serves
      through ``verify_tree``, of ``"greedy"`` (T = 0 requests), ``"rrs"`` and
      ``"sglang"``; empty (the default): no ``verify_tree``. A tree batch
      needing an undeclared one raises ``UnsupportedCall``. For trees ``max_k``
      bounds the depth (the longest path, so the output row ``max_k + 1``), and
      ``max_tree_nodes`` the nodes of one request (SPEC §11.1): a deeper or
      larger tree raises ``UnsupportedCall``, one at the limits must be served.
      ``max_tree_nodes`` None (the default) declares no node limit: trees up to
      ``DEFAULT_MAX_TREE_NODES`` must be served, and a larger one may be served or
      refused (``tree_node_limit``: the declared limit, else that default).
    - ``sampler``: the SPEC §12 parameters served (of ``SAMPLER_PARAMETERS``) and
      ``sampler_orders`` the order profiles (of ``SAMPLER_ORDERS``); empty (the default): a
      batch with ``sampler`` parameters raises ``UnsupportedCall``.
    - ``withdrawn_drafts``: the device serves ``VerifyBatch.withdrawn`` (SPEC §4's withdrawn
      drafts: rejected, residual from the draft row). False (the default): a batch with a
      withdrawn draft raises ``UnsupportedCall``, never served as padding.
    - ``spec_version``: the SPEC version the device implements (``"1.0"``, ``"1.1"``, …; the
      known ones are ``reference.SPEC_VERSIONS``). A check newer than it is reported apart and
      never fails the device, and a feature added since is never sent to it. None (the default):
      the device is judged against the current version, and the verdict says so.
    """

    injected_noise: bool
    rng: RngKind
    max_vocab_size: int
    max_k: int = 16
    greedy: bool = True
    draft_probs: bool = True
    point_proposals: bool = True
    top_k: bool = True
    top_p: bool = True
    dtypes: tuple[str, ...] = ("float32", "float64")
    tree_schemes: tuple[str, ...] = ()
    max_tree_nodes: int | None = None
    sampler: tuple[str, ...] = ()
    sampler_orders: tuple[str, ...] = ()
    withdrawn_drafts: bool = False
    spec_version: str | None = None

    def __post_init__(self):
        if self.rng not in ("philox", "seeded", "none"):
            raise InvalidInput(f"capabilities.rng: must be 'philox', 'seeded' or 'none', got {self.rng!r}")
        if not self.injected_noise and self.rng == "none":
            raise InvalidInput("capabilities: a device must take injected noise or draw its own (rng != 'none')")
        for d in self.dtypes:
            if d not in ("float16", "bfloat16", "float32", "float64"):
                raise InvalidInput("capabilities.dtypes: each must be 'float16', 'bfloat16', 'float32' or "
                                   f"'float64', got {d!r}")
        for s in self.tree_schemes:
            if s not in TREE_SCHEMES:
                raise InvalidInput(f"capabilities.tree_schemes: each must be one of {TREE_SCHEMES}, got {s!r}")
        if self.max_tree_nodes is not None and (isinstance(self.max_tree_nodes, bool)
                                                or not isinstance(self.max_tree_nodes, (int, np.integer))
                                                or self.max_tree_nodes < 1):
            raise InvalidInput(f"capabilities.max_tree_nodes: must be an integer >= 1 or None (undeclared), "
                               f"got {self.max_tree_nodes!r}")
        if self.spec_version is not None and not isinstance(self.spec_version, str):
            raise InvalidInput(f"capabilities.spec_version: must be a SPEC version string such as '1.0', or None, "
                               f"got {self.spec_version!r}")
        for name, values, known in (("sampler", self.sampler, SAMPLER_PARAMETERS),
                                    ("sampler_orders", self.sampler_orders, SAMPLER_ORDERS)):
            for s in values:
                if s not in known:
                    raise InvalidInput(f"capabilities.{name}: each must be one of {known}, got {s!r}")

    @property
    def tree_node_limit(self) -> int:
        """The nodes per request the device serves at most: the declared ``max_tree_nodes``, else
        ``DEFAULT_MAX_TREE_NODES`` (a device may refuse beyond it, or serve beyond it correctly)."""
        return DEFAULT_MAX_TREE_NODES if self.max_tree_nodes is None else int(self.max_tree_nodes)

    def to_json(self) -> dict:
        """Every field by name as declared (``max_tree_nodes`` and ``spec_version`` None where undeclared)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class VerifyBatch:
    """One verification step for a ragged batch (see the module docstring).

    - ``num_draft_tokens``: ``[batch]`` int64, K_i >= 0.
    - ``draft_token_ids``: ``[num_tokens]`` int64, ``num_tokens = sum(K_i)``;
      each in ``[0, V)`` or ``PLACEHOLDER_TOKEN_ID``.
    - ``draft_probs``: ``[num_tokens, V]`` float, the rows the drafts were
      sampled from; or None for point proposals (n-gram, greedy drafting).
      A padding placeholder's row is never read (all zeros by convention); a
      withdrawn draft's row is the row it was drawn from, and is read.
    - ``target_logits``: ``[num_tokens + batch, V]`` float, raw target logits
      (before temperature, top-k, top-p); finite or -inf, never NaN or +inf.
    - ``temperature``: ``[batch]`` float64 >= 0; 0 means greedy.
    - ``top_k``: ``[batch]`` int64 >= 0; 0 means off.
    - ``top_p``: ``[batch]`` float64 in (0, 1]; 1 means off.
    - ``seeds``: ``[batch]`` uint64, the key of each request's random streams
      (SPEC §5.2); needed only when the device draws its own randomness.
    - ``positions``: ``[batch]`` int64 >= 0, the number of tokens in each
      request's sequence before this step's drafts — the round's key.
    - ``sampler``: SPEC §12's parameters (``SamplerParams``) or None.
    - ``withdrawn``: ``[num_tokens]`` bool or None (SPEC §4): True where the draft was drawn
      from its ``draft_probs`` row and withdrawn before verification (a grammar-invalid draft
      under structured output); its id is ``PLACEHOLDER_TOKEN_ID``. It is rejected with
      certainty and the residual is ``max(target − draft, 0)`` from its row, where a padding
      placeholder's is the target row itself. Needs ``draft_probs`` and
      ``Capabilities.withdrawn_drafts``. None (or all False): no draft is withdrawn.
    """

    num_draft_tokens: np.ndarray
    draft_token_ids: np.ndarray
    draft_probs: np.ndarray | None
    target_logits: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    seeds: np.ndarray | None = None
    positions: np.ndarray | None = None
    sampler: "SamplerParams | None" = None
    withdrawn: np.ndarray | None = None

    @property
    def batch_size(self) -> int:
        return int(len(self.num_draft_tokens))

    @property
    def vocab_size(self) -> int:
        return int(self.target_logits.shape[-1])

    @property
    def max_k(self) -> int:
        return int(np.max(self.num_draft_tokens, initial=0))

    def has_withdrawn(self) -> bool:
        """Whether some draft is withdrawn (``withdrawn`` given with a True entry)."""
        return self.withdrawn is not None and bool(np.any(self.withdrawn))

    def request_offsets(self) -> np.ndarray:
        """``[batch + 1]`` exclusive cumsum of ``num_draft_tokens``.

        >>> VerifyBatch(np.array([2, 0, 3]), np.zeros(5, int), None,
        ...             np.zeros((8, 4)), np.ones(3), np.zeros(3, int),
        ...             np.ones(3)).request_offsets().tolist()
        [0, 2, 2, 5]
        """
        return np.concatenate([[0], np.cumsum(self.num_draft_tokens)]).astype(np.int64)


@dataclass(frozen=True)
class SamplerParams:
    """SPEC §12: the optional sampler parameters of a step (``VerifyBatch.sampler``).

    Every field is optional (None: off); a batch whose ``sampler`` is None is exactly SPEC §2's
    step. The *output so far* of target row (request i, position j) is
    ``output_token_ids[i]`` followed by request i's drafts ``0 .. j−1``: penalties, bad words
    and min_tokens read it, so each row sees the drafts before it.

    - ``order``: ``"canonical"`` or ``"vllm"`` (SPEC §12's order profiles).
    - ``prompt_token_ids``, ``output_token_ids``: ``batch`` int64 arrays ``[n_i]`` (None: empty),
      the prompt and the tokens emitted before this step.
    - ``token_mask``: ``[num_tokens + batch, V]`` bool, True where row r allows a token (a
      grammar's mask along the drafts, in target_logits' row layout).
    - ``allowed_token_ids``: ``batch`` int64 arrays (or None for a request: all allowed).
    - ``bad_words``: ``batch`` tuples of int64 arrays; a word's last token is banned where the
      output so far ends with the rest of the word.
    - ``min_tokens``: ``[batch]`` int64 >= 0 with ``stop_token_ids`` (``batch`` int64 arrays,
      EOS included): banned while ``len(output so far) < min_tokens``.
    - ``logit_bias``: ``[batch, V]`` float, finite, added to the logits.
    - ``repetition_penalty``: ``[batch]`` float > 0 (1: off) on prompt ∪ output so far;
      ``frequency_penalty``, ``presence_penalty``: ``[batch]`` finite (0: off) on the output so far.
    - ``min_p``: ``[batch]`` float in [0, 1] (0: off).
    """

    order: str = "canonical"
    prompt_token_ids: tuple | None = None
    output_token_ids: tuple | None = None
    token_mask: np.ndarray | None = None
    allowed_token_ids: tuple | None = None
    bad_words: tuple | None = None
    min_tokens: np.ndarray | None = None
    stop_token_ids: tuple | None = None
    logit_bias: np.ndarray | None = None
    repetition_penalty: np.ndarray | None = None
    frequency_penalty: np.ndarray | None = None
    presence_penalty: np.ndarray | None = None
    min_p: np.ndarray | None = None

    def given(self) -> tuple[str, ...]:
        """The parameters of ``SAMPLER_PARAMETERS`` this step uses (not None)."""
        return tuple(name for name in SAMPLER_PARAMETERS if getattr(self, name) is not None)

    def as_kwargs(self) -> dict:
        """Every field by name (for ``reference.sampler.sampler_rows``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def tiled(self, repeats: int) -> "SamplerParams":
        """The parameters of this step's batch tiled ``repeats`` times (whole batch after whole batch):
        per-request entries repeated, ``token_mask`` rows repeated (the tiled rows are these, ``repeats`` times)."""
        def tile(name, value):
            if value is None or name == "order":
                return value
            if isinstance(value, (tuple, list)):
                return tuple(value) * repeats
            return np.tile(value, (repeats,) + (1,) * (np.ndim(value) - 1))
        return SamplerParams(**{name: tile(name, value) for name, value in self.as_kwargs().items()})


@dataclass(frozen=True)
class Noise:
    """Injected randomness for one step (SPEC §5.1).

    - ``uniforms``: ``[num_tokens]`` float64 in [0, 1): the acceptance coin of
      each draft position.
    - ``exponentials``: ``[batch, V]`` float64, finite and > 0: one Exp(1)
      vector per request, used by the exponential race that draws the
      request's one recovered-or-bonus token.
    """

    uniforms: np.ndarray
    exponentials: np.ndarray


@dataclass(frozen=True)
class VerifyOutput:
    """The result of one step.

    - ``output_token_ids``: ``[batch, max_k + 1]`` int64: request i's accepted
      drafts, then its recovered or bonus token, then ``PLACEHOLDER_TOKEN_ID``.
    - ``num_accepted``: ``[batch]`` int64, the accepted drafts of each request;
      it emitted ``num_accepted + 1`` tokens.
    """

    output_token_ids: np.ndarray
    num_accepted: np.ndarray

    def emitted(self, i: int) -> list[int]:
        """Request ``i``'s emitted tokens, without padding."""
        return [int(t) for t in self.output_token_ids[i, : int(self.num_accepted[i]) + 1]]


@dataclass(frozen=True)
class TreeBatch:
    """One tree verification step (SPEC §11) for a ragged batch; §1's layout with nodes for drafts.

    Worked example — request 0 drafts ``root → a → c`` and ``root → b → d``, request 1 nothing::

        num_nodes       = [4, 0]
        parents         = [-1, -1, 0, 1]      # request-local: -1 is the root (the context)
        draft_token_ids = [a, b, c, d]
        target_logits rows: 0 root, 1 after a, 2 after b, 3 after c, 4 after d | 5 request 1 root

    - ``num_nodes``: ``[batch]`` int64, N_i >= 0.
    - ``parents``: ``[num_nodes_total]`` int64; node n of request i at ``cu[i] + n`` has parent
      -1 or a node in [0, n). Siblings are tried in node order.
    - ``draft_token_ids``: ``[num_nodes_total]`` int64, in [0, V) or ``PLACEHOLDER_TOKEN_ID``.
    - ``draft_probs``: ``[num_nodes_total, V]`` float, the law each node was drawn from given
      its path and its earlier siblings (with replacement: the parent's drafter row; without:
      that row less the earlier siblings, renormalised); or None (point proposals, top-k trees).
    - ``target_logits``: ``[num_nodes_total + batch, V]`` float; request i's row ``cu[i] + i`` is
      its root row, ``cu[i] + i + 1 + n`` the row after node n (a leaf's: its bonus row).
    - ``temperature``, ``top_k``, ``top_p``, ``seeds``, ``positions``: as ``VerifyBatch``.
    - ``scheme``: ``"rrs"`` or ``"sglang"``, for the requests with T > 0 (T = 0: greedy).
    - ``threshold_single``, ``threshold_acc``: in [0, 1], read by ``"sglang"``; 1 is lossless.
    """

    num_nodes: np.ndarray
    parents: np.ndarray
    draft_token_ids: np.ndarray
    draft_probs: np.ndarray | None
    target_logits: np.ndarray
    temperature: np.ndarray
    top_k: np.ndarray
    top_p: np.ndarray
    seeds: np.ndarray | None = None
    positions: np.ndarray | None = None
    scheme: str = "rrs"
    threshold_single: float = 1.0
    threshold_acc: float = 1.0

    @property
    def batch_size(self) -> int:
        return int(len(self.num_nodes))

    @property
    def vocab_size(self) -> int:
        return int(self.target_logits.shape[-1])

    def request_offsets(self) -> np.ndarray:
        """``[batch + 1]`` exclusive cumsum of ``num_nodes``."""
        return np.concatenate([[0], np.cumsum(self.num_nodes)]).astype(np.int64)

    def depths(self) -> np.ndarray:
        """``[num_nodes_total]`` each node's depth (1 under the root); parents assumed valid.

        >>> TreeBatch(np.array([4, 0]), np.array([-1, -1, 0, 1]), np.zeros(4, int), None,
        ...           np.zeros((6, 3)), np.ones(2), np.zeros(2, int), np.ones(2)).depths().tolist()
        [1, 1, 2, 2]
        """
        out = np.zeros(len(self.parents), np.int64)
        for start, stop in zip(self.request_offsets()[:-1], self.request_offsets()[1:]):
            for n in range(stop - start):
                p = int(self.parents[start + n])
                out[start + n] = 1 if p < 0 else out[start + p] + 1
        return out

    def schemes_needed(self) -> set[str]:
        """The ``Capabilities.tree_schemes`` entries this batch needs."""
        t = np.asarray(self.temperature)
        return ({"greedy"} if (t == 0).any() else set()) | ({self.scheme} if (t > 0).any() else set())


@dataclass(frozen=True)
class TreeOutput:
    """The result of one tree step (SPEC §11.7).

    - ``output_token_ids``: ``[batch, D + 1]`` int64 (D: the batch's largest depth): the accepted
      path's tokens, then the emitted token, then ``PLACEHOLDER_TOKEN_ID``.
    - ``num_accepted``: ``[batch]`` int64.
    - ``accepted_nodes``: ``[batch, D]`` int64, the accepted path's request-local node ids, then -1.
    """

    output_token_ids: np.ndarray
    num_accepted: np.ndarray
    accepted_nodes: np.ndarray

    def emitted(self, i: int) -> list[int]:
        """Request ``i``'s emitted tokens, without padding."""
        return [int(t) for t in self.output_token_ids[i, : int(self.num_accepted[i]) + 1]]


@runtime_checkable
class Device(Protocol):
    """A verification device. ``verify`` must not mutate its arguments (SPEC §1: inputs are read-only;
    the suite hands it read-only arrays and fails a call that changes any).

    ``noise`` given: use exactly that randomness (requires
    ``capabilities.injected_noise``). ``noise`` None: draw your own as
    ``capabilities.rng`` declares, keyed by ``batch.seeds``/``batch.positions``.
    Raise ``InvalidInput`` for input breaking SPEC §6, ``UnsupportedCall`` for
    a call outside the declared capabilities.

    Optional: a device declaring ``capabilities.tree_schemes`` also has
    ``verify_tree(batch: TreeBatch, noise: Noise | None = None) -> TreeOutput``
    (SPEC §11; noise as §5.1 with one coin per node). Without it, nothing else changes.

    Optional: ``verify_repeated(template, repeats, draft_token_ids, seeds,
    positions) -> VerifyOutput`` — ``verify`` of ``template`` (a one-trial
    ``VerifyBatch``) tiled ``repeats`` times with these ids ``[repeats · Σ K_i]``,
    seeds and positions ``[repeats · B]``, its float rows taken once
    (``devices.torch_device``). The sign-off campaign at a real vocabulary uses
    it, where a trial's rows are megabytes; nothing else does.
    """

    name: str
    capabilities: Capabilities

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput: ...


__all__ = [
    "PLACEHOLDER_TOKEN_ID", "DEFAULT_MAX_TREE_NODES", "InvalidInput", "UnsupportedCall", "Capabilities",
    "VerifyBatch", "Noise", "VerifyOutput", "Device", "TREE_SCHEMES", "TreeBatch", "TreeOutput",
]
