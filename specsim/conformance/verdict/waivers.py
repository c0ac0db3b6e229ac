"""Waivers: a vendor's expected failures, each with a reason and an issue URL.

A waivers file lives in the vendor's repository and is passed with
``pytest --specsim-waivers FILE``. TOML::

    [[waiver]]
    check  = "property_tests/test_device_exact.py::test_device_matches_reference_given_injected_noise[float32]"
    reason = "float32 tile reduction rounds differently; fixed in driver 2.4"
    issue  = "https://tracker.acme.example/SPEC-123"
    devices = ["acme-npu"]   # optional: only when --specsim-device is one of these
    mark   = "xfail"         # optional: "xfail" (default; runs, failure expected) or "skip"

or JSON: ``{"waiver": [{...}, ...]}`` (``"waivers"`` also accepted) or a bare list.

A ``check`` beginning ``conformance:`` names conformance *checks* (``CheckResult.name``,
e.g. ``conformance:L1/edge/u0-masked-point``) rather than tests. Both routes apply them through one
function (``specsim.conformance.verdict.conform_waivers.apply``) and judge through one verdict
(``specsim.conformance.run.runner.verdict_of``): ``specsim conform --waivers FILE`` and the shipped
``property_tests/test_conformance_groups.py`` under ``pytest --specsim-waivers FILE``. Two optional keys
describe a deviation for the field table (``docs/field.md``): ``deviation`` (a short id grouping entries) and ``judgement`` (one of
``JUDGEMENTS``); a third, ``upstream_status``, records what the engine's project already knows of it
(``UPSTREAM_STATUS``: documented, an issue or pull request, or none found — a person's finding, with its link),
which the field's upstream reports quote as their "Known upstream?" line. ``judged_on`` names the
engine release the judgement was made on, as ``"<engine> <release>"`` (``judged_on = "transformers 5.23.0"``): on a device that runs another
release (its ``engine`` says which) the entry waives nothing, and what it would cover is shown as
judged on that release (``specsim field``, ``specsim conform --waivers``). The field's waiver files
(``devices/field/*_waivers.toml``) name it on every entry.

A test waiver's ``check`` is a test id or a pattern with ``*`` and ``?`` wildcards (``[`` is literal),
matched against the test's id from ``property_tests/`` on (so it does not
depend on where the package is installed), its full node id, and its name;
a pattern without wildcards also matches every parametrization and every test
in a file it names (``property_tests/test_bad_input.py``). ``reason``, ``issue``
(an ``http(s)://`` URL; also spelt ``link`` or ``url``) and ``check`` are required; an unknown key is an error
(a typo must not silently disable a waiver). An entry that matches no collected
test is reported at the end of the run. A test waiver never covers the tests of
``property_tests/test_conformance_groups.py`` (``GATE_FILE``): they are the verdict, which only
``conformance:`` entries reach (an entry naming that file is refused at load; a pattern that matches
its tests leaves them unmarked, and the summary says so).

What a waiver may say (each rule broken is a :class:`WaiverError` at load, naming the file, the entry
and the rule):

- ``reason``: at least ``MIN_REASON_WORDS`` words saying what deviates and why, not a placeholder
  (``PLACEHOLDER_REASONS``: "known", "todo", "n/a", "flaky", "wip", ...). Every entry, test or check.
- ``issue`` (also spelt ``link`` or ``url``): an ``http://`` or ``https://`` URL. Every entry.
- a ``conformance:`` check is one check's exact name, or a **narrow pattern** (``narrow_pattern_problem``):
  ``*`` and ``?`` only in the pattern's last ``/``-segment, after at least two whole segments (the layer
  and the area: ``L1/edge/``), and either at least ``MIN_STEM`` characters of the check's own name
  (``L1/edge/u0-*``, ``L1/sizes/batch-B*``) or a third whole segment (``L1-sampler/edge/penalty-zeroes-draft/*``,
  ``L3/v8-ties/r0/*``). A pattern covers the variants of one check (its dtypes, orders, sizes), never a
  whole group, area or layer (``*``, ``L1/*``, ``L1/edge/*``, ``L2/*batch-invariance`` are refused).
- a ``conformance:`` check never names a record of a group that did not run to its end
  (``UNWAIVABLE_RECORDS``: ``<group>/crashed``, ``/timeout``, ``/missing``, ``/declaration-mismatch``,
  ``/mutated-input``): a crash is no deviation of the law, and it hides every check of its group.
- a ``conformance:`` check that names, or whose pattern can match, the core's evidence
  (``specsim.conformance.verdict.profiles.carries_core_evidence``: L1-injected, L1-keyed, L3's chain cases, the
  core rows of the capabilities group) loads only as a **judged deviation record**, with ``deviation``
  and ``judgement`` both given (the field table's judgements of engines): it documents the failure and
  never waives it (SPEC §10: a waiver cannot make a device conform to the core).

Whatever loads, applying never waives a crash record or a check that carries the core's evidence: such a
check keeps failing, unwaived, and the waiver record lists the entry under ``refused``, with why.

Example::

    >>> w = Waiver(check="property_tests/test_x.py::test_y", reason="r", issue="https://x.example/1")
    >>> w.matches("property_tests/test_x.py::test_y[float32]", "test_y[float32]")
    True
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from dataclasses import dataclass, field

KEYS = {"check", "reason", "issue", "devices", "mark", "deviation", "judgement",
        "upstream_status", "judged_on"}
CONFORMANCE = "conformance:"
JUDGEMENTS = ("loss of losslessness", "semantics difference at an edge of SPEC", "RNG-contract break",
              "contract difference", "adapter limitation")
"""What a known deviation is: a real loss of the output law; a choice SPEC makes one way and the
engine another, at an edge; a break of the randomness contract (SPEC §5) that the engine does not
document as its own; a randomness contract the engine documents and SPEC states otherwise (a stream
keyed by batch row where SPEC §5.2 keys it by request: a contract, not a correctness bug); or the
adapter's own limit."""
UPSTREAM_STATUS = ("documented", "open issue", "open pull request", "closed pull request", "fixed upstream",
                   "none found")
