"""``specsim devices [SPEC]``: every known device, whether it loads, and what it declares; or one device checked
before a run: whether it loads, its declaration, and whether it declares SPEC §10's core profile."""

from __future__ import annotations

HELP = ("list known devices: availability (and why not), capabilities, load errors; with SPEC, check one device "
        "before a run: it loads, what it declares, whether it declares the core profile (exit 0; 1 the core is "
        "not declared; 3 it does not load)")


def add_arguments(p):
    p.add_argument("spec", nargs="?", metavar="SPEC",
                   help="one device to check: a registered name or 'module:attr' (a module of the current "
                        "directory is found too)")
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
    if args.spec:
        return check_one(args.spec, as_json=args.json)
    return list_all(as_json=args.json)


def list_all(as_json: bool = False) -> int:
    """Every known device: whether it loads (its error, said once, when not) and what it declares."""
    import json

    from devices.registry import survey

    rows = survey()
    if as_json:
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


def examined(spec: str) -> dict:
    """One device checked before a run: ``loaded`` (and ``error``, the load error in full), its name, engine and
    capabilities, what it lacks of the core profile (empty: declared) and which optional profiles it declares."""
    from devices.registry import DeviceLoadError, entries, load, load_error_text
    from specsim.conformance.verdict.profiles import CORE, core_lacking, optional_profiles

    known = entries()
    out = {"spec": spec, "target": known[spec].target if spec in known else spec,
           "origin": known[spec].origin if spec in known else "module:attr"}
    try:
        device = load(spec)
    except DeviceLoadError as e:
        return {**out, "loaded": False, "error": load_error_text(e)}
    caps = device.capabilities
    return {**out, "loaded": True, "error": None, "name": device.name, "engine": getattr(device, "engine", None),
            "capabilities": caps.to_json(), "declares": _caps(caps), "core": {"spec": CORE.spec,
            "lacking": core_lacking(caps)}, "profiles": optional_profiles(caps)}


def report_lines(doc: dict) -> list[str]:
    """``examined``'s findings as a person reads them."""
    head = f"device spec {doc['spec']!r} ({doc['origin']}: {doc['target']})"
    if not doc["loaded"]:
        return [head, f"  loads:    no: {doc['error']}"]
    lacking = doc["core"]["lacking"]
    core = ("declared" if not lacking else f"NOT declared: it lacks {'; '.join(lacking)}")
    profiles = [name for name, on in doc["profiles"].items() if on]
    lines = [head, f"  loads:    yes, as {doc['name']!r}" + (f" ({doc['engine']})" if doc["engine"] else ""),
             f"  declares: {doc['declares']}",
             f"  core profile (SPEC §10: {doc['core']['spec']}): {core}",
             f"  optional profiles declared: {', '.join(profiles) or 'none'}"]
    if lacking:
        lines.append("  a device that does not declare the core cannot pass (SPEC §10): declare it in its "
                     "Capabilities (devices/protocol.py), then run the suite")
    lines.append(f"  next: specsim conform --device {doc['spec']} --out out/")
    return lines


def check_one(spec: str, as_json: bool = False) -> int:
    """Print one device's check; exit 0 it loads and declares the core, 1 it lacks the core, 3 it does not load."""
    import json
    import sys

    doc = examined(spec)
    if as_json:
        print(json.dumps(doc, indent=1))
    else:
        print("\n".join(report_lines(doc)), file=sys.stdout if doc["loaded"] else sys.stderr)
    if not doc["loaded"]:
        return 3
    return 1 if doc["core"]["lacking"] else 0
