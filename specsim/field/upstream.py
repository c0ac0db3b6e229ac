"""Upstream reports: one markdown file per confirmed field deviation that an engine's maintainers should fix.

``specsim field --out DIR`` sorts every failing check of a field adapter into a
known deviation (``specsim.field.table``). The deviations judged a **loss of
losslessness** or an **RNG-contract break** get a report, ``DIR/upstream/
<engine>-<deviation>.md``, written for the engine's tracker and standing on its
own: what happens, where in the engine's code (links to the release tag of the
pinned version, the lines quoted from the package loaded when the report is
written), what lossless rejection sampling gives there, what the engine gives
(the standalone reproduction's output), the environment it ran in, the
reproduction itself (``devices/field/repro/``: the engine and torch, no
specsim; exit 0 the lossless answer, 1 the bug present, 3 a dependency
missing), the impact with numbers, the upstream threads it relates to and the
fix. Nothing in it refers to this project's own numbering (check names, SPEC
sections, rows of docs/bugs.md) or to a path of the machine that wrote it:
:func:`upstream_text_problems` says what would. ``DIR/upstream/README.md``, for
this project, lists every deviation with its kind, the checks that found it and
its report or why none.

The kinds (a waiver's ``judgement``):

    >>> [is_reported(j) for j in ("loss of losslessness", "RNG-contract break", "contract difference")]
    [True, True, False]
    >>> gravest(["semantics difference at an edge of SPEC", "loss of losslessness"])
    'loss of losslessness'
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import platform
import re
import subprocess
import sys

KINDS = {
    "loss of losslessness": "a correctness bug: the emitted tokens do not follow the target law",
    "RNG-contract break": "a break of the randomness contract the engine itself keeps elsewhere or does not "
                          "document otherwise; the output law is unchanged",
    "contract difference": "a randomness contract the engine documents and SPEC states otherwise; not a "
                           "correctness bug",
    "semantics difference at an edge of SPEC": "a choice SPEC makes one way and the engine another, at an edge; "
                                               "not a correctness bug",
    "adapter limitation": "the adapter's own limit, not the engine's",
}
"""Each judgement of ``specsim.conformance.verdict.waivers.JUDGEMENTS``, gravest first, with what it means for a report."""

REPORTED = ("loss of losslessness", "RNG-contract break")
"""The judgements that get an upstream report."""

ENTRIES_FILE = "upstream_reports.toml"
"""The report entries shipped beside the adapters in ``devices/field/``."""

OUR_PACKAGES = ("specsim", "devices", "reference", "property_tests", "reports")
"""This project's top-level packages: a standalone reproduction must import none of them."""


def is_reported(judgement: str) -> bool:
    """Whether a deviation of this judgement gets an upstream report."""
    return judgement in REPORTED


def gravest(judgements) -> str:
    """The gravest of a deviation's judgements (its entries may be judged apart: one check at u = 0, one at
    u == ratio); an unknown or unjudged one ranks last."""
    order = list(KINDS)
    return min(judgements, key=lambda j: order.index(j) if j in order else len(order))


# -- the report entries (devices/field/upstream_reports.toml) ----------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Source:
    """Lines of the engine's source that hold the cause: ``file`` relative to the package's install root,
    ``lines`` (first, last), ``contains``: text those lines must hold."""

    file: str
    lines: tuple[int, int]
    contains: str


@dataclasses.dataclass(frozen=True)
class Thread:
    """An upstream issue or pull request a finding relates to: ``ref`` as its tracker names it ("vLLM PR
    #32642"), its ``url`` and how it relates."""

    ref: str
    url: str
    relation: str


@dataclasses.dataclass(frozen=True)
class Entry:
    """One deviation's report material: see ``devices/field/upstream_reports.toml``. ``version`` is the pinned
    release the report is about; the links' tag is ``tag`` formatted with it, never a display text."""

    deviation: str
    devices: tuple[str, ...]
    package: str
    repository: str
    version: str
    tag: str
    runner: str
    title: str
    what: str
    expected: str
    impact: str
    repro: str
    filing: str = "issue"          # "issue", or "pull request" for a one-line fix offered as such
    probability: str = ""          # how often it happens, shown beside the kind
    spec: str = ""                 # the SPEC clause, for this project's index only: never in the report
    fix: str = ""
    threads: tuple[Thread, ...] = ()
    sources: tuple[Source, ...] = ()
    repository_prefix: str = ""   # where the package's files sit in its repository ("src/" for transformers)
    observed: str = ""             # a recorded run's observation (hardware the report's writer may lack), quoted

    @property
    def release_tag(self) -> str:
        return self.tag.format(release=self.version, version=self.version)


