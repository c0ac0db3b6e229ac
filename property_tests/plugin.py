"""The ``specsim`` pytest plugin: run the shipped suites against any device.

Registered through ``[project.entry-points.pytest11] specsim = "property_tests.plugin"``,
so once specsim is installed::

    pytest --pyargs property_tests --specsim-device=acme-npu --specsim-waivers acme-waivers.toml

Options (also ``pytest --help``, group "specsim"):

- ``--specsim-device=SPEC``: a registered device name or ``module:attr``
  (default: ``$SPECSIM_DEVICE``, else ``torch``);
- ``--specsim-waivers=FILE``: expected failures, each with a reason and an
  issue URL (``specsim/conformance/verdict/waivers.py`` has the format and its rules; default
  ``$SPECSIM_WAIVERS``). Waived tests are marked ``xfail`` (not strict: a
  statistical test of a buggy device can pass by chance) or ``skip``; entries
  that match no collected test are listed in the terminal summary. The file is read and
  checked by the loader of ``specsim conform --waivers``, and its ``conformance:`` entries
  are applied by the same function (``specsim.conformance.verdict.conform_waivers.apply``).

The shipped ``property_tests/test_conformance_groups.py`` gates on SPEC §10's verdict
(``test_conformance_verdict``, through :func:`judge_conformance`: ``vendor_waivers.apply`` then
``specsim.conformance.run.runner.verdict_of``, what ``specsim conform --quick --waivers FILE`` does), not only on
no check failing: a device that declares nothing fails no check, and fails there. A test waiver never
reaches those tests (``waivers.GATE_FILE``); a crash record or the core's evidence is never waived.

The header shows the device, where the choice came from, every ``SPECSIM_*``
variable (a typo in one is then visible), and devices that failed to load
(``devices.registry.load_failures()``; it loads every known device, so it runs
only when a device is chosen or ``property_tests`` is named;
``SPECSIM_DEVICE_SURVEY=0`` skips it). Tests get the device from the
session fixture ``specsim_device``; a device that does not load fails each
test that uses it with the loader's message.

This module is imported by every pytest run in an environment where specsim
is installed, so it imports nothing heavy at module level.
"""

from __future__ import annotations

import os

import pytest

DEFAULT_DEVICE = "torch"
_DEVICE_KEY = "specsim_device_spec"


def pytest_addoption(parser):
    group = parser.getgroup("specsim", "specsim conformance suites")
    group.addoption("--specsim-device", action="store", default=None, metavar="SPEC",
                    help=f"device to test: registered name or 'module:attr' "
                         f"(default: $SPECSIM_DEVICE, else {DEFAULT_DEVICE!r})")
    group.addoption("--specsim-waivers", action="store", default=None, metavar="FILE",
                    help="TOML or JSON file of expected failures (check, reason, issue URL each; "
                         "default: $SPECSIM_WAIVERS)")
    try:  # the repository's conftest.py declares it too; whichever comes first wins
        group.addoption("--run-slow", action="store_true", default=False,
                        help="also run tests marked slow (long statistical campaigns; or SPECSIM_RUN_SLOW=1)")
    except ValueError:
        pass


def device_choice(config) -> tuple[str, str]:
    """``(spec, where it came from)``."""
    opt = config.getoption("specsim_device", default=None)
    if opt:
        return opt, "--specsim-device"
    env = os.environ.get("SPECSIM_DEVICE")
    if env:
        return env, "$SPECSIM_DEVICE"
    return DEFAULT_DEVICE, "default"


class _State:
    """Per-session plugin state (on the config object)."""

    def __init__(self):
        self.waivers = []
        self.waiver_file = None  # vendor_waivers.WaiverFile: what the conformance tests apply
        self.waivers_path: str | None = None
        self.matched: set = set()
        self.waived_items: dict[str, object] = {}  # nodeid -> Waiver
        self.gate_refused: dict[str, object] = {}  # nodeid of a verdict test -> the test waiver that matched it
        self.waived_checks: dict[str, str] = {}  # conformance check name -> the source of the entry waiving it
        self.refused_checks: dict[str, dict] = {}  # entry source -> its refused record (checks merged)
        self.judged_elsewhere: list = []  # conformance waivers judged on another release than the device's
        self.engine: str | None = None


def _state(config) -> _State:
    st = getattr(config, "_specsim_state", None)
    if st is None:
        st = _State()
        config._specsim_state = st
    return st


def pytest_configure(config):
    # an installed suite has no pyproject.toml to declare its markers
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")
    config.addinivalue_line("markers", "slow: long statistical campaign; opt in with --run-slow")
    config.addinivalue_line("markers", "needs_extra(name, ...): needs an optional dependency (property_tests/extras.py); "
                                       "skipped without it, failed instead under SPECSIM_REQUIRE_EXTRAS=1")
    st = _state(config)
    path = config.getoption("specsim_waivers", default=None) or os.environ.get("SPECSIM_WAIVERS") or None
    if path:
        from specsim.conformance.verdict.conform_waivers import WaiverError, load_file
        try:
            st.waiver_file = load_file(path, option="--specsim-waivers")
        except WaiverError as e:
            raise pytest.UsageError(str(e)) from None
        st.waivers = list(st.waiver_file.waivers)
        st.waivers_path = path


