"""The field's samplers in the step benchmark: vLLM's rejection sampler on the benchmark's inputs.

The hook is ``devices.field.vllm_bench`` (the field adapter's loader takes vLLM's
sampler module out of its pinned wheel): ``make_step()`` returns ``(call,
label)``, ``call(x)`` running vLLM's whole ``RejectionSampler.forward`` on an
input dict of ``workloads.make_inputs`` (keys ``cu``, ``num_draft_tokens``,
``draft_token_ids``, ``draft_probs``, ``target_logits``, ``temperature``,
``seeds``, ``positions``, ``max_k``, ``mode``) the way vLLM's model runner calls
it; ``make_rejection_sample_step()`` its ``rejection_sample`` function alone.
Where vLLM cannot be loaded the benchmark runs without its rows and says why.
"""

from __future__ import annotations


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
