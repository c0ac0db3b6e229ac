"""A run that was stopped, killed, resumed over changed code, narrowed or weakened never reads as a plain PASS.

Each test is a device (or a run) a skeptical vendor could bring; each must end FAIL, PARTIAL or
INCOMPLETE, with the reason naming what it got wrong.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from specsim.conformance.verdict import profiles

from specsim.conformance.run import runner

from specsim.conformance.checks.chain import volume
from specsim.conformance.run.isolation import ResumeMismatch, run_isolated
from specsim.conformance.core.results import CheckResult
from specsim_fakegroups import FAKE_GROUPS
from specsim_fakedev import GreedyDevice
from test_isolation import DRIVER

HERE = os.path.dirname(os.path.abspath(__file__))


def _passing_core() -> list[CheckResult]:
    """What a correct run of the core's evidence looks like, as results."""
    return [CheckResult("capabilities/greedy", "capabilities", "pass", extra={"core": True}),
            CheckResult("L1/injected/full-mixed/V8/float32", "L1", "pass")]


class Dev:
    name = "fake-greedy"
    capabilities = GreedyDevice.capabilities


def test_every_group_at_the_suite_seed_and_alpha_is_a_pass():
    assert runner.verdict_of(Dev(), _passing_core())["status"] == "pass"


def test_a_groups_subset_holding_the_core_evidence_is_partial_and_lists_what_did_not_run():
    v = runner.verdict_of(Dev(), _passing_core(), groups=["capabilities", "L1-injected"])
    assert v["status"] == "partial"
    assert any("did not run" in r and "L1-trees" in r and "L1-sizes" in r for r in v["reasons"]), v["reasons"]
    assert set(v["scope"]["groups_not_run"]) == set(runner.GROUPS) - {"capabilities", "L1-injected"}
    # a profile is met only by groups that ran: injected noise needs L1-edges, L1-sizes and L1-volume too; float64 only L1-injected
    assert not v["optional_profiles"]["injected-noise"] and v["optional_profiles"]["float64"]
    absent = [g for g in profiles.PROFILES[0].groups if g != "L1-injected"]
    assert v["profiles"]["injected-noise"]["why"] == f"not run: {', '.join(absent)}"


def test_optional_profiles_are_met_only_when_their_groups_ran_and_passed():
    from devices.torch_device import CAPABILITIES
    checks = [c.to_json() for c in _passing_core()]
    tree_fail = {"name": "L1/trees/x", "layer": "L1", "status": "fail", "extra": {"group": "L1-trees"}}
    v = profiles.verdict(CAPABILITIES, checks + [tree_fail], list(runner.GROUPS), all_groups=list(runner.GROUPS))
    assert v["status"] == "fail" and not v["optional_profiles"]["tree-rrs"]
    assert "L1/trees/x" in v["profiles"]["tree-rrs"]["why"]
    assert v["optional_profiles"]["point-proposals"]
    v = profiles.verdict(CAPABILITIES, checks, ["capabilities", "L1-injected"], all_groups=list(runner.GROUPS))
    assert v["profiles"]["tree-rrs"] == {"declared": True, "met": False, "why": "not run: L1-trees, L2-trees, L3-trees"}


@pytest.mark.parametrize("ctx, said", [
    (runner.Context(alpha_family=1e-100), "below the suite's"),
    (runner.Context(seed=7), "not the suite seed"),
])
def test_a_weaker_alpha_or_another_seed_is_partial(ctx, said):
    v = runner.verdict_of(Dev(), _passing_core(), ctx)
    assert v["status"] == "partial" and any(said in r for r in v["reasons"]), v["reasons"]
    assert v["scope"]["alpha_is_default"] is (ctx.alpha_family == profiles.DEFAULT_ALPHA_FAMILY)
    assert v["scope"]["seed_is_default"] is (ctx.seed == profiles.DEFAULT_SEED)


def test_a_stricter_alpha_may_pass():
    assert runner.verdict_of(Dev(), _passing_core(), runner.Context(alpha_family=1e-2))["status"] == "pass"


class SlowTorch:
    """The torch device, slowed as an emulator is: the volume's time budget cuts its run short."""

    def __init__(self):
        from devices.torch_device import TorchDevice
        self.inner = TorchDevice()
        self.name, self.capabilities = "slow-torch", self.inner.capabilities

    def verify(self, batch, noise=None):
        time.sleep(0.05)
        return self.inner.verify(batch, noise)


def test_a_volume_cut_by_its_time_budget_is_partial_and_says_how_far_it_got():
    check = volume.volume_check(SlowTorch(), seed=0, requests=3 * volume.CHUNK, budget_s=0.01)
    vol = check.extra["volume"]
    assert check.status == "pass" and vol["reached"] < vol["requested"] == 3 * volume.CHUNK
    v = runner.verdict_of(Dev(), _passing_core() + [check])
    assert v["status"] == "partial"
    assert any(f"reached {vol['reached']:,} of {vol['requested']:,}" in r for r in v["reasons"]), v["reasons"]
    assert v["scope"]["volume"]["L1/volume"] == vol


