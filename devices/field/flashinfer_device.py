"""FlashInfer 0.7.2.post1's ``chain_speculative_sampling`` as the ``flashinfer`` device (CUDA GPU only).

**FlashInfer's code** (imported from its installed package, version pinned and
checked): the target rows' ``softmax`` with per-row temperature, its
``top_k_renorm_probs`` and ``top_p_renorm_probs`` where a request asks for
them (in that order, as SGLang's sampler does), the fused
``chain_speculative_sampling`` kernel (acceptance, residual, bonus, all in one
launch, randomness from its in-kernel Philox keyed by a per-request ``seed`` and
``offset``), and ``sampling_from_probs`` for requests with no drafts.

**What the adapter supplies:**

* *the layout change*: FlashInfer takes a padded batch ``[b, n, V]`` of one
  draft length ``n``; SPEC's batch is ragged. The adapter calls the kernel once
  per distinct draft length (requests with the same length together, in batch
  order). A request whose drafts hold a placeholder (-1) at position j is
  passed as its first j drafts with target row j as its bonus row: SPEC rejects
  the placeholder and draws from residual = t_j, which is exactly a bonus draw
  from row j (FlashInfer has no placeholder: its kernel would read row -1).
  K = 0 requests are one ``sampling_from_probs`` call.
* *the randomness hook*: no injected noise (the uniforms are drawn inside the
  kernel); ``rng = "seeded"``: request i's ``seed`` tensor entry is a 63-bit
  hash of (seed, position) and its ``offset`` 0, so its tokens depend on its own
  key only (FlashInfer's per-request seed/offset tensors).
* *input rules*: SPEC §6 by specsim's shared preamble (``devices.validate``).

Declared: draft probabilities only (no point proposals: FlashInfer's chain
kernel needs draft rows), no greedy (SGLang verifies T = 0 by a separate
argmax path, not this kernel), top-k and top-p, float32 logits.
"""

from __future__ import annotations

import hashlib

import numpy as np

from devices.protocol import Capabilities, Noise, UnsupportedCall, VerifyBatch, VerifyOutput

FLASHINFER_VERSION = "0.7.2.post1"


