"""The Ray executor on a local 2-worker cluster: the in-process counts exactly; a killed worker's shard reruns."""

from __future__ import annotations

import functools
import os

import pytest

from property_tests.extras import need  # noqa: E402

pytestmark = pytest.mark.needs_extra("ray")   # absent: skipped (failed under SPECSIM_REQUIRE_EXTRAS=1)
ray = need("ray")

from specsim.campaign.executors import InProcess, Ray  # noqa: E402
from specsim.campaign.run import run_campaign  # noqa: E402
from tests.campaign import test_campaign  # noqa: E402
from tests.campaign.test_campaign import CASES, SHARD_TRIALS, counts, dies_once, verdicts  # noqa: E402


@pytest.fixture
def local_ray():
    ray.cloudpickle.register_pickle_by_value(test_campaign)  # Ray's workers need not import tests/
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_two_ray_workers_count_exactly_what_one_process_counts_even_when_one_is_killed(tmp_path, local_ray):
    common = dict(quick=True, cases=CASES, shard_trials=SHARD_TRIALS, progress=False)
    here = run_campaign("torch", [0], InProcess(), **common)
    out = run_campaign("torch", [0], Ray(), out_dir=str(tmp_path / "campaign"),
                       work=functools.partial(dies_once, str(tmp_path), CASES[1], 2), **common)
    assert "0_v32-topp_2" in os.listdir(tmp_path)                  # that shard's worker did die
    assert out.run["executor"] == "ray" and out.run["cluster"]["CPU"] == 2 and out.run["shards"] == 8
    assert counts(out.tallies) == counts(here.tallies)          # nothing lost, nothing counted twice
    assert verdicts(out.results[0]) == verdicts(here.results[0])
