"""Repository root: make sure the specsim plugin is active even in an
uninstalled checkout, so the slow/gpu skips and ``--specsim-device`` have one
implementation (``property_tests/plugin.py``)."""

from importlib.metadata import entry_points

_installed = any(ep.value == "property_tests.plugin" for ep in entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["property_tests.plugin"]


def pytest_configure(config):
    """Each pytest-xdist worker is one process sharing the machine's cores with the others: one intra-op
    thread each (PyTorch would start one per core in every worker, and the workers' threads contend)."""
    import os
    import sys
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
