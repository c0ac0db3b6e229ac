"""The ``specsim`` command end to end, as a vendor would call it (subprocesses)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXACT_GROUPS = "L1-injected,L1-keyed,L1-edges,L2-rng,input-rules"


def specsim(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specsim.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_devices_lists_torch_as_available():
    out = specsim("devices", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["name"]: r for r in json.loads(out.stdout)}
    assert rows["torch"]["available"], rows["torch"]["error"]
    assert all(r["available"] or r["error"] for r in rows.values()), "an unavailable device must say why"


def test_unknown_device_is_a_load_error_with_exit_code_3():
    out = specsim("conform", "--device", "no_such_module:make")
    assert out.returncode == 3
    assert "no_such_module" in out.stderr


def test_conform_writes_the_documented_json(tmp_path):
    out = specsim("conform", "--device", "torch", "--groups", "L1-edges,input-rules", "--out", str(tmp_path), "--quick")
    assert out.returncode == 5, out.stdout[-2000:] + out.stderr[-2000:]   # QUICK: its own exit status, never 0
    doc = json.loads((tmp_path / "conformance.json").read_text())
    assert doc["schema_version"] >= 1 and doc["passed"] is False
    assert doc["quick"] is True and doc["verdict"]["status"] == "quick"   # a --quick run is no verdict
    assert "verdict: QUICK" in out.stdout and "verdict: PASS" not in out.stdout
    assert {"python", "specsim"} <= set(doc["environment"])
    assert doc["device"]["spec"] == "torch" and doc["device"]["capabilities"]["rng"] == "philox"
    for check in doc["checks"]:
        assert {"name", "layer", "status"} <= set(check)
        assert check["status"] in ("pass", "fail", "not_supported", "error")


EXTERNAL = ROOT / "tests" / "fixtures" / "external_device.py"


@pytest.mark.skipif(not EXTERNAL.exists(), reason="external device fixture not in this checkout")
def test_a_device_written_from_the_docs_alone_conforms():
    # --quick: every check of the groups at the quick sizes (the full sizes are a certificate's, not the docs' test)
    out = specsim("conform", "--device", "tests.fixtures.external_device:make_device", "--groups", EXACT_GROUPS,
                  "--quick")
    assert out.returncode == 5, out.stdout[-3000:] + out.stderr[-2000:]   # nothing failed; a quick run: QUICK
    assert "verdict: QUICK" in out.stdout and "external-numpy: " in out.stdout and " 0 fail, " in out.stdout


@pytest.mark.skipif(not EXTERNAL.exists(), reason="external device fixture not in this checkout")
def test_a_wrong_token_is_a_fail_naming_request_position_and_expected_token(tmp_path):
    out = specsim("conform", "--device", "tests.fixtures.external_device:make_wrong_device",
                  "--groups", "L1-injected", "--out", str(tmp_path))
    assert out.returncode == 1
    doc = json.loads((tmp_path / "conformance.json").read_text())
    failed = [c for c in doc["checks"] if c["status"] == "fail"]
    assert failed
    detail = failed[0]["detail"]
    assert "request" in detail and "position" in detail and "expected token" in detail, detail
