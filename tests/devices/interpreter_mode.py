"""Put a test module's process into Triton's interpreter mode (``devices/triton_mode.py``), or skip
the module with the reason: triton not installed, or the process already runs Triton compiled.
Call it before importing anything that imports triton."""

import pytest

from devices import triton_mode
from property_tests.extras import need


def enter_or_skip(who: str = "the interpreter tests") -> None:
    """The caller's module carries ``pytestmark = pytest.mark.needs_extra("triton")`` (``pytest -m needs_extra``)."""
    need("triton", load=False)   # absent: the module skipped (failed under SPECSIM_REQUIRE_EXTRAS=1); not imported yet
    if triton_mode.conflict(True, who):
        pytest.skip(triton_mode.conflict(True, who), allow_module_level=True)
    triton_mode.enter(True, who)
