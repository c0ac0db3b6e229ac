"""The seed × mutant table (``specsim mutants --seeds``): every mutant judged at every suite seed.

One judgement is one ``runner.Job`` — a (mutant, suite seed, injected noise or
black box) triple, or a correct device at a suite seed — run as a shard on a
campaign executor. A mutant is judged only by the groups that can kill it, and
stops at its first killing check, as ``hunt`` does:

* with injected noise, the group its ``killed_by`` check belongs to
  (``group_of``: ``L1/trees/...`` is ``L1-trees``);
* in black box (no injected noise, a ``"seeded"`` RNG), that group's stand-ins
  (``BLACK_BOX_STAND_INS``): the groups that judge the same law from the
  device's own randomness — ``L1-trees`` by its own sibling patterns' laws,
  ``L2-trees`` and ``L3-trees``, ``L1-sampler`` by its own edge laws and L3's
  SPEC §12 cases — or, where the mutant names the check that kills its twin
  (``killed_in_black_box_by``: a law edge its injected killer's stand-ins never
  run), that check's group and its stand-ins.

A ``killed_by`` that names no known group, or ``hunt="all"``, runs every
group. The correct device (the base, and its black-box twin with black-box
rows) is judged at each seed by the union of the groups its rows are judged
by: a check that kills a mutant at a seed must pass the correct device there.

>>> group_of("L1/trees/injected/rrs-with-replacement/case-0"), group_of("L3/trees/sglang/path")
('L1-trees', 'L3-trees')
>>> killing_groups("L1-sampler/edge/mask-forbids-draft", black_box=True)
('L1-sampler', 'L3-statistical')
>>> parse_seeds("3-5", first_seed=0), parse_seeds("2", first_seed=100)
([3, 4, 5], [100, 101])
"""

from __future__ import annotations

import sys
from collections import Counter

CHECK_PREFIXES: tuple[tuple[str, str], ...] = (
    ("L1-sampler/", "L1-sampler"),
    ("L1-16bit/", "L1-16bit"),
    ("L1/injected/", "L1-injected"),
    ("L1/keyed-sampler/", "L1-keyed-sampler"),
    ("L1/keyed/", "L1-keyed"),
    ("L1/edge/", "L1-edges"),
    ("L1/edge-neighbours/", "L1-edges"),
    ("L1/sizes/", "L1-sizes"),
    ("L1/declared/", "L1-declared"),
    ("L1/trees/", "L1-trees"),
    ("L1/volume", "L1-volume"),
    ("L1/long", "L1-long"),
    ("L1/offsets", "L1-offsets"),
    ("L2/trees/", "L2-trees"),
    ("L2/sampler/", "L1-keyed-sampler"),
    ("L2/sizes/", "L2-sizes"),
    ("L2/", "L2-rng"),
    ("input/", "input-rules"),
    ("L3/trees/", "L3-trees"),
    ("L3/declared/", "L3-declared"),
    ("L3/", "L3-statistical"),
    ("capabilities/", "capabilities"),
)
"""Check-name prefix → the conformance group that emits it, most specific first; a group's one
``not_supported`` result may be the prefix without its slash (``L1/injected``).
``tests/stats/test_seedtable.py`` holds every group's checks to this map."""

BLACK_BOX_STAND_INS: dict[str, tuple[str, ...]] = {
    "L1-injected": ("L2-rng", "L3-statistical"),
    "L1-keyed": ("L2-rng", "L3-statistical"),
    "L1-edges": ("L1-edges", "L3-statistical"),
    "L1-sizes": ("L2-sizes",),
    "L1-declared": ("L3-declared",),
    "L1-volume": ("L3-statistical",),
    "L1-sampler": ("L1-sampler", "L3-statistical"),
    "L1-trees": ("L1-trees", "L2-trees", "L3-trees"),   # L1-trees: the sibling patterns' exact laws
}
"""For a group that needs injected noise or Philox replay to judge a law token for token, the groups
that judge it without them (a black-box twin); any other group judges a black box itself."""

ZOO_KINDS: dict[str, str] = {"inside": "INSIDE", "tree": "TREE", "kernel": "KERNEL", "sampler": "SAMPLER",
                             "kernel-gpu": "KERNEL_GPU", "wrapper": "WRAPPERS"}
"""A zoo kind → the list of ``specsim.mutants.zoo`` that holds its mutants (read when asked, so a mutant
added to a list is in the table without a change here)."""

HUNTS = ("named", "all")


