"""Conformance profiles (SPEC §10) and the verdict a run carries.

A *profile* is a set of declared capabilities. The **core** profile is what a conforming
device must implement; a device meeting only part of it gets a FAIL verdict, however many of
its checks pass (a device that declares nothing and answers token 0 passes nothing vacuously).
Optional profiles are listed in ``PROFILES``: a row per profile, so a new capability (a tree
scheme, a sampler parameter, a logits dtype) is one more row.

The verdict (``verdict(caps, checks, groups_run, quick=..., complete=..., seed=..., alpha_family=...,
all_groups=..., scope=...)``), written into ``conformance.json`` and the reports::

    {"status": "pass" | "pass-with-waivers" | "fail" | "partial" | "quick" | "incomplete",
     "reasons": [...],                       # why not "pass", one line each
     "waived": [...],                        # names of the failing checks a vendor waiver covers
     "core_profile": {"met": bool, "missing": [...]},
     "optional_profiles": {"point-proposals": true, ...},   # met: declared, its groups ran and passed
     "profiles": {"point-proposals": {"declared", "met", "why"}, ...},
     "scope": {...},                         # what the verdict covers (see _scope)
     "quick": bool,                          # judged at --quick sizes
     "complete": bool,                       # the run finished
     "spec_version": "1.1",                  # the SPEC version judged against (= judged_against)
     "suite_version": "0.1.0",               # specsim's own version
     "judged_against": "1.1",                # the device's Capabilities.spec_version, else the current
     "declared_spec_version": None,          # what the device declared (None: nothing)
     "newer_checks": {"count": 0, "failing": []}}   # checks newer than the declared version: apart

``pass``: the core profile is declared, no check failed or errored, no check the core needs
came back ``not_supported``, the checks that carry the core's evidence ran and passed
(``CORE_EVIDENCE``: the chain step's own checks, never a tree's or a §12 sampler's), and the run
was the whole suite as published: every group, at full size, at the suite seed and at least the
suite's α. ``partial``: nothing failed, but the run was narrower — a ``--groups`` subset, another
seed, a weaker α, a check cut below its full volume by its time budget — and the reasons list
each narrowing. ``quick``: a ``--quick`` run (smaller cases and samples, for testing the harness)
in which nothing failed: never a verdict. ``incomplete``: the run did not finish (a stop signal, a
kill, a crash of the runner itself, or a reader looking while it runs): never a verdict.
``fail``: a check failed, at any size. Only ``pass`` and ``pass-with-waivers`` are ``passed``.

A check newer than the SPEC version the device declares (``spec_versions.newer_than_declared``)
never counts: not as a failure, not as ``not_supported``, not as evidence; ``newer_checks``
counts them and names the failing ones, apart from the verdict.

A device's refusal (``UnsupportedCall``) of a call inside its declaration is a failing check
(``specsim.conformance.core.calls.refused``), so it reaches the verdict as a ``fail``.

A failing check that a vendor's waiver covers (``specsim conform --waivers``, its ``waiver`` set)
is not counted among the failures, but never silently: ``pass-with-waivers`` (exit status 0) when
every other condition of ``pass`` holds, each waived check named; ``fail`` when a waived check
carries the core's evidence (:func:`carries_core_evidence`), since a waiver documents a deviation
and cannot make a device conform to the core.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from devices.protocol import TREE_SCHEMES, Capabilities
from specsim import __version__
from specsim.conformance.cases.chain import CASES as L3_CASES
from specsim.conformance.core.context import DEFAULT_ALPHA_FAMILY, DEFAULT_SEED
from specsim.conformance.core.spec_versions import newer_than_declared, verdict_fields

CORE_MIN_MAX_K = 8
"""Core: ``max_k`` at least this. EAGLE-style and MTP drafters run 1–7 draft tokens per step in
vLLM's and SGLang's published configurations; 8 leaves one of headroom."""

CORE_MIN_VOCAB_SIZE = 262_144
"""Core: ``max_vocab_size`` at least this: Gemma 3's vocabulary (262,144), the largest of
the common open models (Llama 3: 128,256; Qwen 2.5/3: 151,936 padded to 152,064)."""


@dataclass(frozen=True)
class Profile:
    """One row: a name, what it adds (SPEC section), why a device lacks it (empty: it declares it), and the
    groups that carry its evidence: a declared profile is *met* only when each of them ran and none of
    their checks failed."""

    name: str
    spec: str
    lacking: Callable[[Capabilities], list[str]]
    groups: tuple[str, ...] = ()


def _flags(*names: str) -> Callable[[Capabilities], list[str]]:
    return lambda caps: [n for n in names if not getattr(caps, n)]


def _dtype(name: str) -> Callable[[Capabilities], list[str]]:
    return lambda caps: [] if name in caps.dtypes else [f"dtype {name}"]


def _core(caps: Capabilities) -> list[str]:
    out = _flags("draft_probs", "greedy", "top_k", "top_p")(caps) + _dtype("float32")(caps)
    if caps.max_k < CORE_MIN_MAX_K:
        out.append(f"max_k >= {CORE_MIN_MAX_K} (declares {caps.max_k})")
    if caps.max_vocab_size < CORE_MIN_VOCAB_SIZE:
        out.append(f"max_vocab_size >= {CORE_MIN_VOCAB_SIZE} (declares {caps.max_vocab_size})")
    if not caps.injected_noise and caps.rng == "none":  # Capabilities refuses this; a duck-typed device may not
        out.append("a source of randomness (injected_noise or rng)")
    return out


CORE = Profile("core", "§2, §3 full and greedy, §5, §6, float32", _core)

_CHAIN_L1 = ("L1-injected", "L1-edges", "L1-sizes", "L1-declared", "L1-volume", "L1-long")
_TREES = ("L1-trees", "L2-trees", "L3-trees")

PROFILES: tuple[Profile, ...] = (
    Profile("injected-noise", "§5.1 (layer L1 token for token)", _flags("injected_noise"), _CHAIN_L1),
    Profile("philox-keyed", "§5.2 bit for bit", lambda caps: [] if caps.rng == "philox" else ["rng philox"],
            ("L1-keyed", "L1-keyed-sampler", "L1-declared", "L2-rng", "L2-sizes")),
    Profile("seeded-rng", "§5.2's contract without its streams", lambda caps: [] if caps.rng != "none" else ["rng"],
            ("L2-rng", "L3-statistical", "L3-declared", "L1-long")),
    Profile("point-proposals", "§3 point proposals", _flags("point_proposals"), ("L1-injected", "L3-statistical")),
    Profile("withdrawn-drafts", "§4 withdrawn drafts", _flags("withdrawn_drafts"),
            ("input-rules", "L1-injected", "L1-edges", "capabilities")),
    Profile("float64", "§6 float64 logits", _dtype("float64"), ("L1-injected",)),
    Profile("float16", "§6 16-bit logits", _dtype("float16"), ("L1-injected", "L1-16bit")),
    Profile("bfloat16", "§6 16-bit logits", _dtype("bfloat16"), ("L1-injected", "L1-16bit")),
    Profile("sampler", "§12 the whole sampler", lambda caps: [] if caps.sampler else ["sampler"],
            ("L1-sampler", "L1-keyed-sampler", "L3-statistical")),
) + tuple(
    Profile(f"tree-{s}", "§11", lambda caps, s=s: [] if s in caps.tree_schemes else [f"tree_schemes {s}"], _TREES)
    for s in TREE_SCHEMES
)
"""The optional profiles, in report order. Add a row for a capability you introduce."""

@dataclass(frozen=True)
class Evidence:
    """Checks that must have passed for a ``pass`` verdict: any one whose name starts with one of
    ``prefixes``, from the ``groups`` that apply to the device's declaration."""

    name: str
    prefixes: tuple[str, ...]
    groups: Callable[[Capabilities], tuple[str, ...]]


