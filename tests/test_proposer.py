"""specsim proposer: the project's own proposers pass; malformed proposals fail the exact checks."""

from __future__ import annotations

import numpy as np
import pytest

from specsim.commands import proposer as command
from specsim.engine.proposers.checked import PROPOSERS, load
from specsim.conformance.proposer.proposers import DesignError, check


@pytest.mark.parametrize("name", sorted(PROPOSERS))
def test_the_projects_proposers_pass(name):
    result = check(load(name), samples=1000)
    failed = [c for c in result["checks"] if c["status"] == "fail"]
    assert result["verdict"] == "pass", failed
    if result["declaration"]["has_probs"]:
        laws = [c for c in result["checks"] if c["check"].startswith("law/")]
        assert laws and all(c["method"] == "pooled-by-prefix" for c in laws)   # q is a function of the prefix


class Broken:
    """A drafter-shaped object whose proposals break one exact rule at a time."""

    vocab_size, has_probs, greedy, sampling, max_len = 4, True, True, (), None

    def __init__(self, how: str):
        self.how = how
        self.name = f"broken-{how}"

    def propose(self, requests, ks):
        out = []
        for r in requests:
            rows = np.tile([0.1, 0.2, 0.3, 0.4], (int(ks[0]), 1)) if r.params.temperature else np.eye(4)[[3] * int(ks[0])]
            ids = np.full(int(ks[0]), 3)
            if self.how == "placeholder-first":
                ids[0] = -1
            elif self.how == "too-long":
                ids, rows = np.append(ids, 3), np.vstack([rows, rows[:1]])
            elif self.how == "not-a-distribution":
                rows = rows * 1.01
            elif self.how == "greedy-not-argmax" and not r.params.temperature:
                ids[:] = 0
                rows = np.tile([0.4, 0.6, 0.0, 0.0], (len(ids), 1))
            out.append((ids, rows))
        return out


@pytest.mark.parametrize("how, check_name", [("placeholder-first", "structure"), ("too-long", "structure"),
                                             ("not-a-distribution", "q-is-a-distribution"),
                                             ("greedy-not-argmax", "greedy-argmax")])
def test_exact_rules_fail_by_name(how, check_name):
    result = check(Broken(how), samples=50, only=("T1", "greedy"))
    assert {c["check"] for c in result["checks"] if c["status"] == "fail"} >= {check_name}


def test_command_exit_codes(capsys, tmp_path):
    parser = __import__("argparse").ArgumentParser()
    command.add_arguments(parser)
    assert command.run(parser.parse_args(["draft_model", "--samples", "400", "--json", str(tmp_path / "r.json")])) == 0
    assert command.run(parser.parse_args(["mutant:q-before-processors", "--samples", "400", "--cases", "T1.1-p0.8"])) == 1
    assert command.run(parser.parse_args(["no.such.module:f"])) == 2
    assert command.run(parser.parse_args(["draft_model", "--samples", "100", "--max-tv", "0.05"])) == 2
    assert "verdict: FAIL" in capsys.readouterr().out


def test_the_design_is_asserted_before_sampling():
    with pytest.raises(DesignError, match="calls would reach it"):
        check(load("draft_model"), samples=100, max_tv=0.05)


@pytest.mark.parametrize("name", ["specsim.conformance.proposer.proposers", "specsim.engine.proposers.processed", "specsim.commands.proposer",
                                  "specsim.engine.proposers.checked", "specsim.mutants.proposers"])
def test_docstring_examples_run(name):
    import doctest
    import importlib
    failures, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failures == 0 and tried > 0


class SeedMixture:
    """q depends on the request's seed (two rows, by parity): not a function of the prefix, so the law check
    takes the PIT path. ``honest=False`` reports the other row than the one it drew from."""

    vocab_size, has_probs, greedy, sampling, max_len = 4, True, False, (), None
    ROWS = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4]])

    def __init__(self, honest: bool):
        self.honest, self.name = honest, f"seed-mixture-{honest}"

    def propose(self, requests, ks):
        out = []
        for r in requests:
            row = self.ROWS[r.seed % 2]
            token = np.random.default_rng(r.seed).choice(4, p=row)
            out.append((np.array([token]), (row if self.honest else self.ROWS[1 - r.seed % 2])[None, :]))
        return out


@pytest.mark.parametrize("honest", [True, False])
def test_q_varying_within_a_prefix_takes_the_pit_path(honest):
    result = check(SeedMixture(honest), samples=3000, k=1, only=("T1",))
    law = next(c for c in result["checks"] if c["check"] == "law/position-0")
    assert law["method"] == "pit" and law["status"] == ("pass" if honest else "fail"), law
