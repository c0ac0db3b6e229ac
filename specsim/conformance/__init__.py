"""The conformance suite: which observations a run makes and what they add up to.

``runner`` runs the groups (``GROUPS``: L1 exact, L2 RNG contracts, L3 statistics, input rules,
capabilities) in isolated processes and gives the verdict of SPEC §10; ``stat_plan`` splits the run's
false-fail budget over every statistical test; ``capabilities`` holds a device to what it declares,
both ways; ``waivers`` and ``vendor_waivers`` are a vendor's expected failures; ``proposers`` is the
same discipline for a drafter (``specsim proposer``). Single observations are judged by ``specsim.judge``.
"""

_VENDOR_API = {"run_conformance": "specsim.conformance.runner", "verdict_of": "specsim.conformance.runner",
               "Context": "specsim.conformance.runner", "GROUPS": "specsim.conformance.runner",
               "CheckResult": "specsim.conformance.results", "BlackBox": "specsim.conformance.black_box"}
__all__ = sorted(_VENDOR_API)


def __getattr__(name: str):
    # Lazily: the runner imports every room below it, and a plain ``import specsim.conformance`` (a room's
    # own import of its package) must stay cheap and free of circles.
    if name in _VENDOR_API:
        import importlib
        return getattr(importlib.import_module(_VENDOR_API[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
