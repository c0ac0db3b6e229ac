"""Subcommands of ``specsim``: one module each, with ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.

Listed here by name so ``specsim --help`` imports nothing heavy: a module is
imported only when its command runs (or when help for it is built).
"""

COMMANDS = {
    "devices": "specsim.commands.devices",
    "conform": "specsim.commands.conform",
    "mutants": "specsim.commands.mutants",
    "calibrate": "specsim.commands.calibrate",
    "simulate": "specsim.commands.simulate",
    "bench": "specsim.commands.bench",
    "report": "specsim.commands.report",
    "campaign": "specsim.commands.campaign",
    "field": "specsim.commands.field",
    "proposer": "specsim.commands.proposer",
}
