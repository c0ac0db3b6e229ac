"""Subcommands of ``specsim``: one module each, with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.

Listed here by name so ``specsim --help`` imports nothing heavy: a module is
imported only when its command runs (or when help for it is built). Two audiences,
two lists: a vendor holds a device to SPEC with the first; the second keeps specsim
itself honest (its mutants, calibration, campaigns, proposers, engine, benchmarks).
"""

VENDOR_COMMANDS = {
    "devices": "specsim.commands.devices",
    "conform": "specsim.commands.conform",
    "replay": "specsim.commands.replay",
    "report": "specsim.commands.report",
    "field": "specsim.commands.field",
}

MAINTAINER_COMMANDS = {
    "mutants": "specsim.commands.mutants",
    "calibrate": "specsim.commands.calibrate",
    "campaign": "specsim.commands.campaign",
    "proposer": "specsim.commands.proposer",
    "simulate": "specsim.commands.simulate",
    "bench": "specsim.commands.bench",
}

COMMANDS = {**VENDOR_COMMANDS, **MAINTAINER_COMMANDS}
"""Every command → its module."""

AUDIENCES = {
    "to hold a device to SPEC": VENDOR_COMMANDS,
    "to check specsim itself": MAINTAINER_COMMANDS,
}
"""The headings of ``specsim --help``, each over its commands."""
