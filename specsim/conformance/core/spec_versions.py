"""Which SPEC version each check belongs to, and the version a device is judged against.

A published SPEC version is frozen (SPEC.md, "Version history"); a requirement added since
belongs to the next version. A device declares the version it implements
(``Capabilities.spec_version``; None: the current one, ``reference.SPEC_VERSION``) and is
judged against it:

- every check knows the version that introduced it (``INTRODUCED``, by name pattern; any other
  check is 1.0's): ``introduced_in(name)``;
- a check newer than the device's version is marked (``extra["since"]``,
  ``extra["newer_than_declared"]``, by ``annotate``) and never counts in the verdict: it is
  reported apart as new since the device's version (``profiles.verdict``);
- a check that would *send* something added since (a field, a capability's probe) is never
  sent to such a device: ``not_sent`` gives the check's ``not_supported`` result with its
  cause. A check of a rule on calls an earlier device already takes runs, and only counts
  from the version that added the rule.

    >>> introduced_in("input/withdrawn-not-bool"), introduced_in("L1/edge/vocab-one")
    ('1.1', '1.0')
"""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from typing import Callable

from devices.protocol import Capabilities, InvalidInput
from devices.validate import LOGIT_DTYPES
from reference import SPEC_VERSION, SPEC_VERSIONS
from specsim.conformance.core.results import CheckResult
from specsim.testing.bad_inputs import SAMPLER_BAD_INPUTS, WITHDRAWN_BAD_INPUTS

FIRST = SPEC_VERSIONS[0]


@dataclass(frozen=True)
class Since:
    """Checks named by ``pattern`` (``fnmatch``) were introduced in ``version`` by ``change``.
    ``sends``: the check's call carries something added in ``version`` (never sent to a device
    declaring an earlier one); False: a rule on calls an earlier version already defined."""

    pattern: str
    version: str
    change: str
    sends: bool


def _input_rule(rule: str) -> str:
    """The check name ``specsim.conformance.checks.interface.input_rules`` gives a bad input's rule."""
    return f"input/{rule.replace(' ', '-')}"


