"""The import map of docs/architecture.md, drawn from the code: rooms and the arrows between them.

A *room* is a top-level package of the repository (``reference``, ``devices``, ``property_tests``,
``reports``) or a package of ``specsim`` (``specsim.judge``, ``specsim.conformance``, ...), plus
``specsim.cli``. An arrow A → B says some module of A imports some module of B (at module level or
inside a function: both run). The house rules, checked by ``problems``:

* no circle: following arrows never leads back to where it started;
* ``reference`` imports no other room; ``devices`` never imports ``reference`` or any ``specsim`` room
  (a device checked against itself proves nothing); ``reports`` reads JSON and imports no room;
* nothing imports ``property_tests`` (the shipped suite sits on top) or ``specsim.cli``, and only
  ``specsim.cli`` imports ``specsim.commands``.

``python -m specsim.figures.architecture --write`` redraws the map between the markers of
docs/architecture.md; ``--check`` exits 1 when it is stale or a rule is broken.

    >>> find_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}})
    [['a', 'b', 'c']]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP = ("reference", "devices", "specsim", "property_tests", "reports")
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- specsim:architecture -->", "<!-- /specsim:architecture -->"
TOP_FLOOR = {"property_tests": (), "specsim.cli": (), "specsim.commands": ("specsim.cli",)}
"""Rooms at the top of the house → the only rooms that may import them."""


def room_of(module: str) -> str | None:
    """``specsim.judge.compare`` → ``specsim.judge``; ``devices.field.vllm_device`` → ``devices``; the bare
    ``specsim`` package (its version string) belongs to no room."""
    parts = module.split(".")
    if parts[0] not in TOP:
        return None
    if parts[0] != "specsim":
        return parts[0]
    return f"specsim.{parts[1]}" if len(parts) > 1 else None


def module_name(path: Path, root: Path) -> tuple[str, str]:
    """The module a file defines and the package its relative imports start from."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def imported_modules(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or ""]
        base = package.split(".")[: len(package.split(".")) - node.level + 1]
        return [".".join(base + ([node.module] if node.module else []))]
    return []


def import_map(root: Path = ROOT) -> dict[str, dict[str, list[str]]]:
    """Room → room it imports → the importing modules (sorted), over every ``.py`` file of ``TOP``."""
    arrows: dict[str, dict[str, set[str]]] = {}
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            module, package = module_name(path, root)
            here = room_of(module)
            if here is None:
                continue
            arrows.setdefault(here, {})
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                for target in imported_modules(node, package):
                    there = room_of(target)
                    if there is not None and there != here:
                        arrows[here].setdefault(there, set()).add(module)
    return {a: {b: sorted(ms) for b, ms in sorted(bs.items())} for a, bs in sorted(arrows.items())}


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more rooms (each sorted): the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:   # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(circles)


def problems(arrows: dict[str, dict[str, list[str]]]) -> list[str]:
    """Each broken house rule, one line naming the rooms and a module that breaks it."""
    out = [f"import circle: {' ↔ '.join(c)}" for c in find_circles({a: set(bs) for a, bs in arrows.items()})]
    for room, targets in arrows.items():
        for target, modules in targets.items():
            rule = None
            if room == "reference":
                rule = "reference imports no other room"
            elif room == "devices" and (target == "reference" or target.startswith("specsim")):
                rule = "devices never import the reference or specsim"
            elif room == "reports":
                rule = "reports read JSON and import no room"
            elif target in TOP_FLOOR and room not in TOP_FLOOR[target]:
                rule = (f"only {' and '.join(TOP_FLOOR[target])} may import {target}" if TOP_FLOOR[target]
                        else f"nothing may import {target}")
            if rule:
                out.append(f"{room} → {target} ({modules[0]}): {rule}")
    return out


def what_room_is(room: str, root: Path = ROOT) -> str:
    """The first sentence of the room's package docstring (or module docstring, for ``specsim.cli``)."""
    base = root.joinpath(*room.split("."))
    path = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
    doc = ast.get_docstring(ast.parse(path.read_text())) if path.exists() else None
    first = (doc or "").strip().split("\n\n")[0].replace("\n", " ")
    sentence = first.split(". ")[0].rstrip(".").replace("|", "\\|")
    return sentence.replace("``", "`")


def render(root: Path = ROOT) -> str:
    """The block between the markers: a Mermaid graph of the arrows and a table of the rooms."""
    arrows = import_map(root)
    rooms = sorted(set(arrows) | {b for bs in arrows.values() for b in bs})
    node = {r: r.replace(".", "_") for r in rooms}
    graph = ["```mermaid", "graph TD"]
    graph += [f"  {node[a]}[{a}] --> {node[b]}[{b}]" for a, bs in arrows.items() for b in bs]
    graph.append("```")
    table = ["| room | what it is | imports |", "|---|---|---|"]
    table += [f"| `{r}` | {what_room_is(r, root)} | {', '.join(f'`{b}`' for b in arrows.get(r, {})) or '—'} |"
              for r in rooms]
    return "\n".join([BEGIN, *graph, "", *table, END])


def stale(root: Path = ROOT) -> list[str]:
    """Why docs/architecture.md's map is not the code's (empty when it is), and every broken rule."""
    doc = root / "docs" / "architecture.md"
    text = doc.read_text() if doc.exists() else ""
    out = problems(import_map(root))
    if BEGIN not in text or END not in text:
        return out + [f"docs/architecture.md: no {BEGIN} … {END} block"]
    current = text[text.index(BEGIN):text.index(END) + len(END)]
    if current != render(root):
        out.append("docs/architecture.md: the import map is stale (python -m specsim.figures.architecture --write)")
    return out


def write(root: Path = ROOT) -> bool:
    """Redraw the map in place; True when the file changed."""
    doc = root / "docs" / "architecture.md"
    text = doc.read_text()
    new = text[:text.index(BEGIN)] + render(root) + text[text.index(END) + len(END):]
    if new != text:
        doc.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specsim.figures.architecture", description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if the map is stale or a house rule is broken")
    mode.add_argument("--write", action="store_true", help="redraw the map in docs/architecture.md")
    args = p.parse_args(argv)
    if args.write:
        print("wrote docs/architecture.md" if write() else "docs/architecture.md is current")
        broken = problems(import_map())
    else:
        broken = stale()
    for line in broken:
        print(line, file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
