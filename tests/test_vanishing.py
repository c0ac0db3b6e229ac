"""Checks that vanish: a missing group or command is an error, never a silent drop."""

from __future__ import annotations

import importlib

import pytest

from specsim import cli
from specsim.commands import COMMANDS, MAINTAINER_COMMANDS
from specsim.conformance.run import runner
from tests.fixtures.hollow_devices import HollowDevice


def test_every_group_and_command_of_this_checkout_imports():
    for name in runner.GROUPS:
        assert callable(runner.resolve_group(name)), name
    for module_name in COMMANDS.values():
        importlib.import_module(module_name)


def test_a_group_whose_module_is_missing_is_an_error(monkeypatch):
    monkeypatch.setitem(runner.GROUPS, "ghost", "specsim.conformance.no_such_module:group")
    assert "ghost" in runner.available_groups()
    (result,) = runner.run_conformance(HollowDevice(), runner.Context(), ["ghost"])
    assert result.status == "error" and result.name == "ghost/missing"
    assert "specsim.conformance.no_such_module is missing from this checkout" in result.detail


def test_a_group_whose_function_is_missing_is_an_error(monkeypatch):
    monkeypatch.setitem(runner.GROUPS, "ghost", "specsim.conformance.checks.chain.exact:no_such_group")
    (result,) = runner.run_conformance(HollowDevice(), runner.Context(), ["ghost"])
    assert result.status == "error" and "specsim.conformance.checks.chain.exact:no_such_group is missing from this checkout" in result.detail


def test_a_command_whose_module_is_missing_is_an_error(monkeypatch, capsys):
    monkeypatch.setitem(MAINTAINER_COMMANDS, "ghost", "specsim.commands.no_such_command")
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "MISSING: its module specsim.commands.no_such_command" in capsys.readouterr().out
    assert cli.main(["ghost"]) == 2
    assert "specsim ghost: its module specsim.commands.no_such_command is missing" in capsys.readouterr().err


def test_help_lists_every_command_once_under_its_audience_in_plain_text(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    vendor, maintainer = out.index("to hold a device to SPEC:"), out.index("to check specsim itself:")
    for name in COMMANDS:
        at = [i for i in range(len(out)) if out.startswith(f"\n  {name} ", i)]
        assert len(at) == 1, f"{name} listed {len(at)} times"
        assert (vendor < at[0] < maintainer) == (name in ("devices", "conform", "replay", "report", "field")), name


@pytest.mark.parametrize("name", [None, *COMMANDS])
def test_help_text_carries_no_markup(name, capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"] if name is None else [name, "--help"])
    out = capsys.readouterr().out
    for markup in ("``", ":func:", ":class:", ":mod:", "\n.. "):
        assert markup not in out, f"specsim {name or ''} --help shows {markup!r}"
