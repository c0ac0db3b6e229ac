"""The field table: the real samplers of ``devices/field/`` held to SPEC, their deviations judged.

``specsim field --out DIR`` runs every field adapter that loads where it runs
through the conformance groups, sorts each failing check into a known
deviation (a ``conformance:`` waiver shipped beside the adapter: reason, link,
deviation id, judgement) or a NEW one, re-checks the deviations that have a
confirming experiment (``CONFIRM``), and writes ``DIR/field.json`` and
``DIR/field.md``. Runs on other machines (a CUDA machine's) are folded in with
``--merge``; ``docs/field.md`` shows such a merged table.

A row of the table is one implementation × one layer (conformance group); a field proposer (a drafter, run by
``specsim field --proposers NAME``) has one row, the group ``proposer``: its ``specsim proposer`` checks
(:func:`proposer_entry`):

    >>> group_verdict({"pass": 3, "fail": 1, "not_supported": 2, "error": 0}, waived=1)
    'pass (1 waived)'
    >>> group_verdict({"pass": 3, "fail": 2, "not_supported": 0, "error": 0}, waived=1)
    'FAIL (1 new)'
    >>> group_verdict({"pass": 0, "fail": 0, "not_supported": 4, "error": 0}, waived=0)
    'not supported'

A waiver names the release it was judged on (``judged_on = "transformers 5.23.0"``). On that release a failing
check it covers is waived; on any other (the device's ``engine`` names the release it runs) the check stays a
failure, marked with the release of the judgement, so a judgement is never carried silently to another release:

    >>> group_verdict({"pass": 3, "fail": 1, "not_supported": 0, "error": 0}, waived=0, judged_elsewhere=1,
    ...               judged_on="5.23.0")
    'FAIL (1 judged on 5.23.0)'

``specsim field --releases A,B`` runs one engine's releases side by side (:func:`release_runs_block`): the
rows are the groups and the failing checks, the columns the releases.

A Markdown page shows a stored table between markers naming its ``field.json`` (relative to the page)::

    <!-- specsim:field field-results/field.json -->
    …the verdicts, commands, deviations and release tables, rendered…
    <!-- /specsim:field -->

``python -m specsim.field.table --write docs/field.md`` renders the block from that file, ``--check`` exits 1
when it differs (``tests/field/test_field_table.py`` runs the check), so every figure in it is the stored run's.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

from devices.protocol import PLACEHOLDER_TOKEN_ID
from reference import SPEC_VERSION

WAIVER_GLOB = "*_waivers.toml"
"""Waiver files shipped beside the adapters in ``devices/field/``."""

SCHEMA = 2
"""``field.json``'s schema: 2 adds each entry's ``release``, each finding's ``judged_on`` and ``standing``, each
group's ``judged_elsewhere`` count and the ``releases`` blocks. A document without ``schema`` is 1 and reads
as 2 with every judged finding waived (what schema 1 recorded)."""

PROPOSER_GROUP = "proposer"
"""The one group of a field proposer's row (``specsim.engine.proposers.checked.FIELD``): ``specsim proposer``'s
checks, each named ``proposer/<case>/<check>`` (``proposer/T1/law/position-0``)."""

NEW, WAIVED, JUDGED_ELSEWHERE = "new", "waived", "judged elsewhere"
"""A finding's standing: no waiver covers it; a waiver judged on this release covers it; a waiver covers it
but was judged on another release (a failure here, marked with that release)."""


def field_waivers(device_name: str) -> list:
    """The ``conformance:`` waivers of ``devices/field/*_waivers.toml`` that apply to ``device_name``.

    Every entry of those files names the release it was judged on; one that does not is a WaiverError."""
    import devices.field
    from specsim.conformance.verdict.waivers import WaiverError, load
    out = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(devices.field.__file__), WAIVER_GLOB))):
        for w in load(path):
            if not w.judged_on:
                raise WaiverError(f"{w.source}: a field waiver names the release it was judged on "
                                  "(judged_on = \"<engine> <release>\", e.g. \"transformers 5.23.0\")")
            if w.conformance and w.applies_to_device(device_name):
                out.append(w)
    return out


def release_of(engine: str | None) -> str | None:
    """The release in a device's ``engine`` (``"vllm 0.33.0"`` → ``"0.33.0"``); None when it names none.

    >>> release_of("flashinfer 0.7.2.post1"), release_of("transformers")
    ('0.7.2.post1', None)
    """
    from specsim.conformance.verdict.waivers import JUDGED_ON_FORMAT
    m = JUDGED_ON_FORMAT.match((engine or "").strip())
    return m.group(2) if m else None


def standing(finding: dict) -> str:
    """A stored finding's standing (:data:`NEW`, :data:`WAIVED`, :data:`JUDGED_ELSEWHERE`); schema 1 stored
    none: there a judged finding was waived."""
    return finding.get("standing") or (NEW if finding["deviation"] == "NEW" else WAIVED)


def judged_label(judged_on: str) -> str:
    """How a cell names the release of a judgement: the release alone (the row already names the engine).

    >>> judged_label("transformers 5.23.0")
    '5.23.0'
    """
    return release_of(judged_on) or judged_on


def group_verdict(counts: dict, waived: int, judged_elsewhere: int = 0, judged_on: str = "") -> str:
    """One cell of the table from a group's status counts, how many of its failures are waived, and how many
    a waiver judged on another release (``judged_on``: that release) covers."""
    bad = counts.get("fail", 0) + counts.get("error", 0)
    new = bad - waived - judged_elsewhere
    if new > 0 or judged_elsewhere:
        parts = ([f"{new} new"] if new > 0 else []) + (
            [f"{judged_elsewhere} judged on {judged_on or 'another release'}"] if judged_elsewhere else [])
        return f"FAIL ({', '.join(parts)})"
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
    judged_on: str = ""      # the release its waiver was judged on ("transformers 5.23.0"); "" when none covers it
    standing: str = NEW      # NEW, WAIVED or JUDGED_ELSEWHERE

    def reproduction(self, quick: bool) -> str:
        if self.group == PROPOSER_GROUP:
            case = self.check.split("/")[1]
            return (f"specsim proposer {self.device} --cases {case} --seed {self.seed}"
                    f"{' --quick' if quick else ''}  # check {self.check}")
        return (f"specsim conform --device {self.device} --groups {self.group} --in-process"
                f"{' --quick' if quick else ''}  # check {self.check}, seed {self.seed}")


def classify(device_name: str, by_group: dict[str, list[dict]], waivers: list, engine: str | None = None
             ) -> list[Finding]:
    """Every failing or erroring check of one device, matched to the first waiver that covers it; ``engine``:
    the device's ``"<engine> <release>"``, against which each waiver's ``judged_on`` is held."""
    out = []
    for group, c in ((g, c) for g, checks in by_group.items() for c in checks):
        if c["status"] not in ("fail", "error"):
            continue
        f = Finding(device_name, c["name"], c["status"], c.get("seed"), (c.get("detail") or "")[:400], group=group)
        w = next((w for w in waivers if w.matches_check(c["name"])), None)
        if w is not None:
            _judge(f, w, engine)
        out.append(f)
    return out


def _judge(f: Finding, w, engine: str | None) -> None:
    """``f`` sorted into ``w``'s deviation: waived where ``w`` was judged on ``engine``'s release, else marked
    with the release it was judged on."""
    f.deviation, f.judgement, f.reason, f.link = w.deviation or "waived", w.judgement, w.reason, w.issue
    f.judged_on = w.judged_on
    f.standing = WAIVED if w.judged_on_engine(engine) else JUDGED_ELSEWHERE


# -- confirming experiments: a deviation's claim, re-checked on the failing case -------------------------------
def _sampler_case(device, check: str, quick: bool):
    """The batch and noise of a random ``L1-sampler/<order>/<case>`` check, rebuilt as the group builds them."""
    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.sampler.group import CASES, case_params, random_case
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
    from specsim.conformance.checks.chain.exact import chain_cases
    from specsim.conformance.run.runner import Context
    from specsim.testing.batches import random_batch, random_noise
    for name, spec, _why, seed in chain_cases(device, Context(seed=0, quick=quick), "L1/injected"):
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
    from specsim.judge.compare import compare, reference_step
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
    from specsim.conformance.checks.chain.volume import QUICK_REQUESTS, VOLUME_REQUESTS, volume_check
    again = volume_check(PlaceholderRowsZeroed(device), seed=0, requests=QUICK_REQUESTS if quick else VOLUME_REQUESTS)
    if again.status == "pass":
        return f"confirmed: with placeholder rows zeroed the same volume passes ({again.detail[:160]})"
    return f"NOT confirmed: with placeholder rows zeroed: {again.status}: {again.detail[:300]}"


def confirm_sizes_placeholder_rows(device, check: str, quick: bool) -> str:
    """An ``L1/sizes`` check run again (same seed, same batch) with placeholder rows zeroed on the device's side."""
    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.chain.sizes import sizes_group
    (again,) = sizes_group(PlaceholderRowsZeroed(device), Context(seed=0, quick=quick), only=check)
    if again.status == "pass":
        return "confirmed: with placeholder rows zeroed the same batch agrees token for token"
    return f"NOT confirmed: with placeholder rows zeroed: {again.status}: {again.detail[:300]}"


def without_min_tokens_crossings(batch):
    """``batch`` with ``min_tokens`` set to 0 for each request whose drafts carry its output across ``min_tokens``
    (``len(output) < min_tokens <= len(output) + K``): the one step where a bonus row that counts the output
    before the step bans the stop ids SPEC §12.2 allows (``min-tokens-bonus-pre-step``)."""
    s = batch.sampler
    if s is None or s.min_tokens is None:
        return batch
    out = [0 if o is None else len(o) for o in (s.output_token_ids or [None] * batch.batch_size)]
    k = np.asarray(batch.num_draft_tokens)
    min_tokens = np.array(s.min_tokens, copy=True)
    crossing = np.array([out[i] < min_tokens[i] <= out[i] + k[i] for i in range(batch.batch_size)])
    min_tokens[crossing] = 0
    return dataclasses.replace(batch, sampler=dataclasses.replace(s, min_tokens=min_tokens))


def confirm_sampler_precision_placeholder_rows(device, quick: bool) -> str:
    """``L1-sampler/precision`` run again (same seed, same requests) with placeholder rows zeroed on the device's
    side only, and, where the device's waivers judge ``min-tokens-bonus-pre-step`` too, the steps that cross
    ``min_tokens`` given none (for the device and the reference alike): if every request it contradicted had
    one of those two causes, the re-run passes."""
    from specsim.conformance.checks.sampler.precision import (SAMPLER_QUICK_REQUESTS, SAMPLER_REQUESTS,
                                                              sampler_precision_check)
    name = getattr(device, "name", "")
    crossing = any(w.deviation == "min-tokens-bonus-pre-step" for w in field_waivers(name)) if name else False
    again = sampler_precision_check(PlaceholderRowsZeroed(device), seed=0,
                                    requests=SAMPLER_QUICK_REQUESTS if quick else SAMPLER_REQUESTS,
                                    edit=without_min_tokens_crossings if crossing else None)
    how = "placeholder rows zeroed" + (" and min_tokens crossings removed" if crossing else "")
    if again.status == "pass":
        return f"confirmed: with {how} the same requests pass ({again.detail[:160]})"
    return f"NOT confirmed: with {how}: {again.status}: {again.detail[:300]}"


def confirm_edge_placeholder_rows(device, check: str, quick: bool) -> str:
    """An ``L1/edge`` check run again (same seed, same batch; a law check under the device's own draws too) with
    placeholder rows zeroed on the device's side."""
    from specsim.conformance.checks.chain.exact import edge_group
    from specsim.conformance.run.runner import Context
    (again,) = edge_group(PlaceholderRowsZeroed(device), Context(seed=0, quick=quick), only=check)
    if again.status == "pass":
        return f"confirmed: with placeholder rows zeroed the same edge passes ({again.detail[:160]})"
    return f"NOT confirmed: with placeholder rows zeroed: {again.status}: {again.detail[:300]}"


def confirm_placeholder_rows(device, check: str, quick: bool) -> str:
    """The placeholder-row-read experiment for an ``L1/injected`` case, a random ``L1-sampler`` case, §12's
    precision batch, an ``L1/sizes`` batch, an ``L1/edge`` check or ``L1/volume``."""
    if check.startswith("L1/edge/"):
        return confirm_edge_placeholder_rows(device, check, quick)
    if check == "L1/volume":
        return confirm_volume_placeholder_rows(device, quick)
    if check == "L1-sampler/precision":
        return confirm_sampler_precision_placeholder_rows(device, quick)
    if check.startswith("L1/sizes/"):
        return confirm_sizes_placeholder_rows(device, check, quick)
    return confirm_placeholder_row_read(device, check, quick)


def confirm_filter_ties(device, check: str, quick: bool) -> str:
    """A filter that keeps k tokens (or a sorted prefix) drops part of a tie class at its cut (SPEC §2 keeps it).
    An ``L1/sizes/filters-V<V>`` batch mixes requests without ties (strided logits that catch a filter losing
    entries per lane, tile or thread) with one tied across the ``k``-th value: it is rebuilt (same seed) and
    the device confirms the deviation only if every request it contradicts is a tied one (``CONFIRMS_ONLY``)."""
    from specsim.conformance.checks.chain.sizes import FILTER_REQUESTS, filter_batch
    from specsim.judge.compare import reference_step
    from specsim.testing.seeds import case_seed
    batch, noise = filter_batch(np.random.default_rng(case_seed(0, check)), int(check.rsplit("-V", 1)[1]),
                                device.capabilities)
    got, want = device.verify(batch, noise), reference_step(batch, noise)
    wrong = [i for i in range(batch.batch_size)
             if got.emitted(i) != [int(t) for t in want.output_token_ids[i, : int(want.num_accepted[i]) + 1]]]
    tied = [i for i, request in enumerate(FILTER_REQUESTS) if request[3]]
    if wrong and set(wrong) <= set(tied):
        return f"confirmed: of the batch's {batch.batch_size} requests only the tied one(s) {wrong} differ"
    return f"NOT confirmed: requests {wrong} differ; only {tied} hold a tie at the cut"


def confirm_neighbours_top_p(device, check: str, quick: bool) -> str:
    """An ``L1/edge-neighbours`` or ``L1-sampler/edge-neighbours`` check (SPEC 1.10, 1.11: an edge's filler rows, of
    1.10's mix, of one kind or with §12 parameters) run again on the same batches with every filler's top-p off: the
    deviation is top-p's on the neighbours iff they then all agree with the reference (§12's: ``_both_causes``)."""
    from specsim.conformance.checks.chain.exact import edge_kind_checks, edge_mixed_checks
    if check.startswith("L1-sampler/"):
        return _both_causes(device, check, quick, "filler_top_p")
    checks = edge_kind_checks if "/mixed-" in check else edge_mixed_checks
    return _neighbours_again(device, check, quick, checks, "every filler's top-p off", filler_top_p=False)


def confirm_neighbours_min_tokens(device, check: str, quick: bool) -> str:
    """An ``L1-sampler/edge-neighbours`` check (SPEC 1.11: a §12 edge's filler rows, some with ``min_tokens`` crossing
    inside the step) run again on the same batches with every filler's ``min_tokens`` 0: the deviation is the bonus
    row's stop-id ban by the pre-step length iff the fillers' rows then all agree with the reference
    (``_both_causes``)."""
    return _both_causes(device, check, quick, "filler_min_tokens")


FILLER_CAUSES = {"filler_top_p": "every filler's top-p off", "filler_min_tokens": "every filler's min_tokens 0"}
"""The two known causes a §12 edge's filler rows can hold at once (``sampler.group.edge_mixed_checks``' knobs)."""


def _both_causes(device, check: str, quick: bool, own: str) -> str:
    """A §12 edge's neighbours run again with the waiver's cause (``own``, a ``FILLER_CAUSES`` knob) off: confirmed
    if they then agree. A batch can hold both known causes in different filler rows; then confirmed too if, with
    the other cause alone off, they still differ (the waiver's cause is needed) and with both off they agree (no
    third cause)."""
    from specsim.conformance.checks.sampler.group import edge_mixed_checks
    first = _neighbours_again(device, check, quick, edge_mixed_checks, FILLER_CAUSES[own], **{own: False})
    if first.startswith("confirmed"):
        return first
    other = next(k for k in FILLER_CAUSES if k != own)
    alone = _neighbours_again(device, check, quick, edge_mixed_checks, FILLER_CAUSES[other], **{other: False})
    if alone.startswith("confirmed"):   # the other cause alone explains it: not the waiver's
        return first
    both = _neighbours_again(device, check, quick, edge_mixed_checks, " and ".join(FILLER_CAUSES.values()),
                             **{k: False for k in FILLER_CAUSES})
    if not both.startswith("confirmed"):
        return first
    return (f"confirmed: both known causes in one batch ({first}; {alone}; {both})")


def _neighbours_again(device, check: str, quick: bool, checks, changed: str, **knob) -> str:
    """``check`` run again by ``checks(..., only=check, **knob)`` (its fillers ``changed``): confirmed iff it passes."""
    from specsim.conformance.run.runner import Context
    again = [r for r in checks(device, Context(seed=0, quick=quick), only=check, **knob) if r.name == check]
    if again and again[0].status == "pass":
        return f"confirmed: with {changed} the same rows agree ({again[0].detail[-160:]})"
    return f"NOT confirmed: with {changed}: " + (f"{again[0].status}: {again[0].detail[:300]}" if again else
                                                 "no such check")


CONFIRM = {"placeholder-row-read": confirm_placeholder_rows, "filter-ties": confirm_filter_ties,
           "top-p-kept-set-approximate": confirm_neighbours_top_p,
           "min-tokens-bonus-pre-step": confirm_neighbours_min_tokens}
"""Deviation id → ``f(device, check, quick) -> str``: the experiment that confirms the deviation's reason."""

CONFIRMS_ONLY = {"filter-ties": "L1/sizes/filters-V",
                 "top-p-kept-set-approximate": ("L1/edge-neighbours/", "L1-sampler/edge-neighbours/"),
                 "min-tokens-bonus-pre-step": "L1-sampler/edge-neighbours/"}
"""Deviation id → the prefix of the checks its experiment is for (absent: every check of the deviation): the
other checks of ``filter-ties`` are edges and statistics built on a tie alone, with no other cause to rule out;
those of ``top-p-kept-set-approximate`` and ``min-tokens-bonus-pre-step`` outside an edge's neighbours are their own
edges and batches."""


def experiment_for(deviation: str, check: str):
    """The confirming experiment a finding of ``deviation`` at ``check`` must pass to stay waived, or None.

    >>> experiment_for("filter-ties", "L1/edge/top-k-boundary-ties") is None
    True
    >>> experiment_for("filter-ties", "L1/sizes/filters-V4097").__name__
    'confirm_filter_ties'
    """
    experiment = CONFIRM.get(deviation)
    return experiment if experiment is not None and check.startswith(CONFIRMS_ONLY.get(deviation, "")) else None


def confirm(findings: list[Finding], device, quick: bool) -> None:
    """Run the confirming experiment of each finding whose deviation has one (in this process); a finding
    whose experiment does not confirm its deviation is NEW (its waiver claimed a cause that is not the cause)."""
    for f in findings:
        experiment = experiment_for(f.deviation, f.check)
        if experiment is not None:
            try:
                f.confirmed = experiment(device, f.check, quick)
            except Exception as e:  # the experiment's own failure is reported, not raised
                f.confirmed = f"experiment failed: {type(e).__name__}: {e}"
            if not f.confirmed.startswith("confirmed"):   # the waiver's claim does not hold here: not waived
                f.deviation, f.judgement = "NEW", f"unjudged: {f.deviation}'s confirming experiment did not confirm"
                f.standing = NEW


# -- the table ---------------------------------------------------------------------------------------------------
def device_entry(name: str, by_group: dict[str, list[dict]] | None, why_not: str | None, engine: str, quick: bool,
                 where: str, command: str, findings: list[Finding], waivers: list,
                 spec_version: str | None = None) -> dict:
    """One implementation's part of ``field.json``; ``by_group``: group name → its checks (JSON), or None.
    ``engine``: ``"<engine> <release>"``; the entry's ``release`` is its release (None when it names none).
    ``spec_version``: the SPEC version the run judged against, kept per group (``spec_versions``) so that a
    merged entry says which of its groups an older suite ran, with fewer checks (:func:`spec_note`)."""
    groups: dict[str, dict] = {}
    by_standing = {s: {f.check for f in findings if f.standing == s} for s in (WAIVED, JUDGED_ELSEWHERE)}
    for group, checks in (by_group or {}).items():
        counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "not_supported", "error")}
        counts["waived"] = sum(c["name"] in by_standing[WAIVED] for c in checks)
        counts["judged_elsewhere"] = sum(c["name"] in by_standing[JUDGED_ELSEWHERE] for c in checks)
        groups[group] = counts
    seen = {f.check for f in findings}
    return {"device": name, "engine": engine, "release": release_of(engine), "where": where, "quick": quick,
            "command": command, "available": by_group is not None, "why_not": why_not, "groups": groups,
            **({"spec_versions": {g: spec_version for g in groups}} if spec_version else {}),
            "findings": [dataclasses.asdict(f) for f in findings],
            "waivers_not_observed": sorted(w.check for w in waivers if not any(w.matches_check(c) for c in seen))}


def proposer_checks(result: dict) -> list[dict]:
    """The checks of a ``specsim proposer`` result (``specsim.conformance.proposer.proposers.check``) as a group's
    checks: ``name`` ``proposer/<case>/<check>``, the suite seed as ``seed``.

    >>> proposer_checks({"suite_seed": 0, "checks": [{"check": "law/position-0", "case": "T1", "status": "fail",
    ...                                               "detail": "d"}]})[0]["name"]
    'proposer/T1/law/position-0'
    """
    return [{"name": "/".join([PROPOSER_GROUP, *([c["case"]] if c.get("case") else []), c["check"]]),
             "status": c["status"], "seed": result["suite_seed"], "detail": c.get("detail", "")}
            for c in result["checks"]]


def proposer_entry(name: str, result: dict, engine: str, where: str, command: str, quick: bool) -> dict:
    """A field proposer's part of ``field.json``: one row (group :data:`PROPOSER_GROUP`) from its
    ``specsim proposer`` result, its failing checks sorted by the waiver files as a device's are."""
    by_group = {PROPOSER_GROUP: proposer_checks(result)}
    waivers = field_waivers(name)
    findings = classify(name, by_group, waivers, engine)
    return device_entry(name, by_group, None, engine, quick, where, command, findings, waivers, SPEC_VERSION)


def spec_note(entry: dict) -> str:
    """The SPEC versions an entry's groups were judged against, for its line under "Commands": a group run
    before its run recorded one (``field.json`` entries written before SPEC 1.3) is said to be unrecorded, so a
    row an older suite ran never reads as a run of today's checks.

    >>> spec_note({"groups": {"L1-edges": {}, "L2-rng": {}}, "spec_versions": {"L1-edges": "1.3", "L2-rng": "1.3"}})
    'judged against SPEC 1.3'
    >>> spec_note({"groups": {"L1-edges": {}, "L2-rng": {}}, "spec_versions": {"L1-edges": "1.3"}})
    'judged against SPEC 1.3 (L1-edges); SPEC version not recorded (L2-rng: run before SPEC 1.3)'
    """
    versions = entry.get("spec_versions", {})
    by_version: dict[str, list[str]] = {}
    for g in entry["groups"]:
        by_version.setdefault(versions.get(g, ""), []).append(g)
    if len(by_version) == 1 and "" not in by_version:
        return f"judged against SPEC {next(iter(by_version))}"
    parts = [f"judged against SPEC {v} ({', '.join(gs)})" for v, gs in sorted(by_version.items()) if v]
    if "" in by_version:
        parts.append(f"SPEC version not recorded ({', '.join(by_version[''])}: run before SPEC 1.3)")
    return "; ".join(parts)


def _union(old: dict, new: dict) -> dict:
    """Two runs of one device on one machine, each of some groups (run side by side so that their compiles
    overlap): the groups of both, a group run twice taken from ``new``."""
    redone = set(new["groups"])
    sizes = lambda run: {g: run["quick"] for g in run["groups"]} | run.get("quick_groups", {})  # noqa: E731
    versions = {**old.get("spec_versions", {}), **new.get("spec_versions", {})}
    return {**new, "groups": {**old["groups"], **new["groups"]}, "quick_groups": sizes(old) | sizes(new),
            **({"spec_versions": versions} if versions else {}),
            "command": old["command"] + ("" if new["command"] in old["command"].split("; ") else "; " + new["command"]),
            "findings": [f for f in old["findings"] if f["group"] not in redone] + new["findings"],
            "waivers_not_observed": sorted(set(old["waivers_not_observed"]) & set(new["waivers_not_observed"]))}


def merge(docs: list[dict]) -> dict:
    """Fold several ``field.json`` documents (schema 1 or 2): per device, a run beats a 'not available' entry;
    runs on the same machine are united group by group (:func:`_union`); otherwise later wins. Release tables
    (``releases``) are folded per engine, a release run twice taken from the later document."""
    devices: dict[str, dict] = {}
    extras: dict[str, object] = {}
    releases: dict[str, dict] = {}
    for d in docs:
        for e in d["devices"]:
            e.setdefault("release", release_of(e.get("engine")))
            old = devices.get(e["device"])
            if old is not None and old["available"] and e["available"] and old["where"] == e["where"]:
                devices[e["device"]] = _union(old, e)
            elif old is None or e["available"] or not old["available"]:
                devices[e["device"]] = e
        extras.update(d.get("extras", {}))
        for block in d.get("releases", []):
            old = releases.get(block["engine"])
            releases[block["engine"]] = block if old is None else _fold_releases(old, block)
    doc = {"schema": SCHEMA, "devices": sorted(devices.values(), key=lambda e: e["device"]), "extras": extras}
    if releases:
        doc["releases"] = [releases[k] for k in sorted(releases)]
    return doc


def _fold_releases(old: dict, new: dict) -> dict:
    """Two release tables of one engine as one: every release of both (one run twice: ``new``'s), the groups and
    devices of both, both commands; each run keeps its own sizes and groups (``quick``, ``groups``)."""
    runs = {r["release"]: {"quick": old["quick"], "groups": old["groups"], **r} for r in old["runs"]}
    runs.update({r["release"]: {"quick": new["quick"], "groups": new["groups"], **r} for r in new["runs"]})
    return {**new, "runs": sorted(runs.values(), key=lambda r: release_key(r["release"])),
            "groups": list(dict.fromkeys(old["groups"] + new["groups"])),
            "devices": list(dict.fromkeys(old["devices"] + new["devices"])),
            "quick": old["quick"] and new["quick"],
            "command": old["command"] + ("" if new["command"] in old["command"].split("; ") else "; " + new["command"])}


def release_key(release: str) -> tuple:
    """Releases in release order (numbers as numbers; a pre-release before its release).

    >>> sorted(["5.10.0", "5.9.0", "5.24.0rc1", "5.24.0"], key=release_key)
    ['5.9.0', '5.10.0', '5.24.0rc1', '5.24.0']
    """
    parts = re.findall(r"\d+|[A-Za-z]+", release)
    return tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in parts) + ((2, 0, ""),)


def rewaive(doc: dict) -> dict:
    """Sort the stored failing checks of ``doc`` (a merged ``field.json``) again by this checkout's waiver files:
    a deviation judged after the run (say, of a CUDA machine run once) reaches the table without re-running it. A finding
    whose confirming experiment did not confirm stays NEW; one that needs an experiment never run stays NEW.
    Each waiver is held to the entry's engine release (``judged_on``), in the release tables too."""
    entries = list(doc["devices"]) + [e for block in doc.get("releases", []) for run in block["runs"]
                                      for e in run.get("entries", [])]
    for e in entries:
        if e["available"]:
            _rewaive_entry(e)
    return doc


def _rewaive_entry(e: dict) -> None:
    waivers = field_waivers(e["device"])
    e["release"] = release_of(e.get("engine"))
    for f in e["findings"]:
        if f["confirmed"] and not f["confirmed"].startswith("confirmed"):
            continue
        w = next((w for w in waivers if w.matches_check(f["check"])), None)
        deviation = (w.deviation or "waived") if w is not None else "NEW"
        if w is None or (experiment_for(deviation, f["check"]) is not None and not f["confirmed"]):
            f.update(deviation="NEW", judgement="unjudged: a new deviation", reason="", link="", judged_on="",
                     standing=NEW)
        else:
            here = w.judged_on_engine(e.get("engine"))
            f.update(deviation=deviation, judgement=w.judgement, reason=w.reason, link=w.issue,
                     judged_on=w.judged_on, standing=WAIVED if here else JUDGED_ELSEWHERE)
    for g, counts in e["groups"].items():
        counts["waived"] = sum(f["group"] == g and standing(f) == WAIVED for f in e["findings"])
        counts["judged_elsewhere"] = sum(f["group"] == g and standing(f) == JUDGED_ELSEWHERE for f in e["findings"])
    seen = {f["check"] for f in e["findings"]}
    e["waivers_not_observed"] = sorted(w.check for w in waivers if not any(w.matches_check(c) for c in seen))


# -- the release table: one engine's releases side by side ------------------------------------------------------
RELEASES_INTRO = (
    "One engine's releases side by side: `specsim field --out DIR --releases A,B,... --devices D` (or `--engine E`) "
    "installs each release with pip, under the user's own pip configuration, into a directory of its own under "
    "`~/.cache/specsim/field/releases/` (reused by later runs; `SPECSIM_RELEASE_CACHE` moves it) holding the release and "
    "whatever of its requirements the environment lacks, and runs the field groups with that directory first on "
    "`PYTHONPATH`. A column is a release; a row is a group, or a check that fails on some release. A waiver counts "
    "only on the release it was judged on (`judged_on` in the waiver files): there its checks read `waived (judged "
    "here)`; on any other release the same failure reads `FAIL: judged on <release>`, a judgement to make again, "
    "never carried over. A release the adapter cannot run says why (`not run: ...`).")


def release_runs_block(engine: str, distribution: str, devices: list[str], runs: list[dict], *, where: str,
                       quick: bool, groups: list[str], command: str) -> dict:
    """``field.json``'s ``releases`` entry for one ``specsim field --releases`` run.

    ``runs``: one per release, ``{"release", "install": {"path", "pins", "reused"} | None, "error": str | None,
    "entries": [device_entry, ...], "statuses": {device: {check: status}}}`` (``statuses``: the check's status in
    that release's run, for every check that fails in some release: what a row's other cells say)."""
    return {"engine": engine, "distribution": distribution, "devices": list(devices), "where": where,
            "quick": quick, "groups": list(groups), "command": command,
            "runs": sorted(runs, key=lambda r: release_key(r["release"]))}


def failing_checks(runs: list[dict]) -> dict[str, set[str]]:
    """Device → every check that fails (or errors) in some release's run: the release table's rows."""
    out: dict[str, set[str]] = {}
    for run in runs:
        for e in run.get("entries", []):
            out.setdefault(e["device"], set()).update(f["check"] for f in e["findings"])
    return out


def _release_cell(finding: dict | None, status: str | None, run: dict, entry: dict | None) -> str:
    """One cell of a release table's check row."""
    if run.get("error") or entry is None or not entry["available"]:
        return "not run"
    if finding is not None:
        kind = standing(finding)
        if kind == WAIVED:
            return "waived (judged here)" if finding.get("judged_on") else "waived"
        if kind == JUDGED_ELSEWHERE:
            return f"FAIL: judged on {judged_label(finding['judged_on'])}"
        return f"{finding['status'].upper()} (new)"
    return {"pass": "pass", "not_supported": "not supported"}.get(status or "", status or "-")


def _why_not_run(run: dict, entry: dict | None) -> str:
    """Why a release's column has no run, its install directory (a local cache) named as such."""
    why = run.get("error") or (entry or {}).get("why_not") or "?"
    path = (run.get("install") or {}).get("path")
    return why.replace(path, "<release dir>") if path else why


def _entry_verdict(entry: dict, group: str) -> str:
    counts = entry["groups"].get(group)
    if counts is None:
        return "-"
    labels = sorted({judged_label(f["judged_on"]) for f in entry["findings"]
                     if f["group"] == group and standing(f) == JUDGED_ELSEWHERE})
    return group_verdict(counts, counts.get("waived", 0), counts.get("judged_elsewhere", 0), ", ".join(labels))


def render_releases(block: dict) -> list[str]:
    """The markdown of one release table: per device, a row per group and a row per check that fails in some
    release; a column per release."""
    runs = block["runs"]
    head = "| {} | " + " | ".join(r["release"] for r in runs) + " |"
    rule = "|---|" + "---|" * len(runs)
    lines = [f"### {block['engine']}: releases {', '.join(r['release'] for r in runs)}", "",
             f"`{block['command']}` ({block['where']}{', quick sizes' if block['quick'] else ''}): each release "
             f"installed beside the environment ({block['distribution']} and what the environment lacks for it), "
             "its groups run with it first on the path.", ""]
    failing = failing_checks(runs)
    for device in block["devices"]:
        entries = [next((e for e in r.get("entries", []) if e["device"] == device), None) for r in runs]
        lines += [head.format(f"`{device}`"), rule]
        lines.append("| engine | " + " | ".join(
            e["engine"] if e is not None and e["available"] else f"not run: {_cell(_why_not_run(r, e))}"
            for r, e in zip(runs, entries)) + " |")
        for g in block["groups"]:
            lines.append(f"| {g} | " + " | ".join(_entry_verdict(e, g) if e is not None and e["available"] else "-"
                                                  for e in entries) + " |")
        checks = sorted(failing.get(device, ()))
        if checks:
            lines += ["", "| check | deviation | " + " | ".join(r["release"] for r in runs) + " |",
                      "|---|---|" + "---|" * len(runs)]
        for check in checks:
            found = [next((f for f in e["findings"] if f["check"] == check), None) if e is not None else None
                     for e in entries]
            deviation = next((f["deviation"] for f in found if f is not None and f["deviation"] != "NEW"), "NEW")
            cells = [_release_cell(f, r.get("statuses", {}).get(device, {}).get(check), r, e)
                     for f, r, e in zip(found, runs, entries)]
            lines.append(f"| `{check}` | {deviation} | " + " | ".join(cells) + " |")
        lines.append("")
    for r in runs:
        if r.get("error"):
            lines.append(f"* {r['release']}: not run: {_cell(_why_not_run(r, None))}")
        elif r.get("install"):
            pins = r["install"]["pins"]
            quick, groups = r.get("quick", block["quick"]), r.get("groups", block["groups"])
            lines.append(f"* {r['release']}: {len(pins)} package(s) installed beside the environment "
                         f"({', '.join(pins[:3])}{', …' if len(pins) > 3 else ''}); reproduce: "
                         f"`specsim field --out DIR --releases {r['release']} --devices {' '.join(block['devices'])}"
                         f"{' --quick' if quick else ''} --groups {','.join(groups)}`")
    return lines + [""]


def render(doc: dict) -> str:
    """``field.md`` from a (merged) ``field.json``: the devices' verdicts and deviations, then the release tables."""
    lines = ["# The field table", "",
             "Generated by `specsim field` (this file: runs merged with `--merge`; each row names the command "
             "and machine that gave it). Real implementations of speculative-decoding verification, each held to "
             "SPEC through its adapter in `devices/field/`; every failing check is sorted into a known deviation "
             "(a waiver shipped beside the adapter, with its judgement) or reported as NEW.", ""]
    lines += _body(doc)
    for title, text in doc.get("extras", {}).items():
        lines += [f"## {title}", "", text.rstrip(), ""]
    return "\n".join(lines) + "\n"


def _render_devices(doc: dict) -> list[str]:
    """The verdict table, the commands, the deviations and the waivers not observed, of ``doc["devices"]``."""
    lines = ["## Verdicts", "", "| implementation | where | group | verdict | pass | fail | n/s | error |",
             "|---|---|---|---|---|---|---|---|"]
    for e in doc["devices"]:
        if not e["available"]:
            lines.append(f"| {e['engine'] or e['device']} (`{e['device']}`) | {e['where']} | - | not run: "
                         f"{_cell(e['why_not'])} | | | | |")
            continue
        for g, c in sorted(e["groups"].items()):
            lines.append(f"| {e['engine']} (`{e['device']}`) | {e['where']} | {g} | "
                         f"{_entry_verdict(e, g)} | {c['pass']} | {c['fail']} | {c['not_supported']} | "
                         f"{c['error']} |")
    lines += ["", "Commands:", ""]
    lines += [f"* `{e['device']}` ({e['where']}; {spec_note(e)}): `{e['command']}`" for e in doc["devices"]
              if e["available"]]
    lines += ["", "## Deviations", ""]
    by_dev: dict[tuple, list] = {}
    for e in doc["devices"]:
        for f in e["findings"]:
            by_dev.setdefault((f["deviation"], f["device"]), []).append(f)
    for (deviation, device), fs in sorted(by_dev.items()):
        first = fs[0]
        entry = next(e for e in doc["devices"] if e["device"] == device)
        lines += [f"### `{deviation}` on `{device}` — {first['judgement']}{_judged_note(first, entry)}", ""]
        reasons = list(dict.fromkeys(f["reason"] for f in fs if f["reason"]))   # each waiver's judgement, once
        for reason in reasons:
            lines += [reason, ""]
        if reasons:
            lines += [f"Link: {first['link']}", ""]
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
    return lines


def _judged_note(finding: dict, entry: dict) -> str:
    """A deviation's heading note: the release it was judged on, and, if the run's is another, that it is not
    waived there."""
    if not finding.get("judged_on") or finding["deviation"] == "NEW":
        return ""
    if standing(finding) == JUDGED_ELSEWHERE:
        return f" (judged on {finding['judged_on']}; not waived on {entry.get('engine') or 'this release'})"
    return f" (judged on {finding['judged_on']})"


def _cell(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def _body(doc: dict) -> list[str]:
    """The verdicts, commands, deviations and release tables of ``doc``: what a page's block shows."""
    lines = _render_devices(doc) if doc["devices"] else []
    if doc.get("releases"):
        lines += ["## Releases", "", RELEASES_INTRO, ""]
        for block in doc["releases"]:
            lines += render_releases(block)
    return lines


# -- the block of a Markdown page rendered from a stored field.json ----------------------------------------------
BLOCK = re.compile(r"<!-- specsim:field (?P<source>[\w./-]+) -->\n(?P<body>.*?)<!-- /specsim:field -->", re.S)
"""A page's generated block and the ``field.json`` it is rendered from (relative to the page)."""


def render_block(doc: dict) -> str:
    """The body of a page's block from a stored ``field.json`` (merged as ``specsim field --merge`` merges).

    >>> render_block({"devices": [], "releases": []})
    ''
    """
    lines = _body(merge([doc]))
    return "\n".join(lines).rstrip("\n") + "\n" if lines else ""


def with_blocks(text: str, page: Path) -> str:
    """``text`` (the Markdown of ``page``) with every field block rendered from the file its marker names."""
    def block(m: re.Match) -> str:
        source = page.parent / m["source"]
        if not source.is_file():
            raise FileNotFoundError(f"{page}: the field block names {m['source']}, and {source} does not exist")
        body = render_block(json.loads(source.read_text()))
        return f"<!-- specsim:field {m['source']} -->\n{body}<!-- /specsim:field -->"
    return BLOCK.sub(block, text)


def stale_blocks(page: Path) -> list[str]:
    """One line per field block of ``page`` that differs from its ``field.json`` rendered now."""
    text = page.read_text()
    out = []
    for m in BLOCK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if with_blocks(m[0], page) != m[0]:
            out.append(f"{page}:{line}: the field block differs from {m['source']} rendered "
                       f"(python -m specsim.field.table --write {page})")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specsim.field.table",
                                description="render the field blocks of Markdown pages from their field.json")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if a block differs from its field.json")
    mode.add_argument("--write", action="store_true", help="rewrite every block in place")
    p.add_argument("pages", nargs="+", type=Path, help="Markdown files holding <!-- specsim:field ... --> blocks")
    args = p.parse_args(argv)
    problems = []
    for page in args.pages:
        if not BLOCK.search(page.read_text()):
            problems.append(f"{page}: no <!-- specsim:field FIELD_JSON --> block")
        elif args.write:
            page.write_text(with_blocks(page.read_text(), page))
            print(f"wrote {page}")
        else:
            problems += stale_blocks(page)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
