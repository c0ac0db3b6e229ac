"""The ``transformers`` device on two releases: the one its waivers were judged on and the newest other one
pip's index offers, each installed beside the environment (``specsim.field.releases``: ``pip install --no-deps
--target`` of what this environment lacks for it) into a cache kept between runs; and ``specsim field
--releases`` building the table across both.

Needs pip to reach an index (the user's configuration); skipped, with pip's words, when it cannot. The cache:
``$SPECSIM_RELEASE_CACHE``, else ``<tmp>/specsim-release-cache``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pytest

from devices.field.hf_transformers import JUDGED_RELEASE
from specsim.field import releases

CACHE = os.environ.get("SPECSIM_RELEASE_CACHE") or os.path.join(tempfile.gettempdir(), "specsim-release-cache")

PROBE = """
import json
import numpy as np
from devices.protocol import VerifyBatch
from devices.registry import DeviceLoadError, load
try:
    device = load("transformers")
except DeviceLoadError as e:
    print(json.dumps({"refused": str(e)}))
    raise SystemExit(0)
import transformers
batch = VerifyBatch(np.array([2]), np.array([1, 3]), np.full((2, 4), 0.25, np.float32),
                    np.zeros((3, 4), np.float32), np.ones(1), np.zeros(1, np.int64), np.ones(1),
                    np.array([7], np.uint64), np.array([3]))
out = device.verify(batch)
print(json.dumps({"engine": device.engine, "release": device.release, "file": transformers.__file__,
                  "tokens": out.output_token_ids.tolist(), "accepted": out.num_accepted.tolist()}))
"""


def _is_release(v: str) -> bool:
    return all(part.isdigit() for part in v.split("."))


@pytest.fixture(scope="module")
def installed():
    """{release: Installed} for the judged release and the newest other one; skip if pip reaches no index."""
    try:
        offered = releases.available("transformers")
    except releases.ReleaseError as e:
        pytest.skip(f"pip cannot reach an index for transformers' releases: {e}")
    other = next((v for v in offered if _is_release(v) and v != JUDGED_RELEASE), None)
    if other is None:
        pytest.skip(f"pip's index offers no transformers release but {JUDGED_RELEASE}: {offered[:5]}")
    return {r: releases.install("transformers", r, CACHE) for r in (JUDGED_RELEASE, other)}


def _probe(path: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], env=releases.environ_with(path), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_adapter_runs_on_each_release_and_names_it(installed):
    """Each release, first on the path, is the one the device runs and names; the newest other release either
    runs too or is refused with a DeviceLoadError naming that release and what it lacks."""
    for release, where in installed.items():
        assert where.pins[0] == f"transformers=={release}" and os.path.isdir(os.path.join(where.path, "transformers"))
        got = _probe(where.path)
        if "refused" in got:
            assert release != JUDGED_RELEASE, got["refused"]
            assert f"cannot run transformers {release}" in got["refused"], got["refused"]
            continue
        assert (got["engine"], got["release"]) == (f"transformers {release}", release)
        assert got["file"].startswith(where.path), got["file"]
        assert got["accepted"][0] in (0, 1, 2) and got["tokens"][0][got["accepted"][0]] >= 0


@pytest.mark.slow  # two field runs (~25 s of CPU); the adapter's two-release test above stays in the default suite
def test_field_releases_builds_a_table_with_a_column_per_release(installed, tmp_path):
    """``specsim field --releases A,B`` at --quick on the capabilities group: one table, a column a release,
    each column run on its release."""
    wanted = ",".join(installed)
    env = dict(os.environ, SPECSIM_RELEASE_CACHE=CACHE)
    done = subprocess.run([sys.executable, "-m", "specsim.cli", "field", "--out", str(tmp_path), "--releases", wanted,
                           "--devices", "transformers", "--quick", "--groups", "capabilities"],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads((tmp_path / "field.json").read_text())
    (block,) = doc["releases"]
    assert [r["release"] for r in block["runs"]] == sorted(installed, key=lambda v: tuple(map(int, v.split("."))))
    for run in block["runs"]:
        (entry,) = run["entries"]
        if entry["available"]:
            assert entry["engine"] == f"transformers {run['release']}" and "capabilities" in entry["groups"]
        else:
            assert run["release"] != JUDGED_RELEASE and run["release"] in entry["why_not"]
    text = (tmp_path / "field.md").read_text()
    assert "| `transformers` | " + " | ".join(r["release"] for r in block["runs"]) + " |" in text
    assert f"| engine | transformers {block['runs'][0]['release']} |" in text
