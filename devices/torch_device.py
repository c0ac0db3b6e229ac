"""The ``torch`` device: SPEC §2–§5 vectorised over the ragged batch, CPU or CUDA.

No Python loop over requests or positions: per-row request and draft indices
come from ``repeat_interleave``; the step runs in a fixed number of phases:

1. **layout** — request, draft index and target row of each of the
   ``num_tokens`` draft positions; keyed noise (one Philox pass, §5.2) when
   no noise is injected and some request samples;
2. **target rows** — §2 (temperature, top-k by value, softmax, top-p with
   ties kept) for every draft position's target row, in the input dtype
   (one sort serves both filters; top-p prefix sums in float64);
3. **acceptance** — ``u < t(x)/d(x)`` (full), ``u < t(x)`` (point) or
   ``x == argmax z`` (greedy) for every position at once, the ratio and coin
   in float64; placeholders and ``d(x) = 0`` rejected (§4);
4. **first rejection** — ``num_accepted`` per request by a scatter-min;
5. **emission** — only the ONE emission row per request (the first rejected
   position, or the bonus row): §2 again, the residual ``max(t − d, 0)`` (or
   ``t`` with ``x`` zeroed), empty residual → ``t``, then the race
   ``argmax w/E`` over ``w > 0`` in float64 (lowest id on ties), or the
   raw-logit argmax for greedy requests;
6. **layout out** — accepted drafts, the emitted token, ``-1`` padding (§7).

Lower-level API (tensors already on the device; used by GPU benchmarks)::

    verify_tensors(num_draft_tokens,   # [batch] int64, K_i >= 0
                   draft_token_ids,    # [num_tokens] int64, ids or -1
                   draft_probs,        # [num_tokens, V] float, or None (point proposals)
                   target_logits,      # [num_tokens + batch, V] float32/float64
                   temperature,        # [batch] float (0 = greedy)
                   top_k,              # [batch] int64 (0 = off)
                   top_p,              # [batch] float in (0, 1] (1 = off)
                   *,
                   uniforms=None,      # [num_tokens] float64 in [0, 1)   } injected noise, or
                   exponentials=None,  # [batch, V] float64 > 0           }
                   seeds=None,         # [batch] int64 holding uint64 bits } keyed Philox noise
                   positions=None,     # [batch] int64 in [0, 2^32)        } (SPEC §5.2)
                   max_k=None,         # int, max(K_i); None: read from num_draft_tokens (a device sync)
                   modes=None,         # Modes(...) of the batch; None: read from the parameters (a sync)
                   ) -> (output_token_ids [batch, max_k + 1] int64, num_accepted [batch] int64)

It does not validate (call ``devices._validate.validate`` on the numpy
batch for that). With ``max_k`` and ``modes`` given it never synchronises
with the device (CUDA-graph capturable); ``batch_modes`` computes ``modes``.

>>> import numpy as np
>>> from devices.protocol import VerifyBatch, Noise
>>> batch = VerifyBatch(num_draft_tokens=np.array([2]), draft_token_ids=np.array([1, 0]),
...     draft_probs=None, target_logits=np.log(np.array([[.1, .9], [.5, .5], [.2, .8]])),
...     temperature=np.ones(1), top_k=np.zeros(1, np.int64), top_p=np.ones(1))
>>> out = make_cpu_device().verify(batch, Noise(np.array([0.3, 0.6]), np.ones((1, 2))))
>>> out.output_token_ids.tolist(), out.num_accepted.tolist()   # 0.3 < .9 accepts; 0.6 ≥ .5 rejects, emits 1
([[1, 1, -1]], [1])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from devices import torch_philox
from devices._validate import validate
from devices.protocol import (PLACEHOLDER_TOKEN_ID, Capabilities, InvalidInput, Noise, UnsupportedCall,
                              VerifyBatch, VerifyOutput)

CAPABILITIES = Capabilities(injected_noise=True, rng="philox", max_vocab_size=262_144, max_k=256,
                            greedy=True, draft_probs=True, point_proposals=True, top_k=True, top_p=True,
                            dtypes=("float32", "float64"))
"""Limits are declared, not inherent: memory grows as ``num_tokens × V``."""


class Modes(NamedTuple):
    """Which code paths a batch needs; a path a batch does not need is skipped.

    Claiming a mode the batch lacks only costs time; omitting one it has is wrong.
    """

    greedy: bool = True    # some request has temperature 0
    sampled: bool = True   # some request has temperature > 0
    top_k: bool = True     # some sampled request has 0 < top_k < V
    top_p: bool = True     # some sampled request has top_p < 1


def batch_modes(temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, vocab_size: int) -> Modes:
    """The ``Modes`` of a batch, read in one device sync. Arguments ``[batch]`` as in ``verify_tensors``."""
    greedy = temperature == 0
    return Modes(*torch.stack([greedy.any(), (~greedy).any(), ((top_k > 0) & (top_k < vocab_size) & ~greedy).any(),
                               ((top_p < 1) & ~greedy).any()]).tolist())


# --- phase 2: the target distribution of a set of rows (SPEC §2) ---------------

def target_probs(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                 use_top_k: bool = True, use_top_p: bool = True) -> torch.Tensor:
    """Rows of logits → target probabilities, in ``logits.dtype``.

    ``logits`` ``[rows, V]``; ``temperature`` ``[rows]`` (> 0; greedy rows
    carry any positive stand-in), ``top_k`` ``[rows]`` int64, ``top_p``
    ``[rows]`` float64. ``use_top_k``/``use_top_p`` False skip a filter no
    row uses (and with both False, the sort).

    >>> target_probs(torch.tensor([[1., 1., 0.]]), torch.ones(1), torch.tensor([1]), torch.ones(1)).tolist()
    [[0.5, 0.5, 0.0]]
    """
    vocab_size = logits.shape[1]
    z = logits / temperature.to(logits.dtype).unsqueeze(1)
    if not (use_top_k or use_top_p):
        return torch.softmax(z, dim=1)
    # One descending sort serves both filters: masking and exp are monotone,
    # so this order also sorts the post-top-k probabilities.
    sorted_z, order = z.sort(dim=1, descending=True)
    if use_top_k:
        z = _mask_top_k(z, sorted_z, top_k, vocab_size)
    probs = torch.softmax(z, dim=1)
    if use_top_p:
        probs = _mask_top_p(probs, order, top_p)
    return probs


def _mask_top_k(z: torch.Tensor, sorted_z: torch.Tensor, top_k: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Keep ``z_v >= z_(k)`` (the k-th largest, duplicates counted): boundary ties all survive."""
    active = (top_k > 0) & (top_k < vocab_size)
    kth = sorted_z.gather(1, (top_k.clamp(1, vocab_size) - 1).unsqueeze(1))
    kth = torch.where(active.unsqueeze(1), kth, torch.full_like(kth, -torch.inf))
    return z.masked_fill(z < kth, -torch.inf)


