"""The report's content as plain tables (strings in cells), shared by Markdown and HTML.

Every builder takes parsed JSON and returns a :class:`Table` (or None when
its inputs are absent); escaping is the writer's job, so cells hold raw text.

The simulation tables keep the seeds' shapes, so they paste into a PR next to
numbers people already know:

- ``acc_counts`` / ``acc_rate`` block (seed 000, vLLM ``spec_decode.py``)::

      acc_counts: [3331, 0]
      acc_rate: 0.3735142408611796
      num_draft_tokens: 8918
      num_drafts: 8918

- acceptance per position (seed 002): ``| run | pos 1 | pos 2 | ... |``,
  acceptance at position i = ``acc_counts[i] / num_drafts``;
- AL by temperature with and without draft probs (seed 003)::

      | Temperature | AL w/o probs | AL w/ probs |
      | 0           | 2.37         | 2.37        |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field



def statuses(*docs: dict) -> list[str]:
    """The check statuses, in the order the documents' ``summary`` lists them (every status, zeros included):
    the JSON carries its own vocabulary, so a report reads any run's document without importing specsim."""
    return list(dict.fromkeys(s for doc in docs for s in (doc.get("summary") or {})))


@dataclass
class Table:
    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    classes: list[list[str]] = field(default_factory=list)  # per-cell CSS class (HTML only), parallel to rows


def fmt(x, digits: int = 4) -> str:
    """A number for a table cell: ints as is, floats to ``digits`` significant figures, None as ''."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        return f"{x:.{digits}g}"
    return str(x)


def first_line(text, width: int = 120) -> str:
    """The first line of ``text``, cut to ``width``; None is empty, but 0 is "0" (token 0, none accepted).

    >>> first_line(0), first_line(None), first_line("a\\nb")
    ('0', '', 'a')
    """
    line = (str("" if text is None else text).splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


# ----------------------------------------------------------------------------- provenance


def device_label(doc: dict) -> str:
    dev = doc.get("device") or {}
    spec, name = dev.get("spec"), dev.get("name")
    if name and spec and name != spec:
        return f"{name} ({spec})"
    return str(name or spec or "?")


def provenance(doc: dict) -> dict[str, str]:
    """What was run, where, with what: one conformance document's provenance as label → text."""
    env = doc.get("environment") or {}
    checks = [c for c in doc.get("checks") or [] if isinstance(c, dict)]
    ns = [c["n"] for c in checks if isinstance(c.get("n"), (int, float))]
    run = doc.get("run") or {}
    versions = ", ".join(f"{k} {env[k]}" for k in ("specsim", "python", "numpy", "torch", "scipy") if env.get(k))
    out = {
        "device": device_label(doc),
        "versions": versions,
        "machine": ", ".join(str(env[k]) for k in ("platform", "machine", "processor", "cuda") if env.get(k)),
        "suite seed": fmt(doc.get("seed")),
        "α family budget": fmt(doc.get("alpha_family")),
        "sample sizes": _sample_sizes(ns),
        "checks": ", ".join(f"{n} {s}" for s, n in (doc.get("summary") or {}).items()),
        "verdict": verdict_text(doc),
        **({"waivers": waivers_line(doc["waivers"])} if isinstance(doc.get("waivers"), dict) else {}),
        "sizes": "--quick (harness sizes: not a verdict)" if quick_run(doc) else "full",
        "SPEC version": spec_version_text(doc),
    }
    if run:
        out["run"] = (f"{run.get('isolation', '?')}; " + ("complete" if run.get("complete", True) else "INCOMPLETE")
                      + (f"; started {run['started']}" if run.get("started") else ""))
        if run.get("executor"):  # a campaign (specsim campaign / calibrate): where and how its shards ran
            where = run.get("where") or []
            out["campaign"] = (f"executor {run['executor']}"
                               + (f" at {run['address']}" if run.get("address") else "")
                               + (f", {run['workers']} workers" if run.get("workers") else "")
                               + (f", cluster {run['cluster']}" if run.get("cluster") else "")
                               + f", {len(where)} worker process(es) ({', '.join(map(str, where[:4]))}"
                               + (" …)" if len(where) > 4 else ")")
                               + f"; {run.get('shards', '?')} shards ({run.get('shards_resumed', 0)} resumed), "
                               f"{fmt(run.get('trials'))} trials, {run.get('wall_seconds', '?')} s wall")
        if run.get("command"):
            out["command"] = " ".join(str(a) for a in run["command"])
    return out


