"""The field table: the real samplers of ``devices/field/`` held to SPEC, their deviations judged.

``specsim field --out DIR`` runs every field adapter that loads on this
machine through the conformance groups, sorts each failing check into a known
deviation (a ``conformance:`` waiver shipped beside the adapter: reason, link,
deviation id, judgement) or a NEW one, re-checks the deviations that have a
confirming experiment (``CONFIRM``), and writes ``DIR/field.json`` and
``DIR/field.md``. Runs on other machines (the GPU box) are folded in with
``--merge``; ``docs/field.md`` is such a merged table.

A row of the table is one implementation × one layer (conformance group):

    >>> group_verdict({"pass": 3, "fail": 1, "not_supported": 2, "error": 0}, waived=1)
    'pass (1 waived)'
    >>> group_verdict({"pass": 3, "fail": 2, "not_supported": 0, "error": 0}, waived=1)
    'FAIL (1 new)'
    >>> group_verdict({"pass": 0, "fail": 0, "not_supported": 4, "error": 0}, waived=0)
    'not supported'
"""

from __future__ import annotations

import dataclasses
import glob
import os

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID

WAIVER_GLOB = "*_waivers.toml"
"""Waiver files shipped beside the adapters in ``devices/field/``."""


def field_waivers(device_name: str) -> list:
    """The ``conformance:`` waivers of ``devices/field/*_waivers.toml`` that apply to ``device_name``."""
    import devices.field
    from property_tests.waivers import load
    out = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(devices.field.__file__), WAIVER_GLOB))):
        out += [w for w in load(path) if w.conformance and w.applies_to_device(device_name)]
    return out


def group_verdict(counts: dict, waived: int) -> str:
    """One cell of the table from a group's status counts and how many of its failures are waived."""
    bad = counts.get("fail", 0) + counts.get("error", 0)
    if bad > waived:
        return f"FAIL ({bad - waived} new)"
    if counts.get("pass", 0) == 0 and bad == 0:
        return "not supported" if counts.get("not_supported", 0) else "-"
    return "pass" + (f" ({waived} waived)" if waived else "")


@dataclasses.dataclass
class Finding:
    """One failing (or erroring) check on one implementation, sorted into a deviation."""

    device: str
    check: str
    status: str
    seed: int | None
    detail: str
    deviation: str = "NEW"
    judgement: str = "unjudged: a new deviation"
    reason: str = ""
    link: str = ""
    confirmed: str = ""

    group: str = ""

    def reproduction(self, quick: bool) -> str:
        return (f"specsim conform --device {self.device} --groups {self.group} --in-process"
                f"{' --quick' if quick else ''}  # check {self.check}, seed {self.seed}")


def classify(device_name: str, by_group: dict[str, list[dict]], waivers: list) -> list[Finding]:
    """Every failing or erroring check of one device, matched to the first waiver that covers it."""
    out = []
    for group, c in ((g, c) for g, checks in by_group.items() for c in checks):
        if c["status"] not in ("fail", "error"):
            continue
        f = Finding(device_name, c["name"], c["status"], c.get("seed"), (c.get("detail") or "")[:400], group=group)
        w = next((w for w in waivers if w.matches_check(c["name"])), None)
        if w is not None:
            f.deviation, f.judgement, f.reason, f.link = w.deviation or "waived", w.judgement, w.reason, w.issue
        out.append(f)
    return out


# -- confirming experiments: a deviation's claim, re-checked on the failing case -------------------------------
def _sampler_case(device, check: str, quick: bool):
    """The batch and noise of a random ``L1-sampler/<order>/<case>`` check, rebuilt as the group builds them."""
    from specsim.conformance.runner import Context
    from specsim.conformance.sampler import CASES, case_params, random_case
    from specsim.testing.seeds import case_seed
    _, order, case = check.split("/")
    if case not in CASES:
        raise KeyError(check)
    seed = case_seed(0, "L1-sampler", order, case)
    return random_case(case, order, Context(seed=0, quick=quick), seed, device.capabilities.dtypes,
                       case_params(case, device.capabilities))


