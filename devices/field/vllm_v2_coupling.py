"""vLLM 0.33.0's Model Runner V2 drafting and verifying one step together: the draft drawn by V2's own
drafting sampler, verified by V2's own ``rejection_sample``, under one request seed.

Model Runner V2 keys all of its randomness by ``(request seed, position, token)``
(``vllm/v1/worker/gpu/sample/gumbel.py``). Its drafters sample each draft with
``gumbel_sample(..., is_drafting=True, logits_cache=...)`` — a Gumbel race,
``gumbel_noised_argmax(..., IS_DRAFTING=True)``, over the draft logits, whose
noise is the murmur3 hash of ``(seed, pos, token)`` —, caching the draft
logits the verifier reads as q. The verifier (``rejection_sample``) draws its
coin from ``tl.rand(seed, pos)`` and, on a rejection, the residual token by a
Gumbel race over ``max(p − q, 0)`` with the same hash at the same
``(seed, pos)``. vLLM PR #54282 added ``_DRAFT_NOISE_SALT``: when drafting,
``pos`` is offset by ``2^30`` so that the draft's noise and the residual's are
disjoint streams. Without it (the code before the PR, or a fork that drops the
offset) the first draft of a step and its residual share one noise vector; the
acceptance test is a probability ratio, not a coupling, so the emitted token's
law is no longer the target's.

``draft_then_verify`` runs one step of one draft for ``len(seeds)`` requests
(each its own request seed, the same rows), exactly as the runner's pieces do:

1. the draft: ``gumbel_sample(draft_logits, idx, T, seeds, pos, apply_temperature=True,
   is_drafting=True, logits_cache=cache, logits_cache_col=0)`` — the drafter's
   call at its first step (the cache column 0 leaves the seed as the request's:
   ``spec_step_seed(seed, 0) == seed``);
2. the verification: ``rejection_sample(target_logits, cache, draft_sampled,
   cu_num_logits, pos, ...)`` with K = 1: request i's rows are its draft row at
   position ``pos`` (the draft's own position: the row whose logits drafted it)
   and its bonus row at ``pos + 1``.

``draft_salt=0`` runs the same members with ``gumbel._DRAFT_NOISE_SALT`` set to
``tl.constexpr(0)`` for the call (the module constant replaced after loading,
restored afterwards): the pre-fix coupling. Under Triton's interpreter the
kernels read the constant when they run; compiled kernels would keep the value
they were compiled with, so a salt other than vLLM's is refused there.

No vLLM code is in this repository: the members are the pinned wheel's
(``vllm_v2_loader``).
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

import numpy as np

DRAFT_SALT_NAME = "_DRAFT_NOISE_SALT"
"""The constant of ``vllm/v1/worker/gpu/sample/gumbel.py`` that vLLM PR #54282 added."""

_SALT_LOCK = threading.Lock()


@dataclass(frozen=True)
class Step:
    """One verified step per request. ``drafts [N]``: each request's draft (V2's drafting sampler);
    ``first_tokens [N]``: the first token the step emits (the draft if accepted, else the residual's);
    ``num_accepted [N]``: 0 or 1; ``draft_salt``: the salt the draft was drawn with."""

    drafts: np.ndarray
    first_tokens: np.ndarray
    num_accepted: np.ndarray
    draft_salt: int


def vllm_draft_salt(v2) -> int:
    """The salt 0.33.0's ``gumbel.py`` ships (``2^30``)."""
    return int(getattr(getattr(v2.gumbel, DRAFT_SALT_NAME), "value"))


@contextlib.contextmanager
def draft_salt(v2, salt: int | None):
    """``gumbel._DRAFT_NOISE_SALT`` set to ``salt`` for the block (None: vLLM's own), then restored."""
    if salt is None:
        yield vllm_draft_salt(v2)
        return
    if not isinstance(salt, int) or salt < 0:
        raise ValueError(f"draft_salt: a non-negative int or None (vLLM's own), got {salt!r}")
    if v2.mode != "cpu" and salt != vllm_draft_salt(v2):
        raise ValueError(f"draft_salt: {salt} needs Triton's interpreter (compiled kernels keep the salt they "
                         f"were compiled with); this load is {v2.mode!r}")
    from triton import language as tl
    with _SALT_LOCK:
        shipped = getattr(v2.gumbel, DRAFT_SALT_NAME)
        setattr(v2.gumbel, DRAFT_SALT_NAME, tl.constexpr(salt))
        try:
            yield salt
        finally:
            setattr(v2.gumbel, DRAFT_SALT_NAME, shipped)


