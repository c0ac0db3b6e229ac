"""Condense one or more ``seedtable.json`` files (``specsim mutants --seeds ... --out DIR``) into the
compact Markdown table docs/statistics.md shows: a row per mutant and mode, how many suite seeds
killed it, and by which checks.

    python tools/seedtable_summary.py DIR1/seedtable.json [DIR2/seedtable.json ...]
"""

from __future__ import annotations

import json
import sys
from collections import Counter


def rows(doc: dict) -> list[str]:
    out = []
    for r in doc["rows"] + [dict(c, mutant=f"correct {c.get('device', doc.get('base', ''))}".strip())
                            for c in doc.get("correct", [])]:
        cells = r["cells"]
        correct = r["mutant"].startswith("correct")
        if correct:   # a correct device's cell counts its checks' statuses
            good = sum(not (c["counts"].get("fail", 0) or c["counts"].get("error", 0)) for c in cells)
            checks = sum(c["counts"].get("pass", 0) for c in cells) // max(1, len(cells))
            by = Counter()
            verdict = f"passes {good}/{len(cells)} ({checks} checks passing a seed)"
        else:
            killed = [c for c in cells if c.get("check") and c.get("status") in ("fail", "error")]
            by = Counter(c["check"].split("/", 1)[1] if "/" in c["check"] else c["check"] for c in killed)
            verdict = f"killed {len(killed)}/{len(cells)}"
        named = ", ".join(f"`{k}`" + (f" ×{n}" if n != len(cells) else "") for k, n in by.most_common(3))
        out.append(f"| {r['mutant']} | {r['mode']} | {verdict} | {named or '—'} |")
    return out


def main(paths: list[str]) -> int:
    docs = [json.load(open(p)) for p in paths]
    print("| mutant | mode | suite seeds | by |\n|---|---|---|---|")
    for doc in docs:
        print("\n".join(rows(doc)))
    for doc in docs:
        seeds = doc["seeds"]
        command = list(doc["command"])
        if "--out" in command:
            command[command.index("--out") + 1] = "DIR"
        print(f"\n`{' '.join(command)}`: seeds {seeds[0]}–{seeds[-1]}, {len(doc['survivors'])} surviving "
              f"(mutant, seed) judgement(s), {len(doc['false_fails'])} false fail(s).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
