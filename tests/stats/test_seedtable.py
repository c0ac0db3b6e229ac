"""The seed × mutant table (``specsim mutants --seeds``): every mutant judged at every suite seed by the
groups that can kill it, the correct device alongside; a survivor, a false fail or a crash fails the run."""

from __future__ import annotations

import argparse
import json

import pytest

from specsim.cli import main
from specsim.conformance.run.runner import GROUPS
from specsim.mutants import seedtable as st
from specsim.mutants.zoo import MUTANTS
from tests.quick_runs import quick_group


@pytest.mark.parametrize("group", [g for g in GROUPS if g != "L3-statistical"])
def test_every_groups_black_box_checks_map_back_to_it(group):
    """``group_of`` is how a mutant's ``killed_by`` picks the group that judges it: a check whose name
    maps elsewhere would leave its mutant judged by a group that never runs that check. The black-box twin's
    checks here; the torch device's in ``tests/test_check_names.py``'s quick run."""
    names = {r.name for r in quick_group(group, black_box=True)}
    assert names
    assert {n: st.group_of(n) for n in names if st.group_of(n) != group} == {}


def test_l3_statistical_check_names_map_to_it():
    from specsim.conformance.cases.chain import CASES
    from specsim.conformance.stats.l3_design import check_names
    names = [n for c in CASES for n in check_names(c)]
    assert names and {st.group_of(n) for n in names} == {"L3-statistical"}


def test_every_zoo_mutant_has_a_kind_and_a_judging_group_in_both_modes():
    """Each mutant's ``killed_by`` names a group (with injected noise, that group alone), its black-box
    twin has stand-ins, and it sits in one of ``ZOO_KINDS``' lists (a new list needs a kind here)."""
    for m in MUTANTS.values():
        injected, black = st.killing_groups(m.killed_by, False), st.killing_groups(m.killed_by, True)
        assert injected == (st.group_of(m.killed_by),) and injected[0] in GROUPS, m.id
        assert black and set(black) <= set(GROUPS), m.id
        assert st.zoo_kind(m.id) in st.ZOO_KINDS, m.id
    assert st.killing_groups("no-such-group/x", False) is None                 # unknown: every group
    assert st.killing_groups("L1/trees/injected/rrs", True, hunt="all") is None


def test_kinds_selects_the_zoo_lists_and_leaves_other_families_out():
    from specsim.commands.mutants import mutant_kinds
    from specsim.mutants import zoo
    families = {"device": list(MUTANTS), "proposer": ["q-before-processors"]}
    got = mutant_kinds(argparse.Namespace(kinds="tree,sampler", families=None), families)
    assert got == {"device": [i for i in MUTANTS if i in {m.id for m in zoo.TREE + zoo.SAMPLER}]}
    assert "proposer" in mutant_kinds(argparse.Namespace(kinds="tree", families="device,proposer"), families)
    assert "unknown" in mutant_kinds(argparse.Namespace(kinds="trees", families=None), families)


@pytest.mark.whole_run
def test_seed_table_kills_every_mutant_at_every_seed_and_the_correct_device_passes(tmp_path, capsys):
    """Two tree mutants and their black-box twins at suite seeds 0 and 1 (quick sizes, in process)."""
    rc = main(["mutants", "--seeds", "0-1", "--only", "tree-sibling-order,tree-thresholds-relaxed", "--black-box",
               "--quick", "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().out
    doc = json.loads((tmp_path / "seedtable.json").read_text())
    assert doc["seeds"] == [0, 1] and not doc["survivors"] and not doc["false_fails"] and not doc["crashed"]
    rows = {(r["mutant"], r["mode"]): r for r in doc["rows"]}
    assert set(rows) == {(m, mode) for m in ("tree-sibling-order", "tree-thresholds-relaxed")
                         for mode in ("injected", "black box")}
    assert rows["tree-sibling-order", "injected"]["groups"] == ["L1-trees"]
    assert rows["tree-sibling-order", "black box"]["groups"] == ["L1-trees", "L2-trees", "L3-trees"]
    for (mutant, mode), r in rows.items():
        assert [c["seed"] for c in r["cells"]] == [0, 1] and r["zoo_kind"] == "tree"
        assert all(c["check"].startswith(MUTANTS[mutant].killed_by if mode == "injected" else "L")
                   for c in r["cells"]), r
    correct = {r["mode"]: r for r in doc["correct"]}
    assert set(correct) == {"injected", "black box"} and correct["black box"]["groups"] == ["L1-trees", "L2-trees", "L3-trees"]
    assert all("check" not in c for r in correct.values() for c in r["cells"])
    table = (tmp_path / "seedtable.md").read_text()
    assert "| tree-sibling-order | tree | black box | L1-trees, L2-trees, L3-trees |" in table
    assert "| correct torch | — | injected | L1-trees | pass | pass |" in table


# --first-seed with a sampler mutant: tests/test_measured_records.py's seed-table record, one run for both


def test_a_survivor_or_a_false_fail_fails_the_table(monkeypatch, capsys):
    """The verdict is the table's: a (mutant, seed) that survives, or a correct device failing at one seed,
    exits 1 and is named."""
    calls = []

    def rigged(job):
        calls.append(job)
        killed = job.seed == 0   # a mutant survives seed 1, the correct device fails seed 0
        killer = {"name": "L1/trees/injected/x", "layer": "L1", "status": "fail", "detail": "d"}
        return {"name": job.name, "killed": killed, "killer": killer if killed else None, "evidence": "",
                "seconds": 0.0, "groups_run": list(job.groups or ()), "counts": None, "where": "here"}
    monkeypatch.setattr(st, "run_seed_job", rigged)
    assert main(["mutants", "--seeds", "0-1", "--only", "tree-sibling-order", "--quick"]) == 1
    out = capsys.readouterr().out
    assert "| tree-sibling-order | tree | injected | L1-trees | injected/x | SURVIVED |" in out
    assert "| correct torch | — | injected | L1-trees | injected/x | pass |" in out
    assert "SURVIVED: tree-sibling-order [injected] at seed 1" in out
    assert "FALSE FAIL: torch [injected] at seed 0 by L1/trees/injected/x" in out
    assert len(calls) == 4


@pytest.mark.parametrize("argv", [["--seeds", "3-1"], ["--seeds", "0"], ["--seeds", "0-2", "--first-seed", "4"],
                                  ["--seeds", "2", "--seed", "1"], ["--hunt", "all"], ["--seeds", "1", "--kinds", "x"]])
def test_seed_table_usage_errors_exit_2(argv, capsys):
    assert main(["mutants", "--only", "tree-sibling-order", *argv]) == 2
    assert "specsim mutants: " in capsys.readouterr().err