def _explicit(config) -> bool:
    """Whether this run is about a specsim device (then the header's device survey is worth its cost:
    it loads every known device). ``SPECSIM_DEVICE_SURVEY=0`` turns it off, ``=1`` on."""
    forced = os.environ.get("SPECSIM_DEVICE_SURVEY")
    if forced:
        return forced not in ("0", "false", "no")
    if config.getoption("specsim_device", default=None) or os.environ.get("SPECSIM_DEVICE"):
        return True
    return any("property_tests" in str(a) for a in config.args)


def pytest_report_header(config):
    spec, origin = device_choice(config)
    lines = [f"specsim: device {spec!r} ({origin})"]
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("SPECSIM_")}
    if env:
        lines.append("specsim: environment " + " ".join(f"{k}={v}" for k, v in env.items()))
    st = _state(config)
    if st.waivers_path:
        lines.append(f"specsim: {len(st.waivers)} waiver(s) from {st.waivers_path}")
    if _explicit(config):
        try:
            from devices.registry import load_failures
            failures = load_failures()
        except Exception as e:  # the registry itself broke: say so, do not hide the header
            failures = {"<registry>": f"{type(e).__name__}: {e}"}
        if failures:
            lines.append(f"specsim: {len(failures)} device(s) failed to load:")
            lines += [f"  {name}: {why.splitlines()[0] if why else '?'}" for name, why in sorted(failures.items())]
        else:
            lines.append("specsim: every known device loads")
    return lines


@pytest.fixture(scope="session")
def specsim_device(pytestconfig):
    """The device under test (``--specsim-device``), loaded once per session."""
    from devices.registry import DeviceLoadError, load
    spec, origin = device_choice(pytestconfig)
    try:
        return load(spec)
    except DeviceLoadError as e:
        why = str(e)
    pytest.fail(f"specsim: device {spec!r} ({origin}) did not load: {why}", pytrace=False)


def judge_conformance(device, device_spec: str, results: list, waiver_file, ctx, groups: list[str]
                      ) -> tuple[list, dict | None, dict]:
    """``(results, waiver record, verdict)`` of conformance ``results`` from ``groups`` run under ``ctx``:
    ``waiver_file`` (a ``vendor_waivers.WaiverFile``, or None) applied by ``vendor_waivers.apply`` and the
    verdict given by ``specsim.conformance.run.runner.verdict_of``, the two functions of ``specsim conform``, so
    the same device, results and waiver file get the same verdict whichever route ran them."""
    from specsim.conformance.run.runner import verdict_of
    from specsim.conformance.verdict.conform_waivers import apply
    record = None
    if waiver_file is not None:
        results, record = apply(results, waiver_file, device_spec=device_spec,
                                device_name=getattr(device, "name", None), engine=getattr(device, "engine", None))
    return results, record, verdict_of(device, results, ctx, groups)


def _remember(st: _State, record: dict | None) -> None:
    """What the summary says of the conformance waivers, from each ``apply`` record of the session."""
    if record is None:
        return
    st.waived_checks.update((e["check"], e["source"]) for e in record["waived"])
    for e in record["refused"]:
        kept = st.refused_checks.setdefault(e["source"], dict(e, checks=[]))
        kept["checks"] = list(dict.fromkeys(kept["checks"] + e["checks"]))
    if not st.judged_elsewhere:
        st.judged_elsewhere = [e for e in record["not_applicable"] if e["why"].startswith("judged on ")]


@pytest.fixture(scope="session")
def specsim_conformance_waivers(pytestconfig, specsim_device):
    """``waive(results) -> (results, record)``: the conformance waivers of ``--specsim-waivers`` applied by
    ``specsim.conformance.verdict.conform_waivers.apply`` (what ``specsim conform --waivers`` applies): a failing check
    an entry covers comes back carrying its ``waiver``; a crash record or a check carrying the core's evidence
    comes back unwaived, the entry listed under the record's ``refused``. ``record`` is None without a file.
    A waiver judged on another release of the device's engine (``judged_on``) waives nothing: its checks are
    held to SPEC like any other, and the summary names the release it was judged on."""
    from specsim.conformance.verdict.conform_waivers import apply
    st = _state(pytestconfig)
    spec = device_choice(pytestconfig)[0]
    st.engine = getattr(specsim_device, "engine", None)
    # Not reported as stale here: a check may exist only at full sizes (specsim conform) or on another
    # device; ``specsim field`` reports conformance waivers that explain no failing check.
    st.matched.update(w for w in st.waivers if w.conformance)

    def waive(results):
        if st.waiver_file is None:
            return list(results), None
        out, record = apply(results, st.waiver_file, device_spec=spec,
                            device_name=getattr(specsim_device, "name", None), engine=st.engine)
        _remember(st, record)
        return out, record
    return waive


