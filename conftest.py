"""Repository root: make sure the specsim plugin is active even in an
uninstalled checkout, so the slow/gpu skips and ``--specsim-device`` have one
implementation (``property_tests/plugin.py``)."""

from importlib.metadata import entry_points

_installed = any(ep.value == "property_tests.plugin" for ep in entry_points(group="pytest11"))
pytest_plugins = [] if _installed else ["property_tests.plugin"]
