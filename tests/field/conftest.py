"""Fixtures of the field adapters' tests."""

import pytest


@pytest.fixture(scope="module")
def cache():
    """vLLM's members in the user's cache, fetched once (about 1 MiB of range requests the first time on a
    machine); skips where there is neither network nor cache."""
    from devices.field import vllm_loader
    try:
        return vllm_loader.fetch()
    except vllm_loader.VllmLoadError as e:
        pytest.skip(f"vLLM members unavailable: {e}")
