"""Upstream reports: one markdown file per confirmed field deviation that an engine's maintainers should fix.

``specsim field --out DIR`` sorts every failing check of a field adapter into a
known deviation (``specsim.field.table``). The deviations judged a **loss of
losslessness** or an **RNG-contract break** get a report, ``DIR/upstream/
<engine>-<deviation>.md``, written for the engine's tracker: the engine, its
release and runner, the kind, "Known upstream?" (the waiver's
``upstream_status``, a person's finding), the SPEC clause, the standalone
reproduction (``devices/field/repro/``: the engine and torch, no specsim), its
output where it could run (expected vs got), the checks that found it, and the
engine's source lines, quoted from the package loaded when the report is written.
``DIR/upstream/README.md`` lists every deviation with its kind, reported or not.

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
class Entry:
    """One deviation's report material: see ``devices/field/upstream_reports.toml``."""

    deviation: str
    devices: tuple[str, ...]
    package: str
    repository: str
    tag: str
    runner: str
    title: str
    spec: str
    repro: str
    fix: str = ""
    sources: tuple[Source, ...] = ()
    repository_prefix: str = ""   # where the package's files sit in its repository ("src/" for transformers)


def _entry(raw: dict, where: str) -> Entry:
    required = ("deviation", "devices", "package", "repository", "tag", "runner", "title", "spec", "repro")
    missing = [k for k in required if not raw.get(k)]
    unknown = set(raw) - set(required) - {"fix", "source", "repository_prefix"}
    if missing or unknown:
        raise ValueError(f"{where}: missing {missing} / unknown {sorted(unknown)} keys")
    sources = []
    for i, s in enumerate(raw.get("source", [])):
        lines = s.get("lines")
        if not (isinstance(lines, list) and len(lines) == 2 and 0 < lines[0] <= lines[1]) or not s.get("file") \
                or not s.get("contains"):
            raise ValueError(f"{where}, source {i + 1}: needs file, lines [first, last] and contains; got {s}")
        sources.append(Source(s["file"], (int(lines[0]), int(lines[1])), s["contains"]))
    return Entry(**{k: raw[k] for k in required if k != "devices"}, devices=tuple(raw["devices"]),
                 fix=raw.get("fix", ""), sources=tuple(sources), repository_prefix=raw.get("repository_prefix", ""))


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


def engine_release(entry: dict, package: str | None = None) -> tuple[str, str]:
    """``(engine, release)`` of a ``field.json`` device entry: from its ``release`` if it has one, else its engine
    text (``"vllm 0.33.0"``), else the installed package's version.

    >>> engine_release({"engine": "vllm 0.33.0", "device": "vllm"})
    ('vllm', '0.33.0')
    """
    engine, _, version = (entry.get("engine") or entry["device"]).partition(" ")
    release = entry.get("release") or version.strip()
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


# -- the engine's source, quoted from the package loaded now -------------------------------------------------------
def package_file(package: str, file: str) -> tuple[pathlib.Path | None, str]:
    """``file`` (relative to the install root, e.g. ``vllm/v1/sample/sampler.py``) of ``package`` as loaded here:
    the installed package, else for vLLM the pinned wheel's members (``devices.field.vllm_loader``); ``(None,
    why)`` when neither is here."""
    spec = importlib.util.find_spec(package)
    if spec is not None and spec.submodule_search_locations:
        path = pathlib.Path(list(spec.submodule_search_locations)[0]).parent / file
        if path.is_file():
            return path, f"installed {package} {_version(package)}, {path}"
    if package == "vllm":
        from devices.field import vllm_loader
        try:
            cache = vllm_loader.fetch()
        except vllm_loader.VllmLoadError as e:
            return None, f"vllm is not installed and its wheel's members could not be fetched: {e}"
        if (cache / file).is_file() and file in vllm_loader.PINNED:
            return cache / file, f"{vllm_loader.WHEEL_FILENAME}, member {file} (sha256-pinned), {cache / file}"
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


