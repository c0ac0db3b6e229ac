"""Fixtures shared by the shipped suites.

``device_under_test`` is the device chosen with ``--specsim-device`` (the
``specsim`` pytest plugin's ``specsim_device`` fixture) or, without the
plugin, ``$SPECSIM_DEVICE`` (default ``torch``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, database=None, deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", deadline=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("SPECSIM_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def device_under_test(request):
    try:
        return request.getfixturevalue("specsim_device")
    except pytest.FixtureLookupError:
        from devices.registry import load
        return load(os.environ.get("SPECSIM_DEVICE", "torch"))