def provenance_line(conformance: list[tuple[str, dict]], extra: str = "") -> str:
    """One line for a figure: device(s), versions, seed(s), n, α, machine."""
    if not conformance:
        return extra or "no conformance input"
    parts = []
    for _, doc in conformance[:3]:
        p = provenance(doc)
        parts.append(f"{first_line(p['device'], 48)} · {p['versions']} · seed {p['suite seed']} · α_family {p['α family budget']} "
                     f"· {p['sample sizes']} · {p['machine']}")
    more = f" (+{len(conformance) - 3} more)" if len(conformance) > 3 else ""
    return " | ".join(parts) + more + (f" · {extra}" if extra else "")


# ----------------------------------------------------------------------------- conformance


def checks_of(doc: dict) -> list[dict]:
    return [c for c in doc.get("checks") or [] if isinstance(c, dict)]


def waived(check: dict) -> bool:
    """Whether a vendor waiver covers this failing check (``specsim conform --waivers``)."""
    return isinstance(check.get("waiver"), dict)


def status_text(check: dict) -> str:
    """A check's status as shown: ``waived (fail)`` for a waived one, its status otherwise."""
    return f"waived ({check.get('status')})" if waived(check) else str(check.get("status"))


def status_class(check: dict) -> str:
    return "waived" if waived(check) else str(check.get("status"))


def waivers_line(record: dict) -> str:
    """The provenance line of a run's waiver file: which file, what it waived, what was stale."""
    return (f"{record.get('file')} (sha256 {str(record.get('sha256', ''))[:12]}…): {len(record.get('waived') or [])} "
            f"failing check(s) waived, {len(record.get('stale') or [])} stale entr(ies), "
            f"{len(record.get('not_applicable') or [])} not for this run")


VERDICT_CLASSES = {"PASS": "pass", "PASS-WITH-WAIVERS": "waived", "QUICK": "not_supported"}  # QUICK: grey, neither way


def summary_table(conformance: list[tuple[str, dict]]) -> Table | None:
    if not conformance:
        return None
    rows, classes = [], []
    columns = statuses(*(doc for _, doc in conformance))
    for src, doc in conformance:
        s = doc.get("summary") or {}
        verdict = verdict_status(doc)
        rows.append([device_label(doc), verdict_text(doc)] + [fmt(s.get(k, 0)) for k in columns] + [src])
        shade = VERDICT_CLASSES.get(verdict, "fail")
        classes.append(["", shade] + [""] * (len(columns) + 1))
    return Table("Conformance summary", ["device", "verdict", *columns, "source"], rows,
                 note="The verdict (SPEC §10): PASS needs the core profile declared and checked, no check "
                      "failed or errored, and the whole suite run (every group, full size, the suite seed and α); "
                      "PASS-WITH-WAIVERS: the same but for failing checks the vendor's waiver file covers, none of "
                      "them carrying the core's evidence (they count in fail/error); PARTIAL: nothing unwaived "
                      "failed but the run was narrower than the suite (a subset of groups, another seed, a weaker "
                      "α, a volume cut short), no claim; QUICK: a --quick run (harness sizes), nothing unwaived "
                      "failed, never a verdict; INCOMPLETE: the run did not finish, never a verdict; "
                      "not_supported outside the core marks a capability the device does not declare.",
                 classes=classes)


def quick_run(doc: dict) -> bool:
    """Whether the run was at ``--quick`` sizes (the document's flag, its verdict's, or its run plan's)."""
    v = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
    plan = (doc.get("run") or {}).get("plan") or {}
    return bool(doc.get("quick") or v.get("quick") or plan.get("quick"))


def verdict_status(doc: dict) -> str:
    """PASS, PARTIAL, QUICK or FAIL; a document older than the verdict (SPEC §10) reads from ``passed``.
    A ``--quick`` run is never PASS or PARTIAL (QUICK), whatever an older document recorded.

    >>> verdict_status({"verdict": {"status": "pass"}, "run": {"plan": {"quick": True}}})
    'QUICK'
    """
    v = doc.get("verdict")
    if (doc.get("run") or {}).get("complete") is False:
        return "INCOMPLETE"  # whatever an older document wrote into its verdict: the run did not finish
    if isinstance(v, dict) and v.get("status"):
        status = str(v["status"]).upper()
    else:
        status = "PASS" if doc.get("passed") else "FAIL"
    return "QUICK" if status in ("PASS", "PASS-WITH-WAIVERS", "PARTIAL") and quick_run(doc) else status


def resumed_text(doc: dict) -> str:
    """Where a run was continued with ``--resume``: how many of its groups an earlier part recorded (SPEC §10: the
    same options and code, checked when it resumed); ``""`` for a run made in one part. A verdict of a resumed
    run is shown with it, never as a plain status.

    >>> resumed_text({"run": {"resumed": True, "group_outcomes": {"a": {"resumed": True}, "b": {}}}})
    'resumed: 1 of 2 groups were recorded by an earlier part of this run (the same options and code, checked by --resume)'
    >>> resumed_text({"run": {"resumed": False}})
    ''
    """
    run = doc.get("run") or {}
    if not run.get("resumed"):
        return ""
    outcomes = run.get("group_outcomes") or {}
    earlier = sum(1 for o in outcomes.values() if isinstance(o, dict) and o.get("resumed"))
    return (f"resumed: {earlier} of {len(outcomes)} groups were recorded by an earlier part of this run (the same "
            "options and code, checked by --resume)")


