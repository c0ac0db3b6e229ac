"""The ``npu`` device: SPEC §2–§5 written with the operations Ascend's torch backend offers.

vllm-ascend (seed 001; https://github.com/vllm-project/vllm-ascend) runs rejection sampling in
fp32 only, on a flat ragged layout with ``cu_num_draft_tokens``. This device
is written as one would for ``torch_npu``, and runs on any torch device:

**Ops used** (all in torch_npu's supported list): ``sort``, ``cumsum``,
``gather``, ``softmax``, ``masked_fill``, ``where``, ``argmax``, ``amin``,
``searchsorted``, ``log``, ``frexp``, ``clamp``, int64 arithmetic, shifts and
bitwise ops (the exact coin; the keyed Philox words via ``devices.torch_philox``).

**Avoided, and why:**

* ``log1p`` — vllm-ascend keeps ``log(1 - ratio)`` for lack of it (vllm-ascend
  PR #15656). SPEC §5.2 asks narrow-precision devices for
  ``-log1p(-m)`` near ``u → 1``; here it is Goldberg's identity
  ``log1p(y) = log(w)·y/(w − 1)`` with ``w = 1 + y`` (and ``y`` when ``w == 1``),
  which needs only ``log`` (``log1p_free``).
* float64 — Ascend's vector units are fp32; the device declares
  ``dtypes=("float32",)``. vllm-ascend rounds the uniforms to fp32; here the
  coin ``u < t/d`` is decided **exactly as float64 decides it**, in int64:
  the quotient is rounded IEEE-style from the integer mantissas and compared
  with ``u`` as (exponent, mantissa) pairs (``coin_accepts``); the host splits
  each float64 uniform with ``frexp``, a Philox word ``x`` is ``(2x + 1)·2⁻³³``. The race and the
  target rows stay fp32 (SPEC §9's fp32 margin covers them).
* data-dependent control flow — no ``.item()``/``.any()`` branch, no boolean
  indexing, no ``nonzero``: greedy and sampled rows, top-k on and off, are all
  computed and selected with ``where`` (so one kernel launch sequence serves
  every batch).
* negative offsets — Triton-Ascend does not honour non-static load masks
  (docs/bugs.md #13: ``tl.load(ptr + offs - 1, mask)`` read before the
  buffer), and PyTorch's ``x[-1]`` reads the *last* vocab entry. Every index
  here is clamped into range *before* the gather and the value masked after;
  the placeholder ``-1`` is never used as an index.
* ``scatter_reduce``/``index_put`` with duplicate indices — the first rejection
  is an ``amin`` over a dense ``[batch, max_k]`` gather of the flat flags.

Heterogeneous vocabularies (TLI, seed 001) are drafted outside the device
(``specsim.engine.proposers.UniversalDraftProposer``); ``tli_draft_probs`` is the
on-device step a proposer would run on Ascend — constrain the draft logits to
the intersection, renormalise, lay the row out in the target vocabulary.

>>> import numpy as np
>>> from devices.protocol import VerifyBatch, Noise
>>> batch = VerifyBatch(num_draft_tokens=np.array([2]), draft_token_ids=np.array([1, 0]),
...     draft_probs=None, target_logits=np.log(np.array([[.1, .9], [.5, .5], [.2, .8]], np.float32)),
...     temperature=np.ones(1), top_k=np.zeros(1, np.int64), top_p=np.ones(1))
>>> out = make_device().verify(batch, Noise(np.array([0.3, 0.6]), np.ones((1, 2))))
>>> out.output_token_ids.tolist(), out.num_accepted.tolist()
([[1, 1, -1]], [1])
"""

from __future__ import annotations

import numpy as np
import torch

from devices import torch_philox
from devices import torch_sampling as ts
from devices.validate import check_call
from devices.protocol import PLACEHOLDER_TOKEN_ID, Capabilities, Noise, VerifyBatch, VerifyOutput

CAPABILITIES = Capabilities(injected_noise=True, rng="philox", max_vocab_size=262_144, max_k=32,
                            dtypes=("float32",))
"""fp32 only, as vllm-ascend's rejection kernels."""

FP32 = torch.float32
"""The decision dtype on Ascend (no float64 vector units): top-p prefix sums and race scores."""


# --- numerics without log1p or float64 -------------------------------------------

def log1p_free(y: torch.Tensor) -> torch.Tensor:
    """``log1p(y)`` for ``y > -1`` from ``log`` only (Goldberg, 1991): accurate to a few ulp.

    >>> round(float(log1p_free(torch.tensor([-1e-9], dtype=torch.float32))[0]) / -1e-9, 6)
    1.0
    """
    w = 1 + y
    safe = torch.where(w == 1, torch.full_like(w, 2.0), w)   # never log(1)/0
    return torch.where(w == 1, y, torch.log(safe) * y / (safe - 1))