INTRODUCED: tuple[Since, ...] = (
    # 1.15's rows first (1.14's ``L1/declared/*/variant/*`` does not match ``variant-limit``)
    Since("L1/declared/*/variant-limit/*", "1.15", "every declared kernel variant (dtype, kind of call, proposal "
          "form) at each declared limit — the declared V, the declared max_k, the ladder's largest batch; trees at "
          "max_tree_nodes and depth max_k — token for token in each token-for-token noise mode", False),
    Since("L3/declared/support/variant-limit/*", "1.15", "every declared kernel variant at each declared limit under "
          "the device's own unkeyed draws, every answer within its exact support, for a device drawing unkeyed "
          "noise", False),
    # 1.14's rows next (1.11's ``L1/trees/edge/*/mixed`` and ``L1/trees/edge-neighbours/*`` and 1.9's
    # ``L1/trees/edge/*/batches`` also match their names)
    Since("L1/trees/edge/*/seeded", "1.14", "§11 every tree edge alone under the device's own unkeyed draws, each "
          "answer within the edge's exact support, for a device drawing unkeyed noise", False),
    Since("L1/trees/edge/*/seeded/batches", "1.14", "§11 every tree edge under the device's own unkeyed draws at "
          "each size of the ladder, every copy within its exact support", False),
    Since("L1/trees/edge/*/seeded/mixed", "1.14", "§11 every tree edge under the device's own unkeyed draws among "
          "filler trees, every copy within its exact support", False),
    Since("L1/trees/edge-neighbours/*/seeded/mixed", "1.14", "§11 the same batches' filler trees, each row within "
          "its own exact support", False),
    Since("L1/trees/pattern/*/keyed", "1.14", "§11 every sibling pattern on the keyed streams, every copy under its "
          "own key, tokens and accepted nodes the reference's, for a device drawing keyed noise", False),
    Since("L1/trees/pattern/*/seeded", "1.14", "§11 every sibling pattern under the device's own unkeyed draws, "
          "every copy within its exact support, for a device taking injected noise too", False),
    Since("L1/declared/*/variant/*", "1.14", "every kernel variant the device declares (dtype, kind of call, proposal "
          "form) asked once in each token-for-token noise mode", False),
    *(Since(f"{area}/*/{dtype}/{mode}/*", "1.14", f"§4, §12 every edge at the ladder's sizes and among fillers in "
            f"{dtype} too on the device's {'keyed streams' if mode == 'keyed' else 'own unkeyed draws'}, for a device "
            "taking injected noise that draws its own too", False)
      for area in ("L1/edge", "L1/edge-neighbours", "L1-sampler/edge", "L1-sampler/edge-neighbours")
      for dtype in LOGIT_DTYPES for mode in ("keyed", "seeded")),
    # 1.13's rows next (1.11's ``L1/trees/edge/*/mixed``, ``L1/trees/edge-neighbours/*`` and ``L1/edge/*/mixed-*``
    # and 1.9's ``L1/trees/edge/*/batches`` also match their names)
    Since("L1/trees/edge/*/keyed", "1.13", "§11 every tree edge alone on the keyed streams, under a key whose coins "
          "come near the edge's placed coins, for a device drawing keyed noise", False),
    Since("L1/trees/edge/*/keyed/batches", "1.13", "§11 every tree edge on the keyed streams at each size of the "
          "ladder, every copy under the edge's key", False),
    Since("L1/trees/edge/*/keyed/mixed", "1.13", "§11 every tree edge on the keyed streams among filler trees on "
          "their own keys", False),
    Since("L1/trees/edge-neighbours/*/keyed/mixed", "1.13", "§11 the same batches' filler trees held to the "
          "reference's keyed tokens and accepted nodes", False),
    Since("L1/edge/*/keyed/mixed-*", "1.13", "§2–§4 every edge among 16 fillers all of one kind on the keyed "
          "streams, for a device taking injected noise that draws keyed noise too", False),
    Since("L1/edge-neighbours/*/keyed/mixed-*", "1.13", "§2–§4 the same batches' filler rows held to the reference's "
          "keyed tokens", False),
    Since("L1/edge/*/seeded/mixed-*", "1.13", "§2–§4 every edge among 16 fillers all of one kind under the device's "
          "own unkeyed draws, each copy held to its exact support, for a device taking injected noise too", False),
    # 1.12's rows next (1.11's ``L1-sampler/edge/*/mixed`` and ``L1-sampler/edge-neighbours/*`` and 1.9's
    # ``L1-sampler/edge/*/batches`` also match their names)
    Since("L1-sampler/edge/*/keyed/batches", "1.12", "§12 every sampler edge at each size of the ladder on the keyed "
          "streams, for a device taking injected noise that draws keyed noise too", False),
    Since("L1-sampler/edge/*/seeded/batches", "1.12", "§12 every sampler edge at each size of the ladder under the "
          "device's own unkeyed draws, each copy held to its exact support, for a device taking injected noise too",
          False),
    Since("L1-sampler/edge/*/keyed/mixed", "1.12", "§12 every sampler edge among filler requests on the keyed "
          "streams, for a device taking injected noise that draws keyed noise too", False),
    Since("L1-sampler/edge-neighbours/*/keyed/mixed", "1.12", "§12 the same batches' filler rows held to the "
          "reference's tokens on the keyed streams", False),
    Since("L1-sampler/edge/*/seeded/mixed", "1.12", "§12 every sampler edge among filler requests under the "
          "device's own unkeyed draws, each copy held to its exact support, for a device taking injected noise too",
          False),
    # 1.11's rows next (1.9's ``L1-sampler/edge/*/batches``, 1.6's and 1.4's ``L1-sampler/edge/empty-residual-*``
    # and 1.5's dtype twins also match their names)
    Since("L1-sampler/edge/*/mixed", "1.11", "§12 every sampler edge's requests at the start, middle and end of a "
          "batch of each size of the ladder, every other row a filler request (unpenalised greedy, top-k, top-p and "
          "unfiltered ones, the rest with every declared §12 parameter), every copy held to its request's answer",
          False),
    Since("L1-sampler/edge-neighbours/*", "1.11", "§12 the same batches' filler rows held to the reference's tokens",
          False),
    Since("L1/trees/edge/*/mixed", "1.11", "§11 every tree edge among filler trees (greedy, top-k, top-p and "
          "unfiltered among them) at each size of the ladder, with injected noise", False),
    Since("L1/trees/edge-neighbours/*", "1.11", "§11 the same batches' filler trees held to the reference's tokens "
          "and accepted nodes", False),
    Since("L1/edge/*/mixed-*", "1.11", "§2–§4 every edge among 16 fillers all of one kind (greedy, sampled without "
          "a filter, cut by top-k, cut by top-p) at 33 and 257 requests", False),
    Since("L1/edge-neighbours/*/mixed-*", "1.11", "§2–§4 the same batches' filler rows held to the reference's "
          "tokens", False),
    # 1.10's rows next (1.8's ``L1/edge/top-p-reaches-p*`` also matches its names)
    Since("L1/edge/*/mixed", "1.10", "§2–§4 every edge's requests at the start, middle and end of a batch of each "
          "size of the ladder, every other row a filler request (greedy, top-k, top-p and unfiltered among them), "
          "every copy held to its request's answer", False),
    Since("L1/edge-neighbours/*", "1.10", "§2–§4 the same batches' filler rows held to the reference's tokens",
          False),
    # 1.9's rows next (every edge's own pattern, 1.8's ``L1/edge/top-p-reaches-p*`` among them, also matches theirs)
    Since("L1/edge/*/batches", "1.9", "§2–§4 every edge's requests repeated to fill a batch of each size of the "
          "ladder, every copy held to its request's answer, in each noise mode the device declares", False),
    Since("L1-sampler/edge/*/batches", "1.9", "§12 every sampler edge the same, at each size of the ladder", False),
    Since("L1/trees/edge/*/batches", "1.9", "§11 every tree edge the same, with injected noise, at each size of the "
          "ladder", False),
    # 1.8's rows next (1.5's ``L1/declared/*/empty-residual-*`` also matches their names)
    Since("L1/declared/*/empty-residual-between-K*", "1.8",
          "§4 an empty residual at the positions of the declared max_k that 1.7 leaves out: every one below 512, "
          "past it each side of every multiple of 64", False),
    Since("L3/declared/support/empty-residual-between-K*", "1.8",
          "§4 the same under a device's own randomness, held to each request's exact support", False),
    Since("L1/edge/top-p-reaches-p*", "1.8", "§2 top-p keeps the smallest set reaching p where the classes are "
          "nearly equal, and no more", False),
    # 1.7's rows next: 1.6's ``L1-sampler/edge/empty-residual-*-then-*`` and ``L1/sizes/support/*``, 1.5's
    # ``L1/edge/empty-residual-*temperature*``, ``L1/sizes/empty-residual-*-V*``, ``L1/declared/*/empty-residual-*``
    # and the dtype twins' patterns also match their names
    Since("L1/edge/empty-residual-temperature-far*", "1.7",
          "§2/§4 an empty residual's fallback at its temperature within √2, T = 2^-9, 2^-7, 2^7, 2^9", False),
    Since("L1/sizes/empty-residual-temperature-far-V*", "1.7",
          "§2/§4 the far temperatures' empty residuals at real vocabularies", False),
    Since("L1/sizes/support/empty-residual-temperature-far-V*", "1.7",
          "§2/§4 the far temperatures' empty residuals at real vocabularies under a device's own randomness", False),
    Since("L1/edge/bonus-row-temperature-band*", "1.7", "§2 a row sampled at its temperature within √2, T = 2^-9 to "
          "2^9", False),
    Since("L1-sampler/edge/empty-residual-every-*-then-*", "1.7",
          "§4/§12 an empty residual where every penalty, with and without the bias, acts at once, then each cut",
          False),
    Since("L1/declared/*/empty-residual-positions-K*", "1.7",
          "§4 an empty residual at every position of K = 8 and of the declared max_k (past 64, each side of every "
          "power of two)", False),
    Since("L3/declared/support/empty-residual-positions-K*", "1.7",
          "§4 the same under a device's own randomness, held to each request's exact support", False),
    # 1.6's rows next: 1.5's ``L1/edge/empty-residual-*temperature*``, ``L1-sampler/edge/empty-residual-bias-*``, its
    # dtype twins' and ``L1/sizes/empty-residual-*-V*`` also match their names
    Since("L1/edge/empty-residual-temperature-band*", "1.6",
          "§2/§4 an empty residual's fallback at its temperature within √2, T = 1/32 to 32, positions 0 to 5", False),
    Since("L1/sizes/empty-residual-temperature-band-V*", "1.6",
          "§2/§4 the temperature band's empty residuals at real vocabularies", False),
    Since("L1-sampler/edge/empty-residual-*-then-*", "1.6",
          "§4/§12 an empty residual where each penalty or the bias, then each cut, leave the target, T = 1/16 to 16, "
          "positions 0 and 2 to 5", False),
    Since("L1/sizes/support/*", "1.6", "§4 every empty-residual edge at real vocabularies under a device's own "
          "randomness, held to its law's support", False),
    Since("L1/edge/*-dyadic*", "1.6", "§2 the edges whose logits were logarithms, on logits every dtype holds", False),
    Since("L1-sampler/edge/*-dyadic/*", "1.6", "§12 the edges whose logits were logarithms, on logits every dtype "
          "holds", False),
    # 1.5's rows next: 1.4's ``L1/edge/empty-residual-top-*``, ``L1-sampler/edge/empty-residual-*`` and 1.3's
    # ``L1/sizes/empty-residual*`` also match their names
    Since("L1/edge/empty-residual-*temperature*", "1.5", "§2/§4 an empty residual of a tempered target", False),
    Since("L1-sampler/edge/empty-residual-penalty-*", "1.5",
          "§4/§12 an empty residual where a penalty, temperature and top-k leave the target", False),
    Since("L1-sampler/edge/empty-residual-bias-*", "1.5",
          "§4/§12 an empty residual where a bias, temperature and min_p leave the target", False),
    *(Since(f"L1-sampler/edge/*/*/{dtype}", "1.5", "§6/§12 every §12 edge in every declared logits dtype that holds "
            "its logits", False) for dtype in LOGIT_DTYPES),
    Since("L1/sizes/empty-residual-*-V*", "1.5", "§4 the empty-residual edges at real vocabularies", False),
    Since("L1/declared/*/empty-residual-*", "1.5", "§4 an empty residual at the declared V and max_k", False),
    # 1.4's rows next: 1.3's ``L1/edge/empty-residual*`` and ``L1/edge/*/keyed`` also match their names
    Since("L1/edge/empty-residual-top-*", "1.4", "§2/§4 an empty residual where top-k or top-p leaves the target",
          False),
    *(Since(f"L1/edge/empty-residual*/{dtype}", "1.4", "§4/§6 an empty residual in every declared logits dtype", False)
      for dtype in LOGIT_DTYPES),
    *(Since(f"L1/edge/*/{dtype}", "1.5", "§4/§6 every edge in every declared logits dtype that holds its logits", False)
      for dtype in LOGIT_DTYPES),
    Since("L1-sampler/edge/empty-residual-*", "1.4", "§4/§12 an empty residual on §12's rows", False),
    Since("L1/edge/*/keyed", "1.3", "§4/§5.2 every edge on the keyed streams of a device taking injected noise",
          False),
    Since("L1/edge/*/seeded", "1.3", "§4/§5 every edge's law under the own draws of a device taking injected noise",
          False),
    Since("L1/edge/empty-residual*", "1.3", "§4 an empty residual draws from t", False),
    Since("L1/sizes/empty-residual*", "1.3", "§4 an empty residual draws from t, at real vocabularies", False),
    # 1.3's rows first, then 1.2's: a pattern of 1.1 (``L1/edge/withdrawn-*``, ``L1-sampler*``) also matches their names
    Since("L1/edge/withdrawn-every-position", "1.2", "§4 a withdrawn draft's own row at every position of the chain",
          False),
    Since("L1-sampler/edge/bad-word-at-every-split*", "1.2", "§12.2 a bad word's prefix across the step boundary",
          False),
    Since("capabilities/withdrawn_drafts", "1.1", "§4/§10 withdrawn drafts (Capabilities.withdrawn_drafts)", True),
    Since("capabilities/withdrawn-all-false", "1.1", "§4 an all-False withdrawn mask is no withdrawn draft", True),
    Since("capabilities/sampler-*", "1.1", "§12 sampler parameters", True),
    Since("capabilities/tree-max_tree_nodes", "1.1", "§11.1 Capabilities.max_tree_nodes", True),
    Since("capabilities/tree-max_tree_nodes+1", "1.1", "§11.1 Capabilities.max_tree_nodes", True),
    *(Since(_input_rule(b.rule), "1.1", "§6 withdrawn drafts' input rules", True) for b in WITHDRAWN_BAD_INPUTS),
    *(Since(_input_rule(b.rule), "1.1", "§12.4 sampler input rules", True) for b in SAMPLER_BAD_INPUTS),
    Since("L1/edge/withdrawn-*", "1.1", "§4 withdrawn drafts", True),
    Since("L1/*/full-withdrawn*", "1.1", "§4 withdrawn drafts", True),
    Since("L1-sampler/edge/top-k-tie-class-kept/*", "1.2", "§2/§12.2 top-k's tie class kept in every order profile",
          False),
    Since("L1-sampler/edge/top-p-tie-class-kept/*", "1.2", "§2/§12.2 top-p's tie class kept in every order profile",
          False),
    Since("L1-sampler/edge/greedy-tie-smallest-id/*", "1.2", "§2/§12.2 greedy ties to the smallest id on §12's rows",
          False),
    Since("L1-16bit*", "1.2", "§6/§9 16-bit logits held to float32's tolerance", False),
    Since("L1-sampler*", "1.1", "§12 the whole sampler", True),
    Since("L3/v16-sampler*", "1.1", "§12 the whole sampler", True),
    Since("L1/trees/edge/sglang-threshold-single-zero", "1.1", "§11.4 t(x) > 0 at threshold_single = 0", False),
    Since("L1/trees/limits*", "1.1", "§11.1 trees at the declared limits", False),
    Since("L1/offsets*", "1.2", "§1 rows at any offset: calls past 2^31 and 2^32 elements", False),
    Since("L1/keyed-sampler*", "1.2", "§5.2 the keyed streams on §12's batches and withdrawn drafts", False),
    Since("L2/sampler*", "1.2", "§5.2's contract on §12's batches", False),
)
"""Every check introduced after SPEC 1.0, first match wins. Add a row with each new requirement."""