def _module(tmp_path, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))
    return str(tmp_path)


def test_a_device_declaring_otherwise_in_the_group_process_is_an_error(tmp_path, monkeypatch):
    """A factory that probes the hardware per process: 262144 in the run's process, 1024 in the group's."""
    monkeypatch.syspath_prepend(_module(tmp_path, "probing_dev", """
        import os
        from devices.protocol import Capabilities
        from specsim_fakedev import GreedyDevice

        def make():
            device = GreedyDevice()
            here = str(os.getpid()) == os.environ.get("PROBING_DEV_PARENT")
            device.capabilities = Capabilities(injected_noise=True, rng="none", max_k=8,
                                               max_vocab_size=262_144 if here else 1024)
            return device
    """))
    monkeypatch.setenv("PROBING_DEV_PARENT", str(os.getpid()))
    from devices.registry import load
    device = load("probing_dev:make")
    assert device.capabilities.max_vocab_size == 262_144
    doc = run_isolated("probing_dev:make", device, runner.Context(), {"F1-ok": FAKE_GROUPS["F1-ok"]},
                       out_dir=str(tmp_path / "run"))
    [check] = doc["checks"]
    assert check["name"] == "F1-ok/declaration-mismatch" and check["status"] == "error"
    assert "1024" in check["detail"] and "one run, one declaration" in check["detail"]
    assert doc["verdict"]["status"] == "fail" and not doc["passed"]


