"""Campaigns: the statistical layer split into shards, run anywhere, merged exactly.

A *shard* is ``(suite seed, case, shard index)``: its trials, drafts, request
seeds and positions derive from that alone
(``specsim.conformance.stats.shards.run_shard``), and it returns integer
counts (``Tally``). Merging is exact addition in shard order, so the verdict
is identical whatever ran the shards — this process, local processes, a Ray
cluster — and in whatever order they finished.

* ``tasks`` — what a shard is (``ShardTask``), the profiles (the suite's
  cases, the sign-off cases at a real vocabulary) and the worker function;
* ``store`` — one JSON per finished shard, written atomically, so an
  interrupted campaign resumes without redoing finished shards;
* ``executors`` — ``inprocess`` (the default), ``processes``, ``ray``;
* ``run`` — plan → tasks → executor → merge → the L3 verdicts, with a time
  estimate after the first shards; and the calibration campaign over seeds.

Commands: ``specsim campaign`` (the L3 group or the sign-off profile) and
``specsim calibrate --executor ...``.
"""
