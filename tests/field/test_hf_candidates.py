"""transformers 5.23.0's AssistedCandidateGenerator through ``specsim proposer`` (proposer conformance).

What the check finds (docs/field-results/transformers-proposer.md): the drafts
follow the q handed to the verifier (lossless), but that q applies the
request's warpers twice — ``declared-sampling`` fails at T != 1 and with top-p,
exactly; the standalone reproduction shows where. Small here (200 calls, two
cases: ~3 s); ``specsim proposer transformers-assisted`` is the recorded run.
"""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("transformers")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
need("transformers")

from specsim.engine.proposers.checked import load  # noqa: E402
from specsim.conformance.proposer.proposers import check  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return check(load("transformers-assisted"), samples=200, only=("T0.7", "greedy"))


def test_the_drafts_follow_the_q_it_reports(result):
    laws = [c for c in result["checks"] if c["check"].startswith("law/")]
    assert laws and all(c["status"] == "pass" for c in laws), laws
    greedy = [c for c in result["checks"] if c["check"] == "greedy-argmax"]
    assert [c["status"] for c in greedy] == ["pass"]


def test_its_q_applies_the_temperature_twice(result):
    declared = next(c for c in result["checks"] if c["check"] == "declared-sampling")
    assert declared["status"] == "fail" and declared["tv"] > 0.05, declared


def test_the_standalone_reproduction_shows_the_warpers_twice(capsys):
    import devices.field.repro as repro
    path = pathlib.Path(repro.__file__).parent / "transformers_assistant_warpers_twice.py"
    spec = importlib.util.spec_from_file_location("transformers_assistant_warpers_twice", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main() == 1
    assert capsys.readouterr().out.count("q == warpers twice") == 2
