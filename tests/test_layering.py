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
    from specsim.figures.architecture import TOP, imported_modules, module_name
    files = {}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            module, package = module_name(path, root)
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
            for target in imported_modules(node, package):
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


# --- specsim/conformance: rooms that import only downward ------------------------------------------------

CONFORMANCE = ROOT / "specsim" / "conformance"
ROOM_ORDER = ("core", "cases", "stats", "checks", "verdict", "run")
"""The conformance rooms, lowest first: a room imports only itself and the rooms before it. ``proposer`` stands
apart (imports no other room and is imported by none)."""
AREA_ARROWS = {("sampler", "chain")}
"""The one import allowed between two areas of ``checks``."""


def _module_of(path: pathlib.Path, root: pathlib.Path) -> tuple[str, str]:
    """``path``'s dotted module name and the package its relative imports resolve against."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def conformance_imports(root: pathlib.Path = ROOT) -> dict[str, set[str]]:
    """Module of ``specsim.conformance`` → the ``specsim.conformance`` modules or packages it imports, anywhere in
    its text (functions included), relative imports resolved; ``from pkg import sub`` names the submodule."""
    package = root / "specsim" / "conformance"
    modules = {_module_of(p, root)[0]: p for p in sorted(package.rglob("*.py"))}
    graph = {}
    for module, path in modules.items():
        _, base = _module_of(path, root)
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    anchor = base.split(".")[: len(base.split(".")) - node.level + 1]
                    target = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
                targets = subs or [target]
            else:
                continue
            found |= {t for t in targets if t == "specsim.conformance" or t.startswith("specsim.conformance.")}
        graph[module] = found - {module}
    return graph


def room_of(module: str) -> tuple[str, str | None]:
    """``("checks", "chain")`` for ``specsim.conformance.checks.chain.exact``; ``("core", None)`` for a core
    module; ``("", None)`` for the package itself, ``("checks", None)`` for the ``checks`` package."""
    parts = module.split(".")[2:]
    if not parts:
        return "", None
    if parts[0] == "checks":
        return "checks", parts[1] if len(parts) > 1 else None
    return parts[0], None


def wrong_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import of ``graph`` against the rooms' order, as ``importer → imported: why``."""
    problems = []
    for importer, targets in sorted(graph.items()):
        room, area = room_of(importer)
        for target in sorted(targets):
            to_room, to_area = room_of(target)
            why = None
            if room == "":
                why = "the package's __init__ names the vendor API lazily; it imports no room"
            elif to_room == "":
                why = "a room imports the module it needs, never the package's facade"
            elif "proposer" in (room, to_room) and room != to_room:
                why = "proposer stands apart: it imports no other room and none imports it"
            elif room not in ROOM_ORDER or to_room not in ROOM_ORDER:
                why = f"unknown room {room if room not in ROOM_ORDER else to_room!r}"
            elif ROOM_ORDER.index(to_room) > ROOM_ORDER.index(room):
                why = f"{room} may not import {to_room} (order: {' → '.join(reversed(ROOM_ORDER))})"
            elif room == to_room == "checks" and area != to_area and to_area is not None \
                    and area is not None and (area, to_area) not in AREA_ARROWS:
                why = f"checks/{area} may not import checks/{to_area} (the one arrow between areas: sampler → chain)"
            if why:
                problems.append(f"{importer} → {target}: {why}")
    return problems


def test_the_conformance_rooms_import_only_downward():
    problems = wrong_arrows(conformance_imports())
    assert not problems, "\n".join(problems)


def test_the_room_rule_sees_an_upward_import_inside_a_function_a_relative_import_and_a_crossing(tmp_path):
    rooms = tmp_path / "specsim" / "conformance"
    for package in ("", "core", "stats", "run", "checks", "checks/chain", "checks/trees", "checks/sampler", "proposer"):
        (rooms / package).mkdir(parents=True, exist_ok=True)
        (rooms / package / "__init__.py").write_text("")
    (rooms / "core" / "calls.py").write_text("def f():\n    from specsim.conformance.run.runner import Context\n")
    (rooms / "run" / "runner.py").write_text("from ..core import calls\nfrom ..checks.chain import exact\n")
    (rooms / "checks" / "chain" / "exact.py").write_text("from specsim.conformance.checks.trees import groups\n")
    (rooms / "checks" / "trees" / "groups.py").write_text("from specsim.conformance.stats import plan\n")
    (rooms / "checks" / "sampler" / "group.py").write_text("from specsim.conformance.checks.chain import exact\n")
    (rooms / "stats" / "plan.py").write_text("import specsim.conformance.proposer.proposers\n")
    (rooms / "proposer" / "proposers.py").write_text("")
    assert wrong_arrows(conformance_imports(tmp_path)) == [
        "specsim.conformance.checks.chain.exact → specsim.conformance.checks.trees.groups: checks/chain may not "
        "import checks/trees (the one arrow between areas: sampler → chain)",
        "specsim.conformance.core.calls → specsim.conformance.run.runner: core may not import run (order: run → "
        "verdict → checks → stats → cases → core)",
        "specsim.conformance.stats.plan → specsim.conformance.proposer.proposers: proposer stands apart: it imports "
        "no other room and none imports it"]