def group_of(check_name: str) -> str | None:
    """The group whose checks are called ``check_name`` (``CHECK_PREFIXES``); None if no group's."""
    return next((g for prefix, g in CHECK_PREFIXES
                 if check_name.startswith(prefix) or check_name == prefix.rstrip("/")), None)


def short_name(check_name: str) -> str:
    """``check_name`` without its group's prefix (the table names the groups once per row)."""
    prefix = next((p for p, _ in CHECK_PREFIXES if check_name.startswith(p)), "")
    return check_name[len(prefix):] if prefix.endswith("/") else check_name


def named_check(mutant, black_box: bool) -> str:
    """The check named to kill ``mutant`` in that mode: its ``killed_by``, or for its black-box twin its
    ``killed_in_black_box_by`` where it names one (an injected-noise killer whose group's stand-ins never
    run the check that kills the twin)."""
    return (getattr(mutant, "killed_in_black_box_by", "") if black_box else "") or mutant.killed_by


def killing_groups(killed_by: str, black_box: bool, hunt: str = "named") -> tuple[str, ...] | None:
    """The groups, in the runner's order, that judge a mutant whose named check is ``killed_by``; None:
    every group (``hunt="all"``, or a ``killed_by`` of no known group)."""
    from specsim.conformance.run.runner import GROUPS
    if hunt not in HUNTS:
        raise ValueError(f"hunt: must be one of {', '.join(HUNTS)}, got {hunt!r}")
    group = group_of(killed_by)
    if hunt == "all" or group not in GROUPS:
        return None
    chosen = BLACK_BOX_STAND_INS.get(group, (group,)) if black_box else (group,)
    return tuple(g for g in GROUPS if g in chosen)


def zoo_kind(mutant_id: str) -> str:
    """The zoo list (``ZOO_KINDS``) that holds ``mutant_id``: its ``kind`` attribute if it has one."""
    from specsim.mutants import zoo
    said = getattr(zoo.MUTANTS.get(mutant_id), "kind", None)
    if isinstance(said, str):
        return said
    return next((kind for kind, attr in ZOO_KINDS.items()
                 if any(m.id == mutant_id for m in getattr(zoo, attr, ()))), "other")


def parse_seeds(text: str, first_seed: int) -> list[int]:
    """``"A-B"`` (inclusive) or ``"N"`` (N seeds from ``first_seed``) as a list of suite seeds."""
    a, dash, b = text.partition("-")
    try:
        if dash:
            low, high = int(a), int(b)
            if not 0 <= low <= high:
                raise ValueError
            return list(range(low, high + 1))
        n = int(text)
        if n < 1 or first_seed < 0:
            raise ValueError
        return list(range(first_seed, first_seed + n))
    except ValueError:
        raise ValueError(f"--seeds: must be A-B with 0 <= A <= B, or a count N >= 1 (from --first-seed >= 0), "
                         f"got {text!r}") from None


def plan(base: str, families: dict[str, list[str]], seeds: list[int], *, black_box: bool, alpha_family: float,
         quick: bool, hunt: str = "named", correct: bool = True) -> list:
    """Every judgement of the table, seed by seed: each mutant (and its black-box twin), each family
    mutant, then the correct base device (and its twin) by the union of its rows' groups, and each
    family's correct subjects. ``families``: family id → mutant ids (``"device"``: the zoo)."""
    from specsim.mutants.families import DEVICE, FAMILIES
    from specsim.mutants.runner import Job
    from specsim.mutants.zoo import MUTANTS
    common = dict(base=base, alpha_family=alpha_family, quick=quick)
    modes = (False, True) if black_box else (False,)
    jobs = []
    for seed in seeds:
        for mode in modes:
            ids = families.get(DEVICE, [])
            rows = [Job("mutant", i, black_box=mode, seed=seed,
                        groups=killing_groups(named_check(MUTANTS[i], mode), mode, hunt),
                        **common) for i in ids]
            jobs += rows
            if correct and rows:
                jobs.append(Job("correct", base, black_box=mode, seed=seed, groups=_union(r.groups for r in rows),
                                **common))
        for fid, ids in families.items():
            if fid == DEVICE:
                continue
            jobs += [Job("mutant", i, black_box=False, seed=seed, family=fid, **common) for i in ids]
            jobs += [Job("correct", c, black_box=False, seed=seed, family=fid, **common)
                     for c in (FAMILIES[fid].correct_ids() if correct else [])]
    return jobs


def _union(group_lists) -> tuple[str, ...] | None:
    from specsim.conformance.run.runner import GROUPS
    lists = list(group_lists)
    if any(g is None for g in lists):
        return None
    chosen = set().union(*lists)
    return tuple(g for g in GROUPS if g in chosen)


