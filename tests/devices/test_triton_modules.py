"""The Triton modules (``devices/triton_*.py``) import one way: no module imports, or loads in a
Triton mode (``triton_mode.kernel_module``), a module that imports or loads it back. Read from the
source text, so it runs without torch or triton."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (ROOT / "devices").glob("triton_*.py"))


def arrows(source: str) -> set[str]:
    """The ``devices.triton_*`` modules a module's text imports, or names in a call (a kernel module
    it loads: ``kernel_module("devices.triton_tree", ...)``, ``self._kernel_file(...)``)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.Call):
            found |= {a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)}
    return {name.split(".")[1] for name in found if name.startswith("devices.triton_") and name.count(".") == 1}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of ``graph`` (module → modules it reaches in one arrow), each from its first module."""
    found = []

    def walk(path):
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == path[0]:
                found.append(path + [nxt])
            elif nxt not in path and nxt > path[0]:
                walk(path + [nxt])

    for start in sorted(graph):
        walk([start])
    return found


def test_the_triton_modules_import_one_way():
    graph = {m: arrows((ROOT / "devices" / f"{m}.py").read_text()) - {m} for m in MODULES}
    assert "triton_host" in graph["triton_device"] and "triton_tree" in graph["triton_device"], graph["triton_device"]
    assert cycles(graph) == [], f"import circles between the Triton modules: {cycles(graph)}"


def test_the_arrows_and_circles_are_found():
    text = ('from devices.triton_device import _chunks\nimport devices.triton_mode\nfrom devices import triton_host\n'
            'kernel_module("devices.triton_tree", True)\n')
    assert arrows(text) == {"triton_device", "triton_mode", "triton_host", "triton_tree"}
    assert arrows('"""Docstring naming devices.triton_step."""\nx = "devices.triton_topk"\n') == set()
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