def keyed_exponentials(words: torch.Tensor) -> torch.Tensor:
    """SPEC §5.2's Exp(1) of Philox words ``[...]`` int64, in fp32, finite and > 0.

    ``x < 2³¹``: ``−log((x + ½)·2⁻³²)``; ``x ≥ 2³¹``: ``−log1p(−(2³² − x − ½)·2⁻³²)``
    through ``log1p_free`` (near ``u → 1``, ``log(u)`` would round to 0).
    """
    low = -torch.log(((words.to(torch.float32) + 0.5) * 2.0**-32))
    tail = ((2**32 - words).to(torch.float32) - 0.5) * 2.0**-32          # 1 - u, exact enough
    high = -log1p_free(-tail)
    return torch.where(words >= 2**31, high, low)


def _normalise(mantissa: torch.Tensor, exponent: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``m·2^e`` with ``0 < m < 2⁵³`` → the same value with ``m`` in ``[2⁵², 2⁵³)`` (int64 only)."""
    bit_length = (mantissa.unsqueeze(-1) >= _POWERS).sum(dim=-1)            # [..]: 1 + floor(log2 m)
    shift = 53 - bit_length
    return mantissa << shift.clamp(min=0), exponent - shift


_POWERS = torch.tensor([1 << k for k in range(54)], dtype=torch.int64)


def ratio_float64(t_x: torch.Tensor, d_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``fl64(t/d)``, the float64 quotient SPEC §3 compares against, as int64 ``(M, e)``: ``M·2^e``.

    ``t_x``, ``d_x`` ``[N]`` fp32, ``t_x > 0``, ``d_x > 0``. The 24-bit mantissas
    are divided to 56 bits in two long-division steps (each below 2⁶³), then
    rounded to 53 bits, nearest-even, with the remainder as sticky bit —
    IEEE division, with no float64 on the device.
    """
    mt_f, et = torch.frexp(t_x.to(torch.float32))
    md_f, ed = torch.frexp(d_x.to(torch.float32))
    mt = (mt_f * 2.0**24).to(torch.int64)                                   # [2^23, 2^24)
    md = (md_f * 2.0**24).to(torch.int64).clamp(min=1 << 23)
    n1 = mt << 39
    q1, r1 = n1 // md, n1 % md
    n2 = r1 << 16
    quotient = (q1 << 16) + n2 // md                                        # floor(mt·2^55 / md), in [2^54, 2^56)
    sticky = (n2 % md) > 0
    shift = torch.where(quotient >= (1 << 55), 3, 2)
    mantissa = quotient >> shift
    rest = quotient & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    up = (rest > half) | ((rest == half) & (sticky | ((mantissa & 1) == 1)))
    mantissa = mantissa + up.to(torch.int64)
    carry = mantissa >= (1 << 53)
    mantissa = torch.where(carry, mantissa >> 1, mantissa)
    exponent = et.to(torch.int64) - ed.to(torch.int64) - 55 + shift + carry.to(torch.int64)
    return mantissa, exponent


def coin_accepts(mu: torch.Tensor, eu: torch.Tensor, t_x: torch.Tensor, d_x: torch.Tensor) -> torch.Tensor:
    """``u < fl64(t_x / d_x)`` decided exactly, with no float64 on the device.

    ``u = mu·2^eu`` (``mu [N]`` int64 in ``[0, 2⁵³)``, ``eu [N]`` int64): the host
    splits an injected float64 uniform exactly with ``np.frexp``
    (``uniform_parts``); a Philox word ``x`` is ``u = (2x + 1)·2⁻³³``.
    ``t_x``, ``d_x`` ``[N]`` fp32, ``d_x > 0`` (1 for point proposals). The
    quotient is rounded as float64 would (``ratio_float64``) and both numbers
    compared as (exponent, 53-bit mantissa) pairs, so SPEC §3's boundary edges
    — ``u`` one ulp below the ratio accepts, ``u`` equal to it rejects — are
    decided as the float64 reference decides them; an fp32 ratio cannot.
    ``t_x = 0`` never accepts (§4).

    >>> mu, eu = uniform_parts(np.array([0.0, 0.5, 2 / 3, np.nextafter(2 / 3, 0)]))
    >>> coin_accepts(mu, eu, torch.tensor([0.0, 0.5, 0.5, 0.5]), torch.tensor([1.0, 1.0, 0.75, 0.75])).tolist()
    [False, False, False, True]
    """
    positive = t_x > 0
    safe_t = torch.where(positive, t_x, torch.ones_like(t_x))
    rm, re = ratio_float64(safe_t, d_x)
    nonzero = mu > 0
    um, ue = _normalise(torch.where(nonzero, mu, torch.ones_like(mu)), eu)
    below = (ue < re) | ((ue == re) & (um < rm))
    return positive & (~nonzero | below)


def uniform_parts(uniforms: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Host side: float64 uniforms ``[N]`` → exact ``(mu, eu)`` int64 tensors with ``u = mu·2^eu``."""
    mantissa, exponent = np.frexp(np.asarray(uniforms, np.float64))
    mu = (mantissa * 2.0**53).astype(np.int64)
    return torch.from_numpy(mu), torch.from_numpy((exponent.astype(np.int64) - 53))


# --- SPEC §2 in fp32 ---------------------------------------------------------------

def target_probs(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor,
                 top_p: torch.Tensor, use_filters: bool = True) -> torch.Tensor:
    """Rows ``logits [R, V]`` fp32 → probabilities; ``temperature [R]`` > 0, ``top_k [R]``, ``top_p [R]``.

    ``devices.torch_sampling.target_probs`` with fp32 prefix sums (no float64
    on Ascend). Top-p is cut on the **renormalised post-top-k** law (SPEC
    §2.4), not on the pre-top-k probabilities as vllm-ascend's
    ``_apply_top_k_top_p_pytorch`` does (docs/bugs.md #32).
    ``use_filters=False``: the host saw no filter in the batch, so no sort is launched.
    """
    rows = ts.SamplingRows(temperature.to(torch.float32), top_k, top_p.to(torch.float32))
    return ts.target_probs(logits, rows, use_top_k=use_filters, use_top_p=use_filters, decision_dtype=FP32)


def _exact_coin(uniforms: tuple[torch.Tensor, torch.Tensor], t_x: torch.Tensor, d_x: torch.Tensor) -> torch.Tensor:
    """``torch_sampling.accepts``'s coin for Ascend: ``uniforms = (mu, eu)``, decided in int64 (``coin_accepts``)."""
    return coin_accepts(*uniforms, t_x, d_x)


# --- the step on the flat ragged layout ---------------------------------------------

def verify_flat(num_draft_tokens, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p, *,
                max_k: int, uniforms=None, exponentials=None, accept_words=None, recover_words=None,
                use_filters: bool = True):
    """One step, vllm-ascend's flat layout; no host sync.

    - ``num_draft_tokens [B]`` int64; ``draft_token_ids [N]`` int64; ``draft_probs [N, V]`` fp32 or None;
    - ``target_logits [N + B, V]`` fp32; ``temperature``/``top_k``/``top_p`` ``[B]``;
    - noise: ``uniforms = (mu, eu)`` (``uniform_parts``) + ``exponentials [B, V]`` fp32 (injected), or Philox
      ``accept_words [N]`` + ``recover_words [B, V]`` int64 (keyed; exact coins).

    Returns ``(output_token_ids [B, max_k + 1], num_accepted [B])`` int64.
    """
    batch = num_draft_tokens.shape[0]
    num_tokens = draft_token_ids.shape[0]
    device = target_logits.device
    layout = ts.ragged_layout(num_draft_tokens, num_tokens)
    greedy = temperature == 0
    safe_t = ts.safe_temperature(temperature)

    # Every flat draft's target row, its coin (exact, int64) or its greedy test.
    logits_rows = target_logits[layout.target_row]                            # [N, V]
    request = layout.request
    probs = target_probs(logits_rows, safe_t[request], top_k[request], top_p[request], use_filters)
    if accept_words is not None:
        uniforms = (2 * accept_words + 1, torch.full_like(accept_words, -33))
    coin = ts.accepts(draft_token_ids, draft_probs, probs, uniforms, coin=_exact_coin)
    accept = torch.where(greedy[request], draft_token_ids == ts.greedy_argmax(logits_rows), coin)

    # First rejection: dense [B, max_k + 1] gather with clamped indices, masked, then amin.
    width = ts.output_width(max_k)
    num_accepted = ts.first_rejection(ts.per_request(accept, layout.starts, width, False), num_draft_tokens)

    # Emission row: target row starts + i + num_accepted; draft row starts + num_accepted (clamped).
    arange = torch.arange(batch, device=device)
    emit_logits = target_logits[layout.starts + arange + num_accepted]
    emit_probs = target_probs(emit_logits, safe_t, top_k, top_p, use_filters)
    draft_row = (layout.starts + num_accepted).clamp(max=max(num_tokens - 1, 0))
    emit_draft = draft_token_ids[draft_row] if num_tokens else torch.full_like(arange, PLACEHOLDER_TOKEN_ID)
    subtract = (num_accepted < num_draft_tokens) & (emit_draft != PLACEHOLDER_TOKEN_ID)
    emit_draft_probs = draft_probs[draft_row] if (draft_probs is not None and num_tokens) else None
    weights = ts.residual_weights(emit_probs, emit_draft_probs, emit_draft, subtract)
    if recover_words is not None:
        exponentials = keyed_exponentials(recover_words)
    token = torch.where(greedy, ts.greedy_argmax(emit_logits), ts.race(weights, exponentials, FP32))

    drafts = ts.per_request(draft_token_ids, layout.starts, width, PLACEHOLDER_TOKEN_ID)
    return ts.emitted_rows(drafts, num_accepted, token), num_accepted


def tli_draft_probs(draft_logits: torch.Tensor, draft_to_target: torch.Tensor, target_vocab_size: int,
                    temperature: torch.Tensor) -> torch.Tensor:
    """TLI on device: draft logits ``[R, Vd]`` → draft_probs in the target vocabulary ``[R, Vt]`` fp32.

    ``draft_to_target [Vd]`` int64: the target id of each draft token, ``-1``
    outside the intersection. Outside tokens get ``-inf`` before the softmax
    (constrained and renormalised in one step); the row is scattered into
    ``Vt + 1`` columns, the extra one a dump for the ``-1`` ids (never a
    negative index), then cut to ``Vt``. ``temperature [R]`` > 0.
    """
    inside = draft_to_target >= 0
    z = (draft_logits / temperature.to(torch.float32).unsqueeze(1)).masked_fill(~inside.unsqueeze(0), -torch.inf)
    probs = torch.softmax(z, dim=1)
    columns = torch.where(inside, draft_to_target, torch.full_like(draft_to_target, target_vocab_size))
    out = torch.zeros(draft_logits.shape[0], target_vocab_size + 1, dtype=probs.dtype, device=probs.device)
    out.scatter_(1, columns.unsqueeze(0).expand_as(probs), probs)
    return out[:, :target_vocab_size]


# --- the protocol device -------------------------------------------------------------

class NpuDevice:
    """SPEC §2–§5 with Ascend-available ops, fp32; numpy in, numpy out."""

    def __init__(self, device: str = "cpu", name: str = "npu", capabilities: Capabilities = CAPABILITIES):
        self.device, self.name, self.capabilities = torch.device(device), name, capabilities

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        check_call(batch, noise, self.capabilities)
        t = self._tensor
        k = t(batch.num_draft_tokens, torch.int64)
        if noise is not None:
            mu, eu = uniform_parts(noise.uniforms)   # exact on the host; no float64 reaches the device
            keyed = dict(uniforms=(mu.to(self.device), eu.to(self.device)),
                         exponentials=t(noise.exponentials, torch.float32))
        else:
            keyed = self._keyed_words(batch, k)
        output, num_accepted = verify_flat(
            k, t(batch.draft_token_ids, torch.int64),
            None if batch.draft_probs is None else t(batch.draft_probs, torch.float32),
            t(batch.target_logits, torch.float32), t(batch.temperature, torch.float32),
            t(batch.top_k, torch.int64), t(batch.top_p, torch.float32), max_k=batch.max_k,
            use_filters=self._uses_filters(batch), **keyed)
        return VerifyOutput(output.cpu().numpy(), num_accepted.cpu().numpy())

    @staticmethod
    def _uses_filters(batch: VerifyBatch) -> bool:
        """Host-side (numpy): does any sampled request set top-k or top-p? Picks the launch sequence."""
        return bool((ts.uses_top_k(batch.temperature, batch.top_k, batch.vocab_size)
                     | ts.uses_top_p(batch.temperature, batch.top_p)).any())

    def _keyed_words(self, batch: VerifyBatch, k: torch.Tensor) -> dict:
        seeds = torch_philox.seeds_to_int64(batch.seeds).to(self.device)
        positions = self._tensor(batch.positions, torch.int64)
        keys = torch_philox.seed_keys(seeds)
        layout = ts.ragged_layout(k, int(batch.num_draft_tokens.sum()))
        accept = torch_philox.stream_words(keys[layout.request], positions[layout.request], torch_philox.ACCEPT, 0,
                                           layout.draft_index)
        recover = torch_philox.block_words(keys, positions, torch_philox.RECOVER, 0, batch.vocab_size)
        return dict(accept_words=accept, recover_words=recover)

    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.tensor(np.asarray(array), dtype=dtype, device=self.device)


def make_device() -> NpuDevice:
    """The ``npu`` device on the CPU (``NpuDevice("npu")`` on an Ascend with torch_npu loaded)."""
    return NpuDevice("cpu")


__all__ = ["NpuDevice", "make_device", "verify_flat", "target_probs", "tli_draft_probs", "log1p_free",
           "keyed_exponentials", "coin_accepts", "ratio_float64", "uniform_parts", "CAPABILITIES"]
