"""Run each conformance group in its own subprocess, with a time limit.

A vendor's device is native code we do not control: it may segfault, call
``abort()``, deadlock, or raise. Run in-process, any of these loses the whole
run and its report. Here each group runs in a child process
(``python -m specsim.conformance.run.isolation ...``); the parent records what
became of it:

======================  ==================================================
child outcome           recorded as
======================  ==================================================
wrote its results       the group's own results (pass/fail/... as checked)
killed by a signal      one ``error`` result ``<group>/crashed``: signal
                        name, exit status, the tail of its stderr (with a
                        Python traceback of every thread: faulthandler)
ran past the limit      one ``error`` result ``<group>/timeout``: the limit,
                        and where it was stuck (faulthandler dump on SIGUSR1)
exited without results  one ``error`` result ``<group>/crashed``
======================  ==================================================

Results are written as they come, each file atomically (temp file + rename):
``OUT/groups/<group>.json`` per finished group, and ``OUT/conformance.json``
rewritten after every group with everything so far (``run.complete`` false
until the last group). ``resume=True`` reads that state back and runs only
the groups without a file, after checking the run's device, seed, α, quick
flag, group list and waiver file are the same (else :class:`ResumeMismatch`).

A stopped run ends its workers. Under :func:`stop_on_signals`, SIGINT and
SIGTERM (Ctrl-C, a CI time limit, ``timeout``, a cancelled job) raise
:class:`Interrupted` in the parent; the running group's child and its whole
process group are stopped (SIGTERM, then SIGKILL), the group is recorded in
``conformance.json`` as ``run.interrupted`` and stays pending
(``run.complete`` false), and ``--resume`` runs it again.

Example (what ``specsim conform --out DIR`` does)::

    from specsim.conformance.run.isolation import run_isolated
    doc = run_isolated("torch", device, Context(seed=0), available_groups(), out_dir="DIR")
    doc["passed"], doc["summary"]
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import datetime
import functools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from specsim.conformance.core import scope as run_scope
from specsim.conformance.core.context import DEFAULT_CALL_BYTES
from specsim.conformance.core.groups import DEFAULT_TIMEOUT_S
from specsim.conformance.core.results import CheckResult
from specsim.conformance.run.registry import RUN_ORDER

GROUP_FILE_KIND = "specsim.conformance.group"
"""The ``kind`` of a per-group file (reports skip these: conformance.json holds the same results)."""

DEFAULT_GROUP_TIMEOUT_S = DEFAULT_TIMEOUT_S
GROUP_TIMEOUT_OVERRIDES_S = {g.name: g.timeout_s for g in RUN_ORDER if g.timeout_s != DEFAULT_TIMEOUT_S}
"""Default limits of groups that legitimately run long, as each declares (``Group.timeout_s``, in its area of
``checks``: the statistical layer, the declared limits, the long run). An explicit ``--group-timeout``
applies to every group."""


def default_timeout(group: str) -> float:
    return GROUP_TIMEOUT_OVERRIDES_S.get(group, DEFAULT_GROUP_TIMEOUT_S)


_KILL_GRACE_S = 5.0  # after SIGTERM, before SIGKILL
_DUMP_GRACE_S = 1.0  # after SIGUSR1 (traceback dump), before SIGTERM
_INTERRUPT_GRACE_S = 2.0  # a stopped run's child, SIGTERM to SIGKILL: whoever sent our SIGTERM follows it with
# a SIGKILL within seconds (`docker stop`: 10 s), and the run must have ended its workers and written its state first
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM") if hasattr(signal, n))
_STDERR_TAIL_CHARS = 4000
_POLL_S = 0.2


class ResumeMismatch(Exception):
    """``resume`` asked for, but the stored run differs (or there is none); the message says how."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; ``signum`` says which (exit status ``128 + signum``).

    A KeyboardInterrupt, so every ``except KeyboardInterrupt`` and cleanup path of Ctrl-C serves SIGTERM too.
    """

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_held: list[int] | None = None
"""While a child is being started: the stop signals that arrived (raised once it is started, so it is stopped)."""


def _on_stop_signal(signum, frame) -> None:
    for s in STOP_SIGNALS:  # stopping is bounded (seconds); a second signal must not cut the cleanup short
        signal.signal(s, signal.SIG_IGN)
    if _held is not None:
        _held.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def stop_on_signals():
    """Within: SIGINT and SIGTERM raise :class:`Interrupted` (once; later ones are ignored while the run
    stops its workers). Outside the main thread, where handlers cannot be set, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _on_stop_signal) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _holding_stop_signals():
    """Delay a stop signal that arrives while a child is being started until its Popen is in hand."""
    global _held
    _held = []
    try:
        yield
    finally:
        got, _held = _held, None
    if got:
        raise Interrupted(got[0])