FILINGS = ("issue", "pull request")
_REQUIRED = ("deviation", "devices", "package", "repository", "version", "tag", "runner", "title", "what",
             "expected", "impact", "repro")
_OPTIONAL = ("filing", "probability", "spec", "fix", "thread", "source", "repository_prefix", "observed")


def _entry(raw: dict, where: str) -> Entry:
    missing = [k for k in _REQUIRED if not raw.get(k)]
    unknown = set(raw) - set(_REQUIRED) - set(_OPTIONAL)
    if missing or unknown:
        raise ValueError(f"{where}: missing {missing} / unknown {sorted(unknown)} keys")
    if raw.get("filing", "issue") not in FILINGS:
        raise ValueError(f"{where}: filing must be one of {FILINGS}; got {raw['filing']!r}")
    return Entry(**{k: raw[k] for k in _REQUIRED if k != "devices"}, devices=tuple(raw["devices"]),
                 filing=raw.get("filing", "issue"), probability=raw.get("probability", ""),
                 spec=raw.get("spec", ""), fix=raw.get("fix", ""),
                 threads=tuple(_thread(t, f"{where}, thread {i + 1}") for i, t in enumerate(raw.get("thread", []))),
                 sources=tuple(_source(x, f"{where}, source {i + 1}") for i, x in enumerate(raw.get("source", []))),
                 repository_prefix=raw.get("repository_prefix", ""), observed=raw.get("observed", ""))


def _thread(raw: dict, where: str) -> Thread:
    if not (raw.get("ref") and raw.get("relation") and THREAD_URL.fullmatch(raw.get("url", ""))):
        raise ValueError(f"{where}: needs ref, relation and url (https://github.com/<org>/<repo>/issues|pull/<n>); "
                         f"got {raw}")
    return Thread(raw["ref"], raw["url"], raw["relation"])


def _source(raw: dict, where: str) -> Source:
    lines = raw.get("lines")
    if not (isinstance(lines, list) and len(lines) == 2 and 0 < lines[0] <= lines[1]) or not raw.get("file") \
            or not raw.get("contains"):
        raise ValueError(f"{where}: needs file, lines [first, last] and contains; got {raw}")
    return Source(raw["file"], (int(lines[0]), int(lines[1])), raw["contains"])


THREAD_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/(\d+)")
"""An upstream thread's address: an issue or a pull request (GitHub redirects one to the other)."""