NEW_CAPABILITIES: dict[str, tuple[str, Callable[[Capabilities], bool]]] = {
    "withdrawn_drafts": ("1.1", lambda caps: bool(caps.withdrawn_drafts)),
    "sampler": ("1.1", lambda caps: bool(caps.sampler)),
    "sampler_orders": ("1.1", lambda caps: bool(caps.sampler_orders)),
    "max_tree_nodes": ("1.1", lambda caps: caps.max_tree_nodes is not None),
}
"""``Capabilities`` fields added after 1.0 → (version, whether ``caps`` declare something there)."""


def _order(version: str) -> int:
    return SPEC_VERSIONS.index(version)


def newer(version: str, than: str) -> bool:
    """Whether SPEC ``version`` came after ``than`` (both known)."""
    return _order(version) > _order(than)


def introduced_in(check_name: str) -> str:
    """The SPEC version that introduced the check named ``check_name`` (1.0 unless ``INTRODUCED`` says)."""
    return _since(check_name).version if _since(check_name) else FIRST


def _since(check_name: str) -> Since | None:
    return next((s for s in INTRODUCED if fnmatch.fnmatchcase(check_name, s.pattern)), None)


def declared_version(caps) -> str | None:
    """The version ``caps`` declare (None: none, or no capabilities); ``InvalidInput`` naming the
    field and the known versions for one SPEC never published."""
    version = getattr(caps, "spec_version", None)
    if version is not None and version not in SPEC_VERSIONS:
        raise InvalidInput(f"capabilities.spec_version: {version!r} is no SPEC version; the known versions are "
                           f"{', '.join(SPEC_VERSIONS)} (None: judged against the current, {SPEC_VERSION})")
    return version


