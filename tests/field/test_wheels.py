"""Where pinned wheels come from (``devices/field/wheels.py``): a local wheel with the network off, a wheelhouse,
a PEP 691 JSON index over HTTP (range requests), a PEP 503 ``file://`` index — every member checked against its
pin, a tampered member refused — and no package-index host written into the code."""

from __future__ import annotations

import doctest
import hashlib
import http.server
import json
import pathlib
import socket
import threading
import zipfile

import pytest

from devices.field import vllm_loader, wheels
from devices.field.remote_wheel import member_hash

ROOT = pathlib.Path(__file__).resolve().parents[2]
MEMBERS = {"vllm/toy.py": b"from vllm.logger import init_logger\nlogger = init_logger(__name__)\nVALUE = 42\n",
           "vllm/data/table.bin": bytes(range(256)) * 8}
RECORD = "vllm-9.9.9.dist-info/RECORD"
FILENAME = "vllm-9.9.9-py3-none-any.whl"


def _record(members: dict[str, bytes]) -> str:
    return "".join(f"{name},{member_hash(data)},{len(data)}\n" for name, data in members.items()) + f"{RECORD},,\n"


def _wheel(path: pathlib.Path, members: dict[str, bytes], record: str | None = None) -> pathlib.Path:
    """A wheel of ``members`` whose RECORD lists each with its hash (as a build backend writes it), or ``record``."""
    record = _record(members) if record is None else record
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
        z.writestr(RECORD, record)
    return path


def _spec(wheel: pathlib.Path) -> wheels.WheelSpec:
    """The pins of the wheel as built: each member's sha256 and the RECORD's."""
    with zipfile.ZipFile(wheel) as z:
        pins = {name: hashlib.sha256(z.read(name)).hexdigest() for name in [*MEMBERS, RECORD]}
    data = wheel.read_bytes()
    return wheels.WheelSpec(project="vllm", version="9.9.9", filename=FILENAME, size=len(data),
                            sha256=hashlib.sha256(data).hexdigest(), record=RECORD, pins=pins,
                            cache_env="SPECSIM_TEST_CACHE", wheel_env="SPECSIM_TEST_WHEEL")


@pytest.fixture
def offline(monkeypatch):
    """No socket may connect: any attempt to reach a network raises."""
    def refuse(self, *args, **kwargs):
        raise OSError("network disabled in this test")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture
def no_pip_config(monkeypatch):
    """pip configured with nothing but what a test sets (the host's pip.conf and PIP_* are hidden)."""
    monkeypatch.setattr(wheels, "pip_config", lambda: {})
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", wheels.WHEELHOUSE_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.needs_extra("triton")   # vLLM's kernels run in Triton's interpreter
def test_a_local_wheel_loads_with_the_network_off_through_the_loaders_own_path(tmp_path, offline, monkeypatch):
    wheel = _wheel(tmp_path / FILENAME, MEMBERS)
    spec = _spec(wheel)
    monkeypatch.setenv(spec.wheel_env, str(wheel))
    cache = vllm_loader.fetch(tmp_path / "cache", spec=spec)
    assert {name: (cache / name).read_bytes() for name in MEMBERS} == MEMBERS
    modules = vllm_loader._execute_members(cache, "cpu", members=["vllm/toy.py"], parts={}, spec=spec)
    assert modules["vllm.toy"].VALUE == 42


@pytest.mark.parametrize("record", ["original", "rewritten"])
def test_a_tampered_member_fails_its_pin(tmp_path, offline, record):
    """A member changed under the original RECORD fails its own pin; with the RECORD rewritten to match, the
    RECORD's pin fails. Nothing reaches the cache either way."""
    spec = _spec(_wheel(tmp_path / FILENAME, MEMBERS))
    changed = {**MEMBERS, "vllm/toy.py": MEMBERS["vllm/toy.py"] + b"VALUE = 43\n"}
    (tmp_path / "tampered").mkdir()
    tampered = _wheel(tmp_path / "tampered" / FILENAME, changed, _record(MEMBERS) if record == "original" else None)
    culprit = "vllm/toy.py" if record == "original" else RECORD
    with pytest.raises(vllm_loader.VllmLoadError, match=rf"{culprit}: sha256 \w+ is not the pinned"):
        vllm_loader.fetch(tmp_path / "cache", spec=spec, wheel=tampered)
    assert not (tmp_path / "cache" / "vllm/toy.py").exists()


def test_a_record_that_disagrees_with_a_member_is_refused(tmp_path, offline):
    wheel = _wheel(tmp_path / FILENAME, MEMBERS)
    spec = _spec(wheel)
    record = zipfile.ZipFile(wheel).read(RECORD)
    lying = record.replace(member_hash(MEMBERS["vllm/toy.py"]).encode(), member_hash(b"other").encode())
    with pytest.raises(wheels.PinnedWheelError, match="differs from the wheel's RECORD"):
        wheels.verify(spec, "vllm/toy.py", MEMBERS["vllm/toy.py"], wheels.record_hashes(lying))


