"""Figures in the docs that a command produces, so they cannot drift.

A countable figure in a Markdown file is written between markers naming what it counts::

    split over the statistical checks (<!-- specsim:l3_checks -->90<!-- /specsim --> checks)

A measured figure (a timing, a campaign's outcome) comes from a record of the command that measured it
(``specsim.figures.records``): a whole table as ``<!-- specsim:table RECORD/TABLE -->`` … ``<!-- /specsim:table -->``,
one value as ``<!-- specsim:results:RECORD/KEY -->…<!-- /specsim -->``.

``python -m specsim.figures.numbers --check`` recomputes every marked figure (``NUMBERS``: name →
a cheap function of this checkout), re-renders every record's table and value, and lists each figure
outside any marker (``unmarked``: a number with a unit of time, a ratio, a percentage, a bandwidth or a
count of passes, checks, tests, mutants or seeds); it exits 1 naming each file and line. ``--write``
rewrites the marked figures and tables in place. ``tests/test_docs_numbers.py`` runs the check in CI.

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

from specsim.figures import records

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "BENCHMARKS.md", "docs/*.md", "reference/SPEC.md")
"""The Markdown files scanned (globs, relative to the repository root)."""

SPAN = re.compile(r"<!-- specsim:(?P<name>[\w.:/-]+) -->(?P<value>.*?)<!-- /specsim -->")
TABLE = re.compile(r"<!-- specsim:table (?P<name>[\w.-]+)/(?P<table>[\w.-]+) -->\n(?P<body>.*?)<!-- /specsim:table -->",
                   re.S)
RESULTS_PREFIX = "results:"


@functools.lru_cache(maxsize=2)
def _run_plan(black_box: bool = False):
    """The statistical plan of ``specsim conform --device torch`` at the default budget, built once; ``black_box``:
    of the same device without injected noise (``specsim mutants --black-box``'s capabilities)."""
    import dataclasses

    from devices.registry import load
    from specsim.conformance.run.runner import Context
    from specsim.conformance.stats.plan import run_plan
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


def _tv(group: str, black_box: bool = False) -> Callable[[], str]:
    def tv() -> str:
        tvs = [t.detectable_tv for t in _run_plan(black_box).of_group(group) if t.detectable_tv is not None]
        return f"{min(tvs):.3f}–{max(tvs):.3f}"
    return tv


def _declared_call_bytes() -> str:
    from specsim.conformance.cases.declared import CALL_BYTES
    return f"{CALL_BYTES >> 30} GiB"


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
    from specsim.conformance.run.runner import GROUPS
    return GROUPS


def _capability_rows():
    from specsim.conformance.checks.interface.capabilities import ROWS
    return ROWS


def _optional_profiles():
    from specsim.conformance.verdict.profiles import PROFILES
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
    "declared_tests": _stat_tests(False, "L3-declared"),
    "declared_tests_black_box": _stat_tests(True, "L3-declared"),
    "declared_tv": _tv("L3-declared"),
    "declared_call_bytes": _declared_call_bytes,
    "edges": _count(_edges),
    "groups": _count(_groups),
    "capability_rows": _count(_capability_rows),
    "optional_profiles": _count(_optional_profiles),
    "bugs": _count(_bugs),
    "spec_version": _spec_version,
}
"""Name → its value now, as the doc prints it. Each must be cheap (CI runs them all)."""


def _plan_tests(group: str, case: str | None = None, black_box: bool = False) -> list:
    tests = _run_plan(black_box).of_group(group)
    prefix = {"L3-statistical": "L3/", "L3-trees": "L3/trees/"}[group]
    return [t for t in tests if case is None or t.name.startswith(f"{prefix}{case}/")]


def _l3_case_trials(case: str) -> Callable[[], str]:
    return lambda: f"{_plan_tests('L3-statistical', case)[0].trials:,}".replace(",", " ")


def _pit_ks(t) -> str:
    return re.search(r"KS distance >= ([\d.]+)", t.note or "")[1]


def _l3_case_worst(case: str) -> Callable[[], str]:
    def worst() -> str:
        positions = [t for t in _plan_tests("L3-statistical", case) if "/pos" in t.name]
        tvs = [t.detectable_tv for t in positions if t.detectable_tv is not None]
        if tvs:
            return f"{max(tvs):.4f}"
        return f"PIT KS {max(map(float, map(_pit_ks, positions))):.3f}"
    return worst


def _l3_case_positions(case: str) -> Callable[[], str]:
    """Per request, each position's detectable TV (the bonus last): ``r0: .017 .018; r1: 0 .020``."""
    def tv(t) -> str:
        if t.detectable_tv is None:
            return f"KS {_pit_ks(t).removeprefix('0')}"
        return "0" if t.detectable_tv == 0 else f"{t.detectable_tv:.3f}".removeprefix("0")

    def positions() -> str:
        by_request: dict[str, list[str]] = {}
        for t in _plan_tests("L3-statistical", case):
            request, position = t.name.split("/")[-2:]
            if position.startswith("pos"):
                by_request.setdefault(request, []).append(tv(t))
        return "; ".join(f"{r}: {' '.join(tvs)}" for r, tvs in by_request.items())
    return positions


