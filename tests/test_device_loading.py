"""Loading a vendor's device: a module of the current directory, the protocol docstring's minimal device (it
declares the core profile), ``specsim devices SPEC`` on one device, each missing attribute and a wrong return
type named, load errors said once."""

from __future__ import annotations

import re
import sys
import textwrap

import pytest

import devices.protocol
from devices import registry
from specsim import cli
from specsim.conformance.verdict.profiles import core_lacking
from specsim.conformance.run.runner import Context, run_group

MINIMAL = textwrap.dedent(devices.protocol.__doc__.split("A minimal device::")[1])
"""The minimal device of ``devices/protocol.py``'s docstring, as a vendor would copy it."""


def vendor_module(tmp_path, monkeypatch, name: str, text: str) -> None:
    """``name.py`` written in ``tmp_path``, the current directory, which the import path does not search (as
    under the ``specsim`` script)."""
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, name, raising=False)


def test_the_protocol_docstrings_minimal_device_declares_the_core_profile():
    namespace: dict = {}
    exec(compile(MINIMAL, "devices/protocol.py (docstring)", "exec"), namespace)
    device = namespace["make_device"]()
    assert core_lacking(device.capabilities) == []


def test_a_module_of_the_current_directory_loads(tmp_path, monkeypatch):
    vendor_module(tmp_path, monkeypatch, "acme_cwd_dev", MINIMAL)
    device = registry.load("acme_cwd_dev:make_device")
    assert device.name == "my-npu" and sys.path[-1] == str(tmp_path)   # searched last: it shadows nothing


def test_a_class_is_a_factory_too(tmp_path, monkeypatch):
    vendor_module(tmp_path, monkeypatch, "acme_class_dev", MINIMAL)
    assert type(registry.load("acme_class_dev:MyDevice")).__name__ == "MyDevice"


def test_a_module_found_nowhere_says_where_it_was_looked_for(tmp_path, monkeypatch):
    vendor_module(tmp_path, monkeypatch, "acme_other", "")
    with pytest.raises(registry.DeviceLoadError) as e:
        registry.load("acme_absent_dev:make_device")
    assert "No module named 'acme_absent_dev'" in str(e.value) and f"current directory, {tmp_path}" in str(e.value)


@pytest.mark.parametrize("drop, named", [("verify", "lacks verify:"), ("name", "lacks name:"),
                                         ("capabilities", "lacks capabilities:")])
def test_a_missing_attribute_is_named(tmp_path, monkeypatch, drop, named):
    text = MINIMAL.replace(f"{drop} = " if drop != "verify" else "def verify(", f"_{drop} = " if drop != "verify"
                           else "def _verify(")
    vendor_module(tmp_path, monkeypatch, f"acme_no_{drop}", text)
    with pytest.raises(registry.DeviceLoadError, match=named):
        registry.load(f"acme_no_{drop}:make_device")


def test_a_load_error_is_said_once(tmp_path, monkeypatch):
    vendor_module(tmp_path, monkeypatch, "acme_broken_dev", "def make_device():\n    raise RuntimeError('no NPU here')\n")
    with pytest.raises(registry.DeviceLoadError) as e:
        registry.load("acme_broken_dev:make_device")
    text = registry.load_error_text(e.value)
    assert text.count("no NPU here") == 1 and "RuntimeError: no NPU here" in text, text


def test_devices_spec_checks_one_device(tmp_path, monkeypatch, capsys):
    small = MINIMAL.replace("262_144", "256_000").replace("make_device", "make_small_device").replace("MyDevice", "Small")
    vendor_module(tmp_path, monkeypatch, "acme_checked_dev", MINIMAL + small)
    assert cli.main(["devices", "acme_checked_dev:make_device"]) == 0
    out = capsys.readouterr().out
    assert "loads:    yes, as 'my-npu'" in out and "V<=262144" in out and "): declared" in out
    assert cli.main(["devices", "acme_checked_dev:make_small_device"]) == 1
    assert "NOT declared: it lacks max_vocab_size >= 262144 (declares 256000)" in capsys.readouterr().out
    assert cli.main(["devices", "acme_checked_dev:make_nothing"]) == 3
    err = capsys.readouterr().err
    assert err.count("has no attribute 'make_nothing'") == 1, err


TUPLE_DEVICE = re.sub(r"(?m)^(\s+)\.\.\.$", r"\1return batch.draft_token_ids, batch.num_draft_tokens", MINIMAL)
assert TUPLE_DEVICE != MINIMAL


@pytest.mark.parametrize("group", ["L1-edges", "capabilities"])
def test_verify_returning_a_tuple_fails_naming_the_type(tmp_path, monkeypatch, group):
    vendor_module(tmp_path, monkeypatch, "acme_tuple_dev", TUPLE_DEVICE)
    results = run_group(group, registry.load("acme_tuple_dev:make_device"), Context(quick=True))
    assert not [r.name for r in results if r.status == "error"]
    named = [r for r in results if r.status == "fail" and r.detail.startswith("verify must return VerifyOutput (got tuple)")]
    assert named and not [r.detail for r in results if "AttributeError" in r.detail]