def run_seed_job(job) -> dict:
    """``runner.run_job`` on one torch thread; an exception (a mutant that cannot be built) is the
    cell's ``crashed``, not the end of the table."""
    from specsim.campaign.executors import one_torch_thread
    from specsim.campaign.tasks import where
    from specsim.mutants.runner import run_job
    with one_torch_thread():
        try:
            return run_job(job)
        except Exception as e:
            return {"name": job.name, "crashed": f"{type(e).__name__}: {e}", "killed": False, "killer": None,
                    "seconds": 0.0, "groups_run": [], "counts": None, "where": where()}


def _mode(black_box: bool) -> str:
    return "black box" if black_box else "injected"


def _cell(job, r: dict) -> dict:
    killer = r.get("killer") or {}
    cell = {"seed": job.seed, "seconds": r["seconds"], "groups_run": r["groups_run"]}
    if r.get("crashed"):
        return {**cell, "crashed": r["crashed"]}
    if killer:
        cell.update(check=killer["name"], status=killer["status"],
                    **{k: killer[k] for k in ("p_value", "alpha", "detectable_tv", "n") if k in killer},
                    evidence=r.get("evidence", ""))
    if job.kind == "correct":
        cell["counts"] = r.get("counts")
    return cell


def table(jobs, results: dict, seeds: list[int]) -> dict:
    """The table's document from each job's ``run_seed_job`` result (``results``: job → result):
    ``rows`` (a mutant in one mode, a cell per seed), ``correct`` (a correct device or subject in one
    mode), ``survivors``, ``false_fails`` and ``crashed`` (each a list of what failed the run)."""
    from specsim.mutants.zoo import MUTANTS
    rows: dict[tuple, dict] = {}
    for j in jobs:
        key = (j.kind, j.family, j.name, j.black_box)
        if key not in rows:
            device_row = j.kind == "mutant" and j.family == "device"
            named = named_check(MUTANTS[j.name], j.black_box) if device_row else None
            rows[key] = {("mutant" if j.kind == "mutant" else "device"): j.name, "family": j.family,
                         **({"zoo_kind": zoo_kind(j.name), "killed_by": named} if named is not None else {}),
                         "mode": _mode(j.black_box), "groups": list(j.groups) if j.groups is not None else None,
                         "cells": []}
        rows[key]["cells"].append(_cell(j, results[j]))
    doc = {"seeds": list(seeds), "rows": [], "correct": [], "survivors": [], "false_fails": [], "crashed": []}
    first = {}
    for kind, family, name, _ in rows:
        first.setdefault((kind, family, name), len(first))
    # a mutant's black-box twin next to it, in the plan's order
    for (kind, family, name, black_box), row in sorted(rows.items(), key=lambda kv: (first[kv[0][:3]], kv[0][3])):
        row["cells"].sort(key=lambda c: c["seed"])
        for c in row["cells"]:
            where = {"name": name, "family": family, "mode": row["mode"], "seed": c["seed"]}
            if c.get("crashed"):
                doc["crashed"].append({**where, "error": c["crashed"]})
            elif kind == "mutant" and "check" not in c:
                doc["survivors"].append(where)
            elif kind == "correct" and "check" in c:
                doc["false_fails"].append({**where, "check": c["check"], "evidence": c.get("evidence", "")})
        doc["rows" if kind == "mutant" else "correct"].append(row)
    return doc


def cell_text(row: dict, cell: dict) -> str:
    """A table cell: the killing (or false-failing) check's short name, ``SURVIVED``, ``pass`` or ``CRASHED``."""
    if cell.get("crashed"):
        return "CRASHED"
    if "check" in cell:
        return ("error: " if cell.get("status") == "error" else "") + short_name(cell["check"])
    return "SURVIVED" if "mutant" in row else "pass"


def markdown(doc: dict) -> str:
    """The table as markdown: a row per mutant and mode, then per correct device; a column per seed."""
    seeds = doc["seeds"]
    head = ["mutant", "kind", "mode", "groups"] + [str(s) for s in seeds]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in doc["rows"] + doc["correct"]:
        who = row["mutant"] if "mutant" in row else f"correct {row['device']}"
        kind = row.get("zoo_kind", "—" if row["family"] == "device" else row["family"])
        groups = ", ".join(row["groups"]) if row["groups"] is not None else "all"
        by_seed = {c["seed"]: cell_text(row, c) for c in row["cells"]}
        lines.append("| " + " | ".join([who, kind, row["mode"], groups] + [by_seed.get(s, "") for s in seeds]) + " |")
    return "\n".join(lines)


