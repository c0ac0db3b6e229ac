"""Docs numbers cannot drift (issue 16.7): every marked figure equals what its command computes now."""

from __future__ import annotations

from specsim.figures import numbers as docs_numbers


def test_every_marked_figure_in_the_docs_is_current():
    stale = docs_numbers.stale()
    assert not stale, "stale figures (python -m specsim.figures.numbers --write):\n" + "\n".join(stale)


def test_every_measured_figure_names_its_command():
    assert not docs_numbers.check_measured()


def test_a_stale_figure_is_named_with_its_file_line_and_value_now(tmp_path, monkeypatch):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text("a\nthe <!-- specsim:edges -->3<!-- /specsim --> edges\n"
                                            "took 4 s <!-- specsim:measured -->\n")
    from specsim.testing.edges import EDGES
    assert docs_numbers.stale(tmp_path) == [f"docs/x.md:2: edges is '3', now '{len(EDGES)}'"]
    assert docs_numbers.check_measured(tmp_path) == ["docs/x.md:3: a measured figure without the command that gave it"]