def load_entries(path: str | os.PathLike | None = None) -> list[Entry]:
    """The report entries of ``devices/field/upstream_reports.toml`` (or ``path``)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    if path is None:
        import devices.field
        path = pathlib.Path(devices.field.__file__).with_name(ENTRIES_FILE)
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    return [_entry(raw, f"{path}, report {i + 1}") for i, raw in enumerate(doc.get("report", []))]


def repro_dir() -> pathlib.Path:
    import devices.field.repro
    return pathlib.Path(devices.field.repro.__file__).parent


# -- which deviations: confirmed ones, by engine ------------------------------------------------------------------
@dataclasses.dataclass
class Deviation:
    """A confirmed deviation of one engine release, over the field devices that showed it."""

    engine: str
    release: str
    deviation: str
    judgement: str
    devices: list[str]
    findings: list[dict]
    upstream_status: str = ""
    reason: str = ""
    link: str = ""
    entry: Entry | None = None
    slug: str = ""    # the report's file name without .md: <engine>-<deviation>, made unique


VERSION = re.compile(r"\d+(?:\.[0-9A-Za-z]+)+")
"""A release number as packages write it: ``0.33.0``, ``0.7.2.post1``, ``5.23.0``."""


def engine_release(entry: dict, package: str | None = None) -> tuple[str, str]:
    """``(engine, release)`` of a ``field.json`` device entry: from its ``release`` if it has one, else its engine
    text (``"vllm 0.33.0"``), else the installed package's version.

    >>> engine_release({"engine": "vllm 0.33.0 (V1 runner)", "device": "vllm"})
    ('vllm', '0.33.0')
    """
    engine, _, display = (entry.get("engine") or entry["device"]).partition(" ")
    version = VERSION.match(display.strip())     # "0.33.0 (V1 runner)": the release, not the runner's name
    release = entry.get("release") or (version.group(0) if version else "")
    if not release:
        try:
            release = importlib.metadata.version(package or engine)
        except importlib.metadata.PackageNotFoundError:
            release = "release not recorded"
    return engine, release


def _confirmed(finding: dict) -> bool:
    """Judged by a waiver, and its confirming experiment (if it has one) confirmed it."""
    if finding["deviation"] in ("NEW", "waived", ""):
        return False
    return not finding.get("confirmed") or finding["confirmed"].startswith("confirmed")


def confirmed_deviations(doc: dict, waivers_of=None, entries: list[Entry] | None = None) -> list[Deviation]:
    """Every confirmed deviation of a (merged) ``field.json``, one per engine release, deviation id and report
    entry (devices of one engine with different runners, as entries tell them apart, are reported apart), with
    the gravest judgement of its findings and the ``upstream_status`` its waiver entries record
    (``waivers_of(device)``: the device's waivers; default ``specsim.field.field_waivers``)."""
    if waivers_of is None:
        from specsim.field.table import field_waivers as waivers_of
    entries = [] if entries is None else entries
    out: dict[tuple, Deviation] = {}
    for e in doc["devices"]:
        if not e.get("available"):
            continue
        engine, release = engine_release(e)
        for f in (f for f in e["findings"] if _confirmed(f)):
            entry = entry_for(f["deviation"], e["device"], entries)
            key = (engine, release, f["deviation"], entry.devices if entry else e["device"])
            d = out.setdefault(key, Deviation(engine, release, f["deviation"], f["judgement"], [], [], entry=entry))
            d.devices += [] if e["device"] in d.devices else [e["device"]]
            d.findings.append({**f, "where": e.get("where", "")})
            d.judgement = gravest([d.judgement, f["judgement"]])
    for d in out.values():
        statuses = {w.upstream_status for dev in d.devices for w in waivers_of(dev)
                    if w.deviation == d.deviation and getattr(w, "upstream_status", "")}
        d.upstream_status = " | ".join(sorted(statuses))
        first = next(f for f in d.findings if f["judgement"] == d.judgement)   # the reason of its gravest kind
        d.reason, d.link = first.get("reason", ""), first.get("link", "")
    return _named(sorted(out.values(), key=lambda d: (d.engine, d.deviation, d.release, d.devices)))


def _named(deviations: list[Deviation]) -> list[Deviation]:
    """Give each its file name ``<engine>-<deviation>``; where two share one (two releases or runners), each
    gets its release and first device too."""
    plain = [f"{d.engine}-{d.deviation}" for d in deviations]
    for d, name in zip(deviations, plain):
        d.slug = name if plain.count(name) == 1 else f"{name}-{d.release}-{d.devices[0]}"
    return deviations


def entry_for(deviation: str, device: str, entries: list[Entry]) -> Entry | None:
    """The report entry of ``deviation`` as ``device`` shows it."""
    return next((x for x in entries if x.deviation == deviation and device in x.devices), None)


def recorded_deviation(record: dict, entry: Entry, device: str, waivers_of=None) -> Deviation:
    """The deviation ``entry`` reports, as a record of measured figures (``docs/results/<name>.json``, written
    on hardware a field run here may lack) shows it on ``device``: its findings are the record's table rows
    run on ``device`` (``run`` begins with the device's name) whose check a waiver of ``entry.deviation``
    judges and whose result is not a pass; ``ValueError`` when there is none."""
    if waivers_of is None:
        from specsim.field.table import field_waivers as waivers_of
    waivers = [w for w in waivers_of(device) if w.deviation == entry.deviation]
    versions = record.get("versions", {})
    engine, release = engine_release({"engine": f"{entry.package} {versions.get(entry.package, entry.version)}",
                                      "device": device})
    where = record_where(record)
    findings = []
    for table in record.get("tables", {}).values():
        cols = table["columns"]
        for row in (dict(zip(cols, r)) for r in table["rows"]):
            w = next((w for w in waivers if w.matches_check(row.get("check", ""))), None)
            if w is None or not str(row.get("run", "")).startswith(f"{device} ") or row["result"].startswith("pass"):
                continue
            findings.append({"device": device, "check": row["check"], "status": row["result"], "where": where,
                             "deviation": w.deviation, "judgement": w.judgement, "reason": w.reason,
                             "link": w.issue, "confirmed": ""})
    if not findings:
        raise ValueError(f"the record holds no finding of {entry.deviation!r} on {device!r} that its waivers judge")
    d = Deviation(engine, release, entry.deviation, gravest([f["judgement"] for f in findings]), [device], findings,
                  entry=entry, slug=f"{engine}-{entry.deviation}")
    d.upstream_status = " | ".join(sorted({w.upstream_status for w in waivers if w.upstream_status}))
    d.reason, d.link = findings[0]["reason"], findings[0]["link"]
    return d


def record_where(record: dict) -> str:
    """Where a record of measured figures was made, in words: its hardware, torch and Triton.

    >>> record_where({"hardware": "NVIDIA H200", "versions": {"torch": "2.11.0+cu130", "triton": "3.6.0"}})
    'NVIDIA H200, torch 2.11.0+cu130, Triton 3.6.0'
    """
    versions = record.get("versions", {})
    parts = [record.get("hardware", ""), *(f"{name} {versions[key]}" for key, name in (("torch", "torch"),
                                                                                      ("triton", "Triton"))
                                           if key in versions)]
    return ", ".join(x for x in parts if x)


# -- the engine's source, quoted from the package loaded now -------------------------------------------------------
def package_file(package: str, file: str) -> tuple[pathlib.Path | None, str]:
    """``file`` (relative to the install root, e.g. ``vllm/v1/sample/sampler.py``) of ``package`` as loaded here:
    the installed package, else for vLLM the pinned wheel's members (``devices.field.vllm_loader``); ``(None,
    why)`` when neither is here."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        path = pathlib.Path(list(spec.submodule_search_locations)[0]).parent / file
        if path.is_file():
            return path, f"the installed {package} {_version(package)}"
    if package == "vllm":
        from devices.field import vllm_loader
        try:
            cache = vllm_loader.fetch()
        except vllm_loader.VllmLoadError as e:
            return None, f"vllm is not installed and its wheel's members could not be fetched: {e}"
        if (cache / file).is_file() and (file in vllm_loader.PINNED or file in vllm_loader.V2_PINNED):
            return cache / file, f"the release wheel {vllm_loader.WHEEL_FILENAME} (sha256-checked)"
        return None, f"{file} is not one of the members vllm_loader takes from the wheel"
    return None, f"{package} is not installed here"


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "(version unknown)"


def quote(source: Source, path: pathlib.Path) -> tuple[list[str], str]:
    """The numbered lines of ``source`` in ``path`` and a note; if they do not hold ``source.contains`` (another
    release), the lines around its first occurrence elsewhere in the file, and a note saying so."""
    text = path.read_text(encoding="utf-8").splitlines()
    first, last = source.lines
    held = "\n".join(text[first - 1:last])
    if source.contains in held:
        return [f"{n:5d}  {text[n - 1]}" for n in range(first, min(last, len(text)) + 1)], ""
    hits = [i + 1 for i, line in enumerate(text) if source.contains in line]
    if not hits:
        return [], (f"lines {first}-{last} of the loaded file do not hold `{source.contains}`, and no line does: "
                    "the loaded release is not the one judged")
    span = last - first
    first, last = hits[0], min(hits[0] + span, len(text))
    return ([f"{n:5d}  {text[n - 1]}" for n in range(first, last + 1)],
            f"the judged lines {source.lines[0]}-{source.lines[1]} moved: `{source.contains}` is at line {hits[0]} "
            "of the loaded file (another release?)")


def github_link(entry: Entry, source: Source) -> str:
    """``source``'s lines on GitHub at the release tag of the entry's pinned version."""
    return (f"{entry.repository}/blob/{entry.release_tag}/{entry.repository_prefix}{source.file}"
            f"#L{source.lines[0]}-L{source.lines[1]}")


# -- the standalone reproduction, run without specsim --------------------------------------------------------------
_ISOLATED = r"""
import importlib.util, json, runpy, sys, traceback
path, ours, script, args, probe = json.loads(sys.argv[1])
class NotHere:
    # This project's packages are not importable in a standalone reproduction, wherever they are installed.
    def find_spec(self, name, target_path=None, target=None):
        if name.split(".")[0] in ours:
            raise ImportError(f"{name} imported: a standalone reproduction must not import specsim's packages")
        return None
sys.meta_path.insert(0, NotHere())
sys.path[:] = [p for p in path if p not in sys.path] + sys.path
if probe:
    sys.exit(0 if importlib.util.find_spec(probe) else 1)
sys.argv = [script, *args]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.exit(4)   # ISOLATION_FAILED
"""
MISSING_DEPENDENCY = 3
"""Exit status of a reproduction whose engine (or torch) does not import: never the bug's 1."""
ISOLATION_FAILED = 4
"""Exit status of a standalone run that raised (an import refused, a version assertion): neither 1 nor 3."""


def checkout_roots() -> set[str]:
    """Directories that hold this project's packages (the checkout, an editable install's source), except
    site-packages itself (a plain install puts them there beside the engines; the refusal covers that)."""
    import site
    sites = {os.path.realpath(p) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    roots = set()
    for name in OUR_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            roots |= {os.path.realpath(os.path.dirname(p)) for p in spec.submodule_search_locations}
    return roots - sites


def isolated_path() -> list[str]:
    """This interpreter's import path without this project: site-packages and anything on ``PYTHONPATH`` that
    does not hold specsim's packages (an engine installed there by ``pip install --target`` stays visible)."""
    ours = checkout_roots()
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) not in ours
            and os.path.realpath(p) != os.path.realpath(os.getcwd())]


