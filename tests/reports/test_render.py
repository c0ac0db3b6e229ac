"""Reports: what report.md/html/json contain, in the seeds' shapes, escaped, and without matplotlib."""

from __future__ import annotations

import base64
import json
import re
import types

import pytest

from reports import load_inputs, plots, render_directory
from reports.render import build
from specsim.commands import report as report_cmd
from tests.reports.sample_inputs import HOSTILE, write_inputs


@pytest.fixture(scope="module")
def rendered(rendered_report):
    return rendered_report


def test_inputs_are_classified_by_content(rendered):
    inputs = load_inputs([rendered.root])
    assert len(inputs.conformance) == 2 and len(inputs.mutants) == 1 and len(inputs.simulations) == 2


def test_markdown_has_the_seed_shaped_tables(rendered):
    md = rendered.md
    assert "| Temperature | AL w/o probs | AL w/ probs |" in md  # seed 003
    assert "| 1 | 2.09 | 2.21 |" in md
    assert "acc_counts: [3331, 1200]\nacc_rate: 0.2539" in md  # seed 000's print
    assert "| run | pos 1 | pos 2 | mean AL |" in md  # per-position acceptance
    assert "| eagle-k2 | 0.374 | 0.135 | 1.51 |" in md
    assert "| Mutants" not in md and "### Mutants" in md and "1 of 2 mutants killed." in md


def test_markdown_and_json_say_what_was_run(rendered):
    md = rendered.md
    for needle in ("## What was run", "suite seed", "α family budget", "0.001", "n = 1000 … 2000", "x86_64"):
        assert needle in md
    j = rendered.json
    assert j["kind"] == "specsim.report" and len(j["conformance"]) == 2 and j["mutants"][0]["records"]
    assert {t["title"] for t in j["tables"]} >= {"Conformance summary", "AL by temperature", "Mutants"}


def test_failures_are_listed_with_their_detail(rendered):
    assert "Failed and errored checks" in rendered.md
    assert "L1/injected/full/case-1" in rendered.md and "L1-keyed/crashed" in rendered.md
    assert "acme-npu" in rendered.md and "FAIL" in rendered.md


def test_input_text_is_escaped(rendered):
    for text in (rendered.html, rendered.md):
        assert "<script" not in text.lower()
        assert "<img src=x" not in text
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt;" in rendered.html
    assert HOSTILE not in rendered.md and "&lt;script&gt;" in rendered.md
    # a pipe in input text does not split a Markdown table row
    row = next(line for line in rendered.md.splitlines() if "residual-not-clamped" in line)
    assert "\\|x" in row


@pytest.mark.skipif(not plots.available()[0], reason="matplotlib not installed")
def test_html_is_self_contained_with_every_figure(rendered):
    html = rendered.html
    srcs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    keys = {f["key"] for f in rendered.json["figures"]}
    assert keys == {"matrix", "pvalues", "dist-tokens", "dist-num_accepted", "acceptance", "temperature"}
    assert len(srcs) == len(keys)
    for src in srcs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1])
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert width > 300 and height > 200
    assert not re.search(r'(src|href)="(https?:|//)', html)
    assert "Content-Security-Policy" in html and "<link" not in html


def test_without_matplotlib_md_and_json_are_still_written(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "available", lambda: (False, "matplotlib is not available (test)"))
    root = write_inputs(tmp_path / "in")
    written = render_directory([root], str(tmp_path / "out"))
    assert any("matplotlib is not available" in n for n in written["notes"])
    assert written["figures"] == 0
    for name in ("report.md", "report.json", "report.html"):
        assert (tmp_path / "out" / name).stat().st_size > 0
    assert "matplotlib is not available" in (tmp_path / "out" / "report.md").read_text()


def test_gaps_are_noted(tmp_path):
    root = write_inputs(tmp_path / "in", with_sims=False)
    notes = build(load_inputs([root]), with_plots=False)["notes"]
    assert any("no simulation JSON" in n for n in notes)


def test_report_command(tmp_path, capsys):
    root = write_inputs(tmp_path / "in")
    args = types.SimpleNamespace(inputs=[root], out=str(tmp_path / "out"), no_plots=True)
    assert report_cmd.run(args) == 0
    assert (tmp_path / "out" / "report.md").exists()
    assert report_cmd.run(types.SimpleNamespace(inputs=[str(tmp_path / "nope")], out=None, no_plots=True)) == 2
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "junk.json").write_text("{not json")
    assert report_cmd.run(types.SimpleNamespace(inputs=[str(tmp_path / "empty")], out=None, no_plots=True)) == 2
    assert "not readable JSON" in capsys.readouterr().err


def test_unknown_and_partial_shapes_are_read_defensively(tmp_path):
    (tmp_path / "m.json").write_text(json.dumps({"mutants": {"m1": {"killed": True, "weird": [1, 2]}}}))
    (tmp_path / "s.json").write_text(json.dumps({"temperature_sweep": {"temperature": [0, 1],
                                                                       "al_without_probs": [2.0, 1.5],
                                                                       "al_with_probs": [2.0, 1.8]}}))
    (tmp_path / "c.json").write_text(json.dumps({"schema_version": 1, "checks": [{"name": "x", "status": "odd"}, 3]}))
    report = build(load_inputs([str(tmp_path)]), with_plots=False)
    from reports import markdown
    md = markdown.render(report)
    assert "| 1 | 1.5 | 1.8 |" in md and "m1" in md and "| x |" in md


def test_specsim_mutants_document_shape(tmp_path):
    """``specsim mutants --out`` writes {"mutants": [...], "black_box": [...], ...} with the killer as a check."""
    doc = {"seed": 0, "alpha_family": 1e-3, "quick": True, "base": "torch",
           "mutants": [{"name": "residual-unclamped", "bug": "max(0, t - d) missing", "models": "vLLM #1",
                        "killed": True, "killer": {"name": "L1/injected/full/case-3", "layer": "L1",
                                                   "status": "fail"},
                        "evidence": "token 3 != 4", "groups_run": ["L1-injected"], "seconds": 0.5}],
           "black_box": [{"name": "residual-unclamped", "bug": "b", "models": "m", "killed": True,
                          "killer": {"name": "L3/v8-hetero/r0/pos0", "status": "fail", "p_value": 1e-12},
                          "evidence": "p=1e-12"}],
           "correct_devices": [{"name": "torch", "killed": False, "counts": {"pass": 3}}]}
    (tmp_path / "mutants.json").write_text(json.dumps(doc))
    from reports import markdown
    md = markdown.render(build(load_inputs([str(tmp_path)]), with_plots=False))
    assert "| residual-unclamped | max(0, t - d) missing | vLLM #1 | yes | L1/injected/full/case-3 |" in md
    assert "residual-unclamped [black box]" in md and "1e-12" in md and "2 of 2 mutants killed." in md


def test_markdown_fits_a_pull_request_comment(tmp_path):
    from reports import markdown
    from tests.reports.sample_inputs import conformance_doc
    doc = conformance_doc("torch")
    doc["checks"] = [{"name": f"L1/injected/case-{i}", "layer": "L1", "status": "pass", "detail": "x" * 80}
                     for i in range(2000)]
    (tmp_path / "conformance.json").write_text(json.dumps(doc))
    md = markdown.render(build(load_inputs([str(tmp_path)]), with_plots=False))
    assert len(md) < markdown.GITHUB_COMMENT_LIMIT and "left out to fit a pull-request comment" in md
