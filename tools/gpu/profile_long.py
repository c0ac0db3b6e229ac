"""Where L1-long's time goes on a device: per call, the device's own time, the judge's, and kernel compilations.

    python3 tools/gpu/profile_long.py --device triton [--calls 3000] [--limit-s 400] [--out FILE.json]

Runs the group's planned calls in this process (as ``specsim conform --groups L1-long`` does) with a timer around
each ``verify`` and Triton's cache directory watched (a fresh ``TRITON_CACHE_DIR`` unless one is set): a call that
adds kernels to the cache compiled them. Prints a table by (V, noise, mode) and totals; stops at ``--limit-s``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the checkout


def _cache_entries(path: str) -> int:
    try:
        return len(os.listdir(path))
    except FileNotFoundError:
        return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="triton")
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-s", type=float, default=400.0)
    ap.add_argument("--passes", type=int, default=1, help="run the plan this many times (the second is warm)")
    ap.add_argument("--out")
    args = ap.parse_args()
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    cache = os.environ["TRITON_CACHE_DIR"]

    from devices.registry import load
    from specsim.conformance.checks.chain import long_run as lr
    from specsim.conformance.core.calls import ask

    device = load(args.device)
    plan = lr.plan(device.capabilities, args.seed, args.calls)
    report = {"device": args.device, "calls_planned": len(plan), "passes": []}
    for n in range(args.passes):
        rows, kept, started = [], {}, time.perf_counter()
        for p in plan:
            if time.perf_counter() - started > args.limit_s:
                break
            t0 = time.perf_counter()
            batch, noise = lr.build(p)
            t1 = time.perf_counter()
            before = _cache_entries(cache)
            got = ask(device, batch, noise)
            t2 = time.perf_counter()
            compiled = _cache_entries(cache) - before
            lr._judge(lr._Check("x", p.noise), p, batch, noise, got, kept, args.seed)
            t3 = time.perf_counter()
            rows.append(dict(index=p.index, V=p.vocab_size, B=p.batch, K=p.max_k, dtype=p.dtype, noise=p.noise,
                             mode=p.mode, point=p.point, build_s=t1 - t0, device_s=t2 - t1, judge_s=t3 - t2,
                             compiled=compiled))
        wall = time.perf_counter() - started
        by = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])
        for r in rows:
            b = by[(r["V"], r["noise"], r["mode"])]
            b[0] += 1
            b[1] += r["device_s"]
            b[2] += r["compiled"]
            b[3] += r["device_s"] if r["compiled"] else 0.0
        top = sorted(by.items(), key=lambda kv: -kv[1][1])[:25]
        print(f"pass {n + 1}: {len(rows)} of {len(plan)} calls in {wall:.1f} s; device {sum(r['device_s'] for r in rows):.1f} s, "
              f"building {sum(r['build_s'] for r in rows):.1f} s, judging {sum(r['judge_s'] for r in rows):.1f} s, kernels compiled {sum(r['compiled'] for r in rows)} "
              f"in {sum(1 for r in rows if r['compiled'])} calls taking {sum(r['device_s'] for r in rows if r['compiled']):.1f} s")
        print(f"{'V':>7} {'noise':>9} {'mode':>12} {'calls':>6} {'device s':>9} {'compiles':>8} {'in compiling calls s':>21}")
        for (V, noise, mode), (c, s, k, ks) in top:
            print(f"{V:>7} {noise:>9} {mode:>12} {c:>6} {s:>9.2f} {k:>8} {ks:>21.2f}")
        slow = sorted(rows, key=lambda r: -r["device_s"])[:15]
        print("slowest calls:", [(r["index"], r["V"], r["B"], r["K"], r["dtype"], r["noise"], r["mode"],
                                  round(r["device_s"], 2), r["compiled"]) for r in slow])
        report["passes"].append({"wall_s": wall, "rows": rows})
    names = collections.Counter(f[:-5] for d in os.listdir(cache) for f in os.listdir(os.path.join(cache, d))
                                if f.endswith(".json") and not f.startswith("__grp__"))
    print("kernels compiled, by name:", dict(names.most_common()))
    report["compiled_by_name"] = dict(names)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f)


if __name__ == "__main__":
    main()