def _github(entry: Entry, release: str, source: Source) -> str:
    return (f"{entry.repository}/blob/{entry.tag.format(release=release)}/{entry.repository_prefix}{source.file}"
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
    sys.exit(3)   # ISOLATION_FAILED
"""
ISOLATION_FAILED = 3
"""Exit status of a standalone run that raised (an import refused, a version assertion): not the repro's 1."""


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


def run_standalone(script, args=(), timeout: float = 300, cwd: str | None = None) -> ReproRun:
    """Run ``script`` in the isolated interpreter from a scratch directory (exit 1: the deviation is present)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    done = subprocess.run(isolated_command(script, args), capture_output=True, text=True, cwd=cwd or _scratch(),
                          env=env, timeout=timeout)
    return ReproRun("standalone: `python -I -S`, this project's packages not importable", done.returncode,
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
        done = subprocess.run([sys.executable, "-m", "devices.field.repro.on_vllm_members", str(script)],
                              capture_output=True, text=True, timeout=timeout, cwd=root,
                              env={**os.environ, "PYTHONPATH": root})
        return ReproRun("vllm not installed here: the same file on the pinned wheel's members, through "
                        "`python -m devices.field.repro.on_vllm_members`", done.returncode,
                        (done.stdout + done.stderr).strip())
    except subprocess.TimeoutExpired:
        return ReproRun(f"timed out after {timeout:.0f} s", None, "")


# -- the report ------------------------------------------------------------------------------------------------------
def render_report(d: Deviation, entry: Entry | None, run: ReproRun | None, repros: pathlib.Path | None = None) -> str:
    """One upstream report (markdown)."""
    title = entry.title if entry else f"{d.deviation} (no report entry: devices/field/{ENTRIES_FILE})"
    lines = [f"# [{d.engine} {d.release}] {title}", ""]
    if entry is None:
        lines += [f"**INCOMPLETE:** no entry for `{d.deviation}` in `devices/field/{ENTRIES_FILE}`: no reproduction, "
                  "SPEC clause or source lines. Write the entry before sending this.", ""]
    lines += [f"* **Kind:** {d.judgement} — {KINDS.get(d.judgement, 'unjudged')}.",
              f"* **Engine:** {d.engine} {d.release}" + (f"; {entry.runner}" if entry else ""),
              f"* **Known upstream?** {d.upstream_status or 'not judged: no upstream_status in its waiver entries'}",
              f"* **SPEC clause:** {entry.spec if entry else 'not recorded'}",
              f"* **Found by:** `specsim field` on {', '.join(f'`{x}`' for x in d.devices)} "
              f"({len(d.findings)} check(s); waiver link {d.link})", "",
              "## What happens", "", d.reason or "(no reason recorded)", ""]
    if entry:
        lines += _repro_section(entry, run, repros or repro_dir())
    lines += ["## The checks that found it", "", "| device | where | check | expected vs got |", "|---|---|---|---|"]
    lines += [f"| `{f['device']}` | {f['where']} | `{f['check']}` | {_cell(f['detail'][:300])} |" for f in d.findings]
    lines.append("")
    if entry:
        lines += _source_section(entry, d.release)
        if entry.fix:
            lines += ["## Suggested fix", "", entry.fix, ""]
    return "\n".join(lines) + "\n"


def _repro_section(entry: Entry, run: ReproRun | None, repros: pathlib.Path) -> list[str]:
    script = repros / entry.repro
    lines = [f"## Reproduction (standalone: torch and {entry.package} only)", "",
             f"`{entry.repro}` — run `python {entry.repro}`: it prints expected vs got and exits 1 while the "
             "deviation is present, 0 once fixed.", "", "```python", script.read_text(encoding="utf-8").rstrip(),
             "```", "", "## Expected vs got", ""]
    if run is None:
        return lines + ["(not run when this report was written)", ""]
    status = "not run" if run.returncode is None else f"exit {run.returncode}"
    return lines + [f"Run when this report was written ({run.how}; {status}):", "", "```",
                    run.output.rstrip() or "(no output)", "```", ""]


def _source_section(entry: Entry, release: str) -> list[str]:
    lines = ["## Where in the source", ""]
    for s in entry.sources:
        path, origin = package_file(entry.package, s.file)
        lines += [f"`{s.file}`, lines {s.lines[0]}-{s.lines[1]} ({_github(entry, release, s)}).", ""]
        if path is None:
            lines += [f"(not quoted: {origin})", ""]
            continue
        numbered, note = quote(s, path)
        lines += [f"Quoted from {origin}" + (f"; {note}" if note else "") + ":", ""]
        if numbered:
            lines += ["```python", *numbered, "```", ""]
    return lines


def _cell(text: str) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def render_index(deviations: list[Deviation], written: list[str]) -> str:
    """``DIR/upstream/README.md``: every confirmed deviation, its kind, and its report or why none."""
    lines = ["# Upstream reports", "",
             "Written by `specsim field`: one report per confirmed deviation judged "
             + " or ".join(f"**{k}**" for k in REPORTED) + ". The other kinds are not correctness bugs of the "
             "engine (or not the engine's at all) and get none.", "",
             "| engine | deviation | kind | known upstream? | report |", "|---|---|---|---|---|"]
    for d in deviations:
        report = f"[{d.slug}.md]({d.slug}.md)" if f"{d.slug}.md" in written else f"none ({d.judgement})"
        lines.append(f"| {d.engine} {d.release} | `{d.deviation}` | {d.judgement} | "
                     f"{_cell(d.upstream_status) or '-'} | {report} |")
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