def _law_groups(caps: Capabilities) -> tuple[str, ...]:
    return (("L1-injected",) if caps.injected_noise else ()) + (("L1-keyed",) if caps.rng == "philox" else ()) \
        + (("L3-statistical",) if caps.rng != "none" else ())


CHAIN_LAW_PREFIXES: tuple[str, ...] = ("L1/injected/", "L1/keyed/", "L1/declared/", "L1/long/", "L3/declared/") + tuple(
    f"L3/{case.id}/" for case in L3_CASES if not case.sampler)
"""The names of the checks that hold the chain step (``verify``) to its law: L1-injected's and
L1-keyed's cases, the declared limits' chains (L1-declared, L3-declared), the long run (L1-long), and
L3-statistical's cases without SPEC §12 parameters. Not trees (``L3/trees/...``, ``.../tree-...``:
``verify_tree``), not the L1-sampler's or the §12 L3 cases (an optional profile)."""

CORE_EVIDENCE: tuple[Evidence, ...] = (
    Evidence("capabilities", ("capabilities/",), lambda caps: ("capabilities",)),
    Evidence("law", CHAIN_LAW_PREFIXES, _law_groups),
)
"""The capability group's calls (every core mode served), and the chain step's output law checked
exactly (L1) or statistically (L3): a device drawing its own randomness without injected noise is
judged by L3. Evidence absent though one of its groups ran is a ``fail``; absent because none ran,
``partial``."""


