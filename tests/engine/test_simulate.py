"""``specsim simulate``: seed 000's format, ``--json`` keys, seed 003's sweep table."""

import json

from specsim.cli import main

SMALL = ["--num-requests", "4", "--prompt-len", "3", "--output-len", "6", "--vocab-size", "8", "--device", "reference"]


def test_json_prints_exactly_seed_000s_keys_plus_two(capsys):
    assert main(["simulate", "--json", *SMALL]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out) == ["acc_counts", "acc_rate", "num_draft_tokens", "num_drafts", "mean_acceptance_length",
                         "emitted_tokens"]
    assert out["emitted_tokens"] == 24 and len(out["acc_counts"]) == 4


def test_text_output_starts_like_seed_000(capsys):
    assert main(["simulate", *SMALL, "--proposer", "ngram", "-k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("acc_counts: [") and lines[1].startswith("acc_rate: ")


def test_sweep_prints_seed_003s_table(capsys):
    assert main(["simulate", "--sweep-temperature", *SMALL, "--num-requests", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| Temperature | AL w/o probs | AL w/ probs |"
    assert [row.split("|")[1].strip() for row in lines[2:]] == ["0", "0.3", "0.5", "0.7", "1", "1.3", "1.5", "2"]
    greedy = lines[2].split("|")
    assert greedy[2] == greedy[3]  # T = 0: draft probs change nothing


def test_bad_workload_exits_2(capsys):
    assert main(["simulate", *SMALL, "--max-num-batched-tokens", "2"]) == 2
    assert "never be scheduled" in capsys.readouterr().err   # a usage error goes to stderr