def verdict_shown(doc: dict) -> str:
    """``verdict_status`` as every report shows it: with ``(resumed)`` after it where the run was continued.

    >>> verdict_shown({"verdict": {"status": "pass"}, "run": {"resumed": True, "group_outcomes": {}}})
    'PASS (resumed)'
    """
    return verdict_status(doc) + (" (resumed)" if resumed_text(doc) else "")


def _sizes_cell(entry: dict, declared: dict | None = None) -> str:
    """The largest call checked, each size beside the declared limit when it stopped short of it."""
    declared = declared or {}

    def short(size: str, limit: str) -> str:
        got, lim = int(entry.get(size, 0) or 0), declared.get(limit)
        return f" (declared {lim:,})" if isinstance(lim, int) and got < lim else ""
    tree = (f", trees of {entry['tree_nodes']:,} nodes{short('tree_nodes', 'max_tree_nodes')}"
            if entry.get("tree_nodes") else "")
    return (f"V ≤ {entry.get('V', 0):,}{short('V', 'max_vocab_size')}, K ≤ {entry.get('K', 0)}{short('K', 'max_k')}, "
            f"batch ≤ {entry.get('batch', 0):,}{tree}; {entry.get('calls', 0):,} calls; "
            f"{'/'.join(entry.get('dtypes') or [])}")


def scope_rows(doc: dict) -> list[list[str]]:
    """The verdict and what it covers, as (what, value) rows: the first lines of every report and of
    ``specsim conform``'s output."""
    v = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
    sc = v.get("scope") if isinstance(v.get("scope"), dict) else {}
    rows = [["verdict", verdict_shown(doc)], ["judged against", f"SPEC {spec_version_text(doc)}"]]
    resumed = resumed_text(doc)
    if resumed:
        rows.append(["run", resumed])
    declared = sc.get("declared") or (doc.get("device") or {}).get("capabilities") or {}
    if declared:
        noise = ["injected noise"] * bool(declared.get("injected_noise")) + \
            ([f"rng {declared.get('rng')}"] if declared.get("rng") not in (None, "none") else [])
        trees = "/".join(declared.get("tree_schemes") or []) or "none"
        rows.append(["declared", f"{' + '.join(noise) or 'no randomness'}; V ≤ {declared.get('max_vocab_size', 0):,}, "
                                 f"K ≤ {declared.get('max_k')}, dtypes {'/'.join(declared.get('dtypes') or [])}, "
                                 f"trees {trees} (≤ {declared.get('max_tree_nodes') or '64, undeclared,'} nodes), "
                                 f"§12 {len(declared.get('sampler') or [])} parameter(s)"])
    for mode, entry in (sc.get("checked") or {}).items():
        rows.append([f"checked ({mode})", _sizes_cell(entry, declared)])
    if declared and not sc.get("checked"):
        rows.append(["checked", "no call held to its law (no law group ran)"])
    for mode, missing in (sc.get("unasked") or {}).items():
        if missing:
            rows.append([f"never asked ({mode})", f"{len(missing)} declared variant(s) (dtype, kind, proposal form) "
                                                   f"no check held to its law: {', '.join(missing[:6])}"
                                                   + (", …" if len(missing) > 6 else "")])
    for mode, short in (sc.get("unreached") or {}).items():
        if short:
            first, sizes = next(iter(short.items()))
            rows.append([f"short of its limits ({mode})", f"{len(short)} declared variant(s) not asked at every "
                                                          f"declared limit (SPEC 1.15), first: {first} ("
                                                          + ", ".join(f"{k} {g:,} of {w:,}" for k, (g, w) in sizes.items())
                                                          + ")"])
    for name, vol in (sc.get("volume") or {}).items():
        short = int(vol.get("reached", 0)) < int(vol.get("requested", 0))
        rows.append([f"volume {name}", f"{int(vol.get('reached', 0)):,} of {int(vol.get('requested', 0)):,} requests"
                                       + (" — cut by its time budget" if short else "")])
    if "seed" in sc:
        rows.append(["seed", f"{sc['seed']}" + ("" if sc.get("seed_is_default") else " (not the suite seed)")])
        rows.append(["α (family)", f"{sc['alpha_family']:g}" + ("" if sc.get("alpha_is_default") else " (not the suite's)")])
    if sc.get("groups_not_run"):
        rows.append(["groups not run", ", ".join(sc["groups_not_run"])])
    rows += _offset_rows(sc.get("offsets") or {})
    profiles = v.get("profiles") if isinstance(v.get("profiles"), dict) else {}
    met = [n for n, e in profiles.items() if e.get("met")]
    unmet = [f"{n} ({e.get('why')})" for n, e in profiles.items() if e.get("declared") and not e.get("met")]
    if profiles:
        rows.append(["profiles met", ", ".join(met) or "none"])
    if unmet:
        rows.append(["declared, not met", "; ".join(unmet)])
    unsupported = [c for c in checks_of(doc) if c.get("status") == "not_supported"]
    if unsupported:
        rows.append(["not supported", f"{len(unsupported)} check(s), first: {unsupported[0].get('name')} "
                                      f"({first_line(unsupported[0].get('detail'), 120)})"])
    for r in v.get("reasons") or []:
        rows.append(["why", str(r)])
    rows += [["next", step] for step in next_steps(doc)]
    return rows


