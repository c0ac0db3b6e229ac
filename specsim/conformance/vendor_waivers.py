"""A vendor's waivers in ``specsim conform --waivers FILE``: known failures, each with a reason and a link.

One format for both routes: the file of ``pytest --specsim-waivers`` (``specsim/conformance/waivers.py``
reads and validates it). ``specsim conform`` applies its ``conformance:`` entries, each naming
conformance checks (``CheckResult.name``) exactly or by a ``*``/``?`` pattern::

    [[waiver]]
    check  = "conformance:L1/edge/top-p-cut-ties"
    reason = "our top-p keeps one of the tokens tied at the cut; fixed in driver 2.4"
    link   = "https://tracker.acme.example/SPEC-123"     # also spelt 'issue' or 'url'
    devices = ["acme-npu"]                                # optional: only for these devices

``check``, ``reason`` and the link are required; a missing one, an unknown key or a malformed
file is a usage error naming the file and the entry. What a waiver does to a run:

- a ``fail`` or ``error`` it matches keeps its status and gains ``waiver: {check, reason, link,
  source}``; the first matching entry (in file order) waives it. A ``pass`` or ``not_supported``
  is never touched.
- the verdict (SPEC §10, ``profiles.verdict``) says so: ``pass-with-waivers`` when every failure
  is waived and none of them carries the core's evidence, ``fail`` when one does (a waiver
  documents a deviation; it does not make a device conform to the core).
- every entry that waived nothing is listed as **stale**, with why: it matched no check of the
  run, matched only checks that did not fail (fixed?), or every failing check it matches was
  waived by an earlier entry. Entries for other devices, entries judged on another release of the
  device's engine (``judged_on = "transformers 5.23.0"`` against the device's ``engine``), and entries
  naming pytest tests (no ``conformance:`` prefix), are listed as not applicable.

Example::

    >>> from specsim.conformance.waivers import Waiver
    >>> from specsim.conformance.results import CheckResult
    >>> w = Waiver(check="conformance:L1/edge/*", reason="known", issue="https://x.example/1", source="f, entry 1")
    >>> wf = WaiverFile("f", "0" * 64, (w,))
    >>> results, record = apply([CheckResult("L1/edge/a", "L1", "fail"), CheckResult("L1/edge/b", "L1", "pass")],
    ...                         wf, device_spec="dev")
    >>> results[0].status, results[0].waiver["reason"], results[1].waiver
    ('fail', 'known', None)
    >>> record["waived"], record["stale"]
    ([{'check': 'L1/edge/a', 'status': 'fail', 'source': 'f, entry 1'}], [])
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from specsim.conformance.waivers import Waiver, WaiverError, load
from specsim.conformance.results import CheckResult

OPTION = "--waivers"
FAILING = ("fail", "error")

__all__ = ["OPTION", "WaiverError", "WaiverFile", "apply", "load_file", "summary_lines", "waiver_of"]


@dataclass(frozen=True)
class WaiverFile:
    """A validated waiver file: where it is, the SHA-256 of its bytes (what ``--resume`` compares), its entries."""

    path: str
    sha256: str
    waivers: tuple[Waiver, ...]

    def key(self) -> str:
        """The file's identity in a run's plan: its content, not its path (a moved file is the same file)."""
        return f"sha256:{self.sha256}"


def load_file(path: str) -> WaiverFile:
    """Read and validate ``path``; :class:`WaiverError` names the file, the entry and the rule broken."""
    waivers = load(path, option=OPTION)
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


def apply(results: list[CheckResult], waiver_file: WaiverFile, *, device_spec: str,
          device_name: str | None = None, engine: str | None = None) -> tuple[list[CheckResult], dict]:
    """Mark the failing ``results`` the file's waivers cover; return them and ``conformance.json``'s ``waivers``.

    - ``results``: the run's checks, as the groups returned them (never modified; waived ones are copies).
    - ``device_spec`` / ``device_name``: what a waiver's ``devices`` may name.
    - ``engine``: the device's ``"<engine> <release>"`` (its ``engine`` attribute); a waiver ``judged_on``
      another release waives nothing (listed as not applicable, with both releases).

    The record: ``{"file", "sha256", "entries", "waived": [{check, status, source}], "stale": [...],
    "not_applicable": [...]}``, each entry of the last two with its ``check``, ``reason``, ``link``,
    ``source`` and ``why``.
    """
    active, not_applicable = [], []
    for w in waiver_file.waivers:
        why = _not_applicable(w, device_spec, device_name, engine)
        if why is None:
            active.append(w)
        else:
            not_applicable.append(_entry(w, why))
    out, waived, first_of = [], [], {}
    for r in results:
        w = next((w for w in active if w.matches_check(r.name)), None) if r.status in FAILING else None
        if w is None:
            out.append(r)
            continue
        first_of[r.name] = w
        out.append(dataclasses.replace(r, waiver=waiver_of(w)))
        waived.append({"check": r.name, "status": r.status, "source": w.source})
    used = set(first_of.values())
    stale = [_entry(w, _why_stale(w, results, first_of)) for w in active if w not in used]
    record = {"file": waiver_file.path, "sha256": waiver_file.sha256, "entries": len(waiver_file.waivers),
              "waived": waived, "stale": stale, "not_applicable": not_applicable}
    return out, record


def summary_lines(record: dict) -> list[str]:
    """The terminal's account of a run's waivers: how many checks each applied entry waived, then every
    stale and not-applicable entry with why."""
    lines = [f"waivers: {record['entries']} entr{'y' if record['entries'] == 1 else 'ies'} in {record['file']}; "
             f"{len(record['waived'])} failing check(s) waived, {len(record['stale'])} stale"
             + (f", {len(record['not_applicable'])} not for this run" if record["not_applicable"] else "")]
    for e in record["stale"]:
        lines.append(f"  stale: {e['check']!r} ({e['source']}): {e['why']}")
    for e in record["not_applicable"]:
        lines.append(f"  not applied: {e['check']!r} ({e['source']}): {e['why']}")
    return lines