def judged_version(caps) -> str:
    """The version a device declaring ``caps`` is judged against: its declared one, else the current.

    >>> judged_version(Capabilities(True, "none", 8)), judged_version(Capabilities(True, "none", 8, spec_version="1.0"))
    ('1.8', '1.0')
    """
    return declared_version(caps) or SPEC_VERSION


def declaration_problems(caps) -> list[str]:
    """What is wrong with ``caps``' version declaration: an unknown version, or a capability added
    after the declared version (a 1.0 device cannot declare ``withdrawn_drafts``).

    >>> declaration_problems(Capabilities(True, "none", 8, withdrawn_drafts=True, spec_version="1.0"))[0][:44]
    'capabilities.withdrawn_drafts: new in SPEC 1'
    """
    try:
        version = declared_version(caps)
    except InvalidInput as e:
        return [str(e)]
    if version is None:
        return []
    return [f"capabilities.{field}: new in SPEC {since}; a device declaring spec_version {version!r} cannot "
            f"declare it (declare spec_version {since!r} or later, or leave it unset)"
            for field, (since, declares) in NEW_CAPABILITIES.items() if newer(since, version) and declares(caps)]


def not_sent(caps, check_name: str, layer: str, extra: dict | None = None) -> CheckResult | None:
    """The ``not_supported`` result of a check whose call carries something added after the version
    ``caps`` declare (so it is never sent); None where the check may be sent.

    >>> caps = Capabilities(True, "none", 8, spec_version="1.0")
    >>> not_sent(caps, "capabilities/withdrawn_drafts", "L0").detail
    'new in SPEC 1.1 (§4/§10 withdrawn drafts (Capabilities.withdrawn_drafts)); the device declares 1.0'
    """
    since, declared = _since(check_name), declared_version(caps)
    if since is None or not since.sends or declared is None or not newer(since.version, declared):
        return None
    return CheckResult(check_name, layer, "not_supported",
                       f"new in SPEC {since.version} ({since.change}); the device declares {declared}",
                       extra={**(extra or {}), "since": since.version, "newer_than_declared": True})