"""How ``upstream_status`` begins (then ``: `` and the finding); every kind but "none found" carries its link."""
ALIASES = {"id": "check", "pattern": "check", "url": "issue", "link": "issue"}
MARKS = ("xfail", "skip")

MIN_REASON_WORDS = 4
"""A reason says what deviates and why in at least this many words ("top-p keeps one tied token")."""
PLACEHOLDER_REASONS = frozenset({
    "known", "known issue", "known bug", "known failure", "known deviation", "expected", "expected failure",
    "todo", "to do", "tbd", "fixme", "n/a", "na", "none", "flaky", "wip", "temp", "temporary", "ignore", "skip",
    "xfail", "waived", "waiver", "reason", "see issue", "see link", "see ticket", "see tracker", "later",
    "fix later", "will fix", "to be fixed", "investigating", "unknown", "-", "?", "...", "x", "r"})
"""Reasons that say nothing (compared without case, spaces or end punctuation); a reason made only of
these words is refused too ("known flaky wip todo")."""
MIN_STEM = 3
"""A narrow pattern fixing only the layer and the area fixes at least this many characters of the check's
own name after them (``L1/edge/u0-*``)."""
UNWAIVABLE_RECORDS = ("crashed", "timeout", "missing", "declaration-mismatch", "mutated-input")
"""The last segment of the records a run writes in place of checks that could not be judged (a group that
crashed, ran past its limit or was not found; a device whose declaration changed, or that wrote into its
inputs): never waived."""
GATE_FILE = "property_tests/test_conformance_groups.py"
"""The shipped verdict tests: reached by ``conformance:`` entries only, never by a test waiver."""


class WaiverError(ValueError):
    """A waivers file is unreadable or an entry breaks a rule; the message names the file, entry and field."""