def isolated_command(script: str | os.PathLike, args=()) -> list[str]:
    """``python -I -S`` running ``script`` with :func:`isolated_path` only and this project's packages refused:
    no site processing (an editable install's path hook never runs), no ``PYTHONPATH``, no script directory."""
    payload = json.dumps([isolated_path(), list(OUR_PACKAGES), str(script), list(args), ""])
    return [sys.executable, "-I", "-S", "-c", _ISOLATED, payload]


def importable_standalone(module: str, cwd: str | None = None) -> bool:
    """Whether ``module`` imports in the isolated interpreter :func:`isolated_command` gives a reproduction."""
    payload = json.dumps([isolated_path(), list(OUR_PACKAGES), "", [], module])
    done = subprocess.run([sys.executable, "-I", "-S", "-c", _ISOLATED, payload], capture_output=True, text=True,
                          cwd=cwd or _scratch(), timeout=120)
    return done.returncode == 0


def _scratch() -> str:
    import tempfile
    return tempfile.gettempdir()


@dataclasses.dataclass
class ReproRun:
    """A reproduction's run: how it was run, its exit status (None: not run) and its output."""

    how: str
    returncode: int | None
    output: str
    where: str = ""
    """The machine it ran on, in words, where that is not this one (a run kept in a record)."""


