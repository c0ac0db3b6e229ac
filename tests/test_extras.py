"""The tests' optional dependencies (property_tests/extras.py): a test needing an absent one skips, saying which
and how to install it — the README's test command passes on a fresh machine — and under CI's extras step
(``SPECSIM_REQUIRE_EXTRAS=1``) fails instead; every test needing one carries the ``needs_extra`` marker, so that
``pytest -m needs_extra`` runs exactly those."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

from importlib.metadata import entry_points

from property_tests import extras

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULES = {e.module: e.name for e in extras.EXTRAS.values() if e.module}
"""An extra's importable module → the extra's name."""
INSTALLED = any(ep.value == "property_tests.plugin" for ep in entry_points(group="pytest11"))

NEEDS_CHROMIUM = '''
import pytest

@pytest.mark.needs_extra("chromium")
def test_drives_a_browser():
    pass

def test_needs_nothing():
    pass
'''


def run_pytest(tmp_path, env_extra: dict) -> subprocess.CompletedProcess:
    """A pytest run of ``NEEDS_CHROMIUM`` with specsim's plugin, where no Chromium can be found."""
    (tmp_path / "test_browserish.py").write_text(NEEDS_CHROMIUM)
    env = {k: v for k, v in os.environ.items() if k not in ("SPECSIM_CHROMIUM", extras.REQUIRE_ENV)}
    env.update(PATH=str(tmp_path), PYTHONPATH=str(ROOT), SPECSIM_DEVICE_SURVEY="0", **env_extra)   # an empty PATH: no chromium on it
    plugin = [] if INSTALLED else ["-p", "property_tests.plugin"]   # as the repository's conftest.py does
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *plugin, "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def test_an_absent_extra_skips_its_test_with_the_reason_and_how_to_install_it(tmp_path):
    out = run_pytest(tmp_path, {})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 passed, 1 skipped" in out.stdout and "needs chromium, which is not installed (run " \
        ".ci/install-chromium.sh" in out.stdout, out.stdout


def test_under_the_extras_step_an_absent_extra_fails_its_test(tmp_path):
    out = run_pytest(tmp_path, {extras.REQUIRE_ENV: "1"})
    assert out.returncode == 1, out.stdout + out.stderr
    assert "1 passed, 1 error" in out.stdout and "SPECSIM_REQUIRE_EXTRAS=1 but a test needs" in out.stdout, out.stdout


def test_the_decision_names_every_absent_extra(monkeypatch):
    monkeypatch.setattr(extras, "present", lambda name: name == "ray")
    monkeypatch.delenv(extras.REQUIRE_ENV, raising=False)
    assert extras.decide(["ray"]) is None
    action, reason = extras.decide(["triton", "ray", "llguidance"])
    assert action == "skip" and "triton" in reason and "specsim[grammar]" in reason and "ray" not in reason
    monkeypatch.setenv(extras.REQUIRE_ENV, "1")
    assert extras.decide(["triton"])[0] == "fail"
    with pytest.raises(ValueError, match="unknown extra 'tritonn'"):
        extras.decide(["tritonn"])


def _test_files() -> list[pathlib.Path]:
    return sorted(p for d in ("tests", "property_tests") for p in (ROOT / d).rglob("*.py"))


def _extra_imports_at_top(tree: ast.Module) -> set[str]:
    """The extras a module imports at its top level (outside functions), whose absence would break collection."""
    found = set()
    for node in tree.body:
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        found |= {MODULES[n.split(".")[0]] for n in names if n.split(".")[0] in MODULES}
    return found


@pytest.mark.parametrize("path", _test_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_test_needing_an_extra_is_marked_and_none_skips_around_the_marker(path):
    """No ``importorskip`` of an extra (it skips even under ``SPECSIM_REQUIRE_EXTRAS=1`` and escapes
    ``-m needs_extra``); a module that imports or ``need``\\ s an extra at its top carries the marker."""
    text = path.read_text()
    tree = ast.parse(text)
    skipped_around = [m for m in MODULES if f'importorskip("{m}"' in text]
    assert not skipped_around, f"importorskip of {skipped_around}: use property_tests.extras.need and needs_extra"
    needed = _extra_imports_at_top(tree) | {
        node.args[0].value for node in ast.walk(tree) if isinstance(node, ast.Call)
        and getattr(node.func, "id", None) == "need" and node.args and isinstance(node.args[0], ast.Constant)}
    if path.name == "extras.py":
        return
    for name in needed:
        assert f'needs_extra("{name}")' in text, f"{path.name} needs {name} but no test of it is marked needs_extra"