def _l3_cases() -> tuple[str, ...]:
    from specsim.conformance.cases.chain import CASES
    return tuple(c.id for c in CASES)


def _span(values, spec: str) -> str:
    low, high = format(min(values), spec), format(max(values), spec)
    return low if low == high else f"{low}–{high}"


def _l3_trees(what: str) -> Callable[[], str]:
    def figure() -> str:
        tests = _plan_tests("L3-trees")
        if what == "trials":
            return _span([t.n for t in tests if t.name.endswith("/path")], ",d").replace(",", " ")
        return _span([t.detectable_tv for t in tests if t.name.endswith(f"/{what}") and t.detectable_tv], ".3f")
    return figure


def _zoo(kind: str) -> Callable[[], str]:
    def count() -> str:
        from specsim.mutants import zoo
        return str(len(getattr(zoo, kind)))
    return count


def _sampler_edges():
    from specsim.testing.sampler_edges import SAMPLER_EDGES
    return SAMPLER_EDGES


def _false_fail(what: str, seeds: int = 100, modes: int = 2) -> Callable[[], str]:
    """The group calibration's binomial bound (``specsim.campaign.groups``) at the default α_family:
    ``expected`` seeds with a statistical false fail, ``p<k>`` P(at least k such seeds), ``passing`` the most
    such seeds a run passes with."""
    def figure() -> str:
        from specsim.campaign import groups as cg
        alpha = 1e-3
        if what == "expected":
            return f"{seeds * min(1.0, modes * cg.run_budget(alpha)):.2g}"
        if what == "passing":
            return str(next(k for k in range(seeds + 1) if cg.false_fail_p(k + 1, seeds, modes, alpha) <= cg.FALSE_FAIL_LEVEL))
        p = cg.false_fail_p(int(what.removeprefix("p")), seeds, modes, alpha)
        return f"{p:.2g}" if p >= 0.01 else _power_of_ten(p)
    return figure


NUMBERS.update({
    **{f"l3_case.trials.{c}": _l3_case_trials(c) for c in _l3_cases()},
    **{f"l3_case.worst.{c}": _l3_case_worst(c) for c in _l3_cases()},
    **{f"l3_case.positions.{c}": _l3_case_positions(c) for c in _l3_cases()},
    "l3_cases": lambda: str(len(_l3_cases())),
    "l3_tree_trials": _l3_trees("trials"),
    "l3_tree_path_tv": _l3_trees("path"),
    "l3_tree_accepted_tv": _l3_trees("accepted"),
    "zoo_inside": _zoo("INSIDE"),
    "zoo_tree": _zoo("TREE"),
    "zoo_kernel": _zoo("KERNEL"),
    "zoo_kernel_gpu": _zoo("KERNEL_GPU"),
    "offsets_default_call_bytes": lambda: f"{__import__('specsim.conformance.core.context', fromlist=['x']).DEFAULT_CALL_BYTES / 2**30:g} GiB",
    "zoo_sampler": _zoo("SAMPLER"),
    "zoo_wrappers": _zoo("WRAPPERS"),
    "sampler_edges": _count(_sampler_edges),
    "false_fail_expected_100": _false_fail("expected"),
    "false_fail_p1_100": _false_fail("p1"),
    "false_fail_p2_100": _false_fail("p2"),
    "false_fail_p3_100": _false_fail("p3"),
    "false_fail_p4_100": _false_fail("p4"),
    "false_fail_passing_100": _false_fail("passing"),
    "tree_patterns": _count(lambda: __import__("specsim.conformance.cases.tree_patterns", fromlist=["x"]).PATTERNS),
    "tree_random_cases": _count(lambda: __import__("specsim.conformance.checks.trees.l1", fromlist=["x"]).CASES),
    "tree_edges": _count(lambda: __import__("specsim.conformance.checks.trees.l1", fromlist=["x"]).EDGES),
    "tree_cases": _count(lambda: __import__("specsim.conformance.cases.trees", fromlist=["x"]).CASES),
    "group_timeout_s": lambda: f"{__import__('specsim.conformance.run.isolation', fromlist=['x']).DEFAULT_GROUP_TIMEOUT_S:g}",
    "group_timeout_l3_s": lambda: f"{__import__('specsim.conformance.run.isolation', fromlist=['x']).GROUP_TIMEOUT_OVERRIDES_S['L3-statistical']:g}",
    "interrupt_grace_s": lambda: f"{__import__('specsim.conformance.run.isolation', fromlist=['x'])._INTERRUPT_GRACE_S:g}",
    "volume_budget_s": lambda: f"{__import__('specsim.conformance.checks.chain.volume', fromlist=['x']).DEVICE_BUDGET_S:g}",
    "long_run_calls": lambda: str(__import__("specsim.conformance.checks.chain.long_run", fromlist=["x"]).CALLS),
    "long_run_quick_calls": lambda: str(__import__("specsim.conformance.checks.chain.long_run", fromlist=["x"]).QUICK_CALLS),
})