def _boundary(entry: dict) -> str:
    elements = int(entry.get("elements", 0))
    power = elements.bit_length() - 1
    return f"{entry.get('space')} 2^{power}" if elements == 1 << power else f"{entry.get('space')} {elements:,}"


def _offset_rows(offsets: dict) -> list[list[str]]:
    """L1-offsets' element boundaries: those crossed, and those the run's per-call budget left unchecked."""
    rows = []
    if offsets.get("checked"):
        rows.append(["offsets crossed", ", ".join(_boundary(e) for e in offsets["checked"])])
    if offsets.get("unchecked"):
        budget = max(int(e.get("budget", 0)) for e in offsets["unchecked"])
        needs = max(int(e.get("bytes", 0)) for e in offsets["unchecked"])
        rows.append(["offsets not checked", ", ".join(_boundary(e) for e in offsets["unchecked"])
                     + f" (calls up to {needs / 2**30:.1f} GiB; this run allows {budget / 2**30:.1f} GiB per call: "
                       "--call-bytes)"])
    return rows


def next_steps(doc: dict) -> list[str]:
    """What to do about this verdict, with the commands."""
    status, spec = verdict_status(doc), (doc.get("device") or {}).get("spec") or "SPEC"
    bad = [c for c in checks_of(doc) if c.get("status") in ("fail", "error") and not waived(c)]
    steps = []
    replay = next(((c.get("extra") or {}).get("replay") for c in bad if (c.get("extra") or {}).get("replay")), None)
    if replay:
        steps.append(f"replay a failure alone, and save its calls for a bug report: {replay} --npz case.npz")
    if bad:
        steps.append("a known deviation outside the core's evidence can be waived, with a reason and a link: "
                     f"specsim conform --device {spec} --waivers FILE (vendor guide §5); a crash, a timeout or the "
                     "core's evidence cannot")
    if any(c.get("status") == "not_supported" for c in checks_of(doc)):
        steps.append("a mode or limit your device serves but does not declare is not checked: declare it in its "
                     "Capabilities (`specsim devices " + spec + "` shows the declaration)")
    if status == "INCOMPLETE":
        steps.append("continue the run: the same command with --resume (refused if any code changed)")
    if status in ("PARTIAL", "QUICK"):
        steps.append(f"for a verdict, run the whole suite: specsim conform --device {spec} --out DIR "
                     "(no --groups, --quick, --seed or smaller --alpha)")
    return steps


def scope_table(doc: dict) -> "Table | None":
    """The verdict banner: status, SPEC and suite versions, declaration, what was checked per noise mode,
    volume, α, seed, profiles, what did not run and why."""
    if not isinstance(doc.get("verdict"), dict) and "passed" not in doc:
        return None
    status = verdict_status(doc)
    return Table(f"Verdict: {verdict_shown(doc)} — {device_label(doc)}", ["", ""], scope_rows(doc),
                 classes=[[("pass" if status in ("PASS", "PASS-WITH-WAIVERS") else "fail"), ""]] +
                 [["", ""]] * (len(scope_rows(doc)) - 1))

def spec_version_text(doc: dict) -> str:
    """The SPEC version judged against, whether the device declared it, specsim's version, and the
    checks newer than the declared version (shown apart: they do not count in the verdict)."""
    v = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
    version = str(doc.get("spec_version") or v.get("spec_version") or "unstated")
    if "declared_spec_version" in v:
        version += (" (declared by the device)" if v["declared_spec_version"] else
                    " (the device declares no spec_version: judged against the current SPEC)")
    if v.get("suite_version"):
        version += f"; specsim {v['suite_version']}"
    newer = v.get("newer_checks") or {}
    if newer.get("count"):
        failing = newer.get("failing") or []
        version += (f"; {newer['count']} check(s) new since SPEC {v.get('judged_against', version)}, not counted"
                    + (f" ({len(failing)} failing, first: {failing[0]})" if failing else ""))
    return version


