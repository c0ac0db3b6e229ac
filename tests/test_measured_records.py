"""The commands that measure what the docs show write it as a record (``--record FILE``): the command as
typed, the CPU, the versions and the tables, which ``specsim.figures.numbers`` renders into the docs."""

from __future__ import annotations

import platform

import pytest

from specsim.cli import main
from specsim.figures.records import cpu_name
from specsim.figures import numbers as docs_numbers
from specsim.figures import records


def _record(path):
    record = records.load(path.stem, path.parent)
    assert record["hardware"].endswith(" cores") and record["versions"]["python"] == platform.python_version()
    assert {"torch", "numpy"} <= set(record["versions"])
    return record


@pytest.mark.whole_run
def test_the_seed_table_writes_its_summary_as_a_record(tmp_path, capsys, monkeypatch):
    path = tmp_path / "seeds-x.json"
    argv = ["mutants", "--seeds", "2", "--first-seed", "7", "--only", "sampler-min-p-before-temperature", "--quick",
            "--record", str(path)]
    monkeypatch.setattr("sys.argv", ["specsim", *argv])   # the command as typed, which the record keeps
    rc, out = main(argv), capsys.readouterr().out
    assert rc == 0, out
    # the printed table counts its seeds from --first-seed
    assert "| mutant | kind | mode | groups | 7 | 8 |" in out
    assert "| sampler-min-p-before-temperature | sampler | injected | L1-sampler | " \
           "edge/min-p-after-temperature/canonical | edge/min-p-after-temperature/canonical |" in out
    record = _record(path)
    assert record["command"] == "specsim " + " ".join(argv)
    summary = record["tables"]["summary"]
    assert summary["columns"] == ["mutant", "mode", "suite seeds", "by"]
    assert summary["rows"][0] == ["sampler-min-p-before-temperature", "injected", "killed 2/2",
                                  "`edge/min-p-after-temperature/canonical`"]
    assert summary["rows"][1][:3] == ["correct torch", "injected", summary["rows"][1][2]]
    assert summary["rows"][1][2].startswith("passes 2/2 (")
    assert record["values"]["seeds"] == "7–8" and record["values"]["survivors"] == "0"
    rendered = docs_numbers.render("<!-- specsim:table seeds-x/summary -->\n<!-- /specsim:table -->\n"
                                   "<!-- specsim:results:seeds-x/killed -->?<!-- /specsim -->", results=tmp_path)
    assert "| sampler-min-p-before-temperature | injected | killed 2/2 |" in rendered
    assert "<!-- specsim:results:seeds-x/killed -->2<!-- /specsim -->" in rendered


def test_record_goes_with_seeds_only(tmp_path, capsys):
    assert main(["mutants", "--only", "tree-sibling-order", "--record", str(tmp_path / "r.json")]) == 2
    assert "--record apply to --seeds only" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_group_calibration_writes_its_groups_and_ks_tables_as_a_record(tmp_path, capsys):
    path = tmp_path / "calibrate-x.json"
    assert main(["calibrate", "--groups", "L3-trees", "--seeds", "1", "--first-seed", "3", "--quick",
                 "--modes", "black-box", "--record", str(path)]) == 0, capsys.readouterr().out
    record = _record(path)
    (row,) = record["tables"]["groups"]["rows"]
    assert row[:2] == ["L3-trees", "black-box"] and row[-1] == "0 of 1 seeds" and int(row[2]) > 0
    (ks,) = record["tables"]["ks"]["rows"]
    assert ks[0] == "black-box" and int(ks[1]) > 0 and 0 <= float(ks[3]) <= 1
    assert record["values"]["exact-false-fails"] == "0" and record["values"]["first-seed"] == "3"


def test_l3_calibration_writes_its_ks_table_as_a_record(tmp_path, capsys):
    path = tmp_path / "calibrate-l3.json"
    assert main(["calibrate", "--seeds", "2", "--quick", "--cases", "v8-hetero", "--record", str(path)]) == 0, \
        capsys.readouterr().out
    record = _record(path)
    (row,) = record["tables"]["ks"]["rows"]
    assert row[0] == "2" and int(row[1]) == int(record["values"]["p-values"]) > 0
    assert record["values"]["failing-checks"] == "0"


def test_the_cpu_is_named_by_its_model_and_cores():
    assert cpu_name("processor\t: 0\nmodel name\t: Acme Z9 @ 3.0GHz\nflags\t: x\n").startswith("Acme Z9 @ 3.0GHz, ")
    assert cpu_name("").endswith(" cores")


def test_the_sampler_seed_tool_writes_its_mutant_and_precision_tables_as_a_record(tmp_path, capsys):
    import importlib.util
    from pathlib import Path
    spec = importlib.util.spec_from_file_location(
        "sampler_seed_table", Path(__file__).resolve().parents[1] / "tools" / "sampler_seed_table.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    path = tmp_path / "sampler-x.json"
    assert tool.main(["--seeds", "0-0", "--quick", "--no-correct", "--only", "sampler-penalties-fp16",
                      "--record", str(path)]) == 0, capsys.readouterr().out
    record = _record(path)
    assert record["command"].startswith("python tools/sampler_seed_table.py")
    assert record["tables"]["mutants"]["rows"] == [["`sampler-penalties-fp16`", "`precision`", "1/1", "—"]]
    ((device, decisions, beyond, runs),) = record["tables"]["precision"]["rows"]
    assert device == "`sampler-penalties-fp16`" and int(beyond) > 0 and runs == "1 of 1"