@dataclass(frozen=True)
class Waiver:
    check: str
    reason: str
    issue: str
    devices: tuple[str, ...] = ()
    mark: str = "xfail"
    source: str = ""  # "file.toml, entry 3" for messages
    deviation: str = ""
    judgement: str = ""
    upstream_status: str = ""
    judged_on: str = ""  # "<engine> <release>", e.g. "transformers 5.23.0"; "" for any release
    _wild: bool = field(default=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_wild", any(c in self.check for c in "*?"))

    @property
    def conformance(self) -> bool:
        """Whether this waiver names conformance checks (``conformance:...``) rather than tests."""
        return self.check.startswith(CONFORMANCE)

    def matches_check(self, name: str) -> bool:
        """Whether a ``conformance:`` waiver covers the conformance check ``name`` (``*``/``?`` wildcards).

        >>> Waiver(check="conformance:L1/edge/u0-*", reason="r", issue="https://x.example/1").matches_check(
        ...     "L1/edge/u0-masked-point")
        True
        """
        pattern = self.check[len(CONFORMANCE):]
        return self.conformance and fnmatch.fnmatchcase(name, pattern.replace("[", "[[]"))

    def applies_to_device(self, device_spec: str | None) -> bool:
        return not self.devices or device_spec in self.devices

    def judged_on_engine(self, engine: str | None) -> bool:
        """Whether this waiver's judgement holds for a device running ``engine`` (``"<engine> <release>"``, its
        ``engine`` attribute): always without ``judged_on``; else only on the very release it names.

        >>> w = Waiver(check="conformance:x", reason="r", issue="https://x.example/1", judged_on="transformers 5.23.0")
        >>> [w.judged_on_engine(e) for e in ("transformers 5.23.0", "transformers 5.24.0", None)]
        [True, False, False]
        """
        return not self.judged_on or same_release(self.judged_on, engine)

    def matches(self, check_id: str, name: str, nodeid: str | None = None) -> bool:
        """Whether this waiver covers the test ``check_id`` (id from ``property_tests/``), ``name``, ``nodeid``."""
        if self.conformance:
            return False   # names conformance checks, which the group tests apply themselves
        ids = [i for i in (check_id, nodeid, name) if i]
        if self._wild:  # '[' is literal: test ids are full of parametrization brackets
            pattern = self.check.replace("[", "[[]")
            return any(fnmatch.fnmatchcase(i, pattern) for i in ids)
        return any(i == self.check or i.startswith(self.check + "::") or i.startswith(self.check + "[")
                   for i in ids)

    def describe(self) -> str:
        return f"{self.check!r} ({self.source}): {self.reason} [{self.issue}]"


JUDGED_ON_FORMAT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*) ([0-9][0-9A-Za-z.+!_-]*)$")
"""``judged_on``: an engine's name and its release, one space apart (``"vllm 0.33.0"``,
``"flashinfer 0.7.2.post1"``)."""


def same_release(judged_on: str, engine: str | None) -> bool:
    """Whether ``engine`` (a device's ``"<name> <release>"``, perhaps followed by what part of the engine it
    covers in parentheses: ``"vllm 0.33.0 (V1 runner)"``) is the release ``judged_on`` names (names compared
    without case; an engine string with no release is no release). Which part a waiver covers is its
    ``devices`` list's business.

    >>> [same_release("vllm 0.33.0", e) for e in ("vLLM 0.33.0", "vllm", "vllm 0.33.1", "vllm 0.33.0 (V1 runner)")]
    [True, False, False, True]
    """
    engine = re.sub(r"\s*\([^()]*\)$", "", (engine or "").strip())
    a, b = JUDGED_ON_FORMAT.match(judged_on.strip()), JUDGED_ON_FORMAT.match(engine)
    return bool(a and b) and a.group(1).lower() == b.group(1).lower() and a.group(2) == b.group(2)


def check_id(nodeid: str) -> str:
    """The install-independent id of a test: its node id from the last ``property_tests/`` on.

    >>> check_id("../venv/lib/python3.11/site-packages/property_tests/test_a.py::test_b[x]")
    'property_tests/test_a.py::test_b[x]'
    """
    path, sep, rest = nodeid.partition("::")
    i = path.rfind("property_tests/")
    return (path[i:] if i >= 0 else path) + sep + rest