def verdict_text(doc: dict) -> str:
    """The status, then its reasons (why not PASS), then the SPEC version it was judged against."""
    v = doc.get("verdict") if isinstance(doc.get("verdict"), dict) else {}
    reasons = "; ".join(str(r) for r in v.get("reasons") or [])
    version = f" (SPEC {v['spec_version']})" if v.get("spec_version") else ""
    resumed = resumed_text(doc)
    resumed = f"; {resumed}" if resumed else ""
    return verdict_shown(doc) + version + (f": {reasons}" if reasons else "") + resumed


def layer_table(doc: dict) -> Table | None:
    checks = checks_of(doc)
    if not checks:
        return None
    columns = statuses(doc) or list(dict.fromkeys(str(c.get("status")) for c in checks))
    layers: dict[str, dict[str, int]] = {}
    for c in checks:
        row = layers.setdefault(str(c.get("layer", "?")), dict.fromkeys(columns, 0))
        row[c.get("status")] = row.get(c.get("status"), 0) + 1
    return Table(f"By layer — {device_label(doc)}", ["layer", *columns],
                 [[k, *(fmt(v.get(s, 0)) for s in columns)] for k, v in sorted(layers.items())])


def problem_table(doc: dict) -> Table | None:
    """The failed and errored checks no waiver covers (:func:`waived_table` has the others)."""
    bad = [c for c in checks_of(doc) if c.get("status") in ("fail", "error") and not waived(c)]
    if not bad:
        return None
    return Table(f"Failed and errored checks — {device_label(doc)}", ["check", "status", "p-value", "α", "n", "detail"],
                 [[str(c.get("name")), str(c.get("status")), fmt(c.get("p_value"), 3), fmt(c.get("alpha"), 3),
                   fmt(c.get("n")), first_line(c.get("detail"), 300)] for c in bad],
                 classes=[["", str(c.get("status")), "", "", "", ""] for c in bad])


def waived_table(doc: dict) -> Table | None:
    """The failing checks a vendor waiver covers: what each found (its status stays), and the waiver's reason and link."""
    rows = [c for c in checks_of(doc) if waived(c)]
    if not rows:
        return None
    return Table(f"Waived checks — {device_label(doc)}", ["check", "status", "reason", "link", "waiver", "detail"],
                 [[str(c.get("name")), str(c.get("status")), str(c["waiver"].get("reason", "")),
                   str(c["waiver"].get("link", "")), f"{c['waiver'].get('check', '')} ({c['waiver'].get('source', '')})",
                   first_line(c.get("detail"), 200)] for c in rows],
                 note="A waived check still failed: its status is what the check found. The verdict names them; "
                      "one carrying the core's evidence keeps it FAIL.",
                 classes=[["", str(c.get("status")), "", "", "", ""] for c in rows])


def stale_waivers_table(doc: dict) -> Table | None:
    """The waiver entries that waived nothing in this run (stale), and those not for this run, each with why."""
    record = doc.get("waivers") if isinstance(doc.get("waivers"), dict) else {}
    entries = [("refused", e) for e in record.get("refused") or []] + \
        [("stale", e) for e in record.get("stale") or []] + \
        [("not applied", e) for e in record.get("not_applicable") or []]
    if not entries:
        return None
    return Table(f"Waivers that waived nothing — {device_label(doc)}", ["waiver", "entry", "kind", "why", "link"],
                 [[str(e.get("check")), str(e.get("source")), kind, str(e.get("why")), str(e.get("link"))]
                  for kind, e in entries],
                 note=f"From {record.get('file')}. A refused entry named a crash, a timeout or the core's evidence, "
                      "which no waiver covers: its checks still fail. A stale entry matched no failing check of this "
                      "run: fixed, renamed, misspelt, or in a group this run left out.")


def statistical_table(doc: dict) -> Table | None:
    stat = [c for c in checks_of(doc) if c.get("p_value") is not None]
    if not stat:
        return None
    return Table(f"Statistical checks — {device_label(doc)}",
                 ["check", "status", "p-value", "α", "n", "statistic", "detectable TV", "seed"],
                 [[str(c.get("name")), str(c.get("status")), fmt(c.get("p_value"), 3), fmt(c.get("alpha"), 3),
                   fmt(c.get("n")), fmt(c.get("statistic")), fmt(c.get("detectable_tv"), 3), fmt(c.get("seed"))]
                  for c in stat],
                 classes=[["", str(c.get("status"))] + [""] * 6 for c in stat])


def all_checks_table(doc: dict) -> Table | None:
    checks = checks_of(doc)
    if not checks:
        return None
    return Table(f"All checks — {device_label(doc)}", ["check", "layer", "status", "detail"],
                 [[str(c.get("name")), str(c.get("layer", "")), status_text(c), first_line(c.get("detail"))]
                  for c in checks],
                 classes=[["", "", status_class(c), ""] for c in checks])