def request_seed(seed: int, position: int) -> int:
    """Request i's FlashInfer ``seed``: a 63-bit hash of (seed, position).

    >>> request_seed(7, 3) == request_seed(7, 3), request_seed(7, 3) == request_seed(7, 4)
    (True, False)
    """
    digest = hashlib.blake2b(f"flashinfer:{int(seed)}/{int(position)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def effective_drafts(draft_token_ids: np.ndarray) -> int:
    """How many of a request's drafts ``[K]`` FlashInfer verifies: those before the first placeholder.

    >>> effective_drafts(np.array([4, 2, -1, 5])), effective_drafts(np.array([4, 2]))
    (2, 2)
    """
    bad = np.flatnonzero(np.asarray(draft_token_ids) < 0)
    return int(bad[0]) if len(bad) else len(draft_token_ids)


class FlashInferDevice:
    """See the module docstring."""

    capabilities = Capabilities(injected_noise=False, rng="seeded", max_vocab_size=2**31 - 1, max_k=128,
                                greedy=False, draft_probs=True, point_proposals=False, top_k=True, top_p=True,
                                dtypes=("float32",))
    name = "flashinfer"
    engine = f"flashinfer {FLASHINFER_VERSION}"

    def __init__(self):
        import flashinfer.sampling
        self.fi = flashinfer.sampling

    def target_probs(self, logits, temperature, top_k, top_p):
        """``[rows, V]`` float32: FlashInfer's softmax(logits / T), then its top-k and top-p renormalisation for
        the rows that ask (``temperature``, ``top_k``, ``top_p``: ``[rows]`` tensors; 0 / 1 = off)."""
        import torch
        probs = self.fi.softmax(logits, temperature=temperature)
        vocab = logits.shape[-1]
        if bool(((top_k > 0) & (top_k < vocab)).any()):
            k = torch.where((top_k > 0) & (top_k < vocab), top_k, torch.full_like(top_k, vocab))
            probs = self.fi.top_k_renorm_probs(probs, k.to(torch.int32))
        if bool((top_p < 1).any()):
            probs = self.fi.top_p_renorm_probs(probs, top_p.to(torch.float32))
        return probs

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        import torch

        from devices.validate import check_call
        if noise is not None:
            raise UnsupportedCall("injected noise: FlashInfer draws its uniforms inside the kernel")
        check_call(batch, noise, self.capabilities)
        dev = "cuda"
        k = np.asarray(batch.num_draft_tokens, np.int64)
        cu = batch.request_offsets()
        rows_of = lambda i: cu[i] + i + np.arange(k[i] + 1)  # noqa: E731  (request i's target rows)
        row_request = np.concatenate([np.full(k[i] + 1, i) for i in range(len(k))])
        per_row = lambda a, dtype: torch.as_tensor(np.asarray(a)[row_request], dtype=dtype, device=dev)  # noqa: E731
        logits = torch.as_tensor(np.ascontiguousarray(batch.target_logits), dtype=torch.float32, device=dev)
        probs = self.target_probs(logits, per_row(batch.temperature, torch.float32),
                                  per_row(batch.top_k, torch.int64), per_row(batch.top_p, torch.float64))
        draft_probs = torch.as_tensor(np.ascontiguousarray(batch.draft_probs), dtype=torch.float32, device=dev)
        seeds = np.array([request_seed(s, p) for s, p in zip(batch.seeds, batch.positions)], np.int64)
        verified = np.array([effective_drafts(batch.draft_token_ids[cu[i]:cu[i + 1]]) for i in range(len(k))])
        out = np.full((len(k), batch.max_k + 1), -1, np.int64)
        for n in np.unique(verified):
            reqs = np.flatnonzero(verified == n)
            seed = torch.as_tensor(seeds[reqs], device=dev)
            offset = torch.zeros(len(reqs), dtype=torch.int64, device=dev)
            target = probs[torch.as_tensor(np.stack([rows_of(i)[:n + 1] for i in reqs]), device=dev)]  # [b, n+1, V]
            if n == 0:
                emitted = self.fi.sampling_from_probs(target[:, 0].contiguous(), seed=seed, offset=offset)
                out[reqs, 0] = emitted.cpu().numpy()
                continue
            drafts = np.stack([batch.draft_token_ids[cu[i]:cu[i] + n] for i in reqs])
            dprobs = draft_probs[torch.as_tensor(np.stack([cu[i] + np.arange(n) for i in reqs]), device=dev)]
            got, _, _ = self.fi.chain_speculative_sampling(   # (output_token_ids, accepted, emitted counts)
                dprobs.contiguous(), torch.as_tensor(drafts, dtype=torch.int32, device=dev), target.contiguous(),
                seed=seed, offset=offset)
            out[reqs, :n + 1] = got.to(torch.int64).cpu().numpy()
        num_accepted = (out != -1).sum(axis=1) - 1
        return VerifyOutput(out, num_accepted.astype(np.int64))


def make_device() -> FlashInferDevice:
    """FlashInfer's sampling kernels on a CUDA GPU (the pinned version; JIT-compiled on first use)."""
    import importlib.metadata
    import importlib.util
    if importlib.util.find_spec("flashinfer") is None:
        raise ImportError(f"the flashinfer device needs flashinfer-python=={FLASHINFER_VERSION} "
                          "(its wheel is 62 MB; docs/field.md says how to install it on a CUDA machine without network)")
    version = importlib.metadata.version("flashinfer-python")
    if version != FLASHINFER_VERSION:
        raise ImportError(f"the flashinfer device is pinned to flashinfer-python=={FLASHINFER_VERSION}, found {version}")
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("flashinfer: its sampling kernels need a CUDA GPU")
    return FlashInferDevice()