def _entries(doc, path: str) -> list:
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        unknown = set(doc) - {"waiver", "waivers"}
        if unknown:
            raise WaiverError(f"{path}: unknown top-level key(s) {sorted(unknown)}; expected [[waiver]] tables")
        entries = doc.get("waiver", doc.get("waivers", []))
        if isinstance(entries, list):
            return entries
    raise WaiverError(f"{path}: expected a list of waiver entries ([[waiver]] in TOML, a list in JSON)")


def parse_entry(raw, where: str) -> Waiver:
    """One entry → :class:`Waiver`, or :class:`WaiverError` naming ``where``, the field and the rule."""
    if not isinstance(raw, dict):
        raise WaiverError(f"{where}: must be a table/object, got {type(raw).__name__}")
    spellings: dict[str, list[str]] = {}
    for k in raw:
        spellings.setdefault(ALIASES.get(k, k), []).append(k)
    twice = {k: v for k, v in spellings.items() if len(v) > 1}
    if twice:
        raise WaiverError(f"{where}: one field given under two names: "
                          + "; ".join(f"{' and '.join(map(repr, v))} both mean '{k}'" for k, v in twice.items()))
    entry = {ALIASES.get(k, k): v for k, v in raw.items()}
    unknown = set(entry) - KEYS
    if unknown:
        raise WaiverError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(KEYS)}")
    for key in ("check", "reason", "issue"):
        value = entry.get(key)
        if not isinstance(value, str) or not value.strip():
            spelt = " (also spelt 'link' or 'url')" if key == "issue" else ""
            raise WaiverError(f"{where}: '{key}' is required{spelt} and must be a non-empty string "
                              f"(got {value!r}); every waiver names its check, why, and the issue tracking it")
    issue = entry["issue"].strip()
    if not issue.startswith(("https://", "http://")) or len(issue) < 12 or " " in issue:
        raise WaiverError(f"{where}: 'issue' must be the URL of the issue tracking the failure "
                          f"(http:// or https://), got {issue!r}")
    _check_reason(entry["reason"], where)
    devices = entry.get("devices", [])
    if isinstance(devices, str):
        devices = [devices]
    if not isinstance(devices, list) or not all(isinstance(d, str) and d for d in devices):
        raise WaiverError(f"{where}: 'devices' must be a list of device names, got {devices!r}")
    mark = entry.get("mark", "xfail")
    if mark not in MARKS:
        raise WaiverError(f"{where}: 'mark' must be one of {MARKS}, got {mark!r}")
    judgement = entry.get("judgement", "")
    if judgement and judgement not in JUDGEMENTS:
        raise WaiverError(f"{where}: 'judgement' must be one of {JUDGEMENTS}, got {judgement!r}")
    deviation = entry.get("deviation", "")
    if not isinstance(deviation, str):
        raise WaiverError(f"{where}: 'deviation' must be a string id, got {deviation!r}")
    judged_on = entry.get("judged_on", "")
    if not isinstance(judged_on, str) or (judged_on and not JUDGED_ON_FORMAT.match(judged_on.strip())):
        raise WaiverError(f"{where}: 'judged_on' must name the engine and the release the judgement was made on, "
                          f"one space apart (\"transformers 5.23.0\"), got {judged_on!r}")
    check = entry["check"].strip()
    if check.startswith(CONFORMANCE):
        _check_conformance_name(check[len(CONFORMANCE):], where, recorded=bool(deviation and judgement))
    else:
        _check_test_name(check, where)
    return Waiver(check=check, reason=entry["reason"].strip(), issue=issue,
                  devices=tuple(devices), mark=mark, source=where, deviation=deviation, judgement=judgement,
                  upstream_status=_upstream_status(entry.get("upstream_status", ""), where),
                  judged_on=judged_on.strip())


