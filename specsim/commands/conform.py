"""``specsim conform``: run every conformance layer against a device."""

from __future__ import annotations

import os
import sys

HELP = "run the conformance layers against a device; exit 0 iff no check fails or errors"


def add_arguments(p):
    p.add_argument("--device", default="torch", help="registered name or 'module:attr' (default: torch)")
    p.add_argument("--out", default=None, help="directory for conformance.json (and reports)")
    p.add_argument("--seed", type=int, default=0, help="suite seed; case seeds derive from it (default 0)")
    p.add_argument("--alpha", type=float, default=1e-3, help="family false-fail budget of the statistical layer")
    p.add_argument("--groups", default=None, help="comma-separated group names (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes; for testing the harness, not for a verdict")


def _table(results) -> str:
    rows = [("check", "layer", "status", "detail")]
    for r in results:
        rows.append((r.name, r.layer, r.status, (r.detail.splitlines() or [""])[0][:70]))
    w = [max(len(row[i]) for row in rows) for i in range(3)]
    return "\n".join(f"{a:<{w[0]}}  {b:<{w[1]}}  {c:<{w[2]}}  {d}" for a, b, c, d in rows)


def run(args) -> int:
    from devices.registry import DeviceLoadError, load
    from specsim.conformance.runner import Context, available_groups, document, run_conformance, write_json_atomic

    try:
        device = load(args.device)
    except DeviceLoadError as e:
        print(f"specsim conform: {e}", file=sys.stderr)
        return 3
    groups = args.groups.split(",") if args.groups else None
    unknown = set(groups or []) - set(available_groups())
    if unknown:
        print(f"specsim conform: --groups: unknown {sorted(unknown)}; known: {sorted(available_groups())}", file=sys.stderr)
        return 2
    ctx = Context(seed=args.seed, alpha_family=args.alpha, quick=args.quick)
    results = run_conformance(device, ctx, groups)
    doc = document(args.device, device, ctx, results)
    print(_table(results))
    s = doc["summary"]
    print(f"\n{device.name}: {s['pass']} pass, {s['fail']} fail, {s['not_supported']} not supported, {s['error']} error")
    if args.out:
        write_json_atomic(os.path.join(args.out, "conformance.json"), doc)
        print(f"wrote {os.path.join(args.out, 'conformance.json')}")
    return 0 if doc["passed"] else 1
