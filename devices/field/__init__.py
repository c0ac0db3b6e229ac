"""Adapters for the field's real samplers: vLLM, FlashInfer, SGLang (and HF transformers).

Each adapter is a device (``devices.protocol``) that runs the engine's own code
— imported from its installed package, or for vLLM taken from its pinned wheel
by ``vllm_loader`` — and supplies only what the engine's function does not: the
layout change, the bonus token drawn the way the engine's sampler draws it,
and the randomness hook. Each module's docstring says which is which.
Results: ``docs/field.md`` (``specsim field``).
"""
