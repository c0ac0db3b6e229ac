"""The field's samplers in the step benchmark: vLLM's rejection sampler on the benchmark's inputs.

The hook is ``devices.field.vllm_bench`` (the field adapter's loader takes vLLM's
sampler module out of its pinned wheel): ``make_step()`` returns ``(call,
label)``, ``call(x)`` running vLLM's whole ``RejectionSampler.forward`` on an
input dict of ``workloads.make_inputs`` (keys ``cu``, ``num_draft_tokens``,
``draft_token_ids``, ``draft_probs``, ``target_logits``, ``temperature``,
``seeds``, ``positions``, ``max_k``, ``mode``) the way vLLM's model runner calls
it; ``make_rejection_sample_step()`` its ``rejection_sample`` function alone.
Where vLLM cannot be loaded the benchmark runs without its rows and says why.

Two more engines, glued here on the same input dicts: vLLM's Model Runner V2
verifier (``vllm_v2_step``: the function ``devices.field.vllm_v2_device`` calls,
``RejectionSampler._verify_in_chunks``, its runner state built once per input
set) and FlashInfer's ``chain_speculative_sampling`` after its softmax
(``flashinfer_step``, as ``devices.field.flashinfer_device`` calls them). Each
returns ``(call, label)``, or ``(None, why not)`` where the engine does not load.
"""

from __future__ import annotations

V2_DTYPES = ("float32", "float16", "bfloat16")
"""The target logits' dtypes vLLM's Model Runner V2 verifier takes (``vllm_v2_device``'s capabilities)."""


def vllm_step(**filters):
    """vLLM's whole ``RejectionSampler.forward`` as ``(call, label)`` (the ``vllm`` row, the ratio's base),
    or ``(None, why not)``. ``filters``: ``make_step``'s ``top_k``, ``top_p`` or ``sampler``."""
    return vllm_hook("make_step", **filters)


def vllm_rejection_sample_step():
    """vLLM's ``rejection_sample`` function alone as ``(call, label)`` (the ``vllm rejection_sample`` row),
    or ``(None, why not)``."""
    return vllm_hook("make_rejection_sample_step")


def vllm_hook(name: str, **kwargs):
    """``devices.field.vllm_bench.<name>(**kwargs)``, or ``(None, why not)``."""
    try:
        from devices.field import vllm_bench
    except ImportError as e:
        return None, f"vLLM's sampler not loadable here ({e})"
    try:
        return getattr(vllm_bench, name)(**kwargs)
    except Exception as e:  # the loader's reason: wheel missing, version mismatch, ...
        return None, f"vLLM's sampler did not load ({type(e).__name__}: {e})"


def vllm_version() -> str | None:
    """The vLLM version the loader pins (a record's ``versions``), or None where the loader is absent."""
    try:
        from devices.field.vllm_loader import VLLM_VERSION
    except ImportError:
        return None
    return str(VLLM_VERSION)


def vllm_v2_step(top_k: int = 0, top_p: float = 1.0, device: str = "cuda"):
    """vLLM's Model Runner V2 verifier as ``(call, label)`` (the ``vllm v2`` rows), or ``(None, why not)``.
    ``top_k``, ``top_p``: every request's (0, 1: off); ``device="cpu"``: Triton's interpreter (a test of
    the glue, not a timing)."""
    try:
        from devices.field.vllm_loader import VLLM_VERSION
        from devices.field.vllm_v2_loader import load_v2_verifier
        v2 = load_v2_verifier(interpret=device == "cpu")
    except Exception as e:  # import error, or the loader's reason: wheel missing, hash, Triton mode
        return None, f"vLLM's Model Runner V2 verifier did not load ({type(e).__name__}: {e})"
    prepared: dict[int, tuple] = {}   # id(x) -> (rejection sampler, InputBatch fields, draft logits, ids, pos, x)

    def call(x):
        if id(x) not in prepared:
            prepared[id(x)] = v2_prepared(v2, x, top_k, top_p, device)
        rs, inputs, drafts, input_ids, pos, _ = prepared[id(x)]
        return rs._verify_in_chunks(x["target_logits"], inputs, drafts, input_ids, pos,
                                    v2.rejection_sampler.get_max_chunk_logits(x["target_logits"].shape[1]),
                                    v2.sample_states.NO_LOGPROBS, input_ids)

    filters = "" if (top_k, top_p) == (0, 1.0) else f"; top-k {top_k}, top-p {top_p}"
    return call, f"vllm {VLLM_VERSION} Model Runner V2 RejectionSampler._verify_in_chunks{filters}"


