"""Put a test module's process into Triton's interpreter mode (``devices/triton_mode.py``), or skip
the module with the reason: triton not installed, or the process already runs Triton compiled.
Call it before importing anything that imports triton."""

import importlib.util

import pytest

from devices import triton_mode


def enter_or_skip(who: str = "the interpreter tests") -> None:
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton not installed (pip install 'specsim[triton]')", allow_module_level=True)
    if triton_mode.conflict(True, who):
        pytest.skip(triton_mode.conflict(True, who), allow_module_level=True)
    triton_mode.enter(True, who)