@dataclass
class GroupOutcome:
    """What became of one group's child process."""

    group: str
    outcome: str  # "ok", "crashed", "timeout", "no_result", "load_failed"
    results: list[CheckResult]
    elapsed_s: float
    returncode: int | None = None
    stderr_tail: str = ""
    scope: dict = field(default_factory=dict)  # what the group's calls exercised (specsim.conformance.core.scope)

    def to_json(self) -> dict:
        return {"group": self.group, "outcome": self.outcome, "elapsed_s": round(self.elapsed_s, 3),
                "returncode": self.returncode, "stderr_tail": self.stderr_tail}


@dataclass
class Plan:
    """What a run is: the fields a resumed run must share with the stored one."""

    device_spec: str
    seed: int
    alpha_family: float
    quick: bool
    groups: list[str]
    device_name: str | None = None
    capabilities: dict | None = None
    extra: dict = field(default_factory=dict)
    waivers: str | None = None  # the waiver file's content hash (vendor_waivers.WaiverFile.key), None: no file
    code: dict | None = None  # code_fingerprint(): the device's and the suite's code, SPEC and package versions
    call_bytes: int = DEFAULT_CALL_BYTES  # the run's per-call budget (--call-bytes): which offsets L1-offsets crosses

    def key(self) -> dict:
        """As stored in conformance.json (JSON round-tripped, so tuples compare equal to lists)."""
        return json.loads(json.dumps(self._key()))

    def _key(self) -> dict:
        return {"device": self.device_spec, "seed": self.seed, "alpha_family": self.alpha_family,
                "quick": self.quick, "groups": list(self.groups), "device_name": self.device_name,
                "capabilities": self.capabilities, "waivers": self.waivers, "code": self.code,
                "call_bytes": self.call_bytes}

    def declaration(self) -> str:
        """What the device declared in the parent (name and capabilities), as one hash a worker checks."""
        return _digest(json.dumps({"name": self.device_name, "capabilities": self.capabilities}, sort_keys=True))


# ----------------------------------------------------------------------------- what a run's code is

_FINGERPRINT_PACKAGES = ("numpy", "scipy", "torch", "triton", "ml_dtypes")
"""Installed packages whose release can change a device's answers; their versions are part of a run's code."""


def _digest(text: str) -> str:
    import hashlib
    return hashlib.sha256(text.encode()).hexdigest()


def _files_digest(roots: list[str]) -> str:
    """SHA-256 over every Python file below ``roots`` (paths relative to their root, and bytes)."""
    import hashlib
    h = hashlib.sha256()
    for root in sorted(set(roots)):
        files = [root] if os.path.isfile(root) else sorted(
            os.path.join(d, f) for d, dirs, names in os.walk(root) if "__pycache__" not in d
            for f in names if f.endswith((".py", ".so", ".pyd", ".cu", ".cpp", ".h", ".json", ".toml")))
        for path in files:
            h.update(os.path.relpath(path, os.path.dirname(root)).encode())
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _module_roots(names: list[str]) -> list[str]:
    """The files of each module's top-level package (the whole package: a kernel lives beside its device)."""
    import importlib.util
    roots = []
    for name in names:
        top = name.split(".")[0]
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            roots += [p for p in spec.submodule_search_locations if os.path.isdir(p)]
        elif spec.origin and os.path.isfile(spec.origin):
            roots.append(spec.origin)
    return roots