def _injected_case(device, check: str, quick: bool):
    """The batch and noise of an ``L1/injected`` check (or a random ``L1-sampler`` one), rebuilt exactly as
    the group builds them."""
    if check.startswith("L1-sampler/"):
        return _sampler_case(device, check, quick)
    from specsim.conformance.exact import _cases
    from specsim.conformance.runner import Context
    from specsim.testing.batches import random_batch, random_noise
    for name, spec, _why, seed in _cases(device, Context(seed=0, quick=quick), "L1/injected"):
        if name == check:
            rng = np.random.default_rng(seed)
            batch = random_batch(rng, spec)
            return batch, random_noise(rng, batch)
    raise KeyError(check)


def confirm_placeholder_row_read(device, check: str, quick: bool) -> str:
    """The case's padding placeholders, both ways (SPEC §4): re-run with every placeholder's draft row zeroed
    (padding's convention), the device agrees with the reference token for token; and the reference reading
    every placeholder as a withdrawn draft (its row read) agrees with the device as given. Both hold iff the
    device applies the withdrawn-draft rule to every -1 and the case differs only there."""
    from specsim.testing.compare import compare, reference_step
    batch, noise = _injected_case(device, check, quick)
    rows = np.asarray(batch.draft_token_ids) == PLACEHOLDER_TOKEN_ID
    want = reference_step(batch, noise)   # SPEC reads no padding row: the same for the zeroed batch
    got = device.verify(batch, noise)
    before = compare(batch, got, want)
    after = compare(batch, PlaceholderRowsZeroed(device).verify(batch, noise), want)
    withdrawn = as_withdrawn(batch)
    read = compare(withdrawn, got, reference_step(withdrawn, noise)) if withdrawn is not None else None
    if not before.ok and after.ok and read is not None and read.ok:
        return (f"confirmed: with the {int(rows.sum())} placeholder row(s) zeroed the device agrees token for "
                "token, and the reference reading them as withdrawn drafts (SPEC §4) agrees with it as given")
    return (f"NOT confirmed: before zeroing ok={before.ok}, after ok={after.ok}, read as withdrawn ok="
            f"{None if read is None else read.ok}: {(after if not after.ok else read or after).summary()[:200]}")


def as_withdrawn(batch):
    """``batch`` with every placeholder marked a withdrawn draft (SPEC §4: its draft row read), or None when the
    batch has no draft rows (point proposals cannot be withdrawn)."""
    if batch.draft_probs is None:
        return None
    return dataclasses.replace(batch, withdrawn=np.asarray(batch.draft_token_ids) == PLACEHOLDER_TOKEN_ID)


class PlaceholderRowsZeroed:
    """``device`` called with every padding placeholder's draft row zeroed (SPEC §4 reads no such row, so the
    reference's answer is unchanged): what a device that reads the row computes when the row is padding's
    convention. A withdrawn draft's row is left as it is."""

    def __init__(self, device):
        self.device, self.capabilities = device, device.capabilities
        self.name = f"{getattr(device, 'name', 'device')} (placeholder rows zeroed)"

    def verify(self, batch, noise=None):
        if batch.draft_probs is not None:
            draft_probs = np.array(batch.draft_probs, copy=True)
            padding = np.asarray(batch.draft_token_ids) == PLACEHOLDER_TOKEN_ID
            if batch.withdrawn is not None:
                padding &= ~np.asarray(batch.withdrawn, bool)   # a withdrawn draft's row is its own, and is read
            draft_probs[padding] = 0
            batch = dataclasses.replace(batch, draft_probs=draft_probs)
        return self.device.verify(batch, noise)


def confirm_volume_placeholder_rows(device, quick: bool) -> str:
    """``L1/volume`` run again (same seed, same batches) with placeholder rows zeroed on the device's side only:
    if every request it contradicted was a placeholder's row read, the re-run passes."""
    from specsim.conformance.volume import QUICK_REQUESTS, VOLUME_REQUESTS, volume_check
    again = volume_check(PlaceholderRowsZeroed(device), seed=0, requests=QUICK_REQUESTS if quick else VOLUME_REQUESTS)
    if again.status == "pass":
        return f"confirmed: with placeholder rows zeroed the same volume passes ({again.detail[:160]})"
    return f"NOT confirmed: with placeholder rows zeroed: {again.status}: {again.detail[:300]}"