def check_group(name: str, prefix_counts: dict[str, int] | None = None) -> str:
    """The matrix row of a check: its first two path parts (``L1/injected/full/case-3`` → ``L1/injected``), or
    just the first where that two-part prefix holds a single check (``input/top_p-zero`` → ``input``), so
    single-check families collapse into one row."""
    parts = str(name).split("/")
    two = "/".join(parts[:2])
    if prefix_counts is not None and prefix_counts.get(two, 0) < 2:
        return parts[0]
    return two


WORST = {"error": 3, "fail": 2, "pass": 1, "not_supported": 0}


def matrix(conformance: list[tuple[str, dict]]) -> tuple[list[str], list[str], list[list[str | None]]]:
    """Device × check-group statuses: ``(devices, groups, cells)`` with ``cells[device][group]`` the worst
    status of the group's checks on that device (None: the device's run has no such check)."""
    devices = [device_label(doc) for _, doc in conformance]
    prefix_counts: dict[str, int] = {}
    for _, doc in conformance:
        for c in checks_of(doc):
            two = "/".join(str(c.get("name", "?")).split("/")[:2])
            prefix_counts[two] = prefix_counts.get(two, 0) + 1
    groups: list[str] = []
    per: list[dict[str, str]] = []
    for _, doc in conformance:
        cells: dict[str, str] = {}
        for c in checks_of(doc):
            g = check_group(c.get("name", "?"), prefix_counts)
            if g not in groups:
                groups.append(g)
            st = str(c.get("status"))
            if g not in cells or WORST.get(st, 0) > WORST.get(cells[g], 0):
                cells[g] = st
        per.append(cells)
    return devices, groups, [[cells.get(g) for g in groups] for cells in per]


def matrix_table(conformance: list[tuple[str, dict]]) -> Table | None:
    if not conformance:
        return None
    devices, groups, cells = matrix(conformance)
    rows = [[g] + [cells[d][j] or "—" for d in range(len(devices))] for j, g in enumerate(groups)]
    return Table("Device × check matrix (worst status per check group)", ["check group", *devices], rows,
                 classes=[[""] + [cells[d][j] or "" for d in range(len(devices))] for j in range(len(groups))])


# ----------------------------------------------------------------------------- mutants

MUTANT_COLUMNS = ("name", "bug", "models", "killed", "killer", "killer_check", "p_value", "evidence", "detail")


def _flat_mutant(r: dict) -> dict:
    """A killer given as a check result (``{"name", "p_value", ...}``) becomes its name and p-value."""
    killer = r.get("killer")
    if isinstance(killer, dict):
        r = dict(r, killer=killer.get("name"))
        if "p_value" not in r and killer.get("p_value") is not None:
            r["p_value"] = killer["p_value"]
    return r


def mutants_table(mutants: list[tuple[str, list[dict]]]) -> Table | None:
    records = [_flat_mutant(r) for _, recs in mutants for r in recs]
    if not records:
        return None
    keys: list[str] = [k for k in MUTANT_COLUMNS if any(k in r for r in records)]
    for r in records:  # render whatever else exists too, in first-seen order
        keys.extend(k for k in r if k not in keys and not isinstance(r[k], (dict, list)))
    rows, classes = [], []
    for r in records:
        rows.append([first_line(fmt(r.get(k), 3) if not isinstance(r.get(k), str) else r.get(k), 200) for k in keys])
        killed = r.get("killed")
        classes.append(["pass" if killed is True and k == "killed" else "fail" if killed is False and k == "killed"
                        else "" for k in keys])
    n_killed = sum(r.get("killed") is True for r in records)
    return Table("Mutants", list(keys), rows, note=f"{n_killed} of {len(records)} mutants killed.", classes=classes)


# ----------------------------------------------------------------------------- simulations


def num_drafts(sim: dict) -> float | None:
    v = sim.get("num_drafts")
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def mean_acceptance_length(sim: dict) -> float | None:
    """``mean_acceptance_length`` if given, else ``1 + sum(acc_counts) / num_drafts``."""
    v = sim.get("mean_acceptance_length")
    if isinstance(v, (int, float)):
        return float(v)
    counts, n = sim.get("acc_counts"), num_drafts(sim)
    if isinstance(counts, list) and n:
        return 1.0 + sum(float(c) for c in counts) / n
    return None


def _setting(sim: dict, key: str):
    """A workload setting, at the top level or under ``workload``."""
    if key in sim:
        return sim[key]
    w = sim.get("workload")
    return w.get(key) if isinstance(w, dict) else None