def verdict_line(doc: dict) -> str:
    """One sentence: judgements killed, survivors, false fails, crashes."""
    cells = [c for r in doc["rows"] for c in r["cells"]]
    killed = len(cells) - len(doc["survivors"]) - sum(1 for c in cells if c.get("crashed"))
    n = len(doc["seeds"])
    said = f"{killed}/{len(cells)} (mutant, seed) judgements killed over {n} suite seed{'s' if n != 1 else ''}"
    correct = [c for r in doc["correct"] for c in r["cells"]]
    said += f"; correct devices pass {len(correct) - len(doc['false_fails'])}/{len(correct)}"
    if doc["survivors"]:
        said += "; SURVIVED: " + ", ".join(f"{s['name']} [{s['mode']}] at seed {s['seed']}" for s in doc["survivors"])
    if doc["false_fails"]:
        said += "; FALSE FAIL: " + ", ".join(f"{f['name']} [{f['mode']}] at seed {f['seed']} by {f['check']}"
                                             for f in doc["false_fails"])
    if doc["crashed"]:
        said += "; CRASHED: " + ", ".join(f"{c['name']} [{c['mode']}] at seed {c['seed']}: {c['error']}"
                                          for c in doc["crashed"])
    return said


def summary_rows(doc: dict) -> list[list[str]]:
    """A row per mutant and mode, then per correct device: ``[who, mode, verdict over the seeds, by]``, the
    killing checks' short names with how many seeds each killed at where that is not every seed."""
    out = []
    for row in doc["rows"] + doc["correct"]:
        cells = [c for c in row["cells"] if not c.get("crashed")]
        crashed = len(row["cells"]) - len(cells)
        if "mutant" in row:
            killed = [c for c in cells if c.get("check") and c.get("status") in ("fail", "error")]
            by = Counter(short_name(c["check"]) for c in killed)
            who, verdict = row["mutant"], f"killed {len(killed)}/{len(row['cells'])}"
        else:
            failing = [c for c in cells if "check" in c]
            by = Counter(short_name(c["check"]) for c in failing)
            checks = sorted({(c.get("counts") or {}).get("pass", 0) for c in cells})
            who = f"correct {row['device']}"
            verdict = (f"passes {len(cells) - len(failing)}/{len(row['cells'])}"
                       + (f" ({checks[0]}–{checks[-1]} checks passing a seed)" if len(checks) > 1 else
                          f" ({checks[0]} checks passing a seed)" if checks else ""))
        verdict += f", {crashed} crashed" if crashed else ""
        named = ", ".join(f"`{k}`" + (f" ×{n}" if n != len(row["cells"]) else "") for k, n in by.most_common(3))
        out.append([who, row["mode"], verdict, named or "—"])
    return out


def record_tables(doc: dict) -> tuple[dict, dict]:
    """The ``tables`` and ``values`` of the record ``--record`` writes (``specsim.figures.records``): the
    summary table (``summary_rows``) with the verdict line as its note, and the run's counts."""
    cells = [c for r in doc["rows"] for c in r["cells"]]
    correct = [c for r in doc["correct"] for c in r["cells"]]
    seeds = doc["seeds"]
    tables = {"summary": {"columns": ["mutant", "mode", "suite seeds", "by"], "rows": summary_rows(doc),
                          "note": verdict_line(doc) + "."}}
    values = {"seeds": f"{seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else str(seeds[0]), "suite-seeds": str(len(seeds)),
              "judgements": str(len(cells)), "killed": str(len(cells) - len(doc["survivors"]) - sum(1 for c in cells if c.get("crashed"))),
              "survivors": str(len(doc["survivors"])), "correct-judgements": str(len(correct)),
              "false-fails": str(len(doc["false_fails"])), "crashed": str(len(doc["crashed"]))}
    return tables, values


def progress(job, r: dict) -> None:
    tag = f"[{_mode(job.black_box)}, seed {job.seed}]" + ("" if job.family == "device" else f" [{job.family}]")
    if r.get("crashed"):
        said = f"CRASHED: {r['crashed']}"
    elif job.kind == "mutant":
        said = f"killed by {r['killer']['name']}" if r["killed"] else "SURVIVED"
    else:
        said = f"FALSE FAIL {r['killer']['name']}" if r["killed"] else "passes"
    print(f"  {'correct ' if job.kind == 'correct' else ''}{job.name} {tag}: {said} ({r['seconds']:.1f}s)",
          file=sys.stderr, flush=True)
