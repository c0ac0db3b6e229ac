#!/usr/bin/env python3
"""Print the README's commands (the ```sh blocks under "## The two commands"), so that
CI runs them verbatim and cannot drift from what a newcomer reads.

    python3 .ci/readme_commands.py 1     # the first command: install and conform
    python3 .ci/readme_commands.py 2     # the second: install the test extra and run the tests

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import pathlib
import re
import sys

SECTION = "## The two commands"


def readme_commands(readme: str) -> list[str]:
    """The shell blocks of the README's "The two commands" section, in order.

    >>> readme_commands("# x\\n## The two commands\\nA:\\n```sh\\necho a\\n```\\n```sh\\necho b\\n```\\n## Next\\n")
    ['echo a', 'echo b']
    """
    start = readme.index(SECTION) + len(SECTION)
    end = readme.find("\n## ", start)
    section = readme[start:] if end < 0 else readme[start:end]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S)]


def main(argv: list[str]) -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    commands = readme_commands((root / "README.md").read_text(encoding="utf-8"))
    if len(argv) != 2 or not argv[1].isdigit() or not 1 <= int(argv[1]) <= len(commands):
        print(f"usage: {argv[0]} N   (1..{len(commands)})", file=sys.stderr)
        return 2
    print(commands[int(argv[1]) - 1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
