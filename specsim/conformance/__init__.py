"""The conformance suite: which observations a run makes and what they add up to.

``runner`` runs the groups (``GROUPS``: L1 exact, L2 RNG contracts, L3 statistics, input rules,
capabilities) in isolated processes and gives the verdict of SPEC §10; ``stat_plan`` splits the run's
false-fail budget over every statistical test; ``capabilities`` holds a device to what it declares,
both ways; ``waivers`` and ``vendor_waivers`` are a vendor's expected failures; ``proposers`` is the
same discipline for a drafter (``specsim proposer``). Single observations are judged by ``specsim.judge``.
"""
