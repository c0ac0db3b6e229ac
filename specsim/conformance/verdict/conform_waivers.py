"""A vendor's waivers in ``specsim conform --waivers FILE``: known failures, each with a reason and a link.

One format for both routes: the file of ``pytest --specsim-waivers`` (``specsim/conformance/verdict/waivers.py``
reads and validates it). ``specsim conform`` applies its ``conformance:`` entries, each naming one
conformance check (``CheckResult.name``) exactly or the variants of one check by a narrow pattern, and
the shipped ``property_tests/test_conformance_groups.py`` applies them through :func:`apply` too::

    [[waiver]]
    check  = "conformance:L1/edge/top-p-cut-ties"
    reason = "our top-p keeps one of the tokens tied at the cut; fixed in driver 2.4"
    link   = "https://tracker.acme.example/SPEC-123"     # also spelt 'issue' or 'url'
    devices = ["acme-npu"]                                # optional: only for these devices

``check``, ``reason`` and the link are required, and each obeys its rule
(``specsim.conformance.verdict.waivers``: one check's exact name or a narrow pattern for the variants of one
check, a reason of at least ``MIN_REASON_WORDS`` words that is no placeholder, a URL); a broken rule, a
missing field, an unknown key or a malformed file is a usage error naming the file, the entry and the
rule. What a waiver does to a run:

- a ``fail`` or ``error`` it matches keeps its status and gains ``waiver: {check, reason, link,
  source}``; the first matching entry (in file order) waives it. A ``pass`` or ``not_supported``
  is never touched.
- a crash record (``<group>/crashed``, ``/timeout``, ``/missing``, ``/declaration-mismatch``,
  ``/mutated-input``) and a check that carries the core's evidence (``profiles.carries_core_evidence``)
  are never waived: the check keeps failing, unwaived, and every entry that matched it is listed as
  **refused**, with why (a waiver documents a deviation; it does not make a device conform to the core,
  and a crash is no deviation of the law).
- the verdict (SPEC §10, ``profiles.verdict``) says so: ``pass-with-waivers`` when every failure
  is waived, ``fail`` when any is not.
- every entry that waived nothing and was refused nothing is listed as **stale**, with why: it matched no check of the
  run, matched only checks that did not fail (fixed?), or every failing check it matches was
  waived by an earlier entry. Entries for other devices, entries judged on another release of the
  device's engine (``judged_on = "transformers 5.23.0"`` against the device's ``engine``), and entries
  naming pytest tests (no ``conformance:`` prefix), are listed as not applicable.
- ``counts``: how many checks were waived and how many entries were refused, stale and not applicable.

Example::

    >>> from specsim.conformance.verdict.waivers import Waiver
    >>> from specsim.conformance.core.results import CheckResult
    >>> w = Waiver(check="conformance:L1/edge/top-*", reason="top-p keeps one tied token", issue="https://x.example/1",
    ...            source="f, entry 1")
    >>> wf = WaiverFile("f", "0" * 64, (w,))
    >>> checks = [CheckResult("L1/edge/top-a", "L1", "fail"), CheckResult("L1/edge/top-b", "L1", "pass")]
    >>> results, record = apply(checks, wf, device_spec="dev")
    >>> results[0].status, results[0].waiver["reason"], results[1].waiver
    ('fail', 'top-p keeps one tied token', None)
    >>> record["waived"]
    [{'check': 'L1/edge/top-a', 'status': 'fail', 'source': 'f, entry 1'}]
    >>> record["counts"]
    {'waived': 1, 'refused': 0, 'stale': 0, 'not_applicable': 0}
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from specsim.conformance.verdict.waivers import Waiver, WaiverError, load, unwaivable_record
from specsim.conformance.core.results import CheckResult

OPTION = "--waivers"
FAILING = ("fail", "error")

__all__ = ["OPTION", "WaiverError", "WaiverFile", "apply", "load_file", "summary_lines", "unwaivable", "waiver_of"]


@dataclass(frozen=True)
class WaiverFile:
    """A validated waiver file: where it is, the SHA-256 of its bytes (what ``--resume`` compares), its entries."""

    path: str
    sha256: str
    waivers: tuple[Waiver, ...]

    def key(self) -> str:
        """The file's identity in a run's plan: its content, not its path (a moved file is the same file)."""
        return f"sha256:{self.sha256}"


def load_file(path: str, option: str = OPTION) -> WaiverFile:
    """Read and validate ``path``; :class:`WaiverError` names the file (as given with ``option``), the entry
    and the rule broken."""
    waivers = load(path, option=option)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return WaiverFile(path, digest, tuple(waivers))


def waiver_of(w: Waiver) -> dict[str, str]:
    """What a waived check carries in ``conformance.json``."""
    return {"check": w.check, "reason": w.reason, "link": w.issue, "source": w.source}


def _not_applicable(w: Waiver, device_spec: str, device_name: str | None, engine: str | None = None) -> str | None:
    """Why ``w`` is not for this run (None: it is)."""
    if not w.conformance:
        return ("names a pytest test, not a conformance check; to waive a check of specsim conform "
                "write check = \"conformance:<check name>\"")
    if not (w.applies_to_device(device_spec) or (device_name and w.applies_to_device(device_name))):
        return f"for devices {list(w.devices)}; this run's device is {device_spec!r}" + (
            f" ({device_name})" if device_name and device_name != device_spec else "")
    if not w.judged_on_engine(engine):
        return (f"judged on {w.judged_on}; this run's device runs {engine or 'a release it does not name'}: "
                "the checks it names are held to SPEC here")
    return None


def _why_stale(w: Waiver, results: list[CheckResult], first_of: dict[str, Waiver]) -> str:
    matched = [r for r in results if w.matches_check(r.name)]
    if not matched:
        return "matched no check of this run (a typo, a renamed check, or a group this run left out)"
    failing = [r for r in matched if r.status in FAILING]
    if not failing:
        counts = {s: sum(r.status == s for r in matched) for s in ("pass", "not_supported")}
        said = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        return f"matched {len(matched)} check(s), none failing ({said}): fixed? close its issue and remove the entry"
    earlier = sorted({first_of[r.name].source for r in failing})
    return f"every failing check it matches is waived by an earlier entry ({'; '.join(earlier)})"


def _entry(w: Waiver, why: str) -> dict[str, str]:
    return {**waiver_of(w), "why": why}


def unwaivable(r: CheckResult) -> str | None:
    """Why no waiver may cover the failing check ``r`` (None: a waiver may).

    >>> unwaivable(CheckResult("L1-injected/crashed", "L1", "error"))[:39]
    'a record of a group that was not judged'
    """
    from specsim.conformance.verdict.profiles import carries_core_evidence
    if unwaivable_record(r.name):
        return (f"a record of a group that was not judged ({r.name.rsplit('/', 1)[-1]}): a crash, a time-out or a "
                "missing group is no deviation of the law and hides every check of its group")
    if carries_core_evidence({"name": r.name, "extra": r.extra}):
        return ("it carries the core's evidence (SPEC §10): a waiver documents a deviation, it cannot make a "
                "device conform to the core")
    return None


def apply(results: list[CheckResult], waiver_file: WaiverFile, *, device_spec: str,
          device_name: str | None = None, engine: str | None = None) -> tuple[list[CheckResult], dict]:
    """Mark the failing ``results`` the file's waivers cover; return them and ``conformance.json``'s ``waivers``.

    The one function both routes apply a waiver file through (``specsim conform --waivers`` and
    ``pytest --specsim-waivers``'s ``property_tests/test_conformance_groups.py``).

    - ``results``: the run's checks, as the groups returned them (never modified; waived ones are copies).
    - ``device_spec`` / ``device_name``: what a waiver's ``devices`` may name.
    - ``engine``: the device's ``"<engine> <release>"`` (its ``engine`` attribute); a waiver ``judged_on``
      another release waives nothing (listed as not applicable, with both releases).

    The record: ``{"file", "sha256", "entries", "waived": [{check, status, source}], "refused": [...],
    "stale": [...], "not_applicable": [...], "counts": {"waived", "refused", "stale", "not_applicable"}}``,
    each entry of ``refused``, ``stale`` and ``not_applicable`` with its ``check``, ``reason``, ``link``,
    ``source`` and ``why``; a refused one also with ``checks``, the failing checks it may not cover.
    """
    active, not_applicable = [], []
    for w in waiver_file.waivers:
        why = _not_applicable(w, device_spec, device_name, engine)
        if why is None:
            active.append(w)
        else:
            not_applicable.append(_entry(w, why))
    out, waived, first_of = [], [], {}
    refused: dict[Waiver, dict] = {}
    for r in results:
        matching = [w for w in active if w.matches_check(r.name)] if r.status in FAILING else []
        why = unwaivable(r) if matching else None
        if why is not None:
            for w in matching:
                refused.setdefault(w, {**_entry(w, why), "checks": []})["checks"].append(r.name)
        if not matching or why is not None:
            out.append(r)
            continue
        w = matching[0]
        first_of[r.name] = w
        out.append(dataclasses.replace(r, waiver=waiver_of(w)))
        waived.append({"check": r.name, "status": r.status, "source": w.source})
    used = set(first_of.values()) | set(refused)
    stale = [_entry(w, _why_stale(w, results, first_of)) for w in active if w not in used]
    record = {"file": waiver_file.path, "sha256": waiver_file.sha256, "entries": len(waiver_file.waivers),
              "waived": waived, "refused": list(refused.values()), "stale": stale, "not_applicable": not_applicable,
              "counts": {"waived": len(waived), "refused": len(refused), "stale": len(stale),
                         "not_applicable": len(not_applicable)}}
    return out, record


def summary_lines(record: dict) -> list[str]:
    """The terminal's account of a run's waivers: how many checks were waived, then every refused, stale and
    not-applicable entry with why."""
    refused = record.get("refused") or []
    lines = [f"waivers: {record['entries']} entr{'y' if record['entries'] == 1 else 'ies'} in {record['file']}; "
             f"{len(record['waived'])} failing check(s) waived, {len(refused)} entr"
             f"{'y' if len(refused) == 1 else 'ies'} refused, {len(record['stale'])} stale"
             + (f", {len(record['not_applicable'])} not for this run" if record["not_applicable"] else "")]
    for e in refused:
        shown = ", ".join(e["checks"][:3]) + (f" and {len(e['checks']) - 3} more" if len(e["checks"]) > 3 else "")
        lines.append(f"  refused: {e['check']!r} ({e['source']}) on {shown}: {e['why']}; still failing")
    for e in record["stale"]:
        lines.append(f"  stale: {e['check']!r} ({e['source']}): {e['why']}")
    for e in record["not_applicable"]:
        lines.append(f"  not applied: {e['check']!r} ({e['source']}): {e['why']}")
    return lines
