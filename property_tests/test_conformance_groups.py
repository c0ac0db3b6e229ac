"""Every conformance group through pytest, so the pytest route covers what ``specsim conform`` does,
and SPEC §10's verdict on the core's evidence: the gate is the verdict, not "nothing failed".

A ``conformance:`` waiver (``--specsim-waivers``) leaves the checks it names out of the
verdict, so a known deviation does not hide the rest of its group.

The groups run at their quick sizes here (the statistical family budget still holds: α per
check is the family's share), so the verdict's status is ``quick`` at best, never ``pass``:
the verdict at full size is ``specsim conform``'s. What the verdict test adds to the groups'
own tests is what no single check asks: the core profile declared, and its evidence (the
capabilities group, the chain step's law) run and passing — a device that declares nothing
fails no check, and fails here.
"""

from __future__ import annotations

import pytest

from specsim.conformance.profiles import core_evidence_groups
from specsim.conformance.runner import Context, available_groups, run_group, verdict_of

CONTEXT = Context(seed=0, quick=True)


@pytest.fixture(scope="session")
def group_results(device_under_test):
    """``results(group)``: the group's results against the device under test, run once per session."""
    done: dict[str, list] = {}

    def results(group: str) -> list:
        if group not in done:
            done[group] = run_group(group, device_under_test, CONTEXT)
        return done[group]
    return results


@pytest.mark.parametrize("group", list(available_groups()))
def test_conformance_group_passes(group_results, group, specsim_conformance_waivers):
    kept, _ = specsim_conformance_waivers(group_results(group))   # checks a ``conformance:`` waiver names
    bad = [r for r in kept if r.status in ("fail", "error")]
    assert not bad, "\n".join(f"{r.name}: {r.status}: {r.detail[:500]}" for r in bad[:5])


def test_conformance_verdict(device_under_test, group_results, specsim_conformance_waivers):
    """SPEC §10's verdict on the groups carrying the core's evidence: ``quick`` (it would pass at these
    sizes), never ``fail``; a waived check is no evidence."""
    groups = core_evidence_groups(getattr(device_under_test, "capabilities", None))
    kept, _ = specsim_conformance_waivers([r for g in groups for r in group_results(g)])
    verdict = verdict_of(device_under_test, kept, CONTEXT, groups)
    assert verdict["status"] == "quick", f"verdict {verdict['status'].upper()}: " + "; ".join(verdict["reasons"])