def test_the_conformance_package_root_holds_only_its_init():
    loose = sorted(p.name for p in CONFORMANCE.glob("*.py"))
    assert loose == ["__init__.py"], f"modules at specsim/conformance/'s root: {loose}; each belongs in a room"


def _private_imports(path: pathlib.Path) -> list[str]:
    """``from specsim.X import _name`` in ``path``, where ``_name`` is not a submodule (a private module of a
    package is its own business too: the check is on names)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "specsim":
            found += [f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {a.name}"
                      for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_private_name_of_specsim_is_imported_from_outside_its_module():
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    found = [hit for name in tracked.stdout.split() if (ROOT / name).exists() for hit in _private_imports(ROOT / name)]
    assert not found, "private names imported across modules (make them public or move them):\n" + "\n".join(found)


def test_the_moved_modules_still_import_from_their_old_paths_with_a_warning():
    import warnings
    from specsim.conformance import MOVED
    assert "results" in MOVED and "_common" in MOVED and "stat_plan" in MOVED
    code = ("import warnings, sys; warnings.simplefilter('error')\n"
            "try:\n    import specsim.conformance.isolation\nexcept DeprecationWarning as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert "specsim.conformance.run.isolation" in out.stdout and "next release" in out.stdout
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import specsim.conformance.run.runner as runner
        from specsim.conformance.runner import Context
        from specsim.conformance.cases import CASES
        from specsim.conformance.cases.chain import CASES as chain_cases
        for old, new in MOVED.items():
            if isinstance(new, str):
                assert importlib.import_module(f"specsim.conformance.{old}") is importlib.import_module(
                    f"specsim.conformance.{new}"), old
        old_runner = importlib.import_module("specsim.conformance.runner")
        assert old_runner.GROUPS is runner.GROUPS and old_runner.write_json_atomic and old_runner.document
        from specsim.conformance.exact import edge_group, one_check
        from specsim.conformance.trees import tree_l1_group, tree_l2_group
        from specsim.conformance.volume import sampler_precision_check, volume_group
        from specsim.conformance.run.one_check import one_check as moved
        assert one_check is moved and edge_group and tree_l1_group and tree_l2_group and volume_group
        assert sampler_precision_check and importlib.import_module("specsim.conformance.stat_plan").make_plan
    assert runner.__spec__.name == "specsim.conformance.run.runner"
    assert Context is runner.Context and CASES is chain_cases


def test_the_vendor_api_is_importable_from_the_package():
    from specsim.conformance import GROUPS, BlackBox, CheckResult, Context, run_conformance, verdict_of
    from specsim.conformance.run import runner
    assert GROUPS is runner.GROUPS and run_conformance is runner.run_conformance and verdict_of is runner.verdict_of
    assert Context is runner.Context and CheckResult and BlackBox


def test_every_group_is_declared_in_its_area_and_the_rooms_above_name_only_declared_groups():
    from specsim.conformance.checks import chain, declared, interface, sampler, trees
    from specsim.conformance.core.groups import Group
    from specsim.conformance.run.registry import GROUPS, RUN_ORDER
    from specsim.conformance.stats import alpha
    from specsim.conformance.verdict import profiles
    declared_in = {g: area for area in (chain, declared, interface, sampler, trees)
                   for g in vars(area).values() if isinstance(g, Group)}
    assert set(declared_in) == set(RUN_ORDER) and len(RUN_ORDER) == len(GROUPS), "declared but not listed, or twice"
    for g, area in declared_in.items():
        assert g.run.startswith(area.__name__ + "."), f"{g.name} runs {g.run}, outside its area {area.__name__}"
    assert {g.name for g in RUN_ORDER if g.statistical} == set(alpha.GROUPS)
    named = {g for p in profiles.PROFILES for g in p.groups} | {
        g for ev in profiles.CORE_EVIDENCE for caps in _declarations() for g in ev.groups(caps)}
    assert named <= set(GROUPS), f"profiles name groups that no area declares: {sorted(named - set(GROUPS))}"


def _declarations():
    from devices.protocol import Capabilities
    return [Capabilities(injected_noise=i, rng=r, max_vocab_size=8) for i, r in
            ((True, "none"), (True, "philox"), (False, "seeded"), (True, "seeded"))]