def reason_problem(reason: str) -> str | None:
    """Why ``reason`` says too little to waive anything (None: it is a reason).

    >>> reason_problem("known"), reason_problem("top-p keeps one tied token; fixed in driver 2.4")
    ("it is a placeholder ('known')", None)
    """
    text = " ".join(reason.split()).strip(" .!,;:").lower()
    words = re.findall(r"[^\W_][\w.+'/-]*", text)
    if text in PLACEHOLDER_REASONS or (words and all(w in PLACEHOLDER_REASONS for w in words)):
        return f"it is a placeholder ({reason.strip()!r})"
    if len(words) < MIN_REASON_WORDS:
        return f"it has {len(words)} word(s), fewer than {MIN_REASON_WORDS}"
    return None


def _check_reason(reason: str, where: str) -> None:
    why = reason_problem(reason)
    if why is not None:
        raise WaiverError(f"{where}: 'reason' must say what deviates and why, in at least {MIN_REASON_WORDS} words "
                          f"and not a placeholder such as 'known', 'todo', 'n/a', 'flaky' or 'wip': {why}")


def narrow_pattern_problem(name: str) -> str | None:
    """Why the conformance check pattern ``name`` (no ``conformance:``) is not narrow (None: an exact name, or
    a narrow pattern: the module docstring's rule).

    >>> [narrow_pattern_problem(p) is None for p in ("L1/edge/u0-*", "L3/v8-ties/r0/*", "L1/edge/*", "L1/*", "*")]
    [True, True, False, False, False]
    """
    first = min((i for i in (name.find("*"), name.find("?")) if i >= 0), default=-1)
    if first < 0:
        return None
    fixed = name[:first]
    if "/" in name[first:]:
        return "a wildcard may stand only in the pattern's last '/'-segment"
    segments = fixed.count("/")
    if segments < 2:
        return ("a pattern fixes at least the layer and the area (two whole segments, 'L1/edge/') before its "
                "wildcard: it covers the variants of one check, never a whole group, area or layer")
    stem = fixed.rsplit("/", 1)[1]
    if segments < 3 and len(stem) < MIN_STEM:
        return (f"after the layer and the area a pattern fixes at least {MIN_STEM} characters of the check's own "
                "name ('L1/edge/u0-*') or a third whole segment ('L1-sampler/edge/penalty-zeroes-draft/*'): "
                f"{fixed!r} would cover a whole area")
    return None


def unwaivable_record(name: str) -> bool:
    """Whether ``name`` is a record of a group that could not be judged (``UNWAIVABLE_RECORDS``).

    >>> unwaivable_record("L1-injected/crashed"), unwaivable_record("L1/edge/u0-masked-point")
    (True, False)
    """
    return name.rsplit("/", 1)[-1] in UNWAIVABLE_RECORDS


def may_match_core_evidence(name: str) -> bool:
    """Whether the conformance check name or narrow pattern ``name`` can match a check that carries the core's
    evidence (``specsim.conformance.verdict.profiles.carries_core_evidence``).

    >>> may_match_core_evidence("L1/injected/full-*"), may_match_core_evidence("L1/edge/u0-*")
    (True, False)
    """
    from specsim.conformance.checks.interface.capabilities import ROWS
    from specsim.conformance.verdict.profiles import CHAIN_LAW_PREFIXES, carries_core_evidence
    core_rows = {f"capabilities/{row.name}" for row in ROWS if row.core}
    first = min((i for i in (name.find("*"), name.find("?")) if i >= 0), default=-1)
    if first < 0:
        return carries_core_evidence({"name": name, "extra": {"core": name in core_rows}})
    fixed = name[:first]
    if fixed.startswith("L3/trees"):
        return False
    return any(p.startswith(fixed) or fixed.startswith(p) for p in CHAIN_LAW_PREFIXES + tuple(core_rows))


