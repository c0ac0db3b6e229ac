"""Tree mutants × suite seeds: is each tree mutant killed by its named check at every seed?

For every mutant of ``specsim.mutants.zoo.TREE`` whose named check (``killed_by``) is an L1-trees
pattern, and every suite seed, runs that check with injected noise and on its black-box twin
(``specsim.conformance.core.black_box.BlackBox``: no injected noise, so the pattern's exact law is tested), and
names the first failing pattern of the whole pattern list with injected noise (the check a
``specsim mutants`` hunt would report). With ``--correct`` it also runs the correct torch device
through L1-trees and L3-trees at each seed.

    python tools/tree_mutant_seeds.py --seeds 0-19            # the mutant table (full-size law tests)
    python tools/tree_mutant_seeds.py --seeds 0-19 --correct   # and the correct device's groups

Cells: ``K`` killed by the named check, ``-`` survived it; a second letter ``b`` for the black box.
Exit status 1 if any mutant survives its named check at any seed, or the correct device fails.
"""

from __future__ import annotations

import argparse
import sys
import time


def _seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def mutant_row(mutant, seeds: list[int], quick: bool) -> tuple[list[str], list[str]]:
    """(cells, first killers) of one mutant over the seeds."""
    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.trees.patterns import pattern_checks
    from specsim.conformance.core.black_box import BlackBox
    device = mutant.make()
    cells, firsts = [], []
    for seed in seeds:
        ctx = Context(seed=seed, quick=quick)
        injected = pattern_checks(device, ctx, only=mutant.killed_by)
        black = pattern_checks(BlackBox(device), ctx, only=mutant.killed_by)
        every = pattern_checks(device, ctx)
        first = next((r.name for r in every if r.status in ("fail", "error")), "-")
        cells.append(("K" if any(r.status == "fail" for r in injected) else "-")
                     + ("b" if any(r.status == "fail" for r in black) else "-"))
        firsts.append(first.removeprefix("L1/trees/pattern/"))
    return cells, firsts


def correct_rows(seeds: list[int], quick: bool) -> bool:
    """Print one line per seed; whether any check failed or errored."""
    from devices.torch_device import make_cpu_device
    from specsim.conformance.run.runner import Context
    from specsim.conformance.checks.trees.statistical import tree_statistical_group
    from specsim.conformance.checks.trees.l1 import tree_l1_group
    device, failed = make_cpu_device(), False
    for seed in seeds:
        ctx = Context(seed=seed, quick=quick)
        start = time.perf_counter()
        l1 = tree_l1_group(device, ctx)
        middle = time.perf_counter()
        l3 = tree_statistical_group(device, ctx)
        end = time.perf_counter()
        bad = [f"{r.name}: {r.status}" for r in l1 + l3 if r.status not in ("pass", "not_supported")]
        failed |= bool(bad)
        print(f"seed {seed:2d}: L1-trees {sum(r.status == 'pass' for r in l1)}/{len(l1)} pass "
              f"({middle - start:.1f} s), L3-trees {sum(r.status == 'pass' for r in l3)}/{len(l3)} pass "
              f"({end - middle:.1f} s)" + (f"; {bad}" if bad else ""), flush=True)
    return failed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="0-19", help="suite seeds: ranges and lists, e.g. 0-19 or 0,3,7")
    p.add_argument("--quick", action="store_true", help="quick sizes (400 law samples instead of 4000)")
    p.add_argument("--correct", action="store_true", help="also run the correct torch device's L1-trees and L3-trees")
    p.add_argument("--only", default=None, help="comma-separated mutant ids (default: every TREE mutant)")
    args = p.parse_args(argv)
    from specsim.mutants.zoo import TREE
    seeds = _seeds(args.seeds)
    chosen = [m for m in TREE if args.only is None or m.id in args.only.split(",")]
    mutants = [m for m in chosen if m.killed_by.startswith("L1/trees/pattern/")]
    for m in chosen:
        if m not in mutants:    # its named check is an edge or a random case: specsim mutants judges it
            print(f"{m.id}: named check {m.killed_by} is not a pattern; not in this table")
    width = max((len(m.id) for m in mutants), default=len("mutant"))
    print(f"{'mutant':<{width}}  {'named check':<41}  " + " ".join(f"{s:>2}" for s in seeds)
          + "  first failing pattern")
    survived = False
    for m in mutants:
        cells, firsts = mutant_row(m, seeds, args.quick)
        survived |= any(c != "Kb" for c in cells)
        named = m.killed_by.removeprefix("L1/trees/pattern/")
        print(f"{m.id:<{width}}  {named:<41}  " + " ".join(cells) + "  " + ", ".join(sorted(set(firsts))), flush=True)
    failed = correct_rows(seeds, args.quick) if args.correct else False
    return 1 if survived or failed else 0


if __name__ == "__main__":
    sys.exit(main())
