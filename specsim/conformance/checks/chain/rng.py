"""Layer L2: the randomness contracts, checked exactly (no statistics).

For a device drawing its own randomness: the same call twice gives the same
tokens; a request's tokens do not depend on its batch neighbours or its
row; the seed and the position both matter; the global RNGs (python, numpy,
torch) are neither read nor advanced. For every device: injected noise is
the only randomness (two calls with the same noise agree).
"""

from __future__ import annotations

import random
import sys

import numpy as np

from specsim.conformance.core.calls import Malformed, Refusal, call, formed, malformed_result, missing, refused
from specsim.conformance.core.results import CheckResult
from specsim.testing.batches import BatchSpec, random_batch, random_noise, select_requests
from specsim.testing.seeds import case_seed

SPEC = BatchSpec(batch=24, max_k=4, vocab_size=64, greedy_fraction=0.1, placeholder_fraction=0.0)


def _global_states() -> dict:
    states = {"python random": random.getstate(), "numpy global": np.random.get_state()[1].tobytes()}
    torch = sys.modules.get("torch")
    if torch is not None:
        states["torch cpu"] = torch.get_rng_state().numpy().tobytes()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            states["torch cuda"] = torch.cuda.get_rng_state().numpy().tobytes()
    return states


def _rows(out) -> list[list[int]]:
    ids, acc = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    return [ids[i, : int(acc[i]) + 1].tolist() for i in range(len(acc))]


def _check(name, fn) -> CheckResult:
    ok, detail = fn()
    return CheckResult(name, "L2", "pass" if ok else "fail", detail)


def rng_group(device, ctx) -> list[CheckResult]:
    results: list[CheckResult] = []
    try:
        return _rng_checks(device, ctx, results)
    except Malformed as e:  # every check so far, then the one that saw the malformed output
        return results + [malformed_result("L2", e)]
    except Refusal as r:  # every check so far, then the refusal, judged against the declaration
        return results + [refused("L2/refused", "L2", r, device.capabilities)]


def _rng_checks(device, ctx, results: list) -> list[CheckResult]:
    caps = device.capabilities
    spec = SPEC if caps.draft_probs else BatchSpec(**{**SPEC.__dict__, "draft_probs": False})
    why = missing(caps, spec.needs - {"top_k", "top_p", "greedy"}, vocab_size=spec.vocab_size, max_k=0)
    if why:
        return [CheckResult("L2", "L2", "not_supported", why)]
    spec = BatchSpec(**{**spec.__dict__, "max_k": min(spec.max_k, caps.max_k),
                        "greedy_fraction": spec.greedy_fraction if caps.greedy else 0.0,
                        "top_k_fraction": spec.top_k_fraction if caps.top_k else 0.0,
                        "top_p_fraction": spec.top_p_fraction if caps.top_p else 0.0,
                        "dtype": "float64" if "float64" in caps.dtypes else caps.dtypes[0]})
    seed = case_seed(ctx.seed, "L2")
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, spec)

    if caps.injected_noise:
        noise = random_noise(rng, batch)
        pair, problem = call("L2/injected-noise-is-the-only-randomness", "L2",
                             lambda: (formed(device, batch, noise), formed(device, batch, noise)), caps)
        results.append(problem or _check("L2/injected-noise-is-the-only-randomness",
                                         lambda: (_rows(pair[0]) == _rows(pair[1]),
                                                  "two calls with the same injected noise agree" if _rows(pair[0]) == _rows(pair[1])
                                                  else "two calls with the same injected noise differ")))
    if caps.rng == "none":
        results.append(CheckResult("L2/own-randomness", "L2", "not_supported", "device draws no randomness of its own"))
        return results

    before = _global_states()
    first, problem = call("L2/determinism", "L2", lambda: formed(device, batch), caps)
    after = _global_states()
    if problem:
        return results + [problem]
    changed = [k for k in before if before[k] != after.get(k)]
    results.append(CheckResult("L2/global-rng-untouched", "L2", "fail" if changed else "pass",
                               f"verify advanced the global RNG: {', '.join(changed)} (vLLM #38, #1)" if changed
                               else "python, numpy and torch global RNG states unchanged by verify"))
    # Re-seeding the global RNGs must not change anything either (a device reading them would).
    random.seed(12345)
    np.random.seed(12345)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(12345)
    second = formed(device, batch)
    results.append(_check("L2/determinism", lambda: (
        _rows(first) == _rows(second),
        "same seeds and positions, same tokens, even after re-seeding the global RNGs" if _rows(first) == _rows(second)
        else f"same call gave different tokens: first differing request "
             f"{next(i for i, (a, b) in enumerate(zip(_rows(first), _rows(second))) if a != b)}")))

    order = np.arange(batch.batch_size)[::-1]
    reversed_batch, _ = select_requests(batch, order)
    rev = _rows(formed(device, reversed_batch))[::-1]
    singles = [_rows(formed(device, select_requests(batch, [i])[0]))[0] for i in range(0, batch.batch_size, 3)]
    base = _rows(first)
    bad = [i for i in range(batch.batch_size) if rev[i] != base[i]]
    bad += [i for j, i in enumerate(range(0, batch.batch_size, 3)) if singles[j] != base[i]]
    results.append(CheckResult("L2/batch-invariance", "L2", "fail" if bad else "pass",
                               f"request(s) {sorted(set(bad))[:5]} changed when the batch was reversed or split "
                               "(randomness keyed by batch row? vLLM #7, #38)" if bad
                               else "each request's tokens are the same reversed and alone"))

    random_requests = [i for i in range(batch.batch_size) if batch.temperature[i] > 0]
    for what, field in (("seed", "seeds"), ("position", "positions")):
        values = getattr(batch, field)
        shifted = values + (np.uint64(1) if field == "seeds" else 1)
        other = _rows(formed(device, type(batch)(**{**batch.__dict__, field: shifted})))
        same = sum(other[i] == base[i] for i in random_requests)
        results.append(CheckResult(f"L2/{what}-sensitivity", "L2",
                                   "fail" if random_requests and same == len(random_requests) else "pass",
                                   f"{len(random_requests) - same} of {len(random_requests)} sampled requests changed "
                                   f"when every {what} moved by one" + (" — the key ignores it" if same == len(random_requests) else "")))
    return results
