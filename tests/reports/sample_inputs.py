"""Small hand-made report inputs: two devices' conformance.json, a mutants.json, simulation JSON.

``HOSTILE`` text (a script tag, an img with onerror, a table-breaking pipe,
TeX that matplotlib cannot parse) is planted in every place input text
reaches the report, so the escaping tests see it everywhere; a check name
carries the TeX too, since check names reach the figures' titles.
"""

from __future__ import annotations

import json
import os

HOSTILE = '<script>alert("pwned")</script><img src=x onerror=alert(1)>|x $\\frac{1}{ $'  # and TeX that does not parse


def conformance_doc(device: str, *, broken: bool = False) -> dict:
    checks = [
        {"name": "L1/injected/full/case-0", "layer": "L1", "status": "pass"},
        {"name": "L1/injected/full/case-1", "layer": "L1", "status": "fail" if broken else "pass",
         "detail": f"token 3 != 4 {HOSTILE}" if broken else ""},
        {"name": "L2/determinism", "layer": "L2", "status": "pass"},
        {"name": "input/top_p-zero", "layer": "input", "status": "not_supported", "detail": "top_p not declared"},
        {"name": "L3/v8-hetero/r0/pos0", "layer": "L3", "status": "pass", "p_value": 0.42, "alpha": 1e-5, "n": 2000,
         "statistic": 3.1, "detectable_tv": 0.05, "seed": 11,
         "extra": {"observed": [510, 490, 600, 400], "expected_probs": [0.25, 0.25, 0.3, 0.2], "position": 0}},
        {"name": "L3/v8-hetero/r0/pos1", "layer": "L3", "status": "fail" if broken else "pass",
         "p_value": 1e-9 if broken else 0.7, "alpha": 1e-5, "n": 1000, "statistic": 50.0, "detectable_tv": 0.06,
         "seed": 11, "extra": {"worst": [{"cell": 2, "observed": 400.0, "expected": 300.0, "z": 5.8},
                                         {"cell": 0, "observed": 200.0, "expected": 250.0, "z": -3.1}]}},
        {"name": "L3/v8-hetero/r0/accepted", "layer": "L3", "status": "pass", "p_value": 0.3, "alpha": 1e-5,
         "n": 2000, "statistic": 1.0, "seed": 11,
         "extra": {"expected_law": [0.2, 0.3, 0.5], "observed": [390, 610, 1000]}},
    ]
    if broken:
        checks.append({"name": "L3/tex $\\frac{1}{ $/pos2", "layer": "L3", "status": "fail", "p_value": 1e-7,
                       "alpha": 1e-5, "n": 1000, "seed": 11,
                       "extra": {"observed": [700, 300], "expected_probs": [0.5, 0.5], "position": 2}})
        checks.append({"name": "L1-keyed/crashed", "layer": "L1", "status": "error",
                       "detail": f"the group's process was killed by SIGABRT {HOSTILE}"})
    counts = {s: sum(c["status"] == s for c in checks) for s in ("pass", "fail", "not_supported", "error")}
    return {
        "schema_version": 1,
        "device": {"spec": device, "name": device + (HOSTILE if broken else ""), "capabilities": {}},
        "environment": {"specsim": "0.1.0", "python": "3.11.7", "numpy": "2.0", "platform": "Linux-test",
                        "machine": "x86_64"},
        "seed": 0, "alpha_family": 1e-3, "summary": counts,
        "passed": counts["fail"] == 0 and counts["error"] == 0, "checks": checks,
        "run": {"isolation": "subprocess", "complete": True, "command": ["specsim", "conform", "--device", device]},
    }


MUTANTS = [
    {"name": "residual-not-clamped", "models": "vLLM #4212 " + HOSTILE, "killed": True,
     "killer": "L3/v8-hetero/r0/pos1", "p_value": 1e-12},
    {"name": "bonus-from-draft-row", "models": "seed 004", "killed": False, "detail": "survived every check"},
]

SIMULATION = {"acc_counts": [3331, 1200], "acc_rate": 0.2539, "num_drafts": 8918, "num_draft_tokens": 17836,
              "mean_acceptance_length": 1.508, "emitted_tokens": 13449, "name": "eagle-k2"}

SWEEP = {"name": "temperature sweep", "temperature_sweep": [
    {"temperature": t, "draft_probs": flag, "mean_acceptance_length": al}
    for t, flag, al in [(0.0, False, 2.37), (0.0, True, 2.37), (1.0, False, 2.09), (1.0, True, 2.21),
                        (2.0, False, 1.01), (2.0, True, 2.66)]]}


def write_inputs(root, *, devices=("torch",), broken: tuple = (), with_sims: bool = True) -> str:
    """Write the inputs under ``root`` (one subdirectory per device); returns ``root``."""
    root = str(root)
    for dev in devices:
        os.makedirs(os.path.join(root, dev), exist_ok=True)
        with open(os.path.join(root, dev, "conformance.json"), "w") as f:
            json.dump(conformance_doc(dev, broken=dev in broken), f)
    with open(os.path.join(root, "mutants.json"), "w") as f:
        json.dump(MUTANTS, f)
    if with_sims:
        with open(os.path.join(root, "simulate.json"), "w") as f:
            json.dump(SIMULATION, f)
        with open(os.path.join(root, "sweep.json"), "w") as f:
            json.dump(SWEEP, f)
    return root
