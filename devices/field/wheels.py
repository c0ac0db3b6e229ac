"""Pinned wheels: where a wheel comes from, and how the members taken out of it are checked.

A ``WheelSpec`` names one wheel (project, version, file name, size, the whole
file's sha256) and the members taken out of it, each with its pinned sha256
(the wheel's ``RECORD`` among them). ``fetch_members`` puts verified copies of
those members in a cache directory. The wheel is looked for, in this order:

1. a local wheel file: the ``wheel=`` argument, else ``$<spec.wheel_env>``
   (``SPECSIM_VLLM_WHEEL=/path/to/vllm-0.33.0-....whl``);
2. a wheelhouse, a directory holding the wheel under its own file name: the
   ``wheelhouse=`` argument, else ``$SPECSIM_WHEELHOUSE``;
3. where pip is configured to look (``pip config list`` and the ``PIP_*``
   environment: ``find-links``, ``index-url``, ``extra-index-url``; with no
   ``index-url``, pip's own default index), local places first. An index is
   read as a PEP 691 JSON simple index (``GET <index>/<project>/``), or as
   PEP 503 HTML where it serves only that (a ``file://`` index); the file of
   the pinned name is taken, its URL resolved against the page.

A local wheel (a path, or a ``file://`` URL) is read with ``zipfile``; a
remote one by HTTP range requests (``remote_wheel``: about 1 MiB instead of
the whole file; ``http_proxy``/``https_proxy`` are honoured). Whatever the
source, every member is checked against its pin and against the wheel's
``RECORD`` on the way into the cache, and again by the loaders on every load.
An index that lists the file with a different sha256 or size is refused.

>>> normalize("Mistral_Common")
'mistral-common'
>>> pip_setting({"global.index-url": "a", "install.index-url": "b"}, "index-url")
'b'
"""

from __future__ import annotations

import dataclasses
import hashlib
import html.parser
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Mapping

WHEELHOUSE_ENV = "SPECSIM_WHEELHOUSE"
"""A directory of wheels (by their own file names), consulted before any index."""

ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1")
"""PEP 691 content negotiation: JSON preferred, HTML accepted (a ``file://`` or older index serves only that)."""

TIMEOUT_S = 30.0


class PinnedWheelError(RuntimeError):
    """The wheel could not be found, read, or its members do not match their pins; the message says which."""


@dataclasses.dataclass(frozen=True)
class WheelSpec:
    """One pinned wheel and the members taken out of it.

    ``pins``: member path → sha256 (hex) of its bytes, ``record`` (the wheel's ``RECORD``) included; ``size``
    and ``sha256``: the whole file's, as its index lists them; ``cache_env`` / ``wheel_env``: the environment
    variables naming a cache directory and a local wheel file."""

    project: str
    version: str
    filename: str
    size: int
    sha256: str
    record: str
    pins: Mapping[str, str]
    cache_env: str
    wheel_env: str

    def __post_init__(self):
        if self.record not in self.pins:
            raise ValueError(f"WheelSpec {self.filename}: record {self.record!r} must be pinned too")

    def cache_dir(self) -> pathlib.Path:
        """``$cache_env``, else ``$XDG_CACHE_HOME/specsim/<project>-<version>``, else ``~/.cache/...``."""
        return user_cache_dir(self.cache_env, f"{self.project}-{self.version}")


def user_cache_dir(env: str, name: str) -> pathlib.Path:
    """``$env``, else ``$XDG_CACHE_HOME/specsim/name``, else ``~/.cache/specsim/name``."""
    if os.environ.get(env):
        return pathlib.Path(os.environ[env])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "specsim" / name


def normalize(project: str) -> str:
    """PEP 503's normalized project name (the simple index's path segment)."""
    return re.sub(r"[-_.]+", "-", project).lower()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- the members: pins, RECORD, the cache -------------------------------------------------------------------
