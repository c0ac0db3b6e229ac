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
e.g. ``conformance:L1/edge/u0-masked-point``) rather than tests: the conformance-group
tests then leave exactly those checks out of their verdict, so one understood deviation
does not hide a whole group. Two optional keys describe a deviation for the field table
(``docs/field.md``): ``deviation`` (a short id grouping entries) and ``judgement`` (one of
``JUDGEMENTS``); a third, ``upstream_status``, records what the engine's project already knows of it
(``UPSTREAM_STATUS``: documented, an issue or pull request, or none found — a person's finding, with its link),
which the field's upstream reports quote as their "Known upstream?" line. ``judged_on`` names the
engine release the judgement was made on, as ``"<engine> <release>"`` (``judged_on = "transformers 5.23.0"``): on a device that runs another
release (its ``engine`` says which) the entry waives nothing, and what it would cover is shown as
judged on that release (``specsim field``, ``specsim conform --waivers``). The field's waiver files
(``devices/field/*_waivers.toml``) name it on every entry.

The same file serves ``specsim conform --waivers FILE``, which applies its ``conformance:``
entries (``specsim.conformance.vendor_waivers``).

``check`` is a test id or a pattern with ``*`` and ``?`` wildcards (``[`` is literal),
matched against the test's id from ``property_tests/`` on (so it does not
depend on where the package is installed), its full node id, and its name;
a pattern without wildcards also matches every parametrization and every test
in a file it names (``property_tests/test_bad_input.py``). ``reason``, ``issue``
(an ``http(s)://`` URL; also spelt ``link`` or ``url``) and ``check`` are required; an unknown key is an error
(a typo must not silently disable a waiver). An entry that matches no collected
test is reported at the end of the run.

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
    return Waiver(check=entry["check"].strip(), reason=entry["reason"].strip(), issue=issue,
                  devices=tuple(devices), mark=mark, source=where, deviation=deviation, judgement=judgement,
                  upstream_status=_upstream_status(entry.get("upstream_status", ""), where),
                  judged_on=judged_on.strip())


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
