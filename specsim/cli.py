"""The ``specsim`` command: ``DESCRIPTION`` and the commands of ``specsim.commands``, grouped by audience."""

from __future__ import annotations

import argparse
import sys
import textwrap

from devices.registry import UnresolvedTarget, resolve
from specsim import __version__
from specsim.commands import AUDIENCES

DESCRIPTION = ("specsim: the reference and conformance kit for speculative decoding. Exit codes: 0 success; "
               "1 a check failed or errored (or a mutant survived); 2 bad usage or bad input; 3 the device "
               "could not be loaded; `specsim conform` adds 4 PARTIAL, 5 QUICK and 6 INCOMPLETE (see its --help).")
EPILOG = "Run 'specsim COMMAND --help' for a command's options."
WIDTH = 100


def _command(name: str, module_name: str):
    """``(HELP, add_arguments, run)`` of a command's module; a module absent from this checkout gives a
    command that says so when run (exit 2), never one dropped silently."""
    try:
        return tuple(resolve(f"{module_name}:{attr}", f"command {name!r}") for attr in ("HELP", "add_arguments", "run"))
    except UnresolvedTarget as e:
        if e.missing != module_name:
            raise
        why = f"its module {module_name} is missing from this checkout"
        return f"MISSING: {why}", lambda p: None, _missing_command(name, why)


def _overview(helps: dict[str, str]) -> str:
    """The commands under their audience's heading, one line each."""
    indent = " " * (max(map(len, helps)) + 4)

    def line(name: str) -> str:
        return textwrap.fill(helps[name], WIDTH, initial_indent=f"  {name}".ljust(len(indent)),
                             subsequent_indent=indent)
    return "\n\n".join(f"{heading}:\n" + "\n".join(map(line, commands)) for heading, commands in AUDIENCES.items())


def build_parser() -> argparse.ArgumentParser:
    commands = {name: _command(name, module_name) for audience in AUDIENCES.values()
                for name, module_name in audience.items()}
    parser = argparse.ArgumentParser(
        prog="specsim", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG,
        description=f"{textwrap.fill(DESCRIPTION, WIDTH)}\n\n{_overview({n: c[0] for n, c in commands.items()})}")
    parser.add_argument("--version", action="version", version=f"specsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", help="one of the commands above")
    for name, (help_text, add_arguments, run) in commands.items():
        p = sub.add_parser(name, description=help_text)   # no help=: the overview above lists it, grouped
        add_arguments(p)
        p.set_defaults(_run=run)
    return parser


def _missing_command(name: str, why: str):
    """A listed command whose module is absent: an error when run (exit 2), never dropped silently."""
    def run(args) -> int:
        print(f"specsim {name}: {why}; reinstall specsim (pip install -e .) or check out the whole tree",
              file=sys.stderr)
        return 2
    return run


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from devices.registry import DeviceLoadError
    try:
        return int(args._run(args) or 0)
    except DeviceLoadError as e:  # one place for every command's "the device could not be loaded"
        print(f"specsim {args.command}: {e}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
