"""A field proposer's row of the field table: its ``specsim proposer`` checks as the group ``proposer``, sorted by
the shipped waiver files as a device's checks are (no optional dependency: a recorded result is folded in)."""

from __future__ import annotations

import json

from specsim.commands import field as field_command
from specsim.field import table as field

NAME = "transformers-gemma4-assistant"


def _result(engine="transformers 5.23.0"):
    laws = [{"check": f"law/position-{j}", "case": "T1", "status": "fail", "detail": f"measured {0.79 - j / 10}"}
            for j in range(3)]
    return {"proposer": "p", "suite_seed": 0, "samples": 10_000, "engine": engine,
            "command": f"specsim proposer {NAME} --samples 10000 --json FILE",
            "checks": [{"check": "design", "case": "T1", "status": "pass", "detail": ""}, *laws,
                       {"check": "greedy-argmax", "case": "greedy", "status": "pass", "detail": ""},
                       {"check": "brand-new", "case": "T1", "status": "fail", "detail": "other"}]}


def test_the_argmax_drafters_law_failures_are_its_judged_loss_of_losslessness():
    entry = field.proposer_entry(NAME, _result(), "transformers 5.23.0", "CPU", "specsim proposer ...", False)
    by_check = {f["check"]: f for f in entry["findings"]}
    assert sorted(by_check) == ["proposer/T1/brand-new", *(f"proposer/T1/law/position-{j}" for j in range(3))]
    law = by_check["proposer/T1/law/position-0"]
    assert (law["deviation"], law["judgement"], law["standing"]) == ("argmax-drafts-raw-q", "loss of losslessness",
                                                                     field.WAIVED)
    assert by_check["proposer/T1/brand-new"]["standing"] == field.NEW
    assert entry["groups"]["proposer"] == {"pass": 2, "fail": 4, "not_supported": 0, "error": 0, "waived": 3,
                                           "judged_elsewhere": 0}
    repro = field.Finding(**law).reproduction(quick=False)
    assert repro.startswith(f"specsim proposer {NAME} --cases T1 --seed 0"), repro


def test_on_another_release_the_judgement_is_not_carried_over():
    entry = field.proposer_entry(NAME, _result(), "transformers 5.24.0", "CPU", "c", False)
    law = next(f for f in entry["findings"] if f["check"] == "proposer/T1/law/position-0")
    assert law["standing"] == field.JUDGED_ELSEWHERE


def test_a_recorded_result_is_folded_into_the_table(tmp_path):
    recorded = tmp_path / "proposer.json"
    recorded.write_text(json.dumps(_result()))

    class Args:
        out, merge, render_only, extra, rewaive, devices, groups, quick = str(tmp_path / "out"), [], False, [], False, \
            None, None, False
        proposers, proposer_results, where, no_repro_run = [], [f"{NAME}={recorded}"], "CPU", True
    assert field_command.run(Args) == 1                 # the unjudged 'brand-new' check: exit 1
    text = (tmp_path / "out" / "field.md").read_text()
    assert f"| transformers 5.23.0 (`{NAME}`) | CPU | proposer | FAIL (1 new) | 2 | 4 | 0 | 0 |" in text
    assert f"### `argmax-drafts-raw-q` on `{NAME}` — loss of losslessness (judged on transformers 5.23.0)" in text
    assert (tmp_path / "out" / "upstream" / "transformers-argmax-drafts-raw-q.md").is_file()


def test_a_recorded_result_without_its_engine_is_refused(tmp_path, capsys):
    recorded = tmp_path / "proposer.json"
    recorded.write_text(json.dumps(_result(engine=None)))

    class Args:
        out, merge, render_only, extra, rewaive, devices, groups, quick = str(tmp_path / "out"), [], False, [], False, \
            None, None, False
        proposers, proposer_results, where, no_repro_run = [], [f"{NAME}={recorded}"], "CPU", True
    assert field_command.run(Args) == 2
    assert "names no engine" in capsys.readouterr().out


def test_an_unknown_field_proposer_is_refused_by_name(tmp_path, capsys):
    class Args:
        out, merge, render_only, extra, rewaive, devices, groups, quick = str(tmp_path / "out"), [], False, [], False, \
            None, None, True
        proposers, proposer_results, where, no_repro_run = ["draft_model"], [], "CPU", True
    assert field_command.run(Args) == 2
    assert "--proposers: 'draft_model' is not a field proposer" in capsys.readouterr().out