def _seed_array(seeds) -> np.ndarray:
    """``seeds`` as int64; ValueError naming ``seeds`` for one outside [0, 2^63) (V2's seeds are int64)."""
    values = [int(s) for s in np.asarray(seeds).reshape(-1)]
    bad = [s for s in values if not 0 <= s < 2**63]
    if bad:
        raise ValueError(f"seeds: request seeds are in [0, 2^63), got {bad[:3]}")
    return np.asarray(values, dtype=np.int64).reshape(np.asarray(seeds).shape)


def _check_rows(target_probs: np.ndarray, draft_probs: np.ndarray, seeds: np.ndarray, position: int) -> None:
    if target_probs.ndim != 1 or draft_probs.shape != target_probs.shape:
        raise ValueError(f"target_probs, draft_probs: one row [V] each of the same V, got {target_probs.shape} "
                         f"and {draft_probs.shape}")
    for name, row in (("target_probs", target_probs), ("draft_probs", draft_probs)):
        if (row < 0).any() or not np.isfinite(row).all() or abs(float(row.sum()) - 1.0) > 1e-9:
            raise ValueError(f"{name}: a probability row (non-negative, finite, summing to 1), got {row.tolist()}")
    if seeds.ndim != 1 or seeds.size == 0:
        raise ValueError(f"seeds: a non-empty [N] of request seeds, got shape {seeds.shape}")
    if not 0 <= position < 2**30:
        raise ValueError(f"position: the draft row's position in [0, 2^30), got {position}")


def draft_then_verify(target_probs, draft_probs, seeds, *, position: int = 10, draft_salt_value: int | None = None,
                      interpret: bool | None = None) -> Step:
    """One step per request seed: V2 drafts one token from ``draft_probs`` ``[V]`` and verifies it against
    ``target_probs`` ``[V]`` (temperature 1; logits ``log(probs)`` in float32, ``-inf`` where 0), request i
    seeded ``seeds[i]`` (``[N]``), its draft row at ``position``. ``draft_salt_value``: None for vLLM's own
    salt, 0 for the pre-fix coupling (interpreter only). Returns ``Step``."""
    import torch

    from devices.field.vllm_v2_loader import load_v2_verifier
    target_probs = np.asarray(target_probs, np.float64)
    draft_probs = np.asarray(draft_probs, np.float64)
    seeds = _seed_array(seeds)
    _check_rows(target_probs, draft_probs, seeds, position)
    v2 = load_v2_verifier(interpret=interpret)
    device = "cpu" if v2.mode == "cpu" else "cuda"
    n, vocab = seeds.size, target_probs.size
    with np.errstate(divide="ignore"):
        draft_row = torch.as_tensor(np.log(draft_probs), dtype=torch.float32, device=device)
        target_row = torch.as_tensor(np.log(target_probs), dtype=torch.float32, device=device)
    seed = torch.as_tensor(seeds, dtype=torch.int64, device=device)
    temperature = torch.ones(n, dtype=torch.float32, device=device)
    idx = torch.arange(n, dtype=torch.int64, device=device)
    cache = torch.zeros(n, 1, vocab, dtype=torch.float32, device=device)
    with draft_salt(v2, draft_salt_value) as salt:
        drafts = v2.gumbel.gumbel_sample(
            draft_row.expand(n, vocab).contiguous(), idx, temperature, seed,
            torch.full((n,), position, dtype=torch.int64, device=device), apply_temperature=True,
            is_drafting=True, logits_cache=cache, logits_cache_col=torch.zeros((), dtype=torch.int64, device=device))
        first, accepted = _verify(v2, target_row, cache, drafts, seed, temperature, idx, position, device)
    return Step(drafts.cpu().numpy().astype(np.int64), first, accepted, salt)


def _verify(v2, target_row, cache, drafts, seed, temperature, idx, position: int, device: str):
    """``rejection_sample`` with K = 1: request i's rows ``2i`` (its draft row, input token a placeholder 0
    that no kernel reads) and ``2i + 1`` (its bonus row)."""
    import torch
    n, vocab = drafts.numel(), target_row.numel()
    draft_sampled = torch.zeros(2 * n, dtype=torch.int32, device=device)
    draft_sampled[1::2] = drafts.to(torch.int32)
    cu_num_logits = torch.arange(0, 2 * n + 1, 2, dtype=torch.int32, device=device)
    pos = torch.tensor([position, position + 1], dtype=torch.int64, device=device).repeat(n)
    local_pos = torch.tensor([0, 1], dtype=torch.int32, device=device).repeat(n)
    sampled, num_sampled = v2.rejection_sampler_utils.rejection_sample(
        target_row.expand(2 * n, vocab).contiguous(), cache, draft_sampled, cu_num_logits, pos, idx,
        idx.repeat_interleave(2), local_pos, temperature, seed, 1)
    return (sampled[:, 0].cpu().numpy().astype(np.int64), (num_sampled.cpu().numpy() - 1).astype(np.int64))