def _package_versions(modules: list[str]) -> dict:
    from importlib import metadata
    names = list(_FINGERPRINT_PACKAGES)
    try:
        owners = metadata.packages_distributions()
        names += [d for m in modules for d in owners.get(m.split(".")[0], ())]
    except Exception:  # an odd environment: the fixed list still stands
        pass
    versions = {}
    for n in dict.fromkeys(names):
        try:
            versions[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return versions


def code_fingerprint(device_spec: str, device) -> dict:
    """What a run's results depend on besides its options: specsim's release and code, the SPEC version,
    the device's code (every source and data file — JSON, TOML — of the top-level package of its class and of its
    factory), its settings (``document.device_config``: a launch shape read from a tuning file anywhere) and the
    installed releases of the packages it runs on. ``--resume`` refuses a run whose fingerprint differs:
    results of two different codes are never one certificate."""
    from reference import SPEC_VERSION
    from specsim import __version__
    modules = [type(device).__module__] + ([device_spec.split(":")[0]] if ":" in device_spec else [])
    suite = _module_roots(["specsim", "reference", "devices"])
    from specsim.conformance.run.document import device_config
    return {"specsim": __version__, "spec_version": SPEC_VERSION, "suite_code": _files_digest(suite),
            "device_code": _files_digest(_module_roots(modules)), "packages": _package_versions(modules),
            "device_config": device_config(device)}


# ----------------------------------------------------------------------------- child side


def _write_json_atomic(path: str, doc) -> None:
    from specsim.conformance.run.files import write_json_atomic
    write_json_atomic(path, doc)


def worker_main(argv: list[str] | None = None) -> int:
    """The child: load the device, run one group, write its results. Exit 0 when written, 3 when the
    device does not load here."""
    p = argparse.ArgumentParser(prog="python -m specsim.conformance.run.isolation",
                                description="run one conformance group (the child of `specsim conform`)")
    p.add_argument("--device", required=True)
    p.add_argument("--group", required=True, help="group name (as in runner.GROUPS)")
    p.add_argument("--target", default=None, help="'module:function' of the group (default: runner.GROUPS[group])")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--alpha", type=float, default=1e-3)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--call-bytes", type=int, default=None,
                   help="the bytes one call may hold (default: SPECSIM_CALL_BYTES, else 1 GiB)")
    p.add_argument("--result", required=True, help="where to write the results JSON")
    p.add_argument("--declaration", default=None,
                   help="the hash of the parent's device name and capabilities (Plan.declaration); a device that "
                        "declares otherwise here is refused (exit 4)")
    args = p.parse_args(argv)

    if hasattr(signal, "SIGUSR1"):  # the parent asks for a traceback before killing a hung child
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)

    from devices.registry import DeviceLoadError, load
    from specsim.conformance.run.runner import Context, GROUPS, run_group

    try:
        device = load(args.device)
    except DeviceLoadError as e:
        print(f"device load failed in the group's process: {e}", file=sys.stderr)
        return 3
    if args.declaration is not None:
        caps = getattr(device, "capabilities", None)
        here = Plan("", 0, 0.0, False, [], getattr(device, "name", None),
                    caps.to_json() if caps is not None else None)
        if here.declaration() != args.declaration:
            print(f"the device loaded in the group's process declares otherwise than in the run's process: here "
                  f"name {here.device_name!r}, capabilities {json.dumps(here.capabilities, sort_keys=True)}. A "
                  "device's declaration must not depend on the process that loads it (a factory probing the "
                  "hardware differently per process?): one run, one declaration", file=sys.stderr)
            return DECLARATION_MISMATCH_EXIT
    if args.target:  # a group not in GROUPS (the parent names it by target); register it for run_group
        GROUPS[args.group] = args.target
    ctx = Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick,
                  **({} if args.call_bytes is None else {"call_bytes": args.call_bytes}))
    started = time.monotonic()
    scopes: dict = {}
    results = run_group(args.group, device, ctx, scopes)
    _write_json_atomic(args.result, {"group": args.group, "elapsed_s": time.monotonic() - started,
                                     "results": [r.to_json() for r in results], "scope": scopes.get(args.group, {})})
    return 0