def core_evidence_groups(caps: Capabilities | None) -> list[str]:
    """The groups that carry the core's evidence for a device declaring ``caps`` (none if it declares
    nothing: it fails on the core profile alone).

    >>> core_evidence_groups(Capabilities(injected_noise=False, rng="seeded", max_vocab_size=8))
    ['capabilities', 'L3-statistical']
    """
    if caps is None:
        return []
    return list(dict.fromkeys(g for ev in CORE_EVIDENCE for g in ev.groups(caps)))


def core_lacking(caps: Capabilities | None) -> list[str]:
    """What ``caps`` lacks of the core profile (all of it for a device that declares nothing)."""
    if caps is None:
        return ["capabilities (the device declares none)"]
    return _core(caps)


def optional_profiles(caps: Capabilities | None) -> dict[str, bool]:
    """Each optional profile: declared or not."""
    return {p.name: caps is not None and not p.lacking(caps) for p in PROFILES}


def carries_core_evidence(check: dict) -> bool:
    """Whether a check is one the core needs passed: a core row of the capabilities group, or the output law
    on the random batches of ``CORE_EVIDENCE`` (L1 injected or keyed, L3), not the optional tree schemes.

    >>> carries_core_evidence({"name": "L1/injected/full-mixed/V8/float32"}), carries_core_evidence({"name": "L1/edge/x"})
    (True, False)
    """
    name = check["name"]
    if name.startswith("capabilities/"):
        return bool((check.get("extra") or {}).get("core"))
    laws = next(ev for ev in CORE_EVIDENCE if ev.name == "law").prefixes
    return name.startswith(laws) and not name.startswith("L3/trees") and "/tree-" not in name


def _waived_reason(waived: list[dict], core: list[dict]) -> str:
    first = (core or waived)[0]
    w = first["waiver"]
    what = (f"{len(core)} of them carr{'ies' if len(core) == 1 else 'y'} the core's evidence, so a waiver cannot "
            "make the device conform (SPEC §10)" if core else "none carries the core's evidence")
    return (f"{len(waived)} failing check(s) waived by the vendor's waiver file; {what}; "
            f"first: {first['name']} ({first['status']}, waived: {w['reason']} [{w['link']}])")


def _core_unsupported(checks: list[dict]) -> list[str]:
    return [c["name"] for c in checks if c["status"] == "not_supported" and (c.get("extra") or {}).get("core")]



STATUSES = ("pass", "pass-with-waivers", "fail", "partial", "quick", "incomplete")
"""Every verdict status; ``passed`` (and exit status 0) only for the first two."""

PASSING = ("pass", "pass-with-waivers")


def _group_of(check: dict) -> str | None:
    return (check.get("extra") or {}).get("group")


def _short_volume(checks: list[dict]) -> list[str]:
    """Checks that ran fewer requests than their full size (a slow device under a time budget)."""
    out = []
    for c in checks:
        vol = (c.get("extra") or {}).get("volume")
        if vol and int(vol.get("reached", 0)) < int(vol.get("requested", 0)):
            out.append(f"{c['name']} reached {vol['reached']:,} of {vol['requested']:,} requests")
    return out


def _narrowing(groups_run: list[str], all_groups: list[str] | None, seed: int, alpha_family: float,
               checks: list[dict]) -> list[str]:
    """Why a run whose checks all passed still cannot be a PASS: it is narrower than the suite."""
    out = []
    if all_groups is not None:
        not_run = [g for g in all_groups if g not in groups_run]
        if not_run:
            out.append(f"{len(not_run)} group(s) did not run: {', '.join(not_run)} (a PASS needs every group; "
                       "--groups runs a subset)")
    if seed != DEFAULT_SEED:
        out.append(f"seed {seed} is not the suite seed {DEFAULT_SEED}: other seeds explore, a certificate is run at "
                   f"the suite seed")
    if alpha_family < DEFAULT_ALPHA_FAMILY:
        out.append(f"alpha {alpha_family:g} is below the suite's {DEFAULT_ALPHA_FAMILY:g}: every statistical test is "
                   "weaker than its documented power (docs/statistics.md)")
    out += [f"{v} (its stated power is the full size's; the time budget cut it)" for v in _short_volume(checks)]
    return out