def sim_label(src: str, sim: dict) -> str:
    for k in ("name", "label", "workload", "method"):
        if isinstance(sim.get(k), str):
            return sim[k]
    parts = [f"{k}={_setting(sim, k)}" for k in ("proposer", "k", "temperature", "draft_probs")
             if _setting(sim, k) is not None]
    return " ".join(parts) if parts else src.rsplit("/", 1)[-1]


def counts_block(src: str, sim: dict) -> str | None:
    """Seed 000's print shape (``acc_counts:``, ``acc_rate:``, ...)."""
    keys = [k for k in ("acc_counts", "acc_rate", "num_draft_tokens", "num_drafts", "mean_acceptance_length",
                        "emitted_tokens") if k in sim]
    if not keys:
        return None
    lines = [f"=== {sim_label(src, sim)} ==="] + [f"{k}: {sim[k]}" for k in keys]
    return "\n".join(lines)


def per_position_table(simulations: list[tuple[str, dict]]) -> Table | None:
    rows = []
    width = 0
    for src, sim in simulations:
        counts, n = sim.get("acc_counts"), num_drafts(sim)
        if not isinstance(counts, list) or not n:
            continue
        rates = [float(c) / n for c in counts]
        width = max(width, len(rates))
        rows.append((sim_label(src, sim), rates, mean_acceptance_length(sim)))
    if not rows:
        return None
    header = ["run"] + [f"pos {i + 1}" for i in range(width)] + ["mean AL"]
    return Table("Acceptance per position", header,
                 [[label] + [fmt(r, 3) for r in rates] + [""] * (width - len(rates)) + [fmt(al, 3)]
                  for label, rates, al in rows],
                 note="Acceptance at position i = acc_counts[i] / num_drafts; mean AL as the run reported it "
                      "(mean_acceptance_length), else 1 + sum(acc_counts) / num_drafts.")


_AL_KEYS = ("mean_acceptance_length", "al", "AL", "acceptance_length")
_WITH_KEYS = ("draft_probs", "use_draft_probs", "with_probs", "with_draft_probs")


def _bool_of(row: dict) -> bool | None:
    for k in _WITH_KEYS:
        if k in row and isinstance(row[k], (bool, int)):
            return bool(row[k])
    proposal = row.get("proposals") or row.get("proposal")
    if isinstance(proposal, str):
        return proposal in ("draft_probs", "full", "probs")
    return None


def _al_of(row: dict) -> float | None:
    for k in _AL_KEYS:
        if isinstance(row.get(k), (int, float)):
            return float(row[k])
    return mean_acceptance_length(row)


def sweep_points(sim: dict) -> list[tuple[float, bool | None, float]]:
    """``(temperature, with draft probs?, AL)`` points of one simulation document, in any shape we know."""
    points = []
    for key in ("temperature_sweep", "sweep", "rows"):
        sweep = sim.get(key)
        if isinstance(sweep, dict):  # columns: {"temperature": [...], "al_without_probs": [...], ...}
            temps = sweep.get("temperature") or sweep.get("temperatures") or []
            for flag, names in ((False, ("al_without_probs", "al_wo_probs", "AL w/o probs")),
                                (True, ("al_with_probs", "al_w_probs", "AL w/ probs"))):
                col = next((sweep[n] for n in names if isinstance(sweep.get(n), list)), None)
                if col:
                    points += [(float(t), flag, float(a)) for t, a in zip(temps, col) if isinstance(a, (int, float))]
        elif isinstance(sweep, list):
            for row in sweep:
                if not isinstance(row, dict) or not isinstance(row.get("temperature"), (int, float)):
                    continue
                t = float(row["temperature"])
                for flag, names in ((False, ("al_without_probs", "al_wo_probs", "AL w/o probs")),
                                    (True, ("al_with_probs", "al_w_probs", "AL w/ probs"))):
                    for n in names:
                        if isinstance(row.get(n), (int, float)):
                            points.append((t, flag, float(row[n])))
                al = _al_of(row)
                if al is not None and not any(n in row for n in ("al_without_probs", "al_with_probs")):
                    points.append((t, _bool_of(row), al))
    temperature = _setting(sim, "temperature")
    if not points and isinstance(temperature, (int, float)):
        al = _al_of(sim)
        if al is not None:
            w = sim.get("workload")
            flag = _bool_of(sim)
            points.append((float(temperature), flag if flag is not None or not isinstance(w, dict) else _bool_of(w), al))
    return points