def annotate(results: list[CheckResult], caps) -> list[CheckResult]:
    """``results`` with ``extra["since"]`` on each check newer than 1.0 and
    ``extra["newer_than_declared"] = True`` on each newer than the version ``caps`` declare."""
    declared = declared_version(caps)
    out = []
    for r in results:
        version = introduced_in(r.name)
        if version == FIRST:
            out.append(r)
            continue
        extra = {**r.extra, "since": version}
        if declared is not None and newer(version, declared):
            extra["newer_than_declared"] = True
        out.append(dataclasses.replace(r, extra=extra))
    return out


def newer_than_declared(check: dict) -> bool:
    """Whether a check (as in ``conformance.json``) is newer than the device's declared version."""
    return bool((check.get("extra") or {}).get("newer_than_declared"))


def verdict_fields(caps, checks: list[dict]) -> tuple[dict, list[str]]:
    """The verdict's version keys (``judged_against``, ``declared_spec_version``, ``newer_checks``)
    and the reasons the declaration fails the verdict (an unknown version, a newer capability)."""
    problems = declaration_problems(caps) if caps is not None else []
    version = getattr(caps, "spec_version", None)
    judged = version if version in SPEC_VERSIONS else SPEC_VERSION
    newer_checks = [c for c in checks if newer_than_declared(c)]
    fields = {"judged_against": judged, "declared_spec_version": version,
              "newer_checks": {"count": len(newer_checks),
                               "failing": [c["name"] for c in newer_checks if c["status"] in ("fail", "error")]}}
    if version is None:
        fields["spec_version_note"] = (f"the device declares no spec_version (Capabilities.spec_version): judged "
                                       f"against the current SPEC {SPEC_VERSION}")
    return fields, [f"{p} (SPEC §10, versions)" for p in problems]
