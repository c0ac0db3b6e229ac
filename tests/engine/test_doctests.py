"""The engine's docstring examples run (they are its worked examples)."""

import doctest
import importlib

import pytest

MODULES = ["specsim.engine.models", "specsim.engine.kv", "specsim.engine.rng", "specsim.engine.state",
           "specsim.engine.scheduler", "specsim.engine.proposers.base", "specsim.engine.proposers.law",
           "specsim.engine.proposers.draft_model", "specsim.engine.proposers.ngram", "specsim.engine.proposers.universal",
           "specsim.engine.proposers.ptd", "specsim.engine.proposers.factory", "specsim.engine.proposers.tree",
           "specsim.engine.tree_loop", "specsim.engine.metrics",
           "specsim.engine.engine", "specsim.engine.workload", "specsim.engine.sampling"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0