DECLARATION_MISMATCH_EXIT = 4
"""A worker's exit status when the device it loaded declares otherwise than the parent's."""


# ----------------------------------------------------------------------------- parent side


def _layer_of(group: str) -> str:
    return group.split("-")[0]  # the runner's convention: "L1-keyed" -> "L1"


def _error(group: str, what: str, detail: str) -> CheckResult:
    return CheckResult(name=f"{group}/{what}", layer=_layer_of(group), status="error", detail=detail,
                       extra={"group": group})


def _child_env() -> dict:
    """The child must import what the parent could (a 'module:attr' device found via sys.path)."""
    env = dict(os.environ)
    paths = [p for p in sys.path if isinstance(p, str) and p]
    if "" in sys.path or not sys.path:
        paths.insert(0, os.getcwd())
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    env.setdefault("PYTHONFAULTHANDLER", "1")  # a crash prints every thread's Python stack to stderr
    env["SPECSIM_PROGRESS"] = "0"
    return env


def _signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _tail(path: str, n: int = _STDERR_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(size - n, 0))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return ("…" if size > n else "") + text.strip()


def _clean(tail: str) -> str:
    """Drop faulthandler's 'Extension modules: ...' list: long, and the same for every crash."""
    return re.sub(r"\n\s*Extension modules:[^\n]*(\n\s*\(total: \d+\))?", "", tail).strip()


def _where(tail: str) -> str:
    """The innermost Python frame of a faulthandler dump (where it crashed or hung), or ''.

    >>> _where('Current thread 0x1 (most recent call first):\\n  File "/x/dev.py", line 9 in verify\\n  File "/x/g.py"')
    ' in verify (/x/dev.py:9)'
    """
    m = re.search(r'most recent call first\):\s*\n\s*File "([^"]+)", line (\d+) in (\S+)', tail)
    return f" in {m.group(3)} ({m.group(1)}:{m.group(2)})" if m else ""


def _stop(proc: subprocess.Popen, *, dump: bool = True) -> None:
    """Stop the child's whole process group: a traceback first (SIGUSR1, when ``dump``), then SIGTERM, then
    SIGKILL; and SIGKILL whatever of the group outlived its leader (a device's helper process)."""
    def send(sig) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    steps = ([(getattr(signal, "SIGUSR1", None), _DUMP_GRACE_S)] if dump else []) \
        + [(signal.SIGTERM, _KILL_GRACE_S if dump else _INTERRUPT_GRACE_S)]
    for sig, grace in steps:
        if sig is None:
            continue
        send(sig)
        try:
            proc.wait(grace)
            break
        except subprocess.TimeoutExpired:
            pass
    # The group's id stays reserved while any member lives, so this reaches only what is left of it.
    send(signal.SIGKILL)
    proc.wait()


