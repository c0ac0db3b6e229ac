"""One rendered report (two devices, one broken, hostile text) shared by the render and browser tests."""

from __future__ import annotations

import json
import types

import pytest

from reports import render_directory
from tests.reports.sample_inputs import write_inputs


@pytest.fixture(scope="session")
def rendered_report(tmp_path_factory):
    root = write_inputs(tmp_path_factory.mktemp("in"), devices=("torch", "acme-npu"), broken=("acme-npu",))
    out = tmp_path_factory.mktemp("out")
    written = render_directory([root], str(out))
    return types.SimpleNamespace(root=root, out=out, written=written,
                                 html=(out / "report.html").read_text(), md=(out / "report.md").read_text(),
                                 json=json.loads((out / "report.json").read_text()))
