"""Every conformance group through pytest, so the pytest route covers what ``specsim conform`` does.

A ``conformance:`` waiver (``--specsim-waivers``) leaves the checks it names out of the
verdict, so a known deviation does not hide the rest of its group.

The statistical group runs at its quick sizes here (its family budget still
holds: α per check is the family's share); the verdict at the full budget
is ``specsim conform``'s.
"""

from __future__ import annotations

import pytest

from specsim.conformance.runner import Context, available_groups, run_group


@pytest.mark.parametrize("group", list(available_groups()))
def test_conformance_group_passes(device_under_test, group, specsim_conformance_waivers):
    results = run_group(group, device_under_test, Context(seed=0, quick=True))
    kept, _ = specsim_conformance_waivers(results)   # checks a ``conformance:`` waiver names (a known deviation)
    bad = [r for r in kept if r.status in ("fail", "error")]
    assert not bad, "\n".join(f"{r.name}: {r.status}: {r.detail[:500]}" for r in bad[:5])