def run_group_in_subprocess(group: str, target: str, device_spec: str, ctx, workdir: str, *,
                            timeout_s: float = DEFAULT_GROUP_TIMEOUT_S,
                            on_tick: Callable[[], None] | None = None,
                            declaration: str | None = None, running: dict | None = None,
                            stopping: threading.Event | None = None) -> GroupOutcome:
    """Run one group in a child process and turn whatever happens into results.

    - ``target``: the group's ``"module:function"``.
    - ``workdir``: where the child's result and stderr files go (removed afterwards).
    - ``declaration``: ``Plan.declaration()`` of the parent's device; the child refuses a device that declares
      otherwise (one ``error`` result ``<group>/declaration-mismatch``).
    - ``running``, ``stopping``: for groups run side by side (``run_isolated(jobs=N)``), where stop signals reach
      the main thread only: the child's ``Popen`` is registered in ``running[group]`` while it lives, so the
      main thread can stop it, and a child started after ``stopping`` was set is stopped at once.
    """
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", group)
    result_path = os.path.join(workdir, f".{safe}.child.json")
    stderr_path = os.path.join(workdir, f".{safe}.stderr")
    for path in (result_path, stderr_path):
        if os.path.exists(path):
            os.remove(path)
    cmd = [sys.executable, "-X", "faulthandler", "-m", "specsim.conformance.run.isolation",
           "--device", device_spec, "--group", group, "--target", target, "--seed", str(ctx.seed),
           "--alpha", repr(ctx.alpha_family), "--result", result_path] + (["--quick"] if ctx.quick else []) \
        + ["--call-bytes", str(getattr(ctx, "call_bytes", DEFAULT_CALL_BYTES))] \
        + (["--declaration", declaration] if declaration else [])
    started = time.monotonic()
    with open(stderr_path, "wb") as err:
        proc = None
        timed_out = False
        try:
            with _holding_stop_signals() if running is None else contextlib.nullcontext():
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                        env=_child_env(), start_new_session=True)
            if running is not None:
                running[group] = proc
                if stopping is not None and stopping.is_set():  # the run stopped while this child started
                    _stop(proc, dump=False)
            while True:
                try:
                    proc.wait(_POLL_S)
                    break
                except subprocess.TimeoutExpired:
                    if on_tick:
                        on_tick()
                    if time.monotonic() - started > timeout_s:
                        timed_out = True
                        _stop(proc)
                        break
        except BaseException as e:  # a stop signal or any parent failure: never leave the child running
            if proc is not None:
                _stop(proc, dump=not isinstance(e, KeyboardInterrupt))
            raise
    elapsed = time.monotonic() - started
    tail = _clean(_tail(stderr_path))
    rc = proc.returncode
    try:
        if timed_out:
            return GroupOutcome(group, "timeout", [_error(group, "timeout",
                f"no result after the time limit of {timeout_s:g} s (--group-timeout){_where(tail)}; the "
                f"process was stopped. Where it was:\n{tail}")], elapsed, rc, tail)
        if rc is not None and rc < 0:
            name = _signal_name(rc)
            return GroupOutcome(group, "crashed", [_error(group, "crashed",
                f"the group's process was killed by {name} (exit status {rc}) after {elapsed:.1f} s"
                f"{_where(tail)}; stderr tail:\n{tail}")], elapsed, rc, tail)
        if rc == DECLARATION_MISMATCH_EXIT:
            return GroupOutcome(group, "declaration_mismatch", [_error(group, "declaration-mismatch",
                f"the device declared otherwise in the group's process than in the run's: {tail}")], elapsed, rc, tail)
        if rc == 3:
            return GroupOutcome(group, "load_failed", [_error(group, "crashed",
                f"the device did not load in the group's process (exit 3): {tail}")], elapsed, rc, tail)
        try:
            with open(result_path) as f:
                payload = json.load(f)
            results = [CheckResult.from_json(d) for d in payload["results"]]
            group_scope = payload.get("scope") or {}
        except (OSError, ValueError, KeyError, TypeError) as e:
            return GroupOutcome(group, "no_result", [_error(group, "crashed",
                f"the group's process exited with status {rc} without results ({type(e).__name__}: {e}); "
                f"stderr tail:\n{tail}")], elapsed, rc, tail)
        return GroupOutcome(group, "ok", results, elapsed, rc, tail if rc else "", group_scope)
    finally:
        if running is not None:
            running.pop(group, None)
        for path in (result_path, stderr_path):
            if os.path.exists(path):
                os.remove(path)