def confirm_sizes_placeholder_rows(device, check: str, quick: bool) -> str:
    """An ``L1/sizes`` check run again (same seed, same batch) with placeholder rows zeroed on the device's side."""
    from specsim.conformance.runner import Context
    from specsim.conformance.sizes import sizes_group
    (again,) = sizes_group(PlaceholderRowsZeroed(device), Context(seed=0, quick=quick), only=check)
    if again.status == "pass":
        return "confirmed: with placeholder rows zeroed the same batch agrees token for token"
    return f"NOT confirmed: with placeholder rows zeroed: {again.status}: {again.detail[:300]}"


def confirm_placeholder_rows(device, check: str, quick: bool) -> str:
    """The placeholder-row-read experiment for an ``L1/injected`` case, a random ``L1-sampler`` case, an
    ``L1/sizes`` batch or ``L1/volume``."""
    if check == "L1/volume":
        return confirm_volume_placeholder_rows(device, quick)
    if check.startswith("L1/sizes/"):
        return confirm_sizes_placeholder_rows(device, check, quick)
    return confirm_placeholder_row_read(device, check, quick)


CONFIRM = {"placeholder-row-read": confirm_placeholder_rows}
"""Deviation id → ``f(device, check, quick) -> str``: the experiment that confirms the deviation's reason."""


def confirm(findings: list[Finding], device, quick: bool) -> None:
    """Run the confirming experiment of each finding whose deviation has one (in this process); a finding
    whose experiment does not confirm its deviation is NEW (its waiver claimed a cause that is not the cause)."""
    for f in findings:
        experiment = CONFIRM.get(f.deviation)
        if experiment is not None:
            try:
                f.confirmed = experiment(device, f.check, quick)
            except Exception as e:  # the experiment's own failure is reported, not raised
                f.confirmed = f"experiment failed: {type(e).__name__}: {e}"
            if not f.confirmed.startswith("confirmed"):   # the waiver's claim does not hold here: not waived
                f.deviation, f.judgement = "NEW", f"unjudged: {f.deviation}'s confirming experiment did not confirm"


# -- the table ---------------------------------------------------------------------------------------------------
def device_entry(name: str, by_group: dict[str, list[dict]] | None, why_not: str | None, engine: str, quick: bool,
                 where: str, command: str, findings: list[Finding], waivers: list) -> dict:
    """One implementation's part of ``field.json``; ``by_group``: group name → its checks (JSON), or None."""
    groups: dict[str, dict] = {}
    waived = {f.check for f in findings if f.deviation != "NEW"}
    for group, checks in (by_group or {}).items():
        counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "not_supported", "error")}
        counts["waived"] = sum(c["name"] in waived for c in checks)
        groups[group] = counts
    seen = {f.check for f in findings}
    return {"device": name, "engine": engine, "where": where, "quick": quick, "command": command,
            "available": by_group is not None, "why_not": why_not, "groups": groups,
            "findings": [dataclasses.asdict(f) for f in findings],
            "waivers_not_observed": sorted(w.check for w in waivers if not any(w.matches_check(c) for c in seen))}


def _union(old: dict, new: dict) -> dict:
    """Two runs of one device on one machine, each of some groups (run side by side so that their compiles
    overlap): the groups of both, a group run twice taken from ``new``."""
    redone = set(new["groups"])
    sizes = lambda run: {g: run["quick"] for g in run["groups"]} | run.get("quick_groups", {})  # noqa: E731
    return {**new, "groups": {**old["groups"], **new["groups"]}, "quick_groups": sizes(old) | sizes(new),
            "command": old["command"] + ("" if new["command"] in old["command"].split("; ") else "; " + new["command"]),
            "findings": [f for f in old["findings"] if f["group"] not in redone] + new["findings"],
            "waivers_not_observed": sorted(set(old["waivers_not_observed"]) & set(new["waivers_not_observed"]))}


def merge(docs: list[dict]) -> dict:
    """Fold several ``field.json`` documents: per device, a run beats a 'not available' entry; runs on the same
    machine are united group by group (:func:`_union`); otherwise later wins."""
    devices: dict[str, dict] = {}
    extras: dict[str, object] = {}
    for d in docs:
        for e in d["devices"]:
            old = devices.get(e["device"])
            if old is not None and old["available"] and e["available"] and old["where"] == e["where"]:
                devices[e["device"]] = _union(old, e)
            elif old is None or e["available"] or not old["available"]:
                devices[e["device"]] = e
        extras.update(d.get("extras", {}))
    return {"devices": sorted(devices.values(), key=lambda e: e["device"]), "extras": extras}


