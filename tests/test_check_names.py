"""Group names, check names and ``conformance.json``'s keys are a schema: reports, waiver files and vendors'
CI key on them, so they change only on purpose.

``tests/data/conformance_check_names.json`` holds them as ``specsim conform --device torch`` writes them, full
and ``--quick``. A quick in-process run is held to the quick names here; the full names are held against the
README's first command's ``conformance.json`` where CI has run it (``SPECSIM_FIRST_RUN_OUT``, set by
``.ci/run``). A deliberate rename updates the file in the same change.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.quick_runs import quick_group

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = json.loads((ROOT / "tests" / "data" / "conformance_check_names.json").read_text())


def _difference(got: list[str], want: list[str]) -> str:
    return f"new: {sorted(set(got) - set(want))[:20]}; gone: {sorted(set(want) - set(got))[:20]}"


def test_the_groups_are_the_recorded_ones_in_their_order():
    from specsim.conformance import GROUPS
    assert list(GROUPS) == GOLDEN["groups"]


@pytest.mark.whole_run
def test_a_quick_run_names_its_checks_as_recorded():
    """The quick names, and each check's name mapping back to its group (``seedtable.group_of``: how a mutant's
    ``killed_by`` picks the group that judges it; the black-box run's in ``tests/stats/test_seedtable.py``)."""
    from devices.registry import load
    from specsim.conformance import Context
    from specsim.conformance.run.runner import available_groups
    from specsim.conformance.run.document import document
    from specsim.mutants.seedtable import group_of
    ctx = Context(quick=True)
    device = load("torch")
    by_group = {group: quick_group(group) for group in available_groups()}   # run_conformance's, group by group
    results = [r for rs in by_group.values() for r in rs]
    names = sorted(r.name for r in results)
    assert names == GOLDEN["quick"], _difference(names, GOLDEN["quick"])
    elsewhere = {r.name: group_of(r.name) for g, rs in by_group.items() if g != "L3-statistical" for r in rs
                 if group_of(r.name) != g}
    assert elsewhere == {}
    doc = document("torch", device, ctx, results)
    assert sorted(doc) == sorted(set(GOLDEN["document_keys"]) - {"run"})   # "run" is the isolated runner's
    assert {k for c in doc["checks"] for k in c} <= set(GOLDEN["check_keys"])


def test_the_first_run_names_its_checks_as_recorded():
    out = os.environ.get("SPECSIM_FIRST_RUN_OUT")
    if not out:
        pytest.skip("SPECSIM_FIRST_RUN_OUT is not set: .ci/run sets it to the README's first command's output "
                    "directory, whose conformance.json this test compares with the recorded check names")
    doc = json.loads((pathlib.Path(out) / "conformance.json").read_text())
    names = sorted(c["name"] for c in doc["checks"])
    assert names == GOLDEN["full"], _difference(names, GOLDEN["full"])
    assert sorted(doc) == GOLDEN["document_keys"]
    assert {k for c in doc["checks"] for k in c} == set(GOLDEN["check_keys"])
