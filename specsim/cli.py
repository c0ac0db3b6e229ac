"""The ``specsim`` command. Exit codes: 0 success; 1 a check failed or errored
(or a mutant survived); 2 bad usage or bad input; 3 the device could not be loaded."""

from __future__ import annotations

import argparse
import importlib
import sys

from specsim import __version__
from specsim.commands import COMMANDS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="specsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"specsim {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, module_name in COMMANDS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:
                raise
            missing = f"its module {module_name} is missing from this checkout"
            p = sub.add_parser(name, help=f"MISSING: {missing}", description=missing)
            p.set_defaults(_run=_missing_command(name, missing))
            continue
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
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
