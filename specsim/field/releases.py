"""Releases of a field engine, each installed beside the running environment: what ``specsim field --releases`` runs.

A release lives in a directory of its own under :func:`cache_root` (``~/.cache/specsim/field/releases/`` unless
``SPECSIM_RELEASE_CACHE`` or ``XDG_CACHE_HOME`` says otherwise), reused by every later run. It holds the
release itself and whatever of its requirements the running environment does not already satisfy: pip's own
resolver says which (``pip install --dry-run --report``, against this environment), then ``pip install
--no-deps --target DIR`` installs exactly those pins. A process with ``DIR`` first on ``PYTHONPATH``
(:func:`environ_with`) imports that release and, for everything else, the environment's own packages. pip runs
with the user's configuration (index, proxies, constraints, certificates); specsim names no index.

    >>> ENGINES["transformers"].devices
    ('transformers',)
    >>> check_release("5.24.0")
    '5.24.0'
    >>> check_release("latest")
    Traceback (most recent call last):
    ...
    ValueError: --releases: 'latest' is not a release number (e.g. 5.23.0)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

MARKER = ".specsim-release.json"
"""Written last into a release's directory: what was installed there; a directory without it is not used."""

PIP_TIMEOUT_S = 900
"""One pip call's limit (a resolution over the network, or the download of a release and its missing needs)."""

RELEASE_FORMAT = re.compile(r"^[0-9][0-9A-Za-z.+!_-]*$")


@dataclasses.dataclass(frozen=True)
class Engine:
    """An engine whose releases ``--releases`` installs: its pip distribution and the field devices that run it."""

    distribution: str
    devices: tuple[str, ...]


ENGINES = {"transformers": Engine("transformers", ("transformers",))}
"""Engines with a release table: their packages install with pip alone. (vLLM's device resolves its own wheel,
``devices/field/vllm_loader.py``; FlashInfer and SGLang need a GPU build.)"""


class ReleaseError(RuntimeError):
    """A release could not be installed (or pip could not be asked); the message says the command and pip's words."""


@dataclasses.dataclass(frozen=True)
class Installed:
    """A release ready to run: ``path`` goes first on ``PYTHONPATH``; ``pins``: what pip installed there."""

    distribution: str
    release: str
    path: str
    pins: tuple[str, ...]
    reused: bool


def check_release(release: str) -> str:
    """``release`` if it reads as a release number; ValueError naming ``--releases`` otherwise."""
    if not isinstance(release, str) or not RELEASE_FORMAT.match(release.strip()):
        raise ValueError(f"--releases: {release!r} is not a release number (e.g. 5.23.0)")
    return release.strip()


def engine_of(devices: list[str] | None, engine: str | None) -> tuple[str, Engine]:
    """The one engine a ``--releases`` run is about (from ``--engine``, else from ``--devices``) and the devices
    to run; ValueError naming the option otherwise.

    >>> engine_of(["transformers"], None)[0], engine_of(None, "transformers")[1].devices
    ('transformers', ('transformers',))
    """
    names = [engine] if engine else sorted({n for n, e in ENGINES.items() if set(devices or ()) & set(e.devices)})
    if len(names) != 1 or names[0] not in ENGINES:
        raise ValueError(f"--releases needs one engine with a release table, named by --engine or --devices; "
                         f"got --engine {engine!r} --devices {devices!r}; engines: "
                         + "; ".join(f"{n} (devices {list(e.devices)})" for n, e in ENGINES.items()))
    chosen = tuple(devices) if devices else ENGINES[names[0]].devices
    strays = [d for d in chosen if d not in ENGINES[names[0]].devices]
    if strays:
        raise ValueError(f"--devices: {strays} do not run {names[0]} (its devices: {list(ENGINES[names[0]].devices)})")
    return names[0], Engine(ENGINES[names[0]].distribution, chosen)