def run_standalone(script, args=(), timeout: float = 300, cwd: str | None = None) -> ReproRun:
    """Run ``script`` in the isolated interpreter from a scratch directory (exit 1: the deviation is present)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(isolated_command(script, args), capture_output=True, text=True, cwd=cwd or _scratch(),
                          env=env, timeout=timeout)
    return ReproRun("standalone: `python -I -S` against the installed package", done.returncode,
                    (done.stdout + done.stderr).strip())


def run_repro(entry: Entry, timeout: float = 300, repros: pathlib.Path | None = None) -> ReproRun:
    """The report's reproduction, run here: standalone where its engine is installed; for vLLM without an
    install, the same file on the pinned wheel's members (``devices/field/repro/on_vllm_members.py``)."""
    script = (repros or repro_dir()) / entry.repro
    try:
        if importable_standalone(entry.package):
            return run_standalone(script, timeout=timeout)
        if entry.package != "vllm":
            return ReproRun(f"not run: {entry.package} is not installed here", None, "")
        root = str(pathlib.Path(script).parents[3])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)   # Triton may live there
        done = subprocess.run([sys.executable, "-m", "devices.field.repro.on_vllm_members", str(script)],
                              capture_output=True, text=True, timeout=timeout, cwd=root,
                              env={**os.environ, "PYTHONPATH": path})
        return ReproRun("vLLM not installed: the same file, unchanged, on the release wheel's own modules "
                        "(sha256-checked), " + ("compiled on the GPU" if _gpu_name() else "in Triton's interpreter "
                        "on the CPU"), done.returncode,
                        (done.stdout + done.stderr).strip())
    except subprocess.TimeoutExpired:
        return ReproRun(f"timed out after {timeout:.0f} s", None, "")