def _mask_top_p(probs: torch.Tensor, order: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep ``probs >= τ``, τ the m*-th largest with m* the smallest m where ``c_m >= p``; renormalise."""
    vocab_size = probs.shape[1]
    sorted_probs = probs.gather(1, order)
    # float64 prefix sums: in float32 a long tail's rounding could move the cut by more
    # than SPEC §9's float32 tolerance, and c_m is compared with a float64 p anyway.
    cumulative = sorted_probs.cumsum(dim=1, dtype=torch.float64)
    # m* - 1 = how many prefixes fall short of p; capped in case rounding keeps c_V < p.
    cut = (cumulative < top_p.unsqueeze(1)).sum(dim=1).clamp(max=vocab_size - 1)
    tau = sorted_probs.gather(1, cut.unsqueeze(1))
    kept = torch.where(probs >= tau, probs, torch.zeros_like(probs))
    renormalised = kept / kept.sum(dim=1, keepdim=True)
    return torch.where((top_p < 1).unsqueeze(1), renormalised, probs)  # p = 1: untouched, not re-divided


# --- phases 1, 3, 4: layout, acceptance, first rejection ---------------------------

def _layout(num_draft_tokens: torch.Tensor, num_tokens: int):
    """``offsets [batch]`` (cu), ``request [num_tokens]``, ``draft_index [num_tokens]``, ``target_row [num_tokens]``."""
    batch = num_draft_tokens.shape[0]
    device = num_draft_tokens.device
    offsets = torch.cumsum(num_draft_tokens, 0) - num_draft_tokens
    request = torch.repeat_interleave(torch.arange(batch, device=device), num_draft_tokens, output_size=num_tokens)
    draft_index = torch.arange(num_tokens, device=device) - offsets[request]
    target_row = torch.arange(num_tokens, device=device) + request  # cu[i] + i + j
    return offsets, request, draft_index, target_row


def _accepts(draft_token_ids, draft_probs, probs, uniforms) -> torch.Tensor:
    """``[num_tokens]`` bool: does each sampled position pass its coin test (§3, §4)?

    ``probs`` ``[num_tokens, V]`` the positions' target rows; ``draft_probs``
    ``[num_tokens, V]`` or None (point proposals); ``uniforms`` ``[num_tokens]``
    float64. Ratio and coin are float64; the test is strict (``u < ratio``).
    """
    real = draft_token_ids != PLACEHOLDER_TOKEN_ID
    safe_ids = torch.where(real, draft_token_ids, torch.zeros_like(draft_token_ids)).unsqueeze(1)
    t_x = probs.gather(1, safe_ids).squeeze(1).to(torch.float64)
    if draft_probs is None:
        return real & (uniforms < t_x)
    d_x = draft_probs.gather(1, safe_ids).squeeze(1).to(torch.float64)
    # d(x) = 0: x cannot have come from d, so reject rather than divide by 0.
    drawable = real & (d_x > 0)
    ratio = t_x / torch.where(drawable, d_x, torch.ones_like(d_x))
    return drawable & (uniforms < ratio)


def _first_rejection(accept, num_draft_tokens, request, draft_index) -> torch.Tensor:
    """``num_accepted [batch]``: each request's first rejected draft index, or K_i if none."""
    candidate = torch.where(accept, num_draft_tokens[request], draft_index)
    return num_draft_tokens.clone().scatter_reduce(0, request, candidate, reduce="amin", include_self=True)


# --- phase 5: one emission row per request -------------------------------------

def _race(weights: torch.Tensor, exponentials: torch.Tensor) -> torch.Tensor:
    """``argmax_v w_v / E_v`` over ``w_v > 0``, lowest id on ties → ``[rows]`` int64.

    Scores are float64; excluded tokens score -1, below any ``w/E >= 0``
    (even an underflowed one), so a zero-weight token is never drawn.
    """
    score = weights.to(torch.float64) / exponentials
    score = torch.where(weights > 0, score, torch.full_like(score, -1.0))
    return score.argmax(dim=1)  # torch.argmax returns the first maximal index


def _residual(target_rows, draft_rows, draft_ids, subtract) -> torch.Tensor:
    """The weights of the recovered draw ``[batch, V]`` (§3, §4).

    ``subtract`` ``[batch]`` bool: a real rejected draft (not a placeholder,
    not a bonus row). Full: ``max(t − d, 0)``; point: ``t`` with ``x`` zeroed;
    otherwise ``t``. An empty residual falls back to ``t``.
    """
    if draft_rows is not None:
        residual = (target_rows - draft_rows).clamp_min(0)
    else:
        safe_ids = torch.where(subtract, draft_ids, torch.zeros_like(draft_ids)).unsqueeze(1)
        residual = target_rows.scatter(1, safe_ids, 0.0)
    weights = torch.where(subtract.unsqueeze(1), residual, target_rows)
    empty = ~(weights > 0).any(dim=1, keepdim=True)
    return torch.where(empty, target_rows, weights)


# --- the whole step -----------------------------------------------------------

def verify_tensors(num_draft_tokens, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p, *,
                   uniforms=None, exponentials=None, seeds=None, positions=None, max_k=None, modes=None):
    """One step on tensors already on the device; see the module docstring for shapes.

    Returns ``(output_token_ids [batch, max_k + 1] int64, num_accepted [batch] int64)``.
    """
    batch, vocab_size = num_draft_tokens.shape[0], target_logits.shape[1]
    num_tokens = draft_token_ids.shape[0]
    device = target_logits.device
    if max_k is None:
        max_k = int(num_draft_tokens.max()) if batch else 0
    keyed = uniforms is None or exponentials is None
    if keyed and (seeds is None or positions is None):
        raise InvalidInput("seeds: required (with positions) when no noise is injected")

    # Phase 1: layout, which paths this batch needs, and its noise (greedy requests read none).
    offsets, request, draft_index, target_row = _layout(num_draft_tokens, num_tokens)
    has_greedy, has_sampled, use_top_k, use_top_p = modes or batch_modes(temperature, top_k, top_p, vocab_size)
    if keyed and has_sampled:
        uniforms, exponentials = torch_philox.step_noise(seeds, positions, num_draft_tokens, vocab_size,
                                                         num_tokens, max_k)
    greedy = temperature == 0
    safe_temperature = torch.where(greedy, torch.ones_like(temperature), temperature)
    filters = dict(use_top_k=use_top_k, use_top_p=use_top_p)

    # Phases 2-4: every draft position's test, then each request's first rejection.
    draft_logits = target_logits[target_row]
    accept = torch.zeros(num_tokens, dtype=torch.bool, device=device)
    if has_sampled and num_tokens:
        probs = target_probs(draft_logits, safe_temperature[request], top_k[request], top_p[request], **filters)
        accept = _accepts(draft_token_ids, draft_probs, probs, uniforms)
        del probs
    if has_greedy and num_tokens:  # x == argmax of the raw logits (argmax: lowest id on ties)
        accept = torch.where(greedy[request], draft_token_ids == draft_logits.argmax(dim=1), accept)
    del draft_logits
    num_accepted = _first_rejection(accept, num_draft_tokens, request, draft_index)

    # Phase 5: the one emission row per request (first rejection, or the bonus row).
    arange = torch.arange(batch, device=device)
    emit_logits = target_logits[offsets + arange + num_accepted]
    token = torch.zeros(batch, dtype=torch.int64, device=device)
    if has_sampled:
        subtract = num_accepted < num_draft_tokens
        draft_row = (offsets + num_accepted).clamp(max=max(num_tokens - 1, 0))
        draft_ids = draft_token_ids[draft_row] if num_tokens else torch.full_like(arange, PLACEHOLDER_TOKEN_ID)
        subtract &= draft_ids != PLACEHOLDER_TOKEN_ID  # a placeholder's row is never used
        target_rows = target_probs(emit_logits, safe_temperature, top_k, top_p, **filters)
        draft_rows = draft_probs[draft_row] if (draft_probs is not None and num_tokens) else None
        token = _race(_residual(target_rows, draft_rows, draft_ids, subtract), exponentials)
    if has_greedy:
        token = torch.where(greedy, emit_logits.argmax(dim=1), token)

    # Phase 6: accepted drafts, the emitted token, then -1.
    width = max_k + 1
    output = torch.full((batch, width), PLACEHOLDER_TOKEN_ID, dtype=torch.int64, device=device)
    kept = torch.where(draft_index < num_accepted[request], draft_token_ids, PLACEHOLDER_TOKEN_ID)
    output.view(-1).scatter_(0, request * width + draft_index, kept)
    output[arange, num_accepted] = token
    return output, num_accepted


# --- the protocol device --------------------------------------------------------

class TorchDevice:
    """SPEC §2–§5 on a torch device; numpy in, numpy out (``devices.protocol``)."""

    def __init__(self, device: str | torch.device = "cpu", name: str = "torch",
                 capabilities: Capabilities = CAPABILITIES):
        self.device = torch.device(device)
        self.name = name
        self.capabilities = capabilities

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        validate(batch, noise)
        self._check_capabilities(batch)
        if noise is None and (batch.seeds is None or batch.positions is None):
            missing = "seeds" if batch.seeds is None else "positions"
            raise InvalidInput(f"{missing}: required when no noise is given (the device draws "
                               "keyed Philox noise from seeds and positions, SPEC §5.2)")
        as_tensor = self._tensor
        if noise is not None:
            keyed = dict(uniforms=as_tensor(noise.uniforms, torch.float64),
                         exponentials=as_tensor(noise.exponentials, torch.float64))
        else:
            keyed = dict(seeds=torch_philox.seeds_to_int64(batch.seeds).to(self.device),
                         positions=as_tensor(batch.positions, torch.int64))
        output, num_accepted = verify_tensors(
            as_tensor(batch.num_draft_tokens, torch.int64), as_tensor(batch.draft_token_ids, torch.int64),
            None if batch.draft_probs is None else as_tensor(batch.draft_probs),
            as_tensor(batch.target_logits), as_tensor(batch.temperature, torch.float64),
            as_tensor(batch.top_k, torch.int64), as_tensor(batch.top_p, torch.float64),
            max_k=batch.max_k, **keyed)
        return VerifyOutput(output.cpu().numpy(), num_accepted.cpu().numpy())

    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        # torch.tensor copies: the caller's (possibly read-only) array is never aliased or mutated.
        return torch.tensor(np.asarray(array), dtype=dtype, device=self.device)

    def _check_capabilities(self, batch: VerifyBatch) -> None:
        caps = self.capabilities
        if batch.max_k > caps.max_k:
            raise UnsupportedCall(f"max_k <= {caps.max_k}", batch.max_k)
        if batch.vocab_size > caps.max_vocab_size:
            raise UnsupportedCall(f"max_vocab_size <= {caps.max_vocab_size}", batch.vocab_size)
        if batch.target_logits.dtype.name not in caps.dtypes:
            raise UnsupportedCall(f"dtype in {caps.dtypes}", batch.target_logits.dtype.name)


def make_cpu_device() -> TorchDevice:
    """The ``torch`` device on the CPU."""
    return TorchDevice("cpu", name="torch")


def make_cuda_device() -> TorchDevice:
    """The ``torch-cuda`` device; raises ``RuntimeError`` when CUDA is absent (listed as unavailable)."""
    if not torch.cuda.is_available():
        raise RuntimeError(f"torch-cuda: torch.cuda.is_available() is False (torch {torch.__version__}, "
                           f"built with CUDA {torch.version.cuda}); use the 'torch' device on the CPU")
    return TorchDevice("cuda", name="torch-cuda")


__all__ = ["TorchDevice", "verify_tensors", "Modes", "batch_modes", "target_probs", "make_cpu_device", "make_cuda_device", "CAPABILITIES"]
