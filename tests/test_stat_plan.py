"""The run-wide statistical plan (``specsim.conformance.stats.plan``): one family, every test listed once.

* the α shares of every plan sum to ``alpha_family`` exactly (``math.fsum``), for devices with and
  without injected noise, trees and SPEC §12 parameters;
* every statistical check a quick run gives appears in the plan at the same α, and every planned
  test is run (black-box torch: the edges' laws are statistical there);
* the plan follows the groups' own lists (an edge, a tree case or a tree pattern added is planned);
* ``conformance.json`` lists the plan;
* no import cycle among ``specsim/conformance/*`` (function-level imports included).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import pathlib

import pytest

from devices.protocol import Capabilities
from devices.registry import load
from specsim.conformance.stats import alpha, l3_design
from specsim.conformance.stats import plan as stat_plan
from specsim.conformance.run.runner import Context, run_group
from specsim.conformance.run.document import document
from specsim.conformance.core.black_box import BlackBox

ROOT = pathlib.Path(__file__).resolve().parents[1]
CONFORMANCE = ROOT / "specsim" / "conformance"
STATISTICAL_GROUPS = ("L1-edges", "L1-sampler", "L1-trees", "L3-trees", "L3-declared", "L3-statistical")
SOME_L3_CASES = {"v8-hetero", "v16-sampler", "v32768-pit"}
"""L3-statistical's cases run by the default test (a greedy request, a §12 case, the PIT case);
the whole group in the slow one."""


def _capability_sets() -> dict:
    torch_caps, hpu_caps = load("torch").capabilities, load("hpu").capabilities
    return {
        "torch": torch_caps,
        "torch-black-box": BlackBox(load("torch")).capabilities,
        "hpu (no trees, no sampler)": hpu_caps,
        "hpu-black-box (no trees, no sampler, seeded)": dataclasses.replace(hpu_caps, injected_noise=False,
                                                                              rng="seeded"),
        "seeded, draft probs only, V <= 64, float32": Capabilities(False, "seeded", 64, point_proposals=False,
                                                                    dtypes=("float32",), tree_schemes=("rrs",)),
    }


@pytest.mark.parametrize("alpha_family", [1e-3, 0.05, 3e-7])
@pytest.mark.parametrize("label", list(_capability_sets()))
def test_the_shares_sum_to_alpha_family_exactly(label, alpha_family):
    caps = _capability_sets()[label]
    plan = stat_plan.run_plan(caps, Context(alpha_family=alpha_family, quick=True))
    assert plan.tests, f"{label}: no statistical test planned"
    assert math.fsum(t.alpha_share for t in plan.tests) == alpha_family
    assert plan.to_json()["alpha_share_sum"] == alpha_family
    assert len({t.name for t in plan.tests}) == len(plan.tests)
    assert all(t.alpha == t.alpha_share / alpha.SAFETY > 0 for t in plan.tests)
    groups = {t.group for t in plan.tests}
    assert ("L1-edges" in groups) == (not caps.injected_noise or caps.rng == "seeded")   # SPEC 1.3: /seeded edges
    assert ("L3-trees" in groups) == bool(caps.tree_schemes)
    assert ("L1-sampler" in groups) == (not caps.injected_noise and bool(caps.sampler))
    assert ("L1-trees" in groups) == (not caps.injected_noise and bool(caps.tree_schemes))


@pytest.mark.parametrize("alpha_family", [1e-3, 1e-4, 0.1, 0.3, 2.5e-5, 1 / 3])
@pytest.mark.parametrize("count", [1, 2, 3, 7, 112, 135, 1000, 4097])
def test_split_is_even_but_for_the_first_share_and_exact(alpha_family, count):
    shares = alpha.split(alpha_family, count)
    assert len(shares) == count and math.fsum(shares) == alpha_family
    assert all(s > 0 for s in shares) and len(set(shares[1:])) <= 1
    assert shares[0] == pytest.approx(alpha_family / count, rel=1e-9)


def test_the_plan_is_deterministic_and_the_same_whatever_groups_run():
    caps = BlackBox(load("torch")).capabilities
    first = stat_plan.run_plan(caps, Context(quick=True))
    stat_plan._run_plan.cache_clear()
    again = stat_plan.run_plan(caps, Context(quick=True))
    assert first == again
    subset = again.to_json(["L1-edges"])
    assert subset["alpha_share_sum"] == 1e-3
    assert subset["alpha_share_run"] == math.fsum(t.alpha_share for t in again.of_group("L1-edges")) < 1e-3
    assert {t["name"] for t in subset["tests"] if t["ran"]} == {t.name for t in again.of_group("L1-edges")}


def test_torch_with_injected_noise_plans_every_l3_check_and_no_edge():
    """With injected noise the edges are exact answers: the plan is every check of L3-statistical's and
    L3-trees' case lists (torch supports them all) and L3-declared's laws, each at 1e-3 over their count,
    run at a tenth."""
    from specsim.conformance.cases import declared as declared_cases
    from specsim.conformance.cases import trees as tree_cases
    from specsim.conformance.cases.chain import CASES
    caps = load("torch").capabilities
    plan = stat_plan.run_plan(caps, Context(quick=True))
    assert {t.group for t in plan.tests} == {"L3-statistical", "L3-trees", "L3-declared"}
    count = sum(len(l3_design.check_names(c)) for c in CASES) + sum(len(tree_cases.check_names(c))
                                                                    for c in tree_cases.CASES)
    count += len(declared_cases.law_cases(caps, True))
    assert len(plan.tests) == count
    assert all(t.alpha == pytest.approx(1e-3 / count / 10, rel=1e-12) for t in plan.tests)


def _statistical(results) -> list:
    return [r for r in results if r.alpha is not None]


def _checks_match_the_plan(results, plan, groups, l3_cases=None):
    by_check: dict = {}
    for t in plan.tests:
        by_check.setdefault(t.check, []).append(t)
    stat = _statistical(results)
    assert stat
    for r in stat:
        assert r.name in by_check, f"{r.name}: a statistical check the plan does not list"
        assert r.alpha in {t.alpha for t in by_check[r.name]}, (r.name, r.alpha, [t.alpha for t in by_check[r.name]])
        assert r.p_value is not None and r.n
        share = r.extra.get("alpha_share")
        assert share is None or share in {t.alpha_share for t in by_check[r.name]}
    ran = {r.name for r in stat}
    planned = {t.check for t in plan.tests if t.group in groups and
               (l3_cases is None or t.group != "L3-statistical" or t.check.split("/")[1] in l3_cases)}
    assert planned == ran, (f"planned but not run: {sorted(planned - ran)[:5]}; "
                            f"run, not planned: {sorted(ran - planned)[:5]}")


@pytest.fixture(scope="module")
def black_box_run():
    device, ctx = BlackBox(load("torch")), Context(quick=True)
    results = [r for g in STATISTICAL_GROUPS[:5] for r in run_group(g, device, ctx)]
    from specsim.conformance.checks.chain.statistical import statistical_group
    results += statistical_group(device, ctx, cases=SOME_L3_CASES)
    return device, ctx, results


@pytest.mark.whole_run
def test_every_statistical_check_of_a_black_box_run_is_planned_at_its_alpha(black_box_run):
    device, ctx, results = black_box_run
    plan = stat_plan.run_plan(device.capabilities, ctx)
    assert {r.status for r in results} <= {"pass", "not_supported"}
    _checks_match_the_plan(results, plan, STATISTICAL_GROUPS, SOME_L3_CASES)
    edges = [r for r in _statistical(results) if r.name.startswith("L1/edge/")]
    assert len(edges) == len({t.check for t in plan.of_group("L1-edges")}) > 0
    multi = [t for t in plan.of_group("L1-sampler") if t.name.endswith("/request1")]
    assert multi, "an edge with two multi-outcome requests holds two tests"
    patterns = [r for r in _statistical(results) if r.name.startswith("L1/trees/pattern/")]
    assert len(patterns) == len({t.check for t in plan.of_group("L1-trees")}) > 0
    assert [t for t in plan.of_group("L1-trees") if t.name.endswith("/request1")], "empty beside big: two tests"


@pytest.mark.whole_run
def test_conformance_json_lists_the_plan(black_box_run):
    device, ctx, results = black_box_run
    doc = document("torch", device, ctx, results, list(STATISTICAL_GROUPS))
    listed = doc["statistical_plan"]
    assert listed["alpha_family"] == ctx.alpha_family == listed["alpha_share_sum"] == listed["alpha_share_run"]
    assert math.fsum(t["alpha_share"] for t in listed["tests"]) == ctx.alpha_family
    for t in listed["tests"]:
        assert set(t) >= {"name", "group", "check", "alpha_share", "alpha", "n", "detectable_tv", "note", "ran"}
        assert t["ran"] and t["n"] and (t["detectable_tv"] is not None or t["note"])
    alpha = {t["name"]: t["alpha"] for t in listed["tests"]}
    for r in _statistical(results):
        if r.name.startswith("L3/"):
            assert alpha[r.name] == r.alpha
    assert document("torch", device, ctx, results, ["L1-edges"])["statistical_plan"]["alpha_share_run"] < 1e-3


@pytest.mark.slow
def test_every_statistical_check_of_a_whole_quick_run_is_planned_at_its_alpha():
    """Every statistical group of a quick run, black-box torch and torch (~40 s)."""
    for device in (BlackBox(load("torch")), load("torch")):
        ctx = Context(quick=True)
        results = [r for g in STATISTICAL_GROUPS for r in run_group(g, device, ctx)]
        assert {r.status for r in results} <= {"pass", "not_supported"}
        _checks_match_the_plan(results, stat_plan.run_plan(device.capabilities, ctx), STATISTICAL_GROUPS)


def test_an_edge_or_a_tree_case_added_to_the_lists_is_planned():
    from specsim.conformance.cases import trees as tree_cases
    from specsim.testing.edges import EDGES, Edge, Request
    caps = BlackBox(load("torch")).capabilities
    before = stat_plan.run_plan(caps, Context(quick=True))
    extra_edge = Edge("two-outcome-probe", "a two-outcome law", [Request([], [[0.0, 0.0]])], [[0]],
                      frozenset({"point_proposals"}), point=True)
    extra_tree = dataclasses.replace(tree_cases.CASES[0], id="probe-tree")
    EDGES.append(extra_edge)
    tree_cases.CASES.append(extra_tree)
    try:
        stat_plan._enumerate.cache_clear()
        stat_plan._run_plan.cache_clear()
        after = stat_plan.run_plan(caps, Context(quick=True))
    finally:
        EDGES.remove(extra_edge)
        tree_cases.CASES.remove(extra_tree)
        stat_plan._enumerate.cache_clear()
        stat_plan._run_plan.cache_clear()
    added = {t.name for t in after.tests} - {t.name for t in before.tests}
    twins = {f"L1/edge/two-outcome-probe/{d}/request0" for d in ("float16", "bfloat16", "float32")}  # SPEC 1.5
    assert added == {"L1/edge/two-outcome-probe/request0", "L3/trees/probe-tree/path", "L3/trees/probe-tree/accepted"} | twins
    assert after.alpha_sum == 1e-3 and len(after.tests) == len(before.tests) + 6


def test_a_tree_pattern_added_to_the_list_is_planned(monkeypatch):
    from specsim.conformance.cases import tree_patterns as tpc
    caps = BlackBox(load("torch")).capabilities
    before = stat_plan.run_plan(caps, Context(quick=True))
    probe = dataclasses.replace(next(p for p in tpc.PATTERNS if p.name == "empty-beside-big"), name="probe-pattern")
    monkeypatch.setattr(tpc, "PATTERNS", tpc.PATTERNS + (probe,))
    stat_plan._enumerate.cache_clear()
    stat_plan._run_plan.cache_clear()
    try:
        after = stat_plan.run_plan(caps, Context(quick=True))
    finally:
        monkeypatch.undo()
        stat_plan._enumerate.cache_clear()
        stat_plan._run_plan.cache_clear()
    added = [t for t in after.tests if t.name not in {u.name for u in before.tests}]
    assert [t.name for t in added] == [f"{probe.check}/request0", f"{probe.check}/request1"]
    assert {t.group for t in added} == {"L1-trees"} and all(t.n == tpc.QUICK_SAMPLES for t in added)
    assert after.alpha_sum == 1e-3 and len(after.tests) == len(before.tests) + 2


# --------------------------------------------------------------------------- import cycles

def _conformance_imports(path: pathlib.Path, modules: set) -> set:
    """The ``specsim.conformance`` modules (dotted below the package: ``stats.plan``) ``path`` imports anywhere
    in its code (function bodies too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            base = node.module or ""
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["specsim", "conformance"] and ".".join(parts[2:]) in modules:
                found.add(".".join(parts[2:]))
    return found - {_dotted(path)}


def _dotted(path: pathlib.Path) -> str:
    return ".".join(path.relative_to(CONFORMANCE).with_suffix("").parts)


def _cycle(graph: dict) -> list | None:
    """One cycle of ``graph`` (module → imported modules) as a path, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_the_conformance_modules():
    paths = {_dotted(p): p for p in CONFORMANCE.rglob("*.py") if p.name != "__init__.py"}
    graph = {m: _conformance_imports(p, set(paths)) for m, p in paths.items()}
    statistical, patterns = graph["checks.chain.statistical"], graph["checks.trees.patterns"]
    assert statistical >= {"stats.plan"} and "checks.trees.statistical" not in statistical
    assert patterns >= {"stats.plan", "cases.tree_patterns"} and "checks.trees.patterns" not in graph["stats.plan"]
    cycle = _cycle(graph)
    assert cycle is None, f"import cycle in specsim/conformance: {' -> '.join(cycle)}"