def test_a_wheelhouse_serves_offline(tmp_path, offline, no_pip_config, monkeypatch):
    house = tmp_path / "house"
    house.mkdir()
    spec = _spec(_wheel(house / FILENAME, MEMBERS))
    monkeypatch.setenv(wheels.WHEELHOUSE_ENV, str(house))
    cache = wheels.fetch_members(spec, tmp_path / "cache")
    assert (cache / "vllm/data/table.bin").read_bytes() == MEMBERS["vllm/data/table.bin"]


def test_a_named_wheel_that_is_missing_says_so_and_tries_nothing_else(tmp_path, offline):
    spec = _spec(_wheel(tmp_path / FILENAME, MEMBERS))
    with pytest.raises(wheels.PinnedWheelError, match="not a readable wheel"):
        wheels.fetch_members(spec, tmp_path / "cache", wheel=tmp_path / "absent.whl")


def test_a_pep503_file_index_from_pips_configuration(tmp_path, offline, no_pip_config, monkeypatch):
    files, page = tmp_path / "files", tmp_path / "simple" / "vllm"
    files.mkdir()
    page.mkdir(parents=True)
    spec = _spec(_wheel(files / FILENAME, MEMBERS))
    (page / "index.html").write_text(f'<a href="../../files/{FILENAME}#sha256={spec.sha256}">{FILENAME}</a>\n'
                                     '<a href="../../files/vllm-0.1-py3-none-any.whl">vllm-0.1-py3-none-any.whl</a>')
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    assert wheels.open_wheel(spec).where == str(files / FILENAME)
    assert (wheels.fetch_members(spec, tmp_path / "cache") / "vllm/toy.py").read_bytes() == MEMBERS["vllm/toy.py"]


def test_an_index_listing_another_build_is_refused(tmp_path, offline, no_pip_config, monkeypatch):
    page = tmp_path / "simple" / "vllm"
    page.mkdir(parents=True)
    spec = _spec(_wheel(tmp_path / FILENAME, MEMBERS))
    (page / "index.html").write_text(f'<a href="../../{FILENAME}#sha256={"0" * 64}">{FILENAME}</a>')
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "simple").as_uri())
    with pytest.raises(wheels.PinnedWheelError, match="not the pinned"):
        wheels.open_wheel(spec)


class _Index(http.server.BaseHTTPRequestHandler):
    """A PEP 691 JSON simple index at /simple/, its files at /files/ with HTTP range requests."""

    files: dict[str, bytes] = {}
    pages: dict[str, bytes] = {}
    seen: list = []

    def do_GET(self):
        self.seen.append((self.path, self.headers.get("Accept"), self.headers.get("Range")))
        if self.path in self.pages:
            body, kind, status = self.pages[self.path], "application/vnd.pypi.simple.v1+json", 200
        elif self.path in self.files and self.headers.get("Range"):
            start, stop = map(int, self.headers["Range"].removeprefix("bytes=").split("-"))
            body, kind, status = self.files[self.path][start: stop + 1], "application/octet-stream", 206
        else:
            body, kind, status = b"not found", "text/plain", 404
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_pep691_json_index_serves_the_members_by_range_requests(tmp_path, no_pip_config, monkeypatch):
    wheel = _wheel(tmp_path / FILENAME, MEMBERS)
    spec = _spec(wheel)
    doc = {"meta": {"api-version": "1.1"}, "name": "vllm",
           "files": [{"filename": FILENAME, "url": f"../../files/{FILENAME}", "hashes": {"sha256": spec.sha256},
                      "size": spec.size}]}
    _Index.pages, _Index.files, _Index.seen = {"/simple/vllm/": json.dumps(doc).encode()}, \
        {f"/files/{FILENAME}": wheel.read_bytes()}, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
        cache = wheels.fetch_members(spec, tmp_path / "cache")
    finally:
        server.shutdown()
    assert {name: (cache / name).read_bytes() for name in MEMBERS} == MEMBERS
    assert _Index.seen[0][:2] == ("/simple/vllm/", wheels.ACCEPT)
    assert all(rng is not None for path, _, rng in _Index.seen[1:]), "the wheel is read by range requests only"


def test_pips_configured_index_and_sources_in_pips_precedence(monkeypatch):
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)
    config = {"global.index-url": "https://mirror.example/simple", "global.extra-index-url": "file:///a file:///b",
              "global.find-links": "/wheels"}
    assert wheels.pip_sources(config) == wheels.PipSources(("/wheels",), ("https://mirror.example/simple",
                                                                            "file:///a", "file:///b"))
    monkeypatch.setenv("PIP_INDEX_URL", "https://proxy.example/simple")
    assert wheels.pip_sources(config).indexes[0] == "https://proxy.example/simple"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert wheels.pip_sources(config).indexes == ()


def test_no_package_index_host_is_written_into_the_code():
    hosts = ("pythonhosted", "pypi.org")
    found = [f"{path.relative_to(ROOT)}: {host}" for top in ("devices", "specsim") for path in (ROOT / top).rglob("*")
             if path.is_file() and path.suffix in (".py", ".toml", ".json", ".txt", ".sh", ".cfg")
             for host in hosts if host in path.read_text(errors="replace")]
    assert not found, found


def test_docstring_examples_run():
    assert doctest.testmod(wheels).failed == 0