def group_path(out_dir: str, group: str) -> str:
    return os.path.join(out_dir, "groups", re.sub(r"[^A-Za-z0-9_.-]", "_", group) + ".json")


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _difference(key: str, stored, now) -> str:
    if key == "waivers":  # a hash says nothing to a person; say what changed
        said = {None: "no --waivers file"}
        return (f"waivers: the stored run used {said.get(stored, f'a waiver file with {stored}')}, this one "
                f"{said.get(now, f'a waiver file with {now}')} (the same --waivers FILE, unchanged, is needed)")
    if key == "code":  # say which part of the code changed, not two dicts of hashes
        stored, now = stored or {}, now or {}
        parts = [k for k in sorted(set(stored) | set(now)) if stored.get(k) != now.get(k)]
        names = {"device_code": "the device's code", "suite_code": "specsim's code", "specsim": "specsim's release",
                 "spec_version": "the SPEC version", "packages": "installed package releases"}
        return ("code: " + ", ".join(names.get(k, k) for k in parts) + " changed since the stored run; results of "
                "two codes are never one run (start over without --resume)")
    return f"{key}: stored {stored!r}, now {now!r}"


def load_finished(out_dir: str, plan: Plan) -> dict[str, tuple[list[CheckResult], dict, dict]]:
    """A stored run's finished groups (results, isolation record, scope), after checking it is the same run
    as ``plan`` — the same options and the same code (``code_fingerprint``).

    Raises :class:`ResumeMismatch` naming every difference.
    """
    path = os.path.join(out_dir, "conformance.json")
    try:
        with open(path) as f:
            stored = json.load(f)
    except FileNotFoundError:
        raise ResumeMismatch(f"--resume: {path} does not exist; there is no run to resume "
                             "(run without --resume to start one)") from None
    except ValueError as e:
        raise ResumeMismatch(f"--resume: {path} is not valid JSON ({e}); run without --resume to start over") from None
    run = stored.get("run") or {}
    before = run.get("plan")
    if not isinstance(before, dict):
        raise ResumeMismatch(f"--resume: {path} has no run plan (written by --in-process or an older specsim); "
                             "run without --resume to start over")
    now = plan.key()
    diffs = [_difference(k, before.get(k), now[k]) for k in now if before.get(k) != now[k]]
    if diffs:
        raise ResumeMismatch("--resume: this is not the same run as the one in " + out_dir + "; "
                             + "; ".join(diffs) + ". Pass the same options, or run without --resume to start over.")
    finished = {}
    for group in plan.groups:
        try:
            with open(group_path(out_dir, group)) as f:
                gdoc = json.load(f)
            if gdoc.get("kind") != GROUP_FILE_KIND or gdoc.get("group") != group:
                continue
            if gdoc.get("plan") != plan.key():
                continue  # written by another run: run it again
            finished[group] = ([CheckResult.from_json(d) for d in gdoc["results"]], gdoc.get("isolation", {}),
                               gdoc.get("scope") or {})
        except (OSError, ValueError, KeyError, TypeError):
            continue  # not finished (or torn): run it again
    return finished