def _profile_evidence(p: "Profile", caps: Capabilities | None, checks: list[dict], groups_run: list[str]) -> dict:
    """Declared, met (its groups ran and none of their checks failed), and why not."""
    declared = caps is not None and not p.lacking(caps)
    if not declared:
        return {"declared": False, "met": False, "why": "not declared: " + "; ".join(p.lacking(caps) if caps else
                                                                                      ["no capabilities"])}
    absent = [g for g in p.groups if g not in groups_run]
    if absent:
        return {"declared": True, "met": False, "why": f"not run: {', '.join(absent)}"}
    bad = [c["name"] for c in checks if _group_of(c) in p.groups and c["status"] in ("fail", "error")
           and not c.get("waiver")]
    if bad:
        return {"declared": True, "met": False, "why": f"{len(bad)} check(s) of {', '.join(p.groups)} failed, "
                                                       f"first: {bad[0]}"}
    return {"declared": True, "met": True, "why": ""}


def verdict(caps: Capabilities | None, checks: list[dict], groups_run: list[str], quick: bool = False, *,
            complete: bool = True, seed: int = DEFAULT_SEED, alpha_family: float = DEFAULT_ALPHA_FAMILY,
            all_groups: list[str] | None = None, scope: dict | None = None) -> dict:
    """The verdict of one run (see the module docstring); ``checks`` as in ``conformance.json``,
    ``groups_run`` the groups that ran, ``quick`` whether at ``--quick`` sizes, ``complete`` whether the
    run finished (an interrupted one is ``incomplete``), ``seed`` and ``alpha_family`` the run's,
    ``all_groups`` the suite's groups (a run without one of them is ``partial``; None: not judged), ``scope``
    what the calls exercised (``scope.of_run``).

    >>> v = verdict(Capabilities(injected_noise=True, rng="none", max_vocab_size=10, greedy=False), [], [])
    >>> v["status"], v["core_profile"]["missing"]
    ('fail', ['greedy', 'max_vocab_size >= 262144 (declares 10)'])
    """
    versions, reasons = verdict_fields(caps, checks)
    checks = [c for c in checks if not newer_than_declared(c)]   # new since the device's version: shown apart
    missing = core_lacking(caps)
    if missing:
        reasons.append(f"core profile not met: the device does not declare {'; '.join(missing)} (SPEC §10)")
    bad = [c["name"] for c in checks if c["status"] in ("fail", "error") and not c.get("waiver")]
    if bad:
        reasons.append(f"{len(bad)} check(s) failed or errored, first: {bad[0]}")
    unsupported = _core_unsupported(checks)
    if unsupported:
        reasons.append(f"{len(unsupported)} check(s) the core profile needs came back not_supported, "
                       f"first: {unsupported[0]}")
    waived = [c for c in checks if c["status"] in ("fail", "error") and c.get("waiver")]
    core_waived = [c for c in waived if carries_core_evidence(c)]
    status = "fail" if reasons or core_waived else "pass-with-waivers" if waived else "pass"
    if waived:
        reasons.append(_waived_reason(waived, core_waived))
    for ev in CORE_EVIDENCE if caps is not None else ():
        if any(c["status"] == "pass" and c["name"].startswith(ev.prefixes) for c in checks):
            continue
        ran = [g for g in ev.groups(caps) if g in groups_run]
        if ran:
            status = "fail"
            reasons.append(f"no check of {', '.join(ran)} passed: the core's {ev.name} evidence is missing "
                           f"(a device must be checked, not only declared; SPEC §10)")
        else:
            status = "partial" if status in PASSING else status
            reasons.append(f"the core's {ev.name} evidence was not run (groups: {', '.join(ev.groups(caps))})")
    narrowed = _narrowing(groups_run, all_groups, seed, alpha_family, checks)
    if narrowed:
        status = "partial" if status in PASSING else status
        reasons += narrowed
    short = _short_of_declaration(caps, scope, versions["judged_against"]) if not narrowed else []
    if short:
        status = "partial" if status in PASSING else status
        reasons += short
    if quick and status != "fail":
        reasons.insert(0, f"a --quick run (smaller cases and samples, for testing the harness) is never a verdict; "
                          f"at these sizes it would be {status.upper()}: run without --quick for the verdict")
        status = "quick"
    if not complete:
        reasons.insert(0, f"the run did not finish (stopped, killed or still running): no verdict; what ran so far "
                          f"would be {status.upper()}. Continue it with --resume, or run it again")
        status = "incomplete"
    profiles = {p.name: _profile_evidence(p, caps, checks, groups_run) for p in PROFILES}
    return {"status": status, "reasons": reasons, "waived": [c["name"] for c in waived],
            "core_profile": {"met": not missing, "missing": missing},
            "optional_profiles": {name: e["met"] for name, e in profiles.items()},
            "profiles": profiles, "quick": bool(quick), "complete": bool(complete),
            "spec_version": versions["judged_against"], "suite_version": __version__, **versions,
            "scope": _scope(caps, groups_run, all_groups, seed, alpha_family, checks, scope)}


