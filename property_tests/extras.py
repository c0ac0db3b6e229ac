"""The tests' optional dependencies: whether each is present, and what a test needing an absent one does.

A test that needs an optional dependency carries the marker ``needs_extra(NAME, ...)`` (``NAME`` a key of
``EXTRAS``); a module that imports one at its top calls :func:`need` first, so that importing it without the
dependency skips the module instead of failing its collection::

    pytestmark = pytest.mark.needs_extra("ray")
    ray = need("ray")

Without the dependency the test is skipped with the reason and how to install it — the README's test command
(``pip install -e ".[test]" && python -m pytest -q -n auto``) installs none of them and passes. With
``SPECSIM_REQUIRE_EXTRAS=1`` (CI's extras step, after ``.ci/extras.sh`` installed them all) an absent one fails
the test instead: a skip would hide the gap. ``pytest -m needs_extra`` runs only these tests.

Standard library only: the specsim pytest plugin imports it in every pytest run.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from dataclasses import dataclass

REQUIRE_ENV = "SPECSIM_REQUIRE_EXTRAS"
MARKER = "needs_extra"


@dataclass(frozen=True)
class Extra:
    name: str
    module: str | None    # the importable module that makes it present; None: a program (``program``)
    install: str          # how to install it
    program: tuple[str, ...] = ()


EXTRAS: dict[str, Extra] = {e.name: e for e in (
    Extra("triton", "triton", "pip install 'specsim[triton]'"),
    Extra("ray", "ray", "pip install 'specsim[ray]'"),
    Extra("transformers", "transformers", "pip install 'specsim[transformers]'"),
    Extra("llguidance", "llguidance", "pip install 'specsim[grammar]'"),
    Extra("chromium", None, "run .ci/install-chromium.sh, or set SPECSIM_CHROMIUM to a Chromium binary",
          ("chromium", "chromium-browser")),
)}
"""Every optional dependency a test of this repository may need; CI installs them all (``.ci/extras.sh``)."""


def chromium() -> str | None:
    """The Chromium binary the browser tests drive: ``$SPECSIM_CHROMIUM``, else the first on ``PATH``."""
    return os.environ.get("SPECSIM_CHROMIUM") or next(filter(None, map(shutil.which, EXTRAS["chromium"].program)), None)


def _extra(name: str) -> Extra:
    if name not in EXTRAS:
        raise ValueError(f"needs_extra: unknown extra {name!r}; known: {', '.join(EXTRAS)}")
    return EXTRAS[name]


def present(name: str) -> bool:
    """Whether the optional dependency ``name`` (a key of ``EXTRAS``) can be used here."""
    extra = _extra(name)
    if extra.module is None:
        return chromium() is not None
    return importlib.util.find_spec(extra.module) is not None


def required() -> bool:
    """Whether an absent optional dependency is an error (``SPECSIM_REQUIRE_EXTRAS=1``), not a skip."""
    return os.environ.get(REQUIRE_ENV) == "1"


def absent_reason(name: str) -> str:
    """Why a test needing ``name`` cannot run here, with how to install it."""
    extra = _extra(name)
    return f"needs {name}, which is not installed ({extra.install})"


def missing(names) -> list[str]:
    """Those of ``names`` absent here, in order."""
    return [n for n in names if not present(n)]


def decide(names) -> tuple[str, str] | None:
    """What a test needing ``names`` does here: None (run it), ``("skip", reason)`` or ``("fail", reason)``."""
    gone = missing(names)
    if not gone:
        return None
    reason = "; ".join(absent_reason(n) for n in gone)
    if required():
        return "fail", f"{REQUIRE_ENV}=1 but a test needs what is absent: {reason}"
    return "skip", reason


def need(name: str, *, load: bool = True):
    """At a test module's top: the module of optional dependency ``name`` imported, or the whole test
    module skipped with the reason (failed under ``SPECSIM_REQUIRE_EXTRAS=1``). Returns None for a program,
    or with ``load=False``: present, not imported (Triton's mode is chosen before its first import)."""
    import pytest

    what = decide([name])
    if what is not None:
        action, reason = what
        if action == "fail":
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason, allow_module_level=True)
    extra = EXTRAS[name]
    return importlib.import_module(extra.module) if extra.module and load else None