# -- the report ------------------------------------------------------------------------------------------------------
def render_report(d: Deviation, entry: Entry | None, run: ReproRun | None, repros: pathlib.Path | None = None) -> str:
    """One upstream report (markdown), standing on its own: see the module's docstring."""
    if entry is None:
        return _incomplete(d)
    lines = [f"# [{d.engine} {entry.version}] {entry.title}", "", *_summary(d, entry), "",
             "## What happens", "", entry.what, "",
             *_source_section(entry),
             "## Expected (lossless rejection sampling)", "", entry.expected, "",
             *_observed_section(run, entry.observed),
             *_environment_section(d, run),
             *_repro_section(entry, repros or repro_dir()),
             "## Impact", "", entry.impact, ""]
    if entry.threads:
        lines += ["## Related upstream threads", "", *(f"* [{t.ref}]({t.url}): {t.relation}" for t in entry.threads),
                  ""]
    if entry.fix:
        lines += ["## Suggested fix" + (" (the pull request)" if entry.filing == "pull request" else ""), "",
                  entry.fix, ""]
    return "\n".join(lines) + "\n"


def _incomplete(d: Deviation) -> str:
    return "\n".join([f"# [{d.engine} {d.release}] {d.deviation}", "",
                      f"**INCOMPLETE:** no entry for `{d.deviation}` in `devices/field/{ENTRIES_FILE}`: no "
                      "reproduction, expected law or source lines. Write the entry before sending this.", "",
                      f"* **Kind:** {d.judgement} — {KINDS.get(d.judgement, 'unjudged')}.",
                      f"* **Known upstream?** {d.upstream_status or 'not judged'}", "",
                      d.reason or "(no reason recorded)", ""]) + "\n"


def _summary(d: Deviation, entry: Entry) -> list[str]:
    kind = f"{d.judgement}" + (f", with probability {entry.probability}" if entry.probability else "")
    return [f"* **Kind:** {kind} — {KINDS.get(d.judgement, 'unjudged')}.",
            f"* **Filed as:** {'a one-line pull request' if entry.filing == 'pull request' else 'an issue'}.",
            f"* **Release:** {d.engine} {entry.version} (tag `{entry.release_tag}`); {entry.runner}.",
            f"* **Known upstream?** {d.upstream_status or 'not searched'}"]


def _observed_section(run: ReproRun | None, recorded: str = "") -> list[str]:
    lines = ["## Observed", "", *([recorded, ""] if recorded else [])]
    if run is None or run.returncode is None:
        why = "not run when this report was written" if run is None else run.how
        return lines + [f"The standalone reproduction below: {why}; run it to see expected vs got." if recorded
                        else f"(the reproduction below: {why}; run it to see expected vs got)", ""]
    meaning = {0: "the lossless answer: the bug is not present here", 1: "the bug is present",
               MISSING_DEPENDENCY: "a dependency is missing: nothing was checked"}.get(
                   run.returncode, "the run broke before giving an answer: nothing was checked")
    when = "run on the machine the record names" if run.where else "run when this report was written"
    return lines + [f"The reproduction below, {when} ({run.how}): exit "
                    f"{run.returncode}, {meaning}.", "", "```", scrub(run.output).rstrip() or "(no output)", "```", ""]


def _environment_section(d: Deviation, run: ReproRun | None) -> list[str]:
    lines = ["## Environment", ""]
    if run is not None and run.returncode is not None:
        lines += [f"* The reproduction's run above: {run.where or this_machine()}; {run.how}."]
    seen = sorted({f"{_hardware(f.get('where', ''))}; {_how_run(f.get('device', ''), f.get('where', ''))}"
                   for f in d.findings})
    lines += [f"* Found on: {x}." for x in seen]
    return lines + [""]


def this_machine() -> str:
    """GPU or CPU, CUDA, torch and Triton of this interpreter, in words."""
    import torch
    gpu = _gpu_name()
    where = f"{gpu}, CUDA {torch.version.cuda}" if gpu else f"CPU ({platform.machine()}), no GPU"
    return f"{where}, torch {torch.__version__}, Triton {_version('triton')}, Python {platform.python_version()}"


def _gpu_name() -> str:
    import torch
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""


def _hardware(where: str) -> str:
    if not where:
        return "hardware not recorded"
    return where if "torch" in where else f"{where} (torch and Triton versions not recorded for that run)"


def _how_run(device: str, where: str) -> str:
    if "interpret" in device:
        return "the release's kernels in Triton's interpreter on the CPU"
    return "the release's kernels compiled on the GPU" if "NVIDIA" in where or "GPU," in where else \
        "the release's code on the CPU"