def v2_prepared(v2, x: dict, top_k: int, top_p: float, device: str) -> tuple:
    """What V2's runner holds before its verifier runs on input set ``x`` (``make_inputs``' dict), built
    as ``devices.field.vllm_v2_device`` builds it: the request states and sampler (V2's own ``Sampler``
    class: the adapter's §12.4 check, a host sync, is not vLLM's work), ``InputBatch``'s fields, the
    drafter's logits ``[batch, K, V]`` float32 (``T · log(draft_probs)``, None for point proposals), the
    rows' input ids and positions."""
    import types

    import numpy as np
    import torch

    from devices.field import vllm_v2_device as v2_device
    num_draft = x["num_draft_tokens"].cpu().numpy()
    B, V, K = len(num_draft), int(x["target_logits"].shape[1]), int(x["max_k"])
    temperature = x["temperature"].cpu().numpy()
    batch = types.SimpleNamespace(   # the fields Layout and _Runner read; the big arrays stay on the GPU
        batch_size=B, vocab_size=V, max_k=K, num_draft_tokens=num_draft,
        draft_token_ids=x["draft_token_ids"].cpu().numpy(), temperature=temperature,
        top_k=np.full(B, top_k, np.int64), top_p=np.full(B, top_p, np.float64), seeds=x["seeds"].cpu().numpy(),
        positions=x["positions"].cpu().numpy(), sampler=None)
    layout = v2_device.Layout(batch)
    runner = v2_device._Runner(v2, batch, layout, device)
    runner.sampler.__class__ = v2.sampler.Sampler
    drafts = None
    if x["draft_probs"] is not None:
        scale = torch.as_tensor(np.where(temperature > 0, temperature, 1.0), dtype=torch.float32, device=device)
        drafts = torch.zeros(B, max(K, 1), V, dtype=torch.float32, device=device)
        drafts[torch.as_tensor(runner.slots, device=device)] = (
            torch.log(x["draft_probs"].to(torch.float32)).view(B, K, V) * scale.view(B, 1, 1))
    return (runner.rejection_sampler, runner.input_batch(layout, device), drafts,
            torch.as_tensor(layout.input_ids(), dtype=torch.int32, device=device),
            torch.as_tensor(layout.positions(), dtype=torch.int64, device=device), x)


def flashinfer_step(top_k: int = 0, top_p: float = 1.0):
    """FlashInfer's step as ``(call, label)`` (the ``flashinfer`` rows), or ``(None, why not)``: its
    ``softmax`` with per-row temperature, ``top_k_renorm_probs`` / ``top_p_renorm_probs`` where ``top_k`` /
    ``top_p`` are on (0, 1: off), then ``chain_speculative_sampling``, as ``devices.field.flashinfer_device``
    calls them (one draft length: one call). Draft mode and float32 logits only."""
    try:
        from devices.field.flashinfer_device import FLASHINFER_VERSION, make_device
        fi = make_device().fi
    except Exception as e:  # flashinfer not installed (import error), another version, no GPU
        return None, f"FlashInfer did not load ({type(e).__name__}: {e})"
    prepared: dict[int, tuple] = {}

    def call(x):
        if id(x) not in prepared:
            prepared[id(x)] = flashinfer_prepared(x, top_k, top_p)
        temperature, k_rows, p_rows, drafts, draft_probs, seed, offset, _ = prepared[id(x)]
        probs = fi.softmax(x["target_logits"], temperature=temperature)
        if k_rows is not None:
            probs = fi.top_k_renorm_probs(probs, k_rows)
        if p_rows is not None:
            probs = fi.top_p_renorm_probs(probs, p_rows)
        B, K = drafts.shape
        return fi.chain_speculative_sampling(draft_probs, drafts, probs.view(B, K + 1, -1), seed=seed, offset=offset)

    filters = "" if (top_k, top_p) == (0, 1.0) else f"; top-k {top_k}, top-p {top_p}"
    return call, (f"flashinfer {FLASHINFER_VERSION} softmax + chain_speculative_sampling (draft mode, float32)"
                  + filters)


def flashinfer_prepared(x: dict, top_k: int, top_p: float) -> tuple:
    """FlashInfer's inputs for input set ``x``: per-row temperature ``[rows]`` float32, top-k ``[rows]``
    int32 and top-p ``[rows]`` float32 (None: off), drafts ``[batch, K]`` int32, draft rows ``[batch, K, V]``,
    per-request ``seed`` (``flashinfer_device.request_seed``) and ``offset`` ``[batch]`` int64."""
    import numpy as np
    import torch

    from devices.field.flashinfer_device import request_seed
    if x["draft_probs"] is None:
        raise ValueError("flashinfer_step: chain_speculative_sampling needs draft_probs (draft mode)")
    B, K = x["num_draft_tokens"].shape[0], int(x["max_k"])
    rows, V = x["target_logits"].shape
    on = x["target_logits"].device
    temperature = x["temperature"].to(torch.float32).repeat_interleave(K + 1)
    k_rows = torch.full((rows,), top_k, dtype=torch.int32, device=on) if 0 < top_k < V else None
    p_rows = torch.full((rows,), top_p, dtype=torch.float32, device=on) if top_p < 1 else None
    seeds = np.array([request_seed(s, p) for s, p in zip(x["seeds"].cpu().numpy(), x["positions"].cpu().numpy())],
                     np.int64)
    return (temperature, k_rows, p_rows, x["draft_token_ids"].to(torch.int32).view(B, K),
            x["draft_probs"].view(B, K, V), torch.as_tensor(seeds, device=on),
            torch.zeros(B, dtype=torch.int64, device=on), x)


def flashinfer_version() -> str | None:
    """The installed flashinfer-python's version (a record's ``versions``), or None where it is absent."""
    import importlib.metadata
    try:
        return importlib.metadata.version("flashinfer-python")
    except importlib.metadata.PackageNotFoundError:
        return None