def run_isolated(device_spec: str, device, ctx, groups: dict[str, str], *, out_dir: str | None = None,
                 timeout_s: float | None = None, resume: bool = False, progress=None,
                 command: list[str] | None = None, waivers=None, jobs: int = 1) -> dict:
    """Run ``groups`` (name → ``"module:function"``) each in a subprocess; return the conformance document.

    With ``out_dir``, write ``groups/<name>.json`` and ``conformance.json`` after every group.
    ``timeout_s``: every group's limit; None: :func:`default_timeout` per group.
    ``progress``: a :class:`specsim.conformance.run.progress.Progress` (or None).
    ``waivers``: a :class:`specsim.conformance.verdict.conform_waivers.WaiverFile` applied to the document (the group
    files keep the checks as they came), or None.

    ``jobs``: how many groups run side by side (each still in its own process, with its own limit); the
    document is the same as one at a time (groups in ``groups``' order), but for ``run.jobs``. Groups share the
    host's cores and accelerators: a group that budgets its own time (L1-volume) then reaches less.

    A stop signal (:class:`Interrupted`, or KeyboardInterrupt) stops the running groups' processes, writes
    ``conformance.json`` with ``run.interrupted`` (those groups stay pending), and propagates.
    """
    if not isinstance(jobs, int) or isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"jobs: must be an int >= 1 (groups run side by side), got {jobs!r}")
    from specsim.conformance.run.document import document

    plan = Plan(device_spec, ctx.seed, ctx.alpha_family, ctx.quick, list(groups),
                getattr(device, "name", None),
                device.capabilities.to_json() if device is not None else None,
                waivers=waivers.key() if waivers is not None else None,
                code=code_fingerprint(device_spec, device),
                call_bytes=getattr(ctx, "call_bytes", DEFAULT_CALL_BYTES))
    finished = load_finished(out_dir, plan) if resume else {}
    started_at = _now()
    workdir_holder = None
    if out_dir:
        os.makedirs(os.path.join(out_dir, "groups"), exist_ok=True)
        workdir = os.path.join(out_dir, "groups")
        if not resume:  # a fresh run: earlier group files would be mistaken for this run's
            for name in os.listdir(workdir):
                if name.endswith(".json"):
                    os.remove(os.path.join(workdir, name))
    else:
        workdir_holder = tempfile.TemporaryDirectory(prefix="specsim-conform-")
        workdir = workdir_holder.name

    outcomes: dict[str, dict] = {g: dict(meta, resumed=True) for g, (_, meta, _) in finished.items()}
    by_group: dict[str, list[CheckResult]] = {g: res for g, (res, _, _) in finished.items()}
    scopes: dict[str, dict] = {g: sc for g, (_, _, sc) in finished.items()}

    interrupted: dict = {}

    def current_doc(complete: bool) -> dict:
        results = [r for g in plan.groups if g in by_group for r in by_group[g]]
        record = None
        if waivers is not None:
            from specsim.conformance.verdict.conform_waivers import apply
            results, record = apply(results, waivers, device_spec=device_spec,
                                    device_name=getattr(device, "name", None), engine=getattr(device, "engine", None))
        doc = document(device_spec, device, ctx, results, [g for g in plan.groups if g in by_group],
                       complete=complete, scope=run_scope.of_run({g: scopes[g] for g in plan.groups if g in scopes}))
        if record is not None:
            doc["waivers"] = record
        doc["run"] = {"isolation": "subprocess", "complete": complete, "jobs": jobs,
                      "group_timeout_s": {g: timeout_s or default_timeout(g) for g in plan.groups},
                      "started": started_at, "updated": _now(), "resumed": bool(finished),
                      "command": command if command is not None else list(sys.argv),
                      "finished_groups": [g for g in plan.groups if g in by_group],
                      "pending_groups": [g for g in plan.groups if g not in by_group],
                      "group_outcomes": outcomes, "plan": plan.key()}
        if interrupted:
            doc["run"]["interrupted"] = interrupted
        return doc

    def save(complete: bool) -> dict:
        doc = current_doc(complete)
        if out_dir:
            _write_json_atomic(os.path.join(out_dir, "conformance.json"), doc)
        return doc

    if progress is not None and finished:
        progress.skip(len(finished))
    save(complete=False)
    def finish(group: str, target: str, outcome: GroupOutcome, started: float | None = None) -> None:
        if out_dir:
            _write_json_atomic(group_path(out_dir, group), {
                "kind": GROUP_FILE_KIND, "group": group, "target": target, "plan": plan.key(),
                "isolation": outcome.to_json(), "results": [r.to_json() for r in outcome.results],
                "scope": outcome.scope})
        by_group[group] = outcome.results
        scopes[group] = outcome.scope
        outcomes[group] = outcome.to_json()
        if progress is not None:
            worst = next((s for s in ("error", "fail") if any(r.status == s for r in outcome.results)), "pass")
            progress.done(worst, counts=collections.Counter(r.status for r in outcome.results),
                          label=group if started is not None else None, started=started)
        save(complete=False)

    def stopped(running_groups: dict[str, float], e: KeyboardInterrupt) -> None:
        now = time.monotonic()
        interrupted.update(group=next(iter(running_groups), None),
                           signal=e.name if isinstance(e, Interrupted) else "SIGINT", at=_now())
        if running_groups:
            interrupted["elapsed_s"] = round(now - next(iter(running_groups.values())), 3)
        if len(running_groups) > 1:
            interrupted["groups"] = list(running_groups)
        for g, since in running_groups.items():
            outcomes[g] = {"group": g, "outcome": "interrupted", "elapsed_s": round(now - since, 3),
                           "signal": interrupted["signal"]}
        save(complete=False)

    pending = [(g, t) for g, t in groups.items() if g not in by_group]
    run_one = functools.partial(run_group_in_subprocess, device_spec=device_spec, ctx=ctx, workdir=workdir,
                                declaration=plan.declaration())
    try:
        if jobs == 1:
            _one_at_a_time(pending, run_one, finish, stopped, timeout_s, progress)
        else:
            _side_by_side(pending, run_one, finish, stopped, timeout_s, progress, jobs)
    finally:
        if progress is not None:
            progress.close()
        if workdir_holder is not None:
            workdir_holder.cleanup()
    return save(complete=True)


