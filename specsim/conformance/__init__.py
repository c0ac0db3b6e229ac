"""The conformance suite: which observations a run makes and what they add up to, in rooms that import only
downward: ``run → verdict → checks → stats → cases → core`` (``proposer`` apart).

- ``core``: the vocabulary every check speaks (``CheckResult``, ``Context``, calls judged against a device's
  declaration, the L1 judge, the scope recorder, ``BlackBox``).
- ``cases``: frozen cases and exact laws; add a case to a table and the run-wide plan budgets it.
- ``stats``: the run-wide statistical plan (the false-fail budget split over every test), shards, tallies,
  per-case verdicts.
- ``checks``: the groups, by specification area (``chain``, ``sampler``, ``trees``, ``interface``,
  ``declared``); areas never import each other, except ``sampler → chain``.
- ``verdict``: SPEC §10's verdict (``profiles``) and a vendor's waivers.
- ``run``: the group registry, in-process and isolated runs, ``conformance.json``, ``specsim replay``'s
  one check.
- ``proposer``: the drafter suite (``specsim proposer``), standing apart.

The vendor API is importable from here: ``run_conformance``, ``verdict_of``, ``Context``, ``CheckResult``,
``GROUPS``, ``BlackBox``. Single observations are judged by ``specsim.judge``.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

_VENDOR_API = {"run_conformance": "specsim.conformance.run.runner", "verdict_of": "specsim.conformance.run.runner",
               "GROUPS": "specsim.conformance.run.runner", "Context": "specsim.conformance.core.context",
               "CheckResult": "specsim.conformance.core.results", "BlackBox": "specsim.conformance.core.black_box"}
__all__ = sorted(_VENDOR_API)


def __getattr__(name: str):
    # Lazily: the runner imports every room below it, and a room's own import of this package must stay
    # cheap and free of circles.
    if name in _VENDOR_API:
        return getattr(importlib.import_module(_VENDOR_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MOVED = {
    "results": "core.results",
    "_common": "core.calls",
    "l1_judge": "core.l1_judge",
    "black_box": "core.black_box",
    "scope": "core.scope",
    "spec_versions": "core.spec_versions",
    "edge_laws": "cases.edges",
    "tree_cases": "cases.trees",
    "tree_pattern_cases": "cases.tree_patterns",
    "declared_cases": "cases.declared",
    "stat_plan": ("stats.plan", "stats.l3_design", "stats.alpha"),
    "shards": "stats.shards",
    "tally": "stats.tally",
    "verdicts": "stats.verdicts",
    "exact": ("checks.chain.exact", "run.one_check"),
    "sizes": "checks.chain.sizes",
    "volume": ("checks.chain.volume", "checks.sampler.precision"),
    "rng_contracts": "checks.chain.rng",
    "statistical": "checks.chain.statistical",
    "long_run": "checks.chain.long_run",
    "sampler": "checks.sampler.group",
    "trees": ("checks.trees.l1", "checks.trees.l2"),
    "tree_patterns": "checks.trees.patterns",
    "tree_sizes": "checks.trees.sizes",
    "tree_statistics": "checks.trees.statistical",
    "input_rules": "checks.interface.input_rules",
    "capabilities": "checks.interface.capabilities",
    "declared": "checks.declared.group",
    "profiles": "verdict.profiles",
    "waivers": "verdict.waivers",
    "vendor_waivers": "verdict.conform_waivers",
    "runner": ("run.runner", "run.document", "run.files"),
    "isolation": "run.isolation",
    "progress": "run.progress",
    "proposers": "proposer.proposers",
}
"""The flat layout's modules (``specsim.conformance.<old>``) → their rooms. Importing an old path still works
for one release, with a ``DeprecationWarning`` naming the new one; it is removed in the next release. A module
that was split names its pieces: the old path is a view whose names resolve through them, in order. (The old
``specsim.conformance.cases`` is now the ``cases`` room: its names resolve through ``cases.chain``.)"""


class _SplitModule(types.ModuleType):
    """An old module that became several: each name from the first piece that has it."""

    def __init__(self, name: str, pieces: list):
        super().__init__(name)
        self._pieces = pieces

    def __getattr__(self, name: str):
        for piece in self._pieces:
            if hasattr(piece, name):
                return getattr(piece, name)
        raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: tuple[str, ...]):
        self.new = new

    def create_module(self, spec):
        pieces = [importlib.import_module(n) for n in self.new]
        if len(pieces) > 1:
            self._spec = spec
            return _SplitModule(spec.name, pieces)
        self._spec = pieces[0].__spec__
        return pieces[0]

    def exec_module(self, module):
        # The import system stamps the old name's spec on the module it was handed; a moved module is the
        # new one, already run, and keeps its own.
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        prefix, _, old = fullname.rpartition(".")
        if prefix != __name__ or old not in MOVED:
            return None
        target = MOVED[old]
        new = tuple(f"{__name__}.{t}" for t in ((target,) if isinstance(target, str) else target))
        warnings.warn(f"{fullname} moved to {' and '.join(new)}; the old path is removed in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new))


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