def record_hashes(record: bytes) -> dict[str, str]:
    """RECORD lines ``path,sha256=<b64>,size`` → path → ``sha256=<b64>``."""
    out = {}
    for line in record.decode("utf-8").splitlines():
        if line.strip():
            path, digest, _ = line.rsplit(",", 2)
            out[path] = digest
    return out


def verify(spec: WheelSpec, name: str, data: bytes, record: dict[str, str] | None) -> None:
    """``data`` is member ``name`` of ``spec``'s wheel: its pin, and its ``RECORD`` line when given."""
    from devices.field.remote_wheel import member_hash
    got = sha256_hex(data)
    if got != spec.pins[name]:
        raise PinnedWheelError(f"{name}: sha256 {got} is not the pinned {spec.pins[name]} of {spec.project} "
                               f"{spec.version}; delete the cache entry and fetch again (a local wheel or an index "
                               "serving a different build is refused)")
    if record is not None and record.get(name) != member_hash(data):
        raise PinnedWheelError(f"{name}: hash {member_hash(data)} differs from the wheel's RECORD ({record.get(name)})")


def write_atomic(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def cached(spec: WheelSpec, cache: pathlib.Path, name: str) -> bytes | None:
    """Member ``name`` from ``cache`` if it is there and matches its pin; else None."""
    path = cache / name
    if not path.is_file():
        return None
    data = path.read_bytes()
    return data if sha256_hex(data) == spec.pins[name] else None


# -- local wheels --------------------------------------------------------------------------------------------
class LocalWheel:
    """A wheel file on the local disk, read with ``zipfile`` (CRC-32 checked by it)."""

    def __init__(self, path: str | os.PathLike):
        self.path = pathlib.Path(path)
        try:
            self.zip = zipfile.ZipFile(self.path)
        except (OSError, zipfile.BadZipFile) as e:
            raise PinnedWheelError(f"{self.path}: not a readable wheel ({e})") from e
        self.where = str(self.path)

    def read(self, name: str) -> bytes:
        try:
            return self.zip.read(name)
        except KeyError:
            raise PinnedWheelError(f"{self.path}: no member {name!r} in the wheel") from None
        except (OSError, zipfile.BadZipFile) as e:
            raise PinnedWheelError(f"{self.path}: member {name!r} unreadable ({e})") from e


class _Remote:
    """A wheel on an index, members by range requests."""

    def __init__(self, url: str, size: int):
        from devices.field.remote_wheel import RemoteWheel, WheelFetchError
        self.where = url
        try:
            self.wheel = RemoteWheel(url, size)
        except WheelFetchError as e:
            raise PinnedWheelError(str(e)) from e

    def read(self, name: str) -> bytes:
        from devices.field.remote_wheel import WheelFetchError
        try:
            return self.wheel.read(name)
        except WheelFetchError as e:
            raise PinnedWheelError(str(e)) from e


# -- pip's configuration -------------------------------------------------------------------------------------
def pip_config() -> dict[str, str]:
    """``pip config list`` as a dict (``global.index-url`` → value; ``:env:.index-url`` for ``PIP_INDEX_URL``):
    every configuration file pip reads and its environment, as pip itself merges them. Empty where pip cannot
    be run (the ``PIP_*`` environment is still read by ``pip_setting``)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                             timeout=60, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    except (OSError, subprocess.SubprocessError):
        return {}
    config = {}
    for line in out.stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip().strip("'\"")
    return config


def pip_setting(config: Mapping[str, str], name: str) -> str | None:
    """A pip option as ``pip install`` sees it: the environment (``PIP_INDEX_URL``), then the ``install``,
    ``download`` and ``global`` sections."""
    env = os.environ.get("PIP_" + name.upper().replace("-", "_"))
    if env:
        return env
    for section in (":env:", "install", "download", "global"):
        if config.get(f"{section}.{name}"):
            return config[f"{section}.{name}"]
    return None


def pip_default_index() -> str | None:
    """The index pip uses when none is configured, as the installed pip defines it (None without pip)."""
    try:
        from pip._internal.models.index import PyPI
    except ImportError:
        return None
    return PyPI.simple_url


@dataclasses.dataclass(frozen=True)
class PipSources:
    """Where pip would look: ``find_links`` (directories or pages), ``indexes`` (simple indexes, in order)."""

    find_links: tuple[str, ...]
    indexes: tuple[str, ...]


def pip_sources(config: Mapping[str, str] | None = None) -> PipSources:
    """pip's ``find-links`` and indexes (``index-url``, else pip's default; then ``extra-index-url``); none
    under ``no-index``."""
    config = pip_config() if config is None else config
    links = tuple((pip_setting(config, "find-links") or "").split())
    if (pip_setting(config, "no-index") or "").lower() in ("1", "true", "yes", "on"):
        return PipSources(links, ())
    index = pip_setting(config, "index-url") or pip_default_index()
    extra = (pip_setting(config, "extra-index-url") or "").split()
    return PipSources(links, tuple(u for u in ([index] if index else []) + extra))


# -- index pages -----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str                 # absolute, fragment removed
    sha256: str | None
    size: int | None


class _Anchors(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href, self._text = dict(attrs).get("href"), []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _is_local(url: str) -> bool:
    return urllib.parse.urlparse(url).scheme in ("", "file")


def _local_path(url: str) -> pathlib.Path:
    parsed = urllib.parse.urlparse(url)
    return pathlib.Path(urllib.request.url2pathname(parsed.path) if parsed.scheme == "file" else url)


def _read_page(url: str) -> tuple[bytes, str, str]:
    """``(body, content type, the page's own URL)``; a ``file://`` directory is read as its ``index.html``."""
    if _is_local(url):
        path = _local_path(url)
        if path.is_dir():
            path = path / "index.html"
        page = path.resolve().as_uri()
        try:
            return path.read_bytes(), "text/html", page
        except OSError as e:
            raise PinnedWheelError(f"{url}: {e}") from e
    request = urllib.request.Request(url, headers={"Accept": ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            return response.read(), response.headers.get("Content-Type", ""), response.geturl()
    except Exception as e:   # network errors, HTTP 404 (the project is not on this index), ...
        raise PinnedWheelError(f"{url}: {e}") from e


def parse_page(body: bytes, content_type: str, page_url: str) -> dict[str, IndexFile]:
    """A simple-index (or find-links) page's files by name: PEP 691 JSON or PEP 503 HTML, URLs made absolute.

    >>> page = b'<a href="../../f/x-1.whl#sha256=ab">x-1.whl</a>'
    >>> parse_page(page, "text/html", "https://i.example/simple/x/")["x-1.whl"]
    IndexFile(filename='x-1.whl', url='https://i.example/f/x-1.whl', sha256='ab', size=None)
    """
    out = {}
    if "json" in content_type:
        for f in json.loads(body).get("files", []):
            url, _, _ = urllib.parse.urljoin(page_url, f["url"]).partition("#")
            out[f["filename"]] = IndexFile(f["filename"], url, (f.get("hashes") or {}).get("sha256"), f.get("size"))
        return out
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    for href, text in parser.links:
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        name = text or urllib.parse.unquote(url.rstrip("/").rsplit("/", 1)[-1])
        digest = dict(p.split("=", 1) for p in fragment.split("&") if "=" in p).get("sha256")
        out[name] = IndexFile(name, url, digest, None)
    return out


def _checked(spec: WheelSpec, f: IndexFile, where: str) -> IndexFile:
    if f.sha256 is not None and f.sha256 != spec.sha256:
        raise PinnedWheelError(f"{where} lists {spec.filename} with sha256 {f.sha256}, not the pinned {spec.sha256}")
    if f.size is not None and f.size != spec.size:
        raise PinnedWheelError(f"{where} lists {spec.filename} of {f.size} bytes, not the pinned {spec.size}")
    return f


def _open(spec: WheelSpec, url_or_path: str):
    return LocalWheel(_local_path(url_or_path)) if _is_local(url_or_path) else _Remote(url_or_path, spec.size)


# -- the search ------------------------------------------------------------------------------------------------
def open_wheel(spec: WheelSpec, wheel: str | os.PathLike | None = None,
               wheelhouse: str | os.PathLike | None = None, config: Mapping[str, str] | None = None):
    """The wheel of ``spec``, opened from the first place that has it (the module docstring's order); an
    object with ``read(member) -> bytes`` and ``where``. Raises ``PinnedWheelError`` listing every place
    tried and why it did not serve."""
    wheel = wheel or os.environ.get(spec.wheel_env)
    if wheel:   # named explicitly: it is used or the error says why, no other place is tried
        return LocalWheel(wheel)
    tried = []
    houses = [h for h in (wheelhouse, os.environ.get(WHEELHOUSE_ENV)) if h]
    for house in houses:
        path = pathlib.Path(house) / spec.filename
        if path.is_file():
            return LocalWheel(path)
        tried.append(f"wheelhouse {house}: no {spec.filename}")
    sources = pip_sources(config)
    pages = [(link, link) for link in sources.find_links] + \
            [(index, index.rstrip("/") + "/" + normalize(spec.project) + "/") for index in sources.indexes]
    pages.sort(key=lambda p: not _is_local(p[1]))          # local places first: no network when they serve
    for source, page in pages:
        if _is_local(page) and _local_path(page).is_dir() and (_local_path(page) / spec.filename).is_file():
            return LocalWheel(_local_path(page) / spec.filename)   # a find-links directory
        try:
            files = parse_page(*_read_page(page))
            if spec.filename not in files:
                tried.append(f"{source}: no {spec.filename}")
                continue
            return _open(spec, _checked(spec, files[spec.filename], source).url)
        except PinnedWheelError as e:
            tried.append(f"{source}: {e}")
    raise PinnedWheelError(f"{spec.filename} not found ({'; '.join(tried) or 'pip has no index configured'}). "
                           f"Name the wheel ({spec.wheel_env}=/path/to/{spec.filename}) or a directory holding it "
                           f"({WHEELHOUSE_ENV}=DIR), or configure pip's index (PIP_INDEX_URL, pip.conf's index-url)")


def fetch_members(spec: WheelSpec, cache: pathlib.Path | None = None, wheel: str | os.PathLike | None = None,
                  wheelhouse: str | os.PathLike | None = None) -> pathlib.Path:
    """Every pinned member of ``spec`` in ``cache`` (default ``spec.cache_dir()``), verified against its pin and
    the wheel's ``RECORD``; only what is missing or corrupt is read from the wheel (``open_wheel``). Returns the
    cache directory. Safe to run concurrently (atomic writes)."""
    cache = pathlib.Path(cache) if cache is not None else spec.cache_dir()
    missing = [name for name in spec.pins if cached(spec, cache, name) is None]
    if not missing:
        return cache
    source = open_wheel(spec, wheel, wheelhouse)
    got = {name: source.read(name) for name in missing}
    record_bytes = got.get(spec.record) or cached(spec, cache, spec.record)
    verify(spec, spec.record, record_bytes, None)
    record = record_hashes(record_bytes)
    for name, data in got.items():
        try:
            verify(spec, name, data, None if name == spec.record else record)
        except PinnedWheelError as e:
            raise PinnedWheelError(f"{e} [read from {source.where}]") from None
        write_atomic(cache / name, data)
    return cache


__all__ = ["WheelSpec", "PinnedWheelError", "LocalWheel", "fetch_members", "open_wheel", "pip_sources",
           "parse_page", "verify", "record_hashes", "cached", "user_cache_dir", "WHEELHOUSE_ENV"]
