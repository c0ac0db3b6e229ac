"""The statistics machinery: the false-fail budget's split (``alpha``), L3-statistical's trial design
(``l3_design``), the run-wide plan over every statistical test (``plan``, with its command line), trial shards,
tallies and per-case verdicts.

It imports ``cases`` and ``core`` of the conformance suite, nothing above them.
"""
