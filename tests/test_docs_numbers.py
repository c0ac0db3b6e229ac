"""Figures in the docs cannot drift: every marked figure equals what its command computes now, every
record table is its record rendered, and no figure stands outside a marker."""

from __future__ import annotations

import json

import pytest

from specsim.figures import numbers as docs_numbers
from specsim.figures import records


def test_every_marked_figure_and_record_table_in_the_docs_is_current():
    stale = docs_numbers.stale()
    assert not stale, "stale figures (python -m specsim.figures.numbers --write):\n" + "\n".join(stale)


def test_no_figure_in_the_docs_stands_outside_a_marker():
    loose = docs_numbers.unmarked()
    assert not loose, ("figures without a marker (a NUMBERS entry or a record of the command that measured "
                       "them), or to be removed:\n" + "\n".join(loose))


def test_every_record_names_command_hardware_versions_and_date():
    for path in sorted(records.RESULTS.glob("*.json")):
        records.load(path.stem)


def _docs(tmp_path, text: str, record: dict | None = None):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "x.md").write_text(text)
    if record is not None:
        (tmp_path / "docs" / "results" / "r.json").write_text(json.dumps(record))


RECORD = {"command": "specsim bench", "hardware": "NVIDIA H100", "versions": {"torch": "2.11"}, "date": "2026-11-26",
          "tables": {"t": {"columns": ["what", "ms"], "rows": [["plain", "0.331"]]}}, "values": {"plain": "0.331"}}


def test_a_stale_figure_is_named_with_its_file_line_and_value_now(tmp_path):
    _docs(tmp_path, "a\nthe <!-- specsim:edges -->3<!-- /specsim --> edges\n")
    from specsim.testing.edges import EDGES
    assert docs_numbers.stale(tmp_path) == [f"docs/x.md:2: edges is '3', now '{len(EDGES)}'"]


def test_a_record_table_and_value_are_rendered_from_the_record_and_their_drift_is_caught(tmp_path):
    _docs(tmp_path, "<!-- specsim:table r/t -->\nold\n<!-- /specsim:table -->\n"
                    "plain took <!-- specsim:results:r/plain -->0.4<!-- /specsim --> ms\n", RECORD)
    assert docs_numbers.stale(tmp_path) == ["docs/x.md:1: table r/t differs from its record",
                                            "docs/x.md:4: results:r/plain is '0.4', now '0.331'"]
    rendered = docs_numbers.render((tmp_path / "docs" / "x.md").read_text(), results=tmp_path / "docs" / "results")
    assert "| plain | 0.331 |" in rendered and "Measured with `specsim bench` on NVIDIA H100 (torch 2.11)" in rendered
    (tmp_path / "docs" / "x.md").write_text(rendered)
    assert docs_numbers.stale(tmp_path) == [] and docs_numbers.unmarked(tmp_path) == []


def test_a_missing_record_is_named(tmp_path):
    _docs(tmp_path, "<!-- specsim:table gone/t -->\n\n<!-- /specsim:table -->\n")
    (line,) = docs_numbers.stale(tmp_path)
    assert line.startswith("docs/x.md:1: record 'gone'") and "does not exist" in line


@pytest.mark.parametrize("text,figure", [("took 4.2 ms on an H100", "4.2 ms"), ("92% of the floor", "92%"),
                                         ("1539 passed", "1539 passed"), ("3.1× faster", "3.1×"),
                                         ("KS p 0.72", "KS p 0.72"), ("at 3.35 TB/s", "3.35 TB/s")])
def test_a_figure_outside_a_marker_is_found(tmp_path, text, figure):
    _docs(tmp_path, f"intro\n{text}\n`9 ms` in code is fine\n```\n5 ms in a block too\n```\n")
    assert docs_numbers.unmarked(tmp_path) == [f"docs/x.md:2: {figure!r}"]
