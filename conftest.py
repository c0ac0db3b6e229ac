"""Repository-wide test switches: GPU tests skip without CUDA; slow campaigns are opt-in."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    try:
        parser.addoption("--run-slow", action="store_true", default=False,
                         help="also run tests marked slow (long statistical campaigns)")
    except ValueError:  # already added by the specsim plugin
        pass


def _cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--run-slow") or os.environ.get("SPECSIM_RUN_SLOW") == "1"
    cuda = None
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: opt in with --run-slow"))
        if "gpu" in item.keywords:
            cuda = _cuda_available() if cuda is None else cuda
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
