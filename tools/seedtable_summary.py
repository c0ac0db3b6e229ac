"""Condense one or more ``seedtable.json`` files (``specsim mutants --seeds ... --out DIR``) into one
Markdown table: a row per mutant and mode, how many suite seeds killed it, and by which checks
(``specsim.mutants.seedtable.summary_rows``, the table ``specsim mutants --seeds ... --record FILE``
writes for the docs).

    python tools/seedtable_summary.py DIR1/seedtable.json [DIR2/seedtable.json ...]
"""

from __future__ import annotations

import json
import sys

from specsim.mutants.seedtable import summary_rows, verdict_line


def main(paths: list[str]) -> int:
    docs = [json.load(open(p)) for p in paths]
    print("| mutant | mode | suite seeds | by |\n|---|---|---|---|")
    for doc in docs:
        print("\n".join("| " + " | ".join(row) + " |" for row in summary_rows(doc)))
    for doc in docs:
        print(f"\n`{' '.join(doc['command'])}`: {verdict_line(doc)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