def _repro_section(entry: Entry, repros: pathlib.Path) -> list[str]:
    script = repros / entry.repro
    return [f"## Reproduction (standalone: torch and {entry.package} only)", "",
            f"`{entry.repro}`: run `python {entry.repro}`. Exit status 0: the lossless answer; 1: the bug is "
            f"present; {MISSING_DEPENDENCY}: a dependency is missing (nothing checked).", "",
            "```python", script.read_text(encoding="utf-8").rstrip(), "```", ""]


def _source_section(entry: Entry) -> list[str]:
    lines = ["## Where in the code", ""]
    for s in entry.sources:
        path, origin = package_file(entry.package, s.file)
        lines += [f"[`{entry.repository_prefix}{s.file}`, lines {s.lines[0]}-{s.lines[1]}]"
                  f"({github_link(entry, s)})", ""]
        if path is None:
            continue
        numbered, note = quote(s, path)
        lines += [f"As shipped in {origin}" + (f"; {note}" if note else "") + ":", ""]
        if numbered:
            lines += ["```python", *numbered, "```", ""]
    return lines


_LOCAL_PATH = re.compile(r"(?<![\w.:/])(?:~|/(?:root|home|work|tmp|usr|opt|var|mnt|private|Users))/[^\s`'\")]*")


def scrub(text: str) -> str:
    """``text`` with this machine's paths cut to their last component (a traceback's file names)."""
    return _LOCAL_PATH.sub(lambda m: ".../" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)


_INTERNAL = (("SPEC §", "a SPEC section"), ("docs/bugs.md", "a row of docs/bugs.md"), ("specsim", "specsim"),
             ("devices/field", "this project's files"), ("conformance:", "a waiver pattern"))
_CHECK_ID = re.compile(r"\bL[0-4](?:-[\w]+)?/[\w./*-]+")
_BLOB = re.compile(r"https://github\.com/([\w.-]+/[\w.-]+)/blob/([^/\s]+)/([^#\s)]+)#L(\d+)(?:-L(\d+))?(?=[)\s]|$)")


def upstream_text_problems(text: str, entry: Entry) -> list[str]:
    """Why ``text`` (a rendered report) could not be filed as it is: a link that is not
    ``https://github.com/<org>/<repo>/blob/<the pinned tag>/<path>#L<n>``, a path of the machine that wrote it, a
    ``#<n>`` that is no upstream thread linked in it, or this project's own numbering (SPEC sections, check
    names, docs/bugs.md rows)."""
    problems = []
    for link in re.findall(r"https://github\.com/\S*?(?=[)\s`,;]|$)", text):
        if THREAD_URL.fullmatch(link):
            continue
        m = _BLOB.fullmatch(link)
        if not m:
            problems.append(f"malformed link {link!r}")
        elif f"https://github.com/{m.group(1)}" != entry.repository or m.group(2) != entry.release_tag:
            problems.append(f"link {link!r}: not {entry.repository} at tag {entry.release_tag}")
    problems += [f"local path {p!r}" for p in _LOCAL_PATH.findall(text)]
    threads = set(THREAD_URL.findall(text))
    problems += [f"#{n}: no upstream thread of that number is linked" for n in re.findall(r"#(\d+)\b", text)
                 if n not in threads]
    problems += [f"{what}: {needle!r}" for needle, what in _INTERNAL if needle in text]
    problems += [f"a check name: {c!r}" for c in _CHECK_ID.findall(text)]
    return problems


def blob_paths(text: str) -> list[str]:
    """The file paths of the ``/blob/`` links in ``text``, relative to the repository."""
    return [m.group(3) for m in _BLOB.finditer(text)]


