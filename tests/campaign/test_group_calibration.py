"""``specsim calibrate --groups``: whole groups of a correct device over suite seeds, as shards; false fails
counted (exact ones fail the run, statistical ones beyond the budget's binomial bound), each statistical
case's detectable TV reported."""

from __future__ import annotations

import json

import pytest

from specsim.campaign import groups as cg
from specsim.cli import main


@pytest.mark.whole_run
def test_tree_and_sampler_groups_calibrate_in_both_modes(tmp_path, capsys):
    rc = main(["calibrate", "--groups", "L3-trees,L1-sampler", "--seeds", "1", "--first-seed", "10", "--quick",
               "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    s = json.loads((tmp_path / "calibration.json").read_text())["summary"]
    assert (s["seeds"], s["first_seed"], s["modes"]) == (1, 10, ["declared", "black-box"])
    assert s["false_fails"] == [] and not s["exceeds_bound"]
    cases = {(c["check"], c["mode"]): c for c in s["statistical_cases"]}
    # without injected noise an L1-sampler edge's law is tested, and states what it can detect
    edge = cases["L1-sampler/edge/mask-forbids-draft/canonical", "black-box"]
    assert edge["seeds"] == 1 and 0 < edge["detectable_tv_min"] <= edge["detectable_tv_max"] < 1
    assert ("L1-sampler/edge/mask-forbids-draft/canonical", "declared") not in cases     # exact there
    assert cases["L3/trees/sglang/path", "declared"]["detectable_tv_max"] < 1
    # the tree laws' single Cressie-Read tests are pooled for the KS; an edge's smallest p is not one
    # (L3-trees draws the same in both modes: the black-box pool is the declared one, no edge added)
    from specsim.conformance.cases.trees import CASES as TREE_CASES
    most = 2 * len(TREE_CASES)   # 1 seed x (path, accepted) per case; a one-cell test is not pooled
    assert most // 2 <= s["ks"]["declared"]["p_values"] == s["ks"]["black-box"]["p_values"] <= most
    assert "| L1-sampler/edge/mask-forbids-draft/canonical | black-box |" in (tmp_path / "calibration.md").read_text()


def _shard(seed, mode="declared", group="L3-trees"):
    return cg.GroupShard("torch", group, seed, mode, 1e-3, True)


def _results(*statuses_alphas):
    return {"results": [{"name": f"L3/trees/c{i}/path", "layer": "L3", "status": s, "detail": "d",
                         **({"alpha": a, "p_value": 1e-9 if s == "fail" else 0.5, "detectable_tv": 0.05,
                             "n": 100, "extra": {"df": 3}} if a else {})}
                        for i, (s, a) in enumerate(statuses_alphas)], "seconds": 0.1, "where": "here"}


def test_statistical_false_fails_are_held_to_the_binomial_bound():
    """100 seeds, two modes at alpha_family 1e-3: three seeds with a statistical false fail are within
    the budget (P = 1.5e-3 > 1e-3), four are not (7.8e-5); each is listed either way."""
    seeds = range(100)
    for failing, exceeds in ((3, False), (4, True)):
        done = {_shard(s, m): _results(("fail" if s < failing and m == "declared" else "pass", 1e-6))
                for s in seeds for m in cg.MODES}
        s = cg.summary(done, seeds, cg.MODES, 1e-3)
        assert (s["seeds_with_a_statistical_false_fail"], s["exact_false_fails"]) == (failing, 0)
        assert s["exceeds_bound"] is exceeds and len(s["false_fails"]) == failing
        assert s["false_fails"][0]["repro"] == "specsim conform --groups L3-trees --seed 0"


def test_an_exact_false_fail_or_an_error_is_never_noise():
    done = {_shard(0): _results(("pass", 1e-6), ("fail", None)), _shard(1): _results(("error", None))}
    s = cg.summary(done, [0, 1], ["declared"], 1e-3)
    assert s["exact_false_fails"] == 2 and s["statistical_false_fails"] == 0 and not s["exceeds_bound"]
    assert "2 exact false fails" in cg.verdict_line(s)


def test_calibrate_groups_exits_1_on_an_exact_false_fail(monkeypatch, capsys):
    monkeypatch.setattr(cg, "run_group_shard", lambda shard: _results(("fail", None)))
    assert main(["calibrate", "--groups", "L3-trees", "--seeds", "1", "--modes", "declared"]) == 1
    assert "FALSE FAIL (exact) L3/trees/c0/path [declared] at seed 1000000" in capsys.readouterr().out


def test_calibrate_groups_usage_errors_exit_2(capsys):
    for argv in (["--groups", "L9"], ["--groups", "L3-trees", "--modes", "grey-box"], ["--modes", "declared"],
                 ["--groups", "L3-trees", "--cases", "v8-far"]):
        assert main(["calibrate", *argv]) == 2, argv
    assert "specsim calibrate: " in capsys.readouterr().err