def _figure(name: str, numbers: dict[str, Callable[[], str]], results: Path) -> str:
    if name.startswith(RESULTS_PREFIX):
        record, _, key = name.removeprefix(RESULTS_PREFIX).partition("/")
        return records.value(records.load(record, results), key)
    if name not in numbers:
        raise KeyError(f"docs number {name!r}: not in specsim.figures.numbers.NUMBERS")
    return numbers[name]()


def render(text: str, numbers: dict[str, Callable[[], str]] = NUMBERS, cache: dict | None = None,
           results: Path = records.RESULTS) -> str:
    """``text`` with every marked figure recomputed and every record's table re-rendered (an unknown name
    raises ``KeyError``, a missing record or table ``records.RecordError``)."""
    cache = {} if cache is None else cache

    def value(m: re.Match) -> str:
        name = m["name"]
        if name not in cache:
            cache[name] = _figure(name, numbers, results)
        return f"<!-- specsim:{name} -->{cache[name]}<!-- /specsim -->"

    def table(m: re.Match) -> str:
        body = records.render_table(records.load(m["name"], results), m["table"])
        return f"<!-- specsim:table {m['name']}/{m['table']} -->\n{body}\n<!-- /specsim:table -->"
    return SPAN.sub(value, TABLE.sub(table, text))


def files(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in DOCS for p in root.glob(pattern)})


def stale(root: Path = ROOT) -> list[str]:
    """One line per marked figure or record table that differs from its value now: ``file:line: …``."""
    out, cache = [], {}
    results = root / "docs" / "results"
    for path in files(root):
        text = path.read_text()
        for m in [*TABLE.finditer(text), *SPAN.finditer(text)]:
            line = text.count("\n", 0, m.start()) + 1
            try:
                now = render(m[0], cache=cache, results=results)
            except (KeyError, records.RecordError) as e:
                out.append(f"{path.relative_to(root)}:{line}: {e}")
                continue
            if now != m[0]:
                what = (f"{m['name']} is {m['value']!r}, now {SPAN.match(now)['value']!r}" if m.re is SPAN
                        else f"table {m['name']}/{m['table']} differs from its record")
                out.append(f"{path.relative_to(root)}:{line}: {what}")
    return out


FIGURE = re.compile(
    r"(?<![\w.§/#-])\d[\d,.]*\s?(?:ms|µs|us|s|min|%|×|x|GB/s|TB/s|GiB|MiB|KiB|passed|pass|failed|fail|skipped|"
    r"checks?|tests?|mutants?|seeds|cases|not supported)(?![\w/])"
    r"|\bKS p\s?[=≈]?\s?0\.\d+|\bp\s?[=≈]\s?0\.\d+")
"""A figure a reader would take for a measurement: a number with a unit of time, a ratio, a percentage, a
bandwidth or size, a count of passes, checks, tests, mutants or seeds, or a p-value."""
UNMARKED_DOCS = ("README.md", "BENCHMARKS.md", "docs/*.md")


FIELD_BLOCK = r"<!-- specsim:field [\w./-]+ -->\n.*?<!-- /specsim:field -->"
"""A field table rendered from its stored ``field.json`` (``specsim.field.table.BLOCK``): its figures are the
stored run's, re-rendered and compared by ``python -m specsim.field.table --check`` (tests/field/test_field_table.py)."""


def _without_marked(text: str) -> str:
    """``text`` with code blocks, inline code, marked figures, record tables and field blocks blanked (lines
    kept)."""
    blank = lambda m: "\n" * m[0].count("\n")   # noqa: E731
    for pattern in (r"```.*?```", TABLE.pattern, FIELD_BLOCK, SPAN.pattern, r"`[^`\n]*`", r"<!--.*?-->"):
        text = re.sub(pattern, blank, text, flags=re.S)
    return text


def unmarked(root: Path = ROOT) -> list[str]:
    """Each figure outside a marker, code or a record's table: ``file:line: 'figure'``. Such a figure
    either gets a marker (a ``NUMBERS`` entry or a record of the command that measured it) or goes."""
    out = []
    for path in sorted({p for pattern in UNMARKED_DOCS for p in root.glob(pattern)}):
        for i, line in enumerate(_without_marked(path.read_text()).splitlines()):
            out += [f"{path.relative_to(root)}:{i + 1}: {m[0]!r}" for m in FIGURE.finditer(line)]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specsim.figures.numbers", description=__doc__.split("\n\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true",
                      help="exit 1 if a marked figure or record table is stale, or a figure is unmarked")
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
    problems = stale() + [f"{u}: a figure outside any marker" for u in unmarked()]
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