def _one_at_a_time(pending, run_one, finish, stopped, timeout_s, progress) -> None:
    """Each pending group in order, one process at a time."""
    running: dict[str, float] = {}
    try:
        for group, target in pending:
            if progress is not None:
                progress.start(group)
            running = {group: time.monotonic()}
            outcome = run_one(group, target, timeout_s=timeout_s or default_timeout(group),
                              on_tick=progress.tick if progress is not None else None)
            running = {}
            finish(group, target, outcome)
    except KeyboardInterrupt as e:  # the group's processes are stopped (run_group_in_subprocess); say where
        stopped(running, e)
        raise


def _side_by_side(pending, run_one, finish, stopped, timeout_s, progress, jobs: int) -> None:
    """The pending groups ``jobs`` at a time, each in its own process, started in order; each is recorded
    as it finishes. Stop signals reach this (the main) thread: it stops every running child, then propagates."""
    procs: dict[str, subprocess.Popen] = {}
    stopping = threading.Event()
    since: dict[str, float] = {}
    queue = list(pending)
    futures: dict = {}

    def show_running() -> None:  # the running groups, timed from the one running longest
        if progress is not None and since:
            progress.start(", ".join(since), started=min(since.values()))

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="specsim-group")
    try:
        while queue or futures:
            while queue and len(futures) < jobs:
                group, target = queue.pop(0)
                since[group] = time.monotonic()
                futures[pool.submit(run_one, group, target, timeout_s=timeout_s or default_timeout(group),
                                    running=procs, stopping=stopping)] = (group, target)
                show_running()
            done, _ = concurrent.futures.wait(futures, timeout=_POLL_S,
                                              return_when=concurrent.futures.FIRST_COMPLETED)
            for future in [f for f in futures if f in done]:  # in start order, so the record reads in order
                group, target = futures.pop(future)
                outcome = future.result()
                started = since.pop(group, None)
                finish(group, target, outcome, started)
                show_running()
            if progress is not None and not done:
                progress.tick()
    except KeyboardInterrupt as e:
        stopping.set()
        for proc in list(procs.values()):
            _stop(proc, dump=False)
        stopped(dict(since), e)
        raise
    finally:
        stopping.set()
        for proc in list(procs.values()):  # a parent failure: never leave a child running
            _stop(proc, dump=False)
        pool.shutdown(wait=True, cancel_futures=True)


if __name__ == "__main__":
    sys.exit(worker_main())
