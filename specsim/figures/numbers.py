"""Numbers in the docs that a command produces, so they cannot drift (issue 16.7).

A countable figure in a Markdown file is written between markers naming what it counts::

    split over the statistical checks (<!-- specsim:l3_checks -->90<!-- /specsim --> checks)

``python -m specsim.figures.numbers --check`` recomputes every marked figure (``NUMBERS``: name →
a cheap function of this checkout) and exits 1 naming each file, line, figure and its value
now; ``--write`` rewrites them in place. ``tests/test_docs_numbers.py`` runs ``--check`` in CI.

Add a figure: one entry in ``NUMBERS``, then the markers in the doc. Measured figures (timings,
GPU results) are not recomputed here; ``check_measured`` asks that each sits on a line (or the
line before it) naming the command that produced it (``specsim …``, ``python …``, ``pytest …``).

    >>> render("<!-- specsim:edges -->3<!-- /specsim -->", {"edges": lambda: "17"})
    '<!-- specsim:edges -->17<!-- /specsim -->'
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "BENCHMARKS.md", "docs/*.md", "reference/SPEC.md")
"""The Markdown files scanned (globs, relative to the repository root)."""

SPAN = re.compile(r"<!-- specsim:(?P<name>[\w.-]+) -->(?P<value>.*?)<!-- /specsim -->")


@functools.lru_cache(maxsize=2)
def _run_plan(black_box: bool = False):
    """The statistical plan of ``specsim conform --device torch`` at the default budget, built once; ``black_box``:
    of the same device without injected noise (``specsim mutants --black-box``'s capabilities)."""
    import dataclasses

    from devices.registry import load
    from specsim.conformance.runner import Context
    from specsim.conformance.stat_plan import run_plan
    caps = load("torch").capabilities
    if black_box:
        caps = dataclasses.replace(caps, injected_noise=False, rng="seeded")
    return run_plan(caps, Context())


def _stat_tests(black_box: bool = False, group: str | None = None) -> Callable[[], str]:
    def count() -> str:
        plan = _run_plan(black_box)
        return str(len(plan.tests if group is None else plan.of_group(group)))
    return count


def _bb_alpha(level: bool) -> str:
    return _power_of_ten(max(t.alpha if level else t.alpha_share for t in _run_plan(True).tests))


def _bb_tv(group: str) -> Callable[[], str]:
    def tv() -> str:
        tvs = [t.detectable_tv for t in _run_plan(True).of_group(group) if t.detectable_tv is not None]
        return f"{min(tvs):.3f}–{max(tvs):.3f}"
    return tv


def _l3_checks() -> str:
    return str(len(_run_plan().of_group("L3-statistical")))


def _l3_tree_checks() -> str:
    return str(len(_run_plan().of_group("L3-trees")))


def _l3_alpha() -> str:
    return _power_of_ten(max(t.alpha_share for t in _run_plan().tests))  # the first test's share holds the remainder


def _l3_alpha_nominal() -> str:
    return _power_of_ten(max(t.alpha for t in _run_plan().tests))


def _power_of_ten(x: float) -> str:
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}·10{str(int(exponent)).translate(SUPERSCRIPT)}"


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _count(what: Callable[[], object]) -> Callable[[], str]:
    return lambda: str(len(what()))


def _edges():
    from specsim.testing.edges import EDGES
    return EDGES


def _groups():
    from specsim.conformance.runner import GROUPS
    return GROUPS


def _capability_rows():
    from specsim.conformance.capabilities import ROWS
    return ROWS


def _optional_profiles():
    from specsim.conformance.profiles import PROFILES
    return PROFILES


def _bugs():
    text = (ROOT / "docs" / "bugs.md").read_text()
    return re.findall(r"^\| (\d+) \|", text, flags=re.M)


def _spec_version() -> str:
    from reference import SPEC_VERSION
    return SPEC_VERSION


NUMBERS: dict[str, Callable[[], str]] = {
    "l3_checks": _l3_checks,
    "l3_alpha": _l3_alpha,
    "l3_alpha_nominal": _l3_alpha_nominal,
    "l3_tree_checks": _l3_tree_checks,
    "stat_tests": _stat_tests(),
    "stat_tests_black_box": _stat_tests(True),
    "edge_tests_black_box": _stat_tests(True, "L1-edges"),
    "sampler_edge_tests_black_box": _stat_tests(True, "L1-sampler"),
    "alpha_black_box": lambda: _bb_alpha(level=False),
    "alpha_nominal_black_box": lambda: _bb_alpha(level=True),
    "edge_tv_black_box": _bb_tv("L1-edges"),
    "sampler_edge_tv_black_box": _bb_tv("L1-sampler"),
    "pattern_tests_black_box": _stat_tests(True, "L1-trees"),
    "pattern_tv_black_box": _bb_tv("L1-trees"),
    "edges": _count(_edges),
    "groups": _count(_groups),
    "capability_rows": _count(_capability_rows),
    "optional_profiles": _count(_optional_profiles),
    "bugs": _count(_bugs),
    "spec_version": _spec_version,
}
"""Name → its value now, as the doc prints it. Each must be cheap (CI runs them all)."""


def render(text: str, numbers: dict[str, Callable[[], str]] = NUMBERS, cache: dict | None = None) -> str:
    """``text`` with every marked figure recomputed (an unknown name raises ``KeyError``)."""
    cache = {} if cache is None else cache

    def value(m: re.Match) -> str:
        name = m["name"]
        if name not in numbers:
            raise KeyError(f"docs number {name!r}: not in specsim.figures.numbers.NUMBERS")
        if name not in cache:
            cache[name] = numbers[name]()
        return f"<!-- specsim:{name} -->{cache[name]}<!-- /specsim -->"
    return SPAN.sub(value, text)


def files(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in DOCS for p in root.glob(pattern)})


def stale(root: Path = ROOT) -> list[str]:
    """One line per marked figure that differs from its value now: ``file:line: name is X, now Y``."""
    out, cache = [], {}
    for path in files(root):
        text = path.read_text()
        for m in SPAN.finditer(text):
            now = render(m[0], cache=cache)
            if now != m[0]:
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"{path.relative_to(root)}:{line}: {m['name']} is {m['value']!r}, now "
                           f"{SPAN.match(now)['value']!r}")
    return out


MEASURED = re.compile(r"<!-- specsim:measured -->")
COMMAND = re.compile(r"`(specsim|python|pytest|\.ci/|bash)[^`]*`")


def check_measured(root: Path = ROOT) -> list[str]:
    """Each ``<!-- specsim:measured -->`` figure must name its command on its line or the line before."""
    out = []
    for path in files(root):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            if MEASURED.search(line) and not (COMMAND.search(line) or (i and COMMAND.search(lines[i - 1]))):
                out.append(f"{path.relative_to(root)}:{i + 1}: a measured figure without the command that gave it")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specsim.figures.numbers", description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a marked figure is stale")
    mode.add_argument("--write", action="store_true", help="rewrite every marked figure in place")
    args = p.parse_args(argv)
    if args.write:
        cache: dict = {}
        for path in files():
            text = path.read_text()
            new = render(text, cache=cache)
            if new != text:
                path.write_text(new)
                print(f"wrote {path.relative_to(ROOT)}")
        return 0
    problems = stale() + check_measured()
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
