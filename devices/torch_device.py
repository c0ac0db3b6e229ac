"""The ``torch`` device: SPEC §2–§5 vectorised over the ragged batch, CPU or CUDA.

No Python loop over requests or positions: per-row request and draft indices
come from ``searchsorted``; the step runs in a fixed number of phases, each
rule taken from ``devices.torch_sampling`` (the one torch implementation of
every SPEC rule, shared with the hpu, npu and Triton devices):

1. **layout** — request, draft index and target row of each of the
   ``num_tokens`` draft positions; keyed noise (one Philox pass, §5.2) when
   no noise is injected and some request samples;
   with SPEC §12's parameters, every target row's logits after its bans,
   penalties and bias, each reading the drafts before it
   (``torch_sampling.process_logits``; greedy rows then take that argmax);
2. **target rows** — §2 (temperature, top-k by value, softmax, top-p with
   ties kept) for every draft position's target row, in the input dtype
   (one sort serves both filters; top-p prefix sums in float64);
3. **acceptance** — ``u < t(x)/d(x)`` (full), ``u < t(x)`` (point) or
   ``x == argmax z`` (greedy) for every position at once, the ratio and coin
   in float64; placeholders and ``d(x) = 0`` rejected (§4);
4. **first rejection** — ``num_accepted`` per request by a masked ``amin``;
5. **emission** — only the ONE emission row per request (the first rejected
   position, or the bonus row): §2 again, the residual ``max(t − d, 0)`` (or
   ``t`` with ``x`` zeroed; ``t`` after a padding placeholder, ``max(t − d, 0)``
   after a withdrawn draft), empty residual → ``t``, then the race
   ``argmax w/E`` over ``w > 0`` in float64 (lowest id on ties), or the
   raw-logit argmax for greedy requests;
6. **layout out** — accepted drafts, the emitted token, ``-1`` padding (§7).

Lower-level API (tensors already on the device; used by GPU benchmarks)::

    verify_tensors(num_draft_tokens,   # [batch] int64, K_i >= 0
                   draft_token_ids,    # [num_tokens] int64, ids or -1
                   draft_probs,        # [num_tokens, V] float, or None (point proposals)
                   target_logits,      # [num_tokens + batch, V] float16/bfloat16 (computed on in float32)/float32/float64
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
                   sampler=None,       # torch_sampling.SamplerTensors (SPEC §12) or None
                   withdrawn=None,     # [num_tokens] bool: withdrawn drafts (SPEC §4), or None
                   ) -> (output_token_ids [batch, max_k + 1] int64, num_accepted [batch] int64)

It does not validate (call ``devices.validate.validate`` on the numpy
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
from devices import torch_sampling as ts
from devices import torch_tree
from devices.validate import check_call, check_repeated, check_tree_call
from devices.protocol import (PLACEHOLDER_TOKEN_ID, SAMPLER_ORDERS, SAMPLER_PARAMETERS, Capabilities, InvalidInput,
                              Noise, SamplerParams, TreeBatch, TreeOutput, VerifyBatch, VerifyOutput)

CAPABILITIES = Capabilities(injected_noise=True, rng="philox", max_vocab_size=262_144, max_k=256,
                            greedy=True, draft_probs=True, point_proposals=True, top_k=True, top_p=True,
                            dtypes=("float16", "bfloat16", "float32", "float64"), tree_schemes=("greedy", "rrs", "sglang"),
                            max_tree_nodes=1024, sampler=SAMPLER_PARAMETERS, sampler_orders=SAMPLER_ORDERS,
                            withdrawn_drafts=True)
"""Limits are declared, not inherent: memory grows as ``num_tokens × V``, a tree step's passes as
depth × the most siblings of one node (``devices.torch_tree``). 16-bit logits are computed on in float32
(``torch_sampling.widened``), as SPEC §6 asks."""


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
    return Modes(*torch.stack([greedy.any(), (~greedy).any(), ts.uses_top_k(temperature, top_k, vocab_size).any(),
                               ts.uses_top_p(temperature, top_p).any()]).tolist())


# --- phase 2: the target distribution of a set of rows (SPEC §2) ---------------

def target_probs(logits: torch.Tensor, temperature: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                 use_top_k: bool = True, use_top_p: bool = True) -> torch.Tensor:
    """Rows of logits → target probabilities, in ``logits.dtype`` (``devices.torch_sampling.target_probs``).

    ``logits`` ``[rows, V]``; ``temperature`` ``[rows]`` (> 0; greedy rows
    carry any positive stand-in), ``top_k`` ``[rows]`` int64, ``top_p``
    ``[rows]`` float64. ``use_top_k``/``use_top_p`` False skip a filter no
    row uses (and with both False, the sort).

    >>> target_probs(torch.tensor([[1., 1., 0.]]), torch.ones(1), torch.tensor([1]), torch.ones(1)).tolist()
    [[0.5, 0.5, 0.0]]
    """
    return ts.target_probs(logits, ts.SamplingRows(temperature, top_k, top_p), use_top_k=use_top_k,
                           use_top_p=use_top_p)


# --- the whole step -----------------------------------------------------------

def verify_tensors(num_draft_tokens, draft_token_ids, draft_probs, target_logits, temperature, top_k, top_p, *,
                   uniforms=None, exponentials=None, seeds=None, positions=None, max_k=None, modes=None, sampler=None,
                   withdrawn=None):
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
    layout = ts.ragged_layout(num_draft_tokens, num_tokens)
    has_greedy, has_sampled, use_top_k, use_top_p = modes or batch_modes(temperature, top_k, top_p, vocab_size)
    if keyed and has_sampled:
        uniforms, exponentials = torch_philox.step_noise(seeds, positions, num_draft_tokens, vocab_size,
                                                         num_tokens, max_k)
    greedy = temperature == 0
    if sampler is not None:  # §12: each row's logits after bans, penalties and bias along its drafts
        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)
    rows = ts.SamplingRows(ts.safe_temperature(temperature), top_k, top_p, None if sampler is None else sampler.min_p)
    filters = dict(use_top_k=use_top_k, use_top_p=use_top_p, order="canonical" if sampler is None else sampler.order)

    # Phases 2-4: every draft position's test, then each request's first rejection.
    draft_logits = target_logits[layout.target_row]
    accept = torch.zeros(num_tokens, dtype=torch.bool, device=device)
    if has_sampled and num_tokens:
        probs = ts.target_probs(draft_logits, rows.take(layout.request), **filters)
        accept = ts.accepts(draft_token_ids, draft_probs, probs, uniforms)
        del probs
    if has_greedy and num_tokens:
        accept = torch.where(greedy[layout.request], draft_token_ids == ts.greedy_argmax(draft_logits), accept)
    del draft_logits
    width = ts.output_width(max_k)
    num_accepted = ts.first_rejection(ts.per_request(accept, layout.starts, width, False), num_draft_tokens)

    # Phase 5: the one emission row per request (first rejection, or the bonus row).
    arange = torch.arange(batch, device=device)
    emit_logits = target_logits[layout.starts + arange + num_accepted]
    token = torch.zeros(batch, dtype=torch.int64, device=device)
    if has_sampled:
        draft_row = (layout.starts + num_accepted).clamp(max=max(num_tokens - 1, 0))
        draft_ids = draft_token_ids[draft_row] if num_tokens else torch.full_like(arange, PLACEHOLDER_TOKEN_ID)
        # A padding placeholder's row is never used; a withdrawn draft's is the row it was drawn from (SPEC §4).
        reads_row = draft_ids != PLACEHOLDER_TOKEN_ID
        if withdrawn is not None and num_tokens:
            reads_row = reads_row | withdrawn[draft_row]
        subtract = (num_accepted < num_draft_tokens) & reads_row
        target_rows = ts.target_probs(emit_logits, rows, **filters)
        draft_rows = draft_probs[draft_row] if (draft_probs is not None and num_tokens) else None
        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)
    if has_greedy:
        token = torch.where(greedy, ts.greedy_argmax(emit_logits), token)

    # Phase 6: accepted drafts, the emitted token, then -1.
    drafts = ts.per_request(draft_token_ids, layout.starts, width, PLACEHOLDER_TOKEN_ID)
    return ts.emitted_rows(drafts, num_accepted, token), num_accepted


# --- the protocol device --------------------------------------------------------

class TorchDevice:
    """SPEC §2–§5 on a torch device; numpy in, numpy out (``devices.protocol``)."""

    def __init__(self, device: str | torch.device = "cpu", name: str = "torch",
                 capabilities: Capabilities = CAPABILITIES):
        self.device = torch.device(device)
        self.name = name
        self.capabilities = capabilities

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        check_call(batch, noise, self.capabilities)
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
            max_k=batch.max_k, sampler=self._sampler(batch.sampler, batch.batch_size, batch.vocab_size),
            withdrawn=self._withdrawn(batch), **keyed)
        return VerifyOutput(output.cpu().numpy(), num_accepted.cpu().numpy())

    def _withdrawn(self, batch: VerifyBatch):
        """SPEC §4's withdrawn-draft mask ``[num_tokens]`` on the device; None when no draft is withdrawn."""
        return self._tensor(batch.withdrawn, torch.bool) if batch.has_withdrawn() else None

    def _sampler(self, sampler: SamplerParams | None, batch_size: int, vocab_size: int):
        """SPEC §12's parameters as ``torch_sampling.SamplerTensors`` on the device; None when none is given."""
        if sampler is None or not sampler.given():
            return None
        return ts.sampler_tensors(sampler, batch_size, vocab_size, self.device)

    def verify_tree(self, batch: TreeBatch, noise: Noise | None = None) -> TreeOutput:
        """SPEC §11 (``devices.torch_tree``): greedy, rrs and sglang trees; noise injected or keyed."""
        depths = check_tree_call(batch, noise, self.capabilities)
        as_tensor = self._tensor
        num_nodes = as_tensor(batch.num_nodes, torch.int64)
        temperature = as_tensor(batch.temperature, torch.float64)
        if noise is not None:
            uniforms, exponentials = as_tensor(noise.uniforms, torch.float64), as_tensor(noise.exponentials, torch.float64)
        elif (np.asarray(batch.temperature) > 0).any():
            uniforms, exponentials = torch_philox.step_noise(
                torch_philox.seeds_to_int64(batch.seeds).to(self.device), as_tensor(batch.positions, torch.int64),
                num_nodes, batch.vocab_size, int(np.sum(batch.num_nodes)), int(np.max(batch.num_nodes)))
        else:
            uniforms = exponentials = None
        links = torch_tree.tree_links(np.asarray(batch.num_nodes), np.asarray(batch.parents), depths, self.device)
        output, num_accepted, nodes = torch_tree.verify_tree_tensors(
            num_nodes, links, as_tensor(batch.draft_token_ids, torch.int64),
            None if batch.draft_probs is None else as_tensor(batch.draft_probs), as_tensor(batch.target_logits),
            temperature, as_tensor(batch.top_k, torch.int64), as_tensor(batch.top_p, torch.float64),
            uniforms, exponentials, scheme=batch.scheme, threshold_single=float(batch.threshold_single),
            threshold_acc=float(batch.threshold_acc))
        return TreeOutput(output.cpu().numpy(), num_accepted.cpu().numpy(), nodes.cpu().numpy())

    def verify_repeated(self, template: VerifyBatch, repeats: int, draft_token_ids: np.ndarray,
                        seeds: np.ndarray, positions: np.ndarray) -> VerifyOutput:
        """``verify`` of ``template`` tiled ``repeats`` times, its rows sent to the device once.

        The optional protocol method of ``devices.protocol.Device``: the result
        equals ``verify`` of the batch whose float rows and parameters are
        ``template``'s repeated, with ``draft_token_ids`` ``[repeats · Σ K_i]``,
        ``seeds`` and ``positions`` ``[repeats · B]`` — at V = 128k a trial's
        rows are ~3 MB, so only ids, seeds and positions cross per call. The
        template is validated (SPEC §6) and copied to the device once, and
        tiled there.
        """
        rows = self._template(template)
        batch = VerifyBatch(np.tile(template.num_draft_tokens, repeats), draft_token_ids, None,
                            np.empty((0, template.vocab_size), template.target_logits.dtype),
                            np.tile(template.temperature, repeats), np.tile(template.top_k, repeats),
                            np.tile(template.top_p, repeats), seeds, positions, sampler=tiled_sampler(template.sampler, repeats),
                            withdrawn=None if template.withdrawn is None else np.tile(template.withdrawn, repeats))
        check_repeated(batch, template)
        output, num_accepted = verify_tensors(
            self._tensor(batch.num_draft_tokens, torch.int64), self._tensor(draft_token_ids, torch.int64),
            None if rows["draft_probs"] is None else rows["draft_probs"].repeat(repeats, 1),
            rows["target_logits"].repeat(repeats, 1), self._tensor(batch.temperature, torch.float64),
            self._tensor(batch.top_k, torch.int64), self._tensor(batch.top_p, torch.float64),
            seeds=torch_philox.seeds_to_int64(seeds).to(self.device),
            positions=self._tensor(positions, torch.int64), max_k=template.max_k,
            sampler=self._sampler(batch.sampler, batch.batch_size, template.vocab_size), withdrawn=self._withdrawn(batch))
        return VerifyOutput(output.cpu().numpy(), num_accepted.cpu().numpy())

    def _template(self, template: VerifyBatch) -> dict:
        """The template's float rows on the device, validated once (cached while the template lives)."""
        cached = getattr(self, "_template_cache", None)
        if cached is None or cached[0] is not template:
            check_call(template, None, self.capabilities)
            rows = {"target_logits": self._tensor(template.target_logits),
                    "draft_probs": None if template.draft_probs is None else self._tensor(template.draft_probs)}
            self._template_cache = cached = (template, rows)
        return cached[1]

    def _tensor(self, array: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        # torch.tensor copies: the caller's (possibly read-only) array is never aliased or mutated.
        array = np.asarray(array)
        if array.dtype.name == "bfloat16" and dtype is None:   # ml_dtypes' bfloat16: torch reads its bits
            return torch.tensor(array.view(np.int16), device=self.device).view(torch.bfloat16)
        return torch.tensor(array, dtype=dtype, device=self.device)


def tiled_sampler(sampler: SamplerParams | None, repeats: int) -> SamplerParams | None:
    """``sampler`` of a template batch for the template tiled ``repeats`` times (``SamplerParams.tiled``)."""
    return None if sampler is None else sampler.tiled(repeats)


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
