"""The statistics machinery: the run-wide plan that splits the false-fail budget over every statistical test
(``plan``), trial shards, tallies and per-case verdicts.

It imports ``cases`` and ``core`` of the conformance suite, nothing above them.
"""