def _check_conformance_name(name: str, where: str, recorded: bool) -> None:
    """The rules a ``conformance:`` check obeys (module docstring); ``recorded``: the entry gives
    ``deviation`` and ``judgement``."""
    why = narrow_pattern_problem(name)
    if why is not None:
        raise WaiverError(f"{where}: 'check' conformance:{name} is not one check: {why}")
    if unwaivable_record(name):
        raise WaiverError(f"{where}: 'check' conformance:{name} names a record of a group that could not be judged "
                          f"(its last segment is one of {list(UNWAIVABLE_RECORDS)}); a crash, a time-out or a "
                          "missing group cannot be waived: fix it, or leave the group out with --groups")
    if not recorded and may_match_core_evidence(name):
        raise WaiverError(f"{where}: 'check' conformance:{name} names the core's evidence (L1-injected, L1-keyed, "
                          "L3's chain cases, the capabilities group's core rows), which no waiver covers (SPEC §10); "
                          "to document a known deviation there give 'deviation' and 'judgement': the entry is then "
                          "recorded and the check keeps failing")


GATE_TESTS = ("test_conformance_verdict", "test_conformance_group_passes")
"""The tests of ``GATE_FILE``."""


def _check_test_name(check: str, where: str) -> None:
    path, _, test = check.rpartition("::")
    if (check.startswith(GATE_FILE) or path.endswith("test_conformance_groups.py")
            or test.startswith(GATE_TESTS) or check.endswith("test_conformance_groups.py")):
        raise WaiverError(f"{where}: 'check' {check} names the shipped verdict tests ({GATE_FILE}); "
                          "only conformance:<check name> entries reach the verdict, through the same rules as "
                          "specsim conform --waivers")


def _upstream_status(value, where: str) -> str:
    """``upstream_status`` checked: one of ``UPSTREAM_STATUS``, then ``: `` and the finding, with a link
    unless nothing was found.

    >>> _upstream_status("open issue: https://github.com/o/r/issues/1", "f, entry 1")
    'open issue: https://github.com/o/r/issues/1'
    """
    if not isinstance(value, str):
        raise WaiverError(f"{where}: 'upstream_status' must be a string, got {value!r}")
    value = value.strip()
    if not value:
        return ""
    kind = next((k for k in UPSTREAM_STATUS if value.startswith(k + ":") or value == k), None)
    if kind is None:
        raise WaiverError(f"{where}: 'upstream_status' must begin with one of {UPSTREAM_STATUS} and ': ', "
                          f"got {value!r}")
    if kind != "none found" and "https://" not in value and "http://" not in value:
        raise WaiverError(f"{where}: 'upstream_status' {kind!r} must carry the link to what was found, "
                          f"got {value!r}")
    return value


def load(path: str, option: str = "--specsim-waivers") -> list[Waiver]:
    """Read and validate a waivers file (``.toml`` or ``.json``, by extension; else tried as TOML then JSON).

    ``option``: how the file was given (``--specsim-waivers``, ``specsim conform --waivers``), for messages.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise WaiverError(f"{option} {path}: cannot read ({e.strerror or e})") from None
    ext = os.path.splitext(path)[1].lower()
    doc, errors = None, []
    for kind in (["json"] if ext == ".json" else ["toml"] if ext == ".toml" else ["toml", "json"]):
        try:
            if kind == "json":
                doc = json.loads(data.decode("utf-8"))
            else:
                try:
                    import tomllib
                except ModuleNotFoundError:  # Python 3.10
                    try:
                        import tomli as tomllib  # type: ignore[no-redef]
                    except ModuleNotFoundError:
                        raise WaiverError(f"{option} {path}: reading TOML needs Python >= 3.11 or "
                                          "`pip install tomli`; or write the waivers as JSON") from None
                doc = tomllib.loads(data.decode("utf-8"))
            break
        except (ValueError, UnicodeDecodeError) as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
            errors.append(f"not valid {kind.upper()}: {e}")
    if doc is None:
        raise WaiverError(f"{option} {path}: " + "; ".join(errors))
    waivers = [parse_entry(raw, f"{path}, entry {i + 1}") for i, raw in enumerate(_entries(doc, path))]
    seen: dict[tuple, str] = {}
    for w in waivers:
        key = (w.check, tuple(sorted(w.devices)))
        if key in seen:
            raise WaiverError(f"{w.source}: check {w.check!r} is already waived by {seen[key]}")
        seen[key] = w.source
    return waivers