def temperature_table(simulations: list[tuple[str, dict]]) -> Table | None:
    by_t: dict[float, dict] = {}
    for _, sim in simulations:
        for t, flag, al in sweep_points(sim):
            by_t.setdefault(t, {})[flag] = al
    if not by_t:
        return None
    rows = [[fmt(t), fmt(v.get(False), 3), fmt(v.get(True), 3)] for t, v in sorted(by_t.items())]
    unknown = any(None in v for v in by_t.values())
    return Table("AL by temperature", ["Temperature", "AL w/o probs", "AL w/ probs"], rows,
                 note="AL: mean acceptance length (tokens emitted per verification step). 'w/o probs': point "
                      "proposals (draft probabilities not used); 'w/ probs': full draft probabilities."
                      + (" Some points did not say whether draft probs were used and are not shown." if unknown else ""))


# ----------------------------------------------------------------------------- distributions in checks

_OBSERVED = ("observed", "observed_counts", "counts")
_EXPECTED = ("expected_probs", "expected_law", "exact_probs", "expected", "target_probs", "law", "exact_law")
_LABELS = ("cells", "tokens", "labels", "categories", "support")


def _vector(v) -> tuple[list, list[float]] | None:
    """A list → (index labels, values); a dict → (sorted keys, values)."""
    if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v):
        return list(range(len(v))), [float(x) for x in v]
    if isinstance(v, dict) and v and all(isinstance(x, (int, float)) for x in v.values()):
        keys = sorted(v, key=lambda k: (len(str(k)), str(k)))
        return keys, [float(v[k]) for k in keys]
    return None


def _sample_sizes(ns: list) -> str:
    """The checks' sample sizes in words.

    >>> _sample_sizes([100000]), _sample_sizes([10, 20, 30]), _sample_sizes([])
    ('n = 100000 (1 check that samples)', 'n = 10 … 30 over 3 checks that sample', 'no statistical checks')
    """
    if not ns:
        return "no statistical checks"
    if min(ns) == max(ns):
        return f"n = {fmt(ns[0])} ({len(ns)} check{'s' if len(ns) > 1 else ''} that sample{'' if len(ns) > 1 else 's'})"
    return f"n = {fmt(min(ns))} … {fmt(max(ns))} over {len(ns)} checks that sample"


def _in_count_order(labels, observed, expected):
    """Cells whose labels are all whole numbers (a number accepted, a token id) in numeric order; others as they came."""
    try:
        keys = [int(str(label)) for label in labels]
    except ValueError:
        return labels, observed, expected
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return [labels[i] for i in order], [observed[i] for i in order], [expected[i] for i in order]


def distribution_of(check: dict) -> dict | None:
    """A statistical check's observed counts and exact law, if its ``extra`` carries them.

    Returns ``{"labels", "observed" (counts), "expected" (probabilities), "n", "kind", "position", "partial"}``;
    kind is ``"num_accepted"`` for the law of the number accepted, else ``"tokens"``. Full vectors come from
    ``extra["observed"]`` and ``extra["expected_probs"]`` (or ``expected_law``); failing those, the cells of
    ``extra["worst"]`` (``[{cell, observed, expected}]``, expected as a count) with ``partial`` True.
    """
    extra = check.get("extra") or {}
    if not isinstance(extra, dict):
        return None
    obs = next((_vector(extra[k]) for k in _OBSERVED if k in extra and _vector(extra[k])), None)
    exp = next((_vector(extra[k]) for k in _EXPECTED if k in extra and _vector(extra[k])), None)
    partial = False
    if (obs is None or exp is None) and isinstance(extra.get("worst"), list) and isinstance(check.get("n"), (int, float)):
        # only the largest residuals were recorded: show those cells (expected count / n = probability)
        worst = [w for w in extra["worst"] if isinstance(w, dict) and {"cell", "observed", "expected"} <= set(w)]
        if worst and check["n"] > 0:
            worst.sort(key=lambda w: str(w["cell"]))
            obs = ([w["cell"] for w in worst], [float(w["observed"]) for w in worst])
            exp = (obs[0], [float(w["expected"]) / check["n"] for w in worst])
            partial = True
    if obs is None or exp is None or len(obs[1]) != len(exp[1]):
        return None
    labels = next((list(extra[k]) for k in _LABELS if isinstance(extra.get(k), list)
                   and len(extra[k]) == len(obs[1])), obs[0])
    total = sum(exp[1])
    expected = [e / total for e in exp[1]] if total > 1.5 and not partial else exp[1]  # counts → probabilities
    n = float(check["n"]) if partial else sum(obs[1])
    text = " ".join(str(x) for x in (check.get("name"), extra.get("kind"), extra.get("what"))).lower()
    kind = "num_accepted" if "accept" in text else "tokens"
    labels, observed, expected = _in_count_order(labels, list(obs[1]), list(expected))
    return {"labels": labels, "observed": observed, "expected": expected, "n": n, "kind": kind, "partial": partial,
            "position": extra.get("position"), "name": check.get("name"), "p_value": check.get("p_value"),
            "alpha": check.get("alpha"), "status": check.get("status"), "seed": check.get("seed")}
