"""The mutant zoo: devices that wrap a correct one and add one realistic bug each.

Every mutant names the real report it models (research/vllm.md §4 numbers,
research/stats.md §3.3 rows). Three kinds of wrapping, by where the bug lives:

* **input** — the bug is in what reaches the kernel (temperature applied
  twice, a row offset without ``+i``): the wrapped device runs on altered input;
* **noise** — the bug is in the randomness (a coin reused across positions,
  noise keyed by batch row, the global RNG): the mutant makes its noise
  (the keyed Philox of SPEC §5.2, then the bug) and injects it into the wrapped
  device;
* **inside** — the bug is inside the step (the residual, the comparison, the
  count): the wrapped device validates the input and runs, then the step is
  recomputed by ``walk`` from the same noise with one hook switched to the bug.

A mutant keeps the wrapped device's capabilities, so the conformance suite
runs the same checks on it as on the correct device.

>>> sorted(MUTANTS)[:3]
['accept-inclusive', 'bonus-last-coin', 'bonus-wrong-row']
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices._validate import validate
from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch, VerifyOutput
from specsim.mutants.walk import Hooks, keyed_noise, walk


class Mutant:
    """Base: wraps ``base``; subclasses override one of ``batch_in``, ``noise_for`` or ``hooks``."""

    id = "mutant"
    bug = ""
    models = ""
    hooks: Hooks | None = None  # an "inside" bug

    def __init__(self, base):
        self.base = base
        self.name = f"mutant:{self.id}"
        self.capabilities = base.capabilities

    def batch_in(self, batch: VerifyBatch) -> VerifyBatch:
        return batch

    def noise_for(self, batch: VerifyBatch, noise: Noise | None) -> Noise | None:
        return noise

    def output(self, batch: VerifyBatch, out: VerifyOutput) -> VerifyOutput:
        return out

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        if self.hooks is not None:
            noise = noise if noise is not None else _keyed(batch)
            self.base.verify(batch, noise)  # validates the input exactly as the correct device does
            return walk(batch, noise, self.hooks)  # noise is not None here: bad input raised above
        validate(batch, noise)  # SPEC §6 on what the caller gave, before the bug rewrites it
        inner = self.batch_in(batch)
        return self.output(batch, self.base.verify(inner, self.noise_for(inner, noise)))


def _keyed(batch: VerifyBatch) -> Noise | None:
    """SPEC §5.2 noise; None when the batch is too broken to key (the wrapped device then raises its error)."""
    try:
        return keyed_noise(batch)
    except Exception:
        return None


def _sampled(batch: VerifyBatch) -> np.ndarray:
    return np.asarray(batch.temperature) > 0


# --------------------------------------------------------------------------- inside the step

def _inside(mid, bug, models, **hook):
    return type(mid.title().replace("-", ""), (Mutant,), {"id": mid, "bug": bug, "models": models,
                                                          "hooks": Hooks(**hook)})


INSIDE = [
    _inside("residual-target", "recovered token drawn from target_probs instead of max(target - draft, 0)",
            "stats.md §3.3 'residual = target'; vllm-ascend #7807 (vllm.md §4 #30: recovered from the wrong residual)",
            residual="target"),
    _inside("residual-swapped", "residual max(draft - target, 0): operands swapped",
            "stats.md §3.3 'residual swapped'; FlashInfer's q/p letter swap (stats.md §1.7)", residual="swapped"),
    _inside("residual-unnormalised", "residual sampled by inverse CDF without renormalising, 'last valid id' fallback",
            "FlashInfer #923 (sum(probs) < u returned an impossible value; stats.md §1.7, §3.3)",
            residual="unnormalised"),
    _inside("residual-next-row", "residual read from the next position's target row",
            "stats.md §3.3 'residual from the next position's row' (row offset bug)", residual_row_shift=1),
    _inside("accept-inclusive", "acceptance u <= ratio: u = 0 accepts a zero-probability draft",
            "vLLM PR #23803 and SGLang #35771 (vllm.md §4 #10, #11)", accept_inclusive=True),
    _inside("count-after-rejection", "num_accepted counts accepting coins after the first rejection",
            "vLLM PR #2658 / #10604 (vllm.md §4 #4: accepted.sum() instead of the prefix)",
            count_after_rejection=True),
    _inside("bonus-last-coin", "bonus token drawn with the last acceptance coin (coin reused)",
            "SGLang PR #7207 / #7231 (vllm.md §4 #35: same coin for acceptance and the final sample)",
            bonus_from_last_coin=True),
    _inside("greedy-tie-high", "greedy argmax ties go to the highest id",
            "SPEC §2 tie rule; argmax implementations that scan from the end (vllm.md §5, greedy ties)",
            greedy_tie_high=True),
    _inside("top-k-ties-dropped", "top-k keeps exactly k tokens (torch.topk), dropping boundary ties",
            "SPEC §2 ties rule vs topk-based masks; vllm-ascend top-k/top-p divergence (vllm.md §4 #32)",
            top_k_exact=True),
]


# --------------------------------------------------------------------------- input bugs

class TemperatureTwice(Mutant):
    id = "temperature-twice"
    bug = "logits divided by T before the kernel, which divides again"
    models = "stats.md §3.3 'temperature applied twice'; vllm-ascend PR #6685 API drift (vllm.md §4 #31)"

    def batch_in(self, batch):
        T = np.asarray(batch.temperature, dtype=np.float64)
        scale = np.where(T > 0, T, 1.0)[np.repeat(np.arange(batch.batch_size), batch.num_draft_tokens + 1)]
        logits = np.asarray(batch.target_logits)
        return replace(batch, target_logits=(logits / scale[:, None]).astype(logits.dtype))


class TargetParamsDefault(Mutant):
    id = "target-params-default"
    bug = "target probabilities computed with default parameters (T = 1, no top-k/top-p)"
    models = "vLLM #9834 -> PR #10198 (vllm.md §4 #3: scorer used T=1, top_p=1)"

    def batch_in(self, batch):
        T = np.asarray(batch.temperature)
        return replace(batch, temperature=np.where(T > 0, 1.0, T).astype(T.dtype),
                       top_k=np.zeros_like(batch.top_k), top_p=np.ones_like(batch.top_p))


class TopPDroppedTarget(Mutant):
    id = "top-p-one-side"
    bug = "top-p applied to the draft only; the target side ignores it"
    models = "transformers#47932 pattern (stats.md §1.9, §3.3 'top-p missing on the target side')"

    def batch_in(self, batch):
        return replace(batch, top_p=np.ones_like(batch.top_p))


class DraftProbsIgnored(Mutant):
    id = "draft-probs-ignored"
    bug = "draft_probs dropped: drafts verified as point proposals (lossless, lower acceptance)"
    models = "vLLM #40149 (stats.md §1.9: draft model path passes draft_probs=None)"

    def batch_in(self, batch):
        return replace(batch, draft_probs=None)


class BonusWrongRow(Mutant):
    id = "bonus-wrong-row"
    bug = "bonus token drawn from the last draft position's row instead of the bonus row"
    models = "stats.md §3.3 'bonus drawn from p_k instead of p_{k+1}'"

    def batch_in(self, batch):
        cu = batch.request_offsets()
        logits = np.array(batch.target_logits, copy=True)
        i = np.flatnonzero(np.asarray(batch.num_draft_tokens) > 0)
        bonus = cu[i + 1] + i
        logits[bonus] = logits[bonus - 1]
        return replace(batch, target_logits=logits)


class RowOffset(Mutant):
    id = "row-offset"
    bug = "target row of draft j of request i read at cu[i] + j (the +i for bonus rows forgotten)"
    models = "vLLM PR #14645 (vllm.md §4 #7: rows of another request in mixed batches)"

    def batch_in(self, batch):
        cu = batch.request_offsets()
        k = np.asarray(batch.num_draft_tokens)
        req = np.repeat(np.arange(batch.batch_size), k + 1)
        j = np.arange(len(req)) - (cu[req] + req)
        logits = np.asarray(batch.target_logits)
        return replace(batch, target_logits=logits[np.minimum(cu[req] + j, len(logits) - 1)])


class PlaceholderLastId(Mutant):
    id = "placeholder-last-id"
    bug = "placeholder draft -1 used as an index: reads the last vocabulary entry"
    models = "vllm-ascend #10045 -> PR #10043 and vLLM PR #46533 (vllm.md §4 #12, #13)"

    def batch_in(self, batch):
        ids = np.asarray(batch.draft_token_ids)
        if not (ids == PLACEHOLDER_TOKEN_ID).any():
            return batch
        ids = np.where(ids == PLACEHOLDER_TOKEN_ID, batch.vocab_size - 1, ids)
        probs = batch.draft_probs
        if probs is not None:  # the row of a placeholder holds zeros; read as a real row it is the last one-hot
            probs = np.array(probs, copy=True)
            ph = np.flatnonzero(np.asarray(batch.draft_token_ids) == PLACEHOLDER_TOKEN_ID)
            probs[ph] = 0
            probs[ph, -1] = 1
        return replace(batch, draft_token_ids=ids, draft_probs=probs)


# --------------------------------------------------------------------------- noise bugs

class NoiseMutant(Mutant):
    """Makes the noise itself (keyed Philox, then the bug) and injects it."""

    def bend(self, batch: VerifyBatch, noise: Noise) -> Noise:
        return noise

    def noise_for(self, batch, noise):
        noise = noise if noise is not None else _keyed(batch)
        return None if noise is None else self.bend(batch, noise)


class CoinReusedAcrossPositions(NoiseMutant):
    id = "coin-reused-positions"
    bug = "one acceptance coin reused at every position of a request"
    models = "stats.md §3.3 'same uniform reused at all positions'; vLLM PR #47386 -> #54282 (vllm.md §4 #15)"

    def bend(self, batch, noise):
        cu = batch.request_offsets()
        k = np.asarray(batch.num_draft_tokens)
        first = np.repeat(cu[:-1], k)
        return Noise(np.asarray(noise.uniforms)[first], noise.exponentials)


class NoiseSharedAcrossRequests(NoiseMutant):
    id = "noise-shared-requests"
    bug = "every request of the batch uses request 0's random streams"
    models = "vLLM #17498 -> PR #17929 and #9441 (vllm.md §4 #2, #8: streams shared or mixed between requests)"

    def noise_for(self, batch, noise):
        if noise is None:  # request 0's key for everyone: identical coins and races
            if batch.seeds is None or batch.positions is None:
                return _keyed(batch)
            return _keyed(replace(batch, seeds=np.full_like(batch.seeds, batch.seeds[0]),
                                  positions=np.full_like(batch.positions, batch.positions[0])))
        e = np.repeat(np.asarray(noise.exponentials)[:1], batch.batch_size, axis=0)
        return Noise(noise.uniforms, e)


class KeyedByRow(Mutant):
    id = "keyed-by-row"
    bug = "own randomness keyed by batch row (curand subsequence = row) instead of the request seed"
    models = "FlashInfer ChainSpeculativeSampling curand_init(seed, row, offset) (stats.md §1.7; vllm.md §4 #38)"

    def batch_in(self, batch):
        if batch.seeds is None:
            return batch
        return replace(batch, seeds=np.arange(batch.batch_size, dtype=np.uint64))


class PositionIgnored(Mutant):
    id = "noise-reused-steps"
    bug = "own randomness keyed by seed only: every step of a request replays the same noise"
    models = "SPEC §5.2 key rule; vLLM #6038 -> PR #6034 (vllm.md §4 #1: generator state not advanced/propagated)"

    def batch_in(self, batch):
        if batch.positions is None:
            return batch
        return replace(batch, positions=np.zeros_like(batch.positions))


class GlobalRng(NoiseMutant):
    id = "global-rng"
    bug = "own randomness drawn from the global numpy RNG instead of the keyed streams"
    models = "vLLM MRV1 draft sampling TODO and #6038 (vllm.md §4 #1, #38: global RNG, seeds ignored)"

    def noise_for(self, batch, noise):
        if noise is not None or _keyed(batch) is None:  # bad input: the wrapped device raises its error
            return noise
        u = np.random.random(int(np.sum(batch.num_draft_tokens)))
        e = np.random.exponential(size=(batch.batch_size, batch.vocab_size)) + 1e-300
        return Noise(u, e)


# --------------------------------------------------------------------------- output bugs

class PaddedSlotsMismatch(Mutant):
    id = "padded-slots-mismatch"
    bug = "padded slots of requests with K_i < max K counted as mismatches: bonus dropped"
    models = "vllm-gaudi (vllm.md §4 #28, and #27 PR #593: padding treated as a mismatch)"

    def output(self, batch, out):
        k = np.asarray(batch.num_draft_tokens)
        ids = np.array(out.output_token_ids, copy=True)
        acc = np.array(out.num_accepted, copy=True)
        hit = np.flatnonzero((k > 0) & (k < k.max()) & (acc == k) & _sampled(batch))
        ids[hit, k[hit]] = PLACEHOLDER_TOKEN_ID
        acc[hit] -= 1
        return VerifyOutput(ids, acc)


MUTANT_CLASSES = INSIDE + [
    TemperatureTwice, TargetParamsDefault, TopPDroppedTarget, DraftProbsIgnored, BonusWrongRow, RowOffset,
    PlaceholderLastId, CoinReusedAcrossPositions, NoiseSharedAcrossRequests, KeyedByRow, PositionIgnored,
    GlobalRng, PaddedSlotsMismatch,
]
MUTANTS = {cls.id: cls for cls in MUTANT_CLASSES}
"""Every mutant by id."""


def make_mutants(base) -> list[Mutant]:
    """One instance of every mutant, each wrapping ``base``."""
    return [cls(base) for cls in MUTANT_CLASSES]