def _short_of_declaration(caps, scope: dict | None, judged_against: str) -> list[str]:
    """From SPEC 1.15, a whole run must ask every declared variant at every declared limit in each declared noise
    mode: one reason per mode where it did not (``unreached``, which names a variant never asked too), so that such a
    run is ``partial``, never a PASS that claims sizes it did not check."""
    from specsim.conformance.core.spec_versions import newer
    if caps is None or scope is None or newer("1.15", judged_against):
        return []
    short = unreached(scope.get("checked", {}), caps)
    return [f"{len(variants)} declared variant(s) in the {mode} noise mode were not asked at every declared limit "
            f"(SPEC 1.15; first: {next(iter(variants))}, short of {_sizes_short(next(iter(variants.values())))}): "
            f"no claim at those sizes" for mode, variants in short.items() if variants]


def _sizes_short(sizes: dict) -> str:
    return ", ".join(f"{k} {got} < {want}" for k, (got, want) in sizes.items())


def unreached(checked: dict, caps) -> dict[str, dict[str, dict]]:
    """Per declared noise mode, each declared variant some limit of which no call held to its law reached
    (``checked``: the scope's; ``cases.declared.variant_limits``): ``{mode: {variant: {size: [largest asked,
    limit]}}}`` (SPEC 1.15). Empty where every variant reached every limit; a variant never asked is here too."""
    from specsim.conformance.cases.declared import variant_limits
    from specsim.conformance.core.scope import declared_modes, declared_variants
    out = {}
    for m in declared_modes(caps):
        reach = (checked.get(m) or {}).get("reach") or {}
        short = {}
        for variant in declared_variants(caps, m):
            got = reach.get(variant, {})
            sizes = {k: [int(got.get(k, 0)), want] for k, want in variant_limits(caps, variant).items()
                     if int(got.get(k, 0)) < want}
            if sizes:
                short[variant] = sizes
        out[m] = short
    return out


def _scope(caps, groups_run, all_groups, seed, alpha_family, checks, scope) -> dict:
    """What the verdict covers, for the first lines of every report: the declaration, the largest call
    checked in each noise mode, the declared variants no check asked (``scope.unasked``), the volume reached,
    α and seed (non-default ones marked)."""
    from specsim.conformance.core.scope import unasked
    volumes = {c["name"]: (c.get("extra") or {})["volume"] for c in checks if (c.get("extra") or {}).get("volume")}
    checked = (scope or {}).get("checked", {})
    return {"declared": caps.to_json() if caps is not None else None,
            "checked": checked, "served": (scope or {}).get("served", {}),
            "unasked": unasked(checked, caps) if caps is not None and scope is not None else {},
            "unreached": unreached(checked, caps) if caps is not None and scope is not None else {},
            "volume": volumes,
            "seed": seed, "seed_is_default": seed == DEFAULT_SEED,
            "alpha_family": alpha_family, "alpha_is_default": alpha_family == DEFAULT_ALPHA_FAMILY,
            "groups_run": list(groups_run),
            "groups_not_run": [g for g in (all_groups or []) if g not in groups_run],
            "offsets": _offsets(checks)}


def _offsets(checks) -> dict:
    """The element boundaries L1-offsets crossed (``checked``) and those its per-call budget left out
    (``unchecked``: each with the bytes its call needs and the run's budget), from its checks' extras."""
    checked, unchecked = [], []
    for c in checks:
        extra = c.get("extra") or {}
        if extra.get("crossing") and c.get("status") != "not_supported":
            checked.append({"check": c["name"], **{k: extra["crossing"][k] for k in ("space", "elements", "bytes")}})
        elif extra.get("unchecked"):
            unchecked.append({"check": c["name"], **extra["unchecked"]})
    return {"checked": checked, "unchecked": unchecked}