def test_resume_after_the_device_code_changed_is_refused(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(_module(tmp_path, "edited_dev", """
        from specsim_fakedev import GreedyDevice

        def make():
            return GreedyDevice()
    """))
    from devices.registry import load
    groups = {"F1-ok": FAKE_GROUPS["F1-ok"], "F5-ok": FAKE_GROUPS["F5-ok"]}
    out = str(tmp_path / "run")
    run_isolated("edited_dev:make", load("edited_dev:make"), runner.Context(), groups, out_dir=out)
    os.remove(os.path.join(out, "groups", "F5-ok.json"))   # as if stopped after its first group
    with open(tmp_path / "edited_dev.py", "a") as f:
        f.write("\n# the kernel, edited between the stop and the resume\n")
    with pytest.raises(ResumeMismatch, match="the device's code"):
        run_isolated("edited_dev:make", load("edited_dev:make"), runner.Context(), groups, out_dir=out, resume=True)


def test_a_resumed_run_never_reads_as_a_plain_pass(tmp_path):
    """A run continued with --resume may pass (SPEC §10: the same options and code), but its verdict line, its
    reports' banner and summary say it was resumed and how many groups an earlier part recorded."""
    from reports.tables import scope_rows, verdict_shown, verdict_text
    from specsim.commands.conform import verdict_line
    groups = {"F1-ok": FAKE_GROUPS["F1-ok"], "F5-ok": FAKE_GROUPS["F5-ok"]}
    out = str(tmp_path / "run")
    from devices.registry import load
    whole = run_isolated("specsim_fakedev:make_good", load("specsim_fakedev:make_good"), runner.Context(), groups,
                         out_dir=out)
    assert "resumed" not in verdict_line(whole["verdict"], whole["run"]) and "resumed" not in verdict_shown(whole)
    os.remove(os.path.join(out, "groups", "F5-ok.json"))   # as if stopped after its first group
    doc = run_isolated("specsim_fakedev:make_good", load("specsim_fakedev:make_good"), runner.Context(), groups,
                       out_dir=out, resume=True)
    said = "resumed: 1 of 2 groups were recorded by an earlier part of this run"
    assert said in verdict_line(doc["verdict"], doc["run"])
    assert verdict_shown(doc).endswith("(resumed)") and said in verdict_text(doc)
    assert ["run", said + " (the same options and code, checked by --resume)"] in scope_rows(doc)


def test_resume_after_the_devices_data_or_settings_changed_is_refused(tmp_path, monkeypatch):
    """A device's data files (a tuning table beside its code) and its settings (a launch shape read from a file
    anywhere, as the Triton device's from SPECSIM_TRITON_TUNING) are part of a run's code: resuming over a change
    to either is refused, never one certificate of two settings."""
    import dataclasses
    pkg = tmp_path / "tuned_dev"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import dataclasses, json, os
        from specsim_fakedev import GreedyDevice

        @dataclasses.dataclass(frozen=True)
        class Config:
            block: int

        def make():
            dev = GreedyDevice()
            dev.config = Config(int(os.environ.get("TUNED_BLOCK", "256")))
            return dev
    """))
    (pkg / "table.json").write_text('{"block": 256}')
    monkeypatch.syspath_prepend(str(tmp_path))
    from devices.registry import load
    groups = {"F1-ok": FAKE_GROUPS["F1-ok"], "F5-ok": FAKE_GROUPS["F5-ok"]}
    out = str(tmp_path / "run")
    doc = run_isolated("tuned_dev:make", load("tuned_dev:make"), runner.Context(), groups, out_dir=out)
    assert doc["device"]["config"] == "Config(block=256)"
    os.remove(os.path.join(out, "groups", "F5-ok.json"))
    (pkg / "table.json").write_text('{"block": 512}')
    with pytest.raises(ResumeMismatch, match="the device's code"):
        run_isolated("tuned_dev:make", load("tuned_dev:make"), runner.Context(), groups, out_dir=out, resume=True)
    (pkg / "table.json").write_text('{"block": 256}')
    monkeypatch.setenv("TUNED_BLOCK", "512")
    with pytest.raises(ResumeMismatch, match="code"):
        run_isolated("tuned_dev:make", load("tuned_dev:make"), runner.Context(), groups, out_dir=out, resume=True)
    assert dataclasses.is_dataclass(load("tuned_dev:make").config)


def _kill_workers_of(marker: str) -> None:
    """SIGKILL every process whose command line names ``marker`` (a killed run's orphaned group process)."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if pid.isdigit() and marker in cmd and int(pid) != os.getpid():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to end the orphaned group process")
def test_a_run_killed_outright_reads_incomplete(tmp_path):
    """SIGKILL (or the out-of-memory killer) gives the runner no chance to write: the file it left says INCOMPLETE."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.getcwd()]), SPECSIM_PROGRESS="0")
    env.pop("FAKEDEV_NO_HANG", None)
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", DRIVER, "conform", "--device", "specsim_fakedev:make_hanging", "--quick",
           "--groups", "F1-ok,F3-hang", "--out", str(out), "--no-report"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (out / "groups" / "F1-ok.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
    finally:
        _kill_workers_of(str(out))
    doc = json.loads((out / "conformance.json").read_text())
    assert doc["run"]["complete"] is False and doc["verdict"]["status"] == "incomplete" and doc["passed"] is False
    assert "did not finish" in doc["verdict"]["reasons"][0]
    from reports import render_directory
    render_directory([str(out)], str(tmp_path / "report"), with_plots=False)
    md = (tmp_path / "report" / "report.md").read_text()
    banner = md.split("\n## ", 2)[1]
    assert banner.startswith("Verdict: INCOMPLETE") and "| verdict | INCOMPLETE |" in banner


def test_an_older_document_of_an_interrupted_run_renders_incomplete():
    """A conformance.json written before this verdict existed recorded a stopped run as pass."""
    from reports.tables import verdict_status
    doc = {"verdict": {"status": "pass"}, "passed": True, "run": {"complete": False}}
    assert verdict_status(doc) == "INCOMPLETE"


def test_scope_names_the_largest_call_checked_per_noise_mode():
    from devices.torch_device import TorchDevice
    scopes: dict = {}
    results = runner.run_conformance(TorchDevice(), runner.Context(quick=True), ["L1-edges"], scopes)
    from specsim.conformance.core.scope import of_run
    v = runner.verdict_of(TorchDevice(), results, runner.Context(quick=True), ["L1-edges"], scope=of_run(scopes))
    checked = v["scope"]["checked"]["injected"]
    assert checked["calls"] > 0 and checked["V"] >= 1 and checked["K"] >= 1
    assert all(r.extra["group"] == "L1-edges" for r in results)


def test_conform_exit_codes_are_documented_in_help():
    from specsim.commands.conform import EPILOG, EXIT_CODES
    for status, code in EXIT_CODES.items():
        assert f"  {code}    verdict {status.upper()}" in EPILOG or status == "pass-with-waivers", status
    assert "130" in EPILOG and "143" in EPILOG and "--exit-zero-on" in EPILOG


def test_bad_alpha_and_empty_groups_are_usage_errors(capsys):
    from specsim import cli
    assert cli.main(["conform", "--alpha", "2", "--groups", "capabilities"]) == 2
    assert "--alpha" in capsys.readouterr().err
    assert cli.main(["conform", "--groups", ""]) == 2
    assert "--groups" in capsys.readouterr().err


class BigBatchRefuser:
    """The torch device, refusing every batch of more than 8 requests: batch size is never a declared limit."""

    def __init__(self):
        from devices.torch_device import TorchDevice
        self.inner = TorchDevice()
        self.name, self.capabilities = "big-batch-refuser", self.inner.capabilities

    def verify(self, batch, noise=None):
        from devices.protocol import UnsupportedCall
        if batch.batch_size > 8:
            raise UnsupportedCall(f"batch <= 8 (got {batch.batch_size})")
        return self.inner.verify(batch, noise)


def test_a_device_refusing_large_batches_is_never_a_pass_from_a_subset_holding_the_core_evidence():
    groups, ctx = ["capabilities", "L1-injected"], runner.Context()
    device = BigBatchRefuser()
    scopes: dict = {}
    results = runner.run_conformance(device, ctx, groups, scopes)
    from specsim.conformance.core.scope import of_run
    v = runner.verdict_of(device, results, ctx, groups, scope=of_run(scopes))
    assert v["status"] in ("fail", "partial"), v["reasons"]
    assert any("did not run" in r and "L1-sizes" in r for r in v["reasons"]), v["reasons"]
    assert not v["optional_profiles"]["tree-rrs"] and not v["optional_profiles"]["sampler"]
    assert v["scope"]["checked"]["injected"]["batch"] <= 8   # what it served is what the scope says