def rewaive(doc: dict) -> dict:
    """Sort the stored failing checks of ``doc`` (a merged ``field.json``) again by this checkout's waiver files:
    a deviation judged after the run (on a GPU box run once) reaches the table without re-running it. A finding
    whose confirming experiment did not confirm stays NEW; one that needs an experiment never run stays NEW."""
    for e in doc["devices"]:
        if not e["available"]:
            continue
        waivers = field_waivers(e["device"])
        for f in e["findings"]:
            if f["confirmed"] and not f["confirmed"].startswith("confirmed"):
                continue
            w = next((w for w in waivers if w.matches_check(f["check"])), None)
            deviation = (w.deviation or "waived") if w is not None else "NEW"
            if w is None or (deviation in CONFIRM and not f["confirmed"]):
                f.update(deviation="NEW", judgement="unjudged: a new deviation", reason="", link="")
            else:
                f.update(deviation=deviation, judgement=w.judgement, reason=w.reason, link=w.issue)
        for g, counts in e["groups"].items():
            counts["waived"] = sum(f["group"] == g and f["deviation"] != "NEW" for f in e["findings"])
        seen = {f["check"] for f in e["findings"]}
        e["waivers_not_observed"] = sorted(w.check for w in waivers if not any(w.matches_check(c) for c in seen))
    return doc


def render(doc: dict) -> str:
    """``field.md`` from a (merged) ``field.json``."""
    lines = ["# The field table", "",
             "Generated by `specsim field` (this file: runs merged with `--merge`; each row names the command "
             "and machine that gave it). Real implementations of speculative-decoding verification, each held to "
             "SPEC through its adapter in `devices/field/`; every failing check is sorted into a known deviation "
             "(a waiver shipped beside the adapter, with its judgement) or reported as NEW.", "",
             "## Verdicts", "", "| implementation | where | group | verdict | pass | fail | n/s | error |",
             "|---|---|---|---|---|---|---|---|"]
    for e in doc["devices"]:
        if not e["available"]:
            lines.append(f"| {e['engine'] or e['device']} (`{e['device']}`) | {e['where']} | - | not run: "
                         f"{_cell(e['why_not'])} | | | | |")
            continue
        for g, c in sorted(e["groups"].items()):
            lines.append(f"| {e['engine']} (`{e['device']}`) | {e['where']} | {g} | "
                         f"{group_verdict(c, c['waived'])} | {c['pass']} | {c['fail']} | {c['not_supported']} | "
                         f"{c['error']} |")
    lines += ["", "Commands:", ""]
    lines += [f"* `{e['device']}` ({e['where']}): `{e['command']}`" for e in doc["devices"] if e["available"]]
    lines += ["", "## Deviations", ""]
    by_dev: dict[tuple, list] = {}
    for e in doc["devices"]:
        for f in e["findings"]:
            by_dev.setdefault((f["deviation"], f["device"]), []).append(f)
    for (deviation, device), fs in sorted(by_dev.items()):
        first = fs[0]
        lines += [f"### `{deviation}` on `{device}` — {first['judgement']}", ""]
        if first["reason"]:
            lines += [first["reason"], "", f"Link: {first['link']}", ""]
        entry = next(e for e in doc["devices"] if e["device"] == device)
        for f in fs:   # a united run's groups may differ in size (``_union``'s quick_groups)
            quick = entry.get("quick_groups", {}).get(f["group"], entry["quick"])
            lines.append(f"* `{f['check']}` ({f['status']}, seed {f['seed']}): {_cell(f['detail'][:240])}")
            lines.append(f"  - reproduce: `{Finding(**f).reproduction(quick)}`")
            if f["confirmed"]:
                lines.append(f"  - {f['confirmed']}")
        lines.append("")
    stale = [(e["device"], w) for e in doc["devices"] if e["available"] for w in e["waivers_not_observed"]]
    if stale:
        lines += ["## Waivers not observed in these runs", "",
                  "(size-specific names, or a deviation this run's cases did not reach)", ""]
        lines += [f"* `{d}`: `{w}`" for d, w in stale]
        lines.append("")
    for title, text in doc.get("extras", {}).items():
        lines += [f"## {title}", "", text.rstrip(), ""]
    return "\n".join(lines) + "\n"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")
