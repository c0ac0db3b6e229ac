"""Frozen cases and exact laws: the chain's L3 cases (``chain``), the edge laws (``edges``), tree cases and tree
pattern cases (``trees``, ``tree_patterns``), the declared-limit cases (``declared``) and the tree batches the
size checks assemble (``tree_assembly``). Add a case to a table here and the run-wide statistical plan
budgets it.

It imports only ``core`` of the conformance suite.
"""

_ROOM = {"chain", "declared", "edges", "tree_assembly", "tree_patterns", "trees"}


def __getattr__(name: str):
    # ``specsim.conformance.cases`` was the chain's case module before it became this room: its names still
    # resolve, with a warning, for one release.
    if name in _ROOM or name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings
    chain = importlib.import_module(f"{__name__}.chain")
    if not hasattr(chain, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} moved to {__name__}.chain.{name}; the old path is removed in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(chain, name)