def _cell(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def render_index(deviations: list[Deviation], written: list[str]) -> str:
    """``DIR/upstream/README.md``, for this project (the reports themselves name none of it): every confirmed
    deviation, its kind, the SPEC clause and checks behind its report, and its report or why none."""
    lines = ["# Upstream reports", "",
             "Written by `specsim field`: one report per confirmed deviation judged "
             + " or ".join(f"**{k}**" for k in REPORTED) + ". The other kinds are not correctness bugs of the "
             "engine (or not the engine's at all) and get none. This index is ours; the reports stand on their own.",
             "", "| engine | deviation | kind | known upstream? | report | SPEC | checks (judged this kind) |",
             "|---|---|---|---|---|---|---|"]
    for d in deviations:
        report = f"[{d.slug}.md]({d.slug}.md)" if f"{d.slug}.md" in written else f"none ({d.judgement})"
        checks = sorted({f"`{f['check']}` ({f['device']})" for f in d.findings if f["judgement"] == d.judgement})
        lines.append(f"| {d.engine} {d.release} | `{d.deviation}` | {d.judgement} | "
                     f"{_cell(d.upstream_status) or '-'} | {report} | {_cell(d.entry.spec) if d.entry else '-'} | "
                     f"{', '.join(checks)} |")
    return "\n".join(lines) + "\n"


def write_reports(doc: dict, out_dir: str | os.PathLike, run_repros: bool = True, entries: list[Entry] | None = None,
                  waivers_of=None, repros: pathlib.Path | None = None) -> list[str]:
    """Write ``out_dir/upstream/<engine>-<deviation>.md`` for each confirmed deviation that is reported, and
    ``README.md``; return the report file names. ``entries``, ``waivers_of`` and ``repros`` (the folder of the
    reproductions) default to the shipped ones."""
    entries = load_entries() if entries is None else entries
    deviations = confirmed_deviations(doc, waivers_of, entries)
    folder = pathlib.Path(out_dir) / "upstream"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.md"):   # an earlier run's report of a deviation no longer found must not linger
        stale.unlink()
    written = []
    for d in (d for d in deviations if is_reported(d.judgement)):
        run = run_repro(d.entry, repros=repros) if (d.entry and run_repros) else None
        (folder / f"{d.slug}.md").write_text(render_report(d, d.entry, run, repros), encoding="utf-8")
        written.append(f"{d.slug}.md")
    (folder / "README.md").write_text(render_index(deviations, written), encoding="utf-8")
    return written


def recorded_run(record: dict, entry: Entry) -> ReproRun | None:
    """The record's run of ``entry``'s reproduction (its ``reproduction`` object: ``script``, ``how``, ``where``,
    ``returncode``, ``output``), or None where the record holds no run of that script."""
    kept = record.get("reproduction")
    if not kept or pathlib.Path(kept.get("script", "")).name != entry.repro:
        return None
    return ReproRun(kept["how"], int(kept["returncode"]), kept["output"], where=kept["where"])


def main(argv: list[str] | None = None) -> int:
    """``python -m specsim.field.upstream --record FILE --deviation ID --device NAME --out REPORT.md``: one
    upstream report of a deviation seen in a record of measured figures (:func:`recorded_deviation`). Its
    reproduction runs where a CUDA GPU is (``--no-repro-run`` leaves it out); elsewhere the report quotes the
    record's own run of it (``recorded_run``), or says it was not run. Exit 1 when the text could not be filed as it is (:func:`upstream_text_problems`)."""
    import argparse
    p = argparse.ArgumentParser(prog="python -m specsim.field.upstream", description=main.__doc__.split("\n\n")[0])
    p.add_argument("--record", required=True, type=pathlib.Path, help="a record of measured figures (JSON)")
    p.add_argument("--deviation", required=True, help="the deviation's id (its report entry and waivers)")
    p.add_argument("--device", required=True, help="the field device the record's rows name")
    p.add_argument("--out", required=True, type=pathlib.Path, help="the report's Markdown file")
    p.add_argument("--no-repro-run", action="store_true", help="do not run the reproduction, even on a GPU")
    args = p.parse_args(argv)
    entry = entry_for(args.deviation, args.device, load_entries())
    if entry is None:
        p.error(f"--deviation {args.deviation} --device {args.device}: no report entry in {ENTRIES_FILE}")
    try:
        record = json.loads(args.record.read_text(encoding="utf-8"))
        d = recorded_deviation(record, entry, args.device)
    except (OSError, ValueError) as e:
        p.error(f"--record {args.record}: {e}")
    if args.no_repro_run:
        run = None
    elif _gpu_name():
        run = run_repro(entry)
    elif (kept := recorded_run(record, entry)) is not None:
        run = kept
    else:
        run = ReproRun(f"not itself run on a GPU (this report was written on a machine without one, where it exits "
                       f"{MISSING_DEPENDENCY}: a dependency missing)", None, "")
    text = render_report(d, entry, run)
    args.out.write_text(text, encoding="utf-8")
    problems = upstream_text_problems(text, entry)
    for line in problems:
        print(f"{args.out}: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