@pytest.fixture(scope="session")
def specsim_conformance_verdict(pytestconfig, specsim_device):
    """``judge(results, ctx, groups) -> (results, record, verdict)``: :func:`judge_conformance` for the device
    and waiver file of this pytest run."""
    st = _state(pytestconfig)
    spec = device_choice(pytestconfig)[0]

    def judge(results, ctx, groups):
        out, record, verdict = judge_conformance(specsim_device, spec, results, st.waiver_file, ctx, groups)
        _remember(st, record)
        return out, record, verdict
    return judge


@pytest.fixture(scope="session")
def specsim_device_spec(pytestconfig) -> str:
    """The device spec string the session tests (for messages and reports)."""
    return device_choice(pytestconfig)[0]


def _cuda_available() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except ImportError:
        return False


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Skip ``slow`` and ``whole_run`` (without --run-slow) and ``gpu`` (without CUDA) tests — the installed suite has no
    conftest.py to do it — and mark waived tests (before -k/-m deselection, so a waiver matching a
    deselected test still counts as matched)."""
    run_slow = config.getoption("run_slow", default=False) or os.environ.get("SPECSIM_RUN_SLOW") == "1"
    cuda = None
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: opt in with --run-slow"))
        elif "whole_run" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="a whole quick run or campaign: opt in with --run-slow "
                                                    "(CI runs these after the default suite: -m whole_run)"))
        if "gpu" in item.keywords:
            cuda = _cuda_available() if cuda is None else cuda
            if not cuda:
                item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
    st = _state(config)
    if not st.waivers:
        return
    from specsim.conformance.verdict.waivers import GATE_FILE, check_id
    spec = device_choice(config)[0]
    for item in items:
        cid = check_id(item.nodeid)
        for w in st.waivers:
            if not w.matches(cid, item.name, item.nodeid):
                continue
            st.matched.add(w)
            if not w.applies_to_device(spec):
                continue
            if cid.startswith(GATE_FILE) or "test_conformance_groups.py::" in item.nodeid:
                st.gate_refused[item.nodeid] = w   # the verdict is reached by conformance: entries only
                continue
            text = f"waived: {w.reason} ({w.issue})"
            item.add_marker(pytest.mark.skip(reason=text) if w.mark == "skip"
                            else pytest.mark.xfail(reason=text, strict=False))
            st.waived_items[item.nodeid] = w
            break


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A ``needs_extra`` test whose optional dependency is absent: skipped with the reason and how to install
    it, or failed under ``SPECSIM_REQUIRE_EXTRAS=1`` (``property_tests/extras.py``)."""
    names = [name for mark in item.iter_markers("needs_extra") for name in mark.args]
    if not names:
        return
    from property_tests.extras import decide
    what = decide(names)
    if what is None:
        return
    action, reason = what
    if action == "fail":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    st = _state(config)
    if not st.waivers:
        return
    tr = terminalreporter
    unmatched = [w for w in st.waivers if w not in st.matched]
    tr.section("specsim waivers")
    spec = device_choice(config)[0]
    applied = len(st.waived_items)
    tr.write_line(f"{len(st.waivers)} waiver(s) from {st.waivers_path}; applied to {applied} test(s) "
                  f"for device {spec!r}")
    if st.waived_checks or st.refused_checks:
        tr.write_line(f"conformance waivers (applied as specsim conform applies them): {len(st.waived_checks)} "
                      f"failing check(s) waived, {len(st.refused_checks)} entr"
                      f"{'y' if len(st.refused_checks) == 1 else 'ies'} refused")
    for source, e in st.refused_checks.items():
        shown = ", ".join(e["checks"][:3]) + (f" and {len(e['checks']) - 3} more" if len(e["checks"]) > 3 else "")
        tr.write_line(f"  refused: {e['check']!r} ({source}) on {shown}: {e['why']}; still failing", red=True)
    for nodeid, w in st.gate_refused.items():
        tr.write_line(f"  refused: {w.check!r} ({w.source}) on {nodeid}: a test waiver never covers the verdict "
                      "tests; name the failing checks as conformance:<check name>", red=True)
    if st.judged_elsewhere:
        tr.write_line(f"{len(st.judged_elsewhere)} conformance waiver(s) not applied: judged on another release "
                      f"than this device's ({st.engine or 'engine release unknown'}); the checks they name are held "
                      "to SPEC:", yellow=True)
        for e in st.judged_elsewhere:
            tr.write_line(f"  {e['why'].split(';')[0]}: {e['check']!r} ({e['source']})", yellow=True)
    xpassed = [r.nodeid for r in tr.stats.get("xpassed", []) if r.nodeid in st.waived_items]
    if xpassed:
        tr.write_line(f"{len(xpassed)} waived test(s) passed (XPASS); is the issue fixed? "
                      "(not a failure: a statistical test can pass by chance)")
        for nodeid in xpassed:
            tr.write_line(f"  XPASS {nodeid}  [{st.waived_items[nodeid].issue}]")
    if unmatched:
        tr.write_line(f"{len(unmatched)} waiver(s) matched no collected test (stale, or a typo):", yellow=True,
                      bold=True)
        for w in unmatched:
            tr.write_line(f"  {w.describe()}", yellow=True)
