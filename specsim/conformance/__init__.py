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
    "stat_plan": "stats.plan",
    "shards": "stats.shards",
    "tally": "stats.tally",
    "verdicts": "stats.verdicts",
    "exact": "checks.chain.exact",
    "sizes": "checks.chain.sizes",
    "volume": "checks.chain.volume",
    "rng_contracts": "checks.chain.rng",
    "statistical": "checks.chain.statistical",
    "long_run": "checks.chain.long_run",
    "sampler": "checks.sampler.group",
    "trees": "checks.trees.groups",
    "tree_patterns": "checks.trees.patterns",
    "tree_sizes": "checks.trees.sizes",
    "tree_statistics": "checks.trees.statistical",
    "input_rules": "checks.interface.input_rules",
    "capabilities": "checks.interface.capabilities",
    "declared": "checks.declared.group",
    "profiles": "verdict.profiles",
    "waivers": "verdict.waivers",
    "vendor_waivers": "verdict.conform_waivers",
    "runner": "run.runner",
    "isolation": "run.isolation",
    "progress": "run.progress",
    "proposers": "proposer.proposers",
}
"""The flat layout's modules (``specsim.conformance.<old>``) → their rooms. Importing an old path still works
for one release, with a ``DeprecationWarning`` naming the new one; it is removed in the next release. (The
old ``specsim.conformance.cases`` is now the ``cases`` room: its names resolve through ``cases.chain``.)"""


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module):
        # The import system stamps the old name's spec on the module it was handed; the module is the new
        # one, already run, and keeps its own.
        module.__spec__ = self._spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        prefix, _, old = fullname.rpartition(".")
        if prefix != __name__ or old not in MOVED:
            return None
        new = f"{__name__}.{MOVED[old]}"
        warnings.warn(f"{fullname} moved to {new}; the old path is removed in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new))


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())
