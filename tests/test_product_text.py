"""The product speaks of itself: no words about how it is developed (machines lent, sessions, tracker
numbers) in the README, the docs, docstrings, comments or help. History belongs in CHANGELOG.md."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEVELOPMENT_WORDS = re.compile(
    r"device tool|GPU box|64 MiB|METHOD\.md|nvidia-h[12]00-x|this session|\bthe lead\b|the field helper|"
    r"2-core machine|gpu_batch\d|\.carry/|worktree|"
    r"\((?:see )?issues? \d+(?:\.\d+)?(?:[,;][^)]*)?\)|\bissues? \d+(?:\.\d+)?\b",
    re.IGNORECASE)
"""Tracker numbers (``issue 18``, ``(issues 10, 11)``), the machines a figure came through and the
development setup. A figure names the GPU, the versions and the command instead."""
NOT_PRODUCT = ("CHANGELOG.md", "tests/test_product_text.py")


def _tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if f not in NOT_PRODUCT and not f.startswith("docs/field-results/")
            and Path(f).suffix in {".py", ".md", ".toml", ".sh", ".txt", ".json", ".cfg", ""}]


def test_no_word_about_the_development_setup_in_the_product():
    found = []
    for name in _tracked():
        path = ROOT / name
        if not path.is_file():
            continue
        for i, line in enumerate(path.read_text(errors="replace").splitlines()):
            found += [f"{name}:{i + 1}: {m[0]!r}" for m in DEVELOPMENT_WORDS.finditer(line)]
    assert not found, "development words in product text:\n" + "\n".join(found)


def test_the_pattern_finds_tracker_numbers_and_machine_words():
    for text in ("as issue 18 asked", "(issue 16.7)", "(issues 10, 11)", "on the GPU box", "the device tool's"):
        assert DEVELOPMENT_WORDS.search(text), text
    for text in ("an issue URL", "issue  = \"https://tracker.acme.example/SPEC-123\"", "pytest session fixture"):
        assert not DEVELOPMENT_WORDS.search(text), text
