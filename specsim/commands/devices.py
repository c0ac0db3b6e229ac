"""``specsim devices``: every known device, whether it loads, and what it declares."""

from __future__ import annotations

HELP = "list known devices: availability (and why not), capabilities, load errors"


def add_arguments(p):
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _caps(c) -> str:
    modes = [m for m in ("greedy", "draft_probs", "point_proposals", "top_k", "top_p") if getattr(c, m)]
    noise = ["injected"] if c.injected_noise else []
    if c.rng != "none":
        noise.append(f"rng={c.rng}")
    return f"{'+'.join(noise)}; {','.join(modes)}; K<={c.max_k}; V<={c.max_vocab_size}; {','.join(c.dtypes)}"


def _described(device) -> str:
    """A loaded device's column: the engine release it runs (a field adapter's ``engine``), then its capabilities."""
    engine = getattr(device, "engine", None)
    return (f"{engine}: " if engine else "") + _caps(device.capabilities)


def run(args) -> int:
    import json

    from devices.registry import survey

    rows = survey()
    if args.json:
        print(json.dumps([{"name": a.entry.name, "target": a.entry.target, "origin": a.entry.origin,
                           "available": a.device is not None, "error": a.error,
                           "engine": getattr(a.device, "engine", None),
                           "capabilities": a.device.capabilities.to_json() if a.device else None} for a in rows], indent=1))
        return 0
    table = [("name", "available", "origin", "capabilities / why not")]
    for a in rows:
        table.append((a.entry.name, "yes" if a.device else "no", a.entry.origin,
                      _described(a.device) if a.device else a.error))
    w = [max(len(r[i]) for r in table) for i in range(3)]
    for r in table:
        print(f"{r[0]:<{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")
    return 0
