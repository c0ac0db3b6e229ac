"""The architecture, enforced: who may import whom (README, Layout).

- ``reference/`` imports numpy and the standard library only (and itself).
- ``devices/`` never imports ``reference`` or ``specsim``: a device checked against itself proves nothing.
- No import circle between modules anywhere in the house, imports inside functions included: a module
  that needs another's piece and is needed back shares the piece through a third module instead.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names)


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "reference").glob("*.py")), ids=lambda p: p.name)
def test_reference_imports_only_numpy_and_the_standard_library(path):
    foreign = _imports(path) - STDLIB - {"numpy", "reference"}
    assert not foreign, f"{path.name} imports {sorted(foreign)}"


@pytest.mark.parametrize("path", sorted((ROOT / "devices").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_devices_never_import_the_reference(path):
    forbidden = _imports(path) & {"reference", "specsim"}
    assert not forbidden, f"{path.relative_to(ROOT)} imports {sorted(forbidden)}"


def test_reference_stays_small_enough_to_audit():
    lines = sum(len(p.read_text().splitlines()) for p in (ROOT / "reference").glob("*.py"))
    assert lines <= 1800, f"reference/ has {lines} lines; the ground truth must stay auditable"


DOCTEST_MODULES = ["reference.rng", "reference.target", "reference.layout", "reference.validate",
                   "reference.verify", "reference.exact", "reference.laws", "reference.tree", "devices.protocol", "devices.torch_sampling", "devices.torch_tree", "specsim.testing.batches", "specsim.testing.sampler_params", "specsim.testing.trees",
                   "specsim.judge.compare", "specsim.judge.allowances", "specsim.testing.seeds", "specsim.testing.bad_inputs",
                   "specsim.bench.harness", "specsim.bench.workloads", "specsim.bench.step", "specsim.bench.trees", "devices.registry", "specsim.figures.architecture", "specsim.conformance.run.runner", "specsim.conformance.run.progress", "specsim.conformance.run.one_check"]


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_docstring_examples_run(name):
    failures, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0


def test_vocab_sits_below_the_engine():
    """The engine's universal-draft proposer imports ``specsim.vocab``; vocab must not import the engine back."""
    code = "import sys, specsim.vocab; print(sorted(m for m in sys.modules if m.startswith('specsim.engine')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", f"importing specsim.vocab loaded {out.stdout.strip()}"


def test_the_import_map_of_docs_architecture_is_the_code_and_keeps_the_house_rules():
    """No import circle between rooms, the rules of docs/architecture.md hold, and its drawn map is current."""
    from specsim.figures import architecture
    assert architecture.stale() == []


def test_the_house_rules_catch_a_circle_and_a_wrong_arrow():
    from specsim.figures.architecture import problems
    arrows = {"specsim.judge": {"specsim.conformance": ["specsim.judge.x"]},
              "specsim.conformance": {"specsim.judge": ["specsim.conformance.y"], "property_tests": ["specsim.conformance.z"]},
              "reports": {"specsim.conformance": ["reports.tables"]}}
    assert problems(arrows) == [
        "import circle: specsim.conformance ↔ specsim.judge",
        "specsim.conformance → property_tests (specsim.conformance.z): nothing may import property_tests",
        "reports → specsim.conformance (reports.tables): reports read JSON and import no room"]


def module_graph(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Module → the modules of the house it imports, anywhere in its text (functions included), over every
    ``.py`` file of the rooms (``specsim.figures.architecture.TOP``). ``from pkg import sub`` is an arrow to
    the submodule; any other import, to the deepest module of ours it names."""
    from specsim.figures.architecture import TOP, _imported, _module_name
    files = {}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            module, package = _module_name(path, root)
            files[module] = (path, package)

    def deepest(name: str) -> str | None:
        parts = name.split(".")
        while parts and ".".join(parts) not in files:
            parts.pop()
        return ".".join(parts) or None

    graph = {}
    for module, (path, package) in files.items():
        arrows = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, package):
                names = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
                subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in files}
                arrows |= subs or {deepest(target)} - {None}
        graph[module] = arrows - {module}
    return graph


def test_no_import_circle_between_any_modules_of_the_house():
    from specsim.figures.architecture import find_circles
    circles = find_circles(module_graph())
    assert not circles, "import circles (functions' imports included): " + "; ".join(" ↔ ".join(c) for c in circles)


def test_the_module_circle_check_sees_an_import_inside_a_function(tmp_path):
    from specsim.figures.architecture import find_circles
    (tmp_path / "specsim" / "room").mkdir(parents=True)
    (tmp_path / "specsim" / "room" / "__init__.py").write_text("")
    (tmp_path / "specsim" / "room" / "a.py").write_text("from specsim.room.b import B\n")
    (tmp_path / "specsim" / "room" / "b.py").write_text("def f():\n    from specsim.room import a\n")
    (tmp_path / "specsim" / "room" / "c.py").write_text("from . import a\n")
    assert find_circles(module_graph(tmp_path)) == [["specsim.room.a", "specsim.room.b"]]


def test_specsim_root_holds_only_packages_and_the_command():
    loose = sorted(p.name for p in (ROOT / "specsim").glob("*.py"))
    assert loose == ["__init__.py", "cli.py"], f"modules at specsim/'s root: {loose}; give each a room"