def cache_root() -> str:
    """Where installed releases are kept: ``$SPECSIM_RELEASE_CACHE``, else ``$XDG_CACHE_HOME/specsim/field/releases``,
    else ``~/.cache/specsim/field/releases``."""
    if os.environ.get("SPECSIM_RELEASE_CACHE"):
        return os.environ["SPECSIM_RELEASE_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "specsim", "releases")


def release_dir(distribution: str, release: str, root: str | None = None) -> str:
    """The directory of one release for this Python and this environment (its missing needs differ by both)."""
    env = hashlib.blake2b(os.path.realpath(sys.prefix).encode(), digest_size=4).hexdigest()
    tag = f"{distribution}-{check_release(release)}-py{sys.version_info[0]}{sys.version_info[1]}-{env}"
    return os.path.join(root or cache_root(), tag)


def _pip(args: list[str], what: str, timeout_s: float = PIP_TIMEOUT_S) -> str:
    """Run ``python -m pip ARGS`` (the user's pip configuration applies); its stdout, or ReleaseError."""
    cmd = [sys.executable, "-m", "pip", *args]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise ReleaseError(f"{what}: `{' '.join(cmd)}` gave no answer in {timeout_s:g} s") from None
    if done.returncode != 0:
        tail = "\n".join(line for line in done.stderr.strip().splitlines() if not line.startswith("WARNING"))
        raise ReleaseError(f"{what}: `{' '.join(cmd)}` exited {done.returncode}: {tail[-1500:]}")
    return done.stdout


def plan(distribution: str, release: str) -> tuple[str, ...]:
    """The exact pins a directory needs so that, first on the path, it gives ``distribution==release`` in this
    environment: the release and each requirement pip's resolver would install or change here."""
    out = _pip(["install", "--dry-run", "--quiet", "--report", "-", f"{distribution}=={release}"],
               f"resolving {distribution}=={release} against this environment")
    try:
        report = json.loads(out)
    except ValueError as e:
        raise ReleaseError(f"resolving {distribution}=={release}: pip's --report is not JSON ({e}): {out[:300]}") \
            from None
    pins = [f"{i['metadata']['name']}=={i['metadata']['version']}" for i in report.get("install", [])]
    if not any(p.split("==")[0].lower().replace("_", "-") == distribution.lower() for p in pins):
        pins.insert(0, f"{distribution}=={release}")   # installed here already: the directory still holds its own
    return tuple(pins)


def _installed(path: str) -> dict | None:
    try:
        with open(os.path.join(path, MARKER)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def install(distribution: str, release: str, root: str | None = None, *, log=None) -> Installed:
    """``distribution==release`` installed into its own directory (reused when already there); ReleaseError
    if pip cannot resolve or install it. ``log``: a function for progress lines, or None."""
    release = check_release(release)
    path = release_dir(distribution, release, root)
    done = _installed(path)
    if done is not None:
        return Installed(distribution, release, path, tuple(done["pins"]), True)
    if log:
        log(f"releases: installing {distribution}=={release} into {path}")
    pins = plan(distribution, release)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = tempfile.mkdtemp(prefix=os.path.basename(path) + ".", dir=os.path.dirname(path))
    try:
        _pip(["install", "--quiet", "--no-deps", "--target", staging, *pins],
             f"installing {distribution}=={release} ({len(pins)} pin(s))")
        with open(os.path.join(staging, MARKER), "w") as f:
            json.dump({"distribution": distribution, "release": release, "pins": list(pins),
                       "python": sys.version.split()[0], "prefix": sys.prefix}, f, indent=1)
        if os.path.isdir(path):         # a run beside this one finished first: keep its copy
            shutil.rmtree(path, ignore_errors=True)
        os.replace(staging, path)
    finally:
        if os.path.isdir(staging):
            shutil.rmtree(staging, ignore_errors=True)
    return Installed(distribution, release, path, pins, False)


def available(distribution: str) -> list[str]:
    """The releases pip's index offers (newest first): ``pip index versions``; ReleaseError if it cannot say."""
    out = _pip(["index", "versions", distribution], f"asking pip's index for {distribution}'s releases", 120)
    m = re.search(r"Available versions:\s*(.*)", out)
    if not m:
        raise ReleaseError(f"pip index versions {distribution}: no 'Available versions' line in {out[:300]!r}")
    return [v.strip() for v in m.group(1).split(",") if v.strip()]


def environ_with(path: str, env: dict | None = None) -> dict:
    """``env`` (default: this process's) with ``path`` first on ``PYTHONPATH``, then every entry of this
    process's ``sys.path`` (what ``specsim.conformance.run.isolation`` hands its children), so the release wins."""
    out = dict(os.environ if env is None else env)
    rest = [p for p in sys.path if isinstance(p, str) and p] or [os.getcwd()]
    if "" in sys.path:
        rest.insert(0, os.getcwd())
    old = out.get("PYTHONPATH")
    out["PYTHONPATH"] = os.pathsep.join([path, *rest] + ([old] if old else []))
    return out
