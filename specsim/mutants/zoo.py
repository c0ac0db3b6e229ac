"""The mutant zoo: one realistic bug each, every one citing the report it models in ``docs/bugs.md``.

Four kinds, by where the bug lives and what the mutant changes:

* **inside** (``INSIDE``) — the bug is in the device's own code (the
  residual, the comparison, the count, the race, the emission row): a
  ``specsim.mutants.source.SourceMutant`` edits a copy of the torch device's
  module (``devices/torch_sampling.py`` or ``devices/torch_device.py``) and
  the device is built from the copy; ``KERNEL`` mutants do the same to the
  Triton kernels under the interpreter (``--base triton-interpret``);
* **input** — the bug is in what reaches the kernel (temperature applied
  twice, a row offset without ``+i``): the mutant rewrites the batch
  (``batch_in``) and the unmodified wrapped device runs on it;
* **noise** — the bug is in the randomness (a coin reused across positions,
  noise keyed by batch row, the global RNG): the mutant makes the noise
  (SPEC §5.2's keyed Philox, then the bug; or rewrites seeds/positions) and
  the unmodified wrapped device consumes it;
* **output** — the bug is in the bookkeeping after the step (padding counted
  as a mismatch): the mutant rewrites the wrapped device's output.

Input, noise and output mutants wrap whatever device they are given;
source mutants are of one device (``SourceMutant.device``) and run only when
it is the base. Every mutant keeps its device's capabilities, so the
conformance suite runs the same checks on it as on the correct device.

>>> sorted(MUTANTS)[:3]
['accept-inclusive', 'accept-inclusive-past-64', 'accept-inclusive-when-mixed']
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from devices.validate import validate
from devices.triton_device import KernelConfig
from devices.protocol import PLACEHOLDER_TOKEN_ID, Noise, VerifyBatch, VerifyOutput
from specsim.mutants.source import Edit, SourceMutant, interpreted_triton
from specsim.mutants.walk import keyed_noise


class Mutant:
    """Base: wraps ``base``; subclasses override one of ``batch_in``, ``noise_for`` or ``output``."""

    id = "mutant"
    bug = ""
    models = ""
    killed_by = ""  # the check (name prefix) that kills it: tests/stats/test_mutants.py holds it to that
    killed_in_black_box_by = ""  # the check that kills its black-box twin, where killed_by's group cannot run it

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

TS, TD = "devices.torch_sampling", "devices.torch_device"


def _torch(mid, bug, models, module, *edits, killed_by=""):
    """A mutant of the torch device's own code: ``edits`` are (anchor, replacement) pairs in ``module``."""
    return SourceMutant(mid, bug, models, module, tuple(Edit(a, r) for a, r in edits), killed_by=killed_by)


_TOP_P_CUT = "    cut = (cumulative < top_p.to(decision_dtype).unsqueeze(-1)).sum(dim=-1).clamp(max=vocab_size - 1)\n"
_TOP_P_AT = ("    at = lambda values, index: values.gather(-1, index.unsqueeze(-1)).squeeze(-1)\n"
             "    p = top_p.to(decision_dtype)\n")
"""SPEC §2's top-p cut in ``top_p_kept``, and what the approximate cuts below read it with."""

INSIDE = [
    _torch("residual-target", "recovered token drawn from target_probs instead of max(target - draft, 0)",
           "docs/bugs.md #30 (recovered from the wrong residual), #29", TS,
           ("weights = torch.where(subtract.unsqueeze(1), residual, target_rows)", "weights = target_rows"),
           killed_by="L1/injected/point-mixed"),
    _torch("residual-swapped", "residual max(draft - target, 0): operands swapped",
           "docs/bugs.md C1 (FlashInfer's q/p letters)", TS,
           ("(target_rows - draft_rows).clamp_min(0)", "(draft_rows - target_rows).clamp_min(0)"),
           killed_by="L1/injected/full-mixed"),
    _torch("residual-unnormalised", "emission by inverse CDF over the unnormalised weights, 'last valid id' fallback",
           "docs/bugs.md #39 (FlashInfer #923: sum(probs) < u returned an impossible value)", TS,
           ("    score = weights.to(decision_dtype) / exponentials.to(decision_dtype)\n",
            "    u = 1 - torch.exp(-exponentials[..., :1].to(decision_dtype))  # a uniform from the noise\n"
            "    cdf = weights.to(decision_dtype).cumsum(dim=-1)  # not divided by its total: the bug\n"
            "    ids = torch.arange(weights.shape[-1], device=weights.device)\n"
            "    last_valid = torch.where(weights > 0, ids, torch.zeros_like(ids)).amax(dim=-1)\n"
            "    return torch.where((cdf > u).any(dim=-1), (cdf <= u).sum(dim=-1), last_valid)\n"),
           killed_by="L1/injected/full-mixed"),
    _torch("residual-next-row", "residual read from the next position's target row",
           "docs/bugs.md C2 (row offset, the family of #7)", TD,
           ("target_rows = ts.target_probs(emit_logits, rows, **filters)",
            "target_rows = ts.target_probs(target_logits[layout.starts + arange + num_accepted + subtract.long()],"
            " rows, **filters)"),
           killed_by="L1/injected/full-mixed"),
    _torch("accept-inclusive", "acceptance u <= ratio: u = 0 accepts a zero-probability draft",
           "docs/bugs.md #10 (vLLM PR #23803), #11 (SGLang #35771)", TS,
           ("return uniforms < t_x", "return uniforms <= t_x"),
           killed_by="L1/edge/u0-zero-target-full"),
    _torch("empty-residual-token-zero", "an empty residual (no max(t − d, 0) > 0: the draft row covers the target "
           "row) raced as it is: the all-zero row's first id, token 0, emitted whatever t holds",
           "docs/bugs.md #64 (vLLM 0.33.0's V1 and Model Runner V2 recovery kernels)", TS,
           ("    return torch.where(empty, target_rows, weights)",
            "    first = torch.zeros_like(weights)\n"
            "    first[:, 0] = 1.0  # 'the argmax of an all-zero residual': id 0\n"
            "    return torch.where(empty, first, weights)"),
           killed_by="L1/edge/empty-residual"),
    _torch("count-after-rejection", "num_accepted counts accepting coins after the first rejection",
           "docs/bugs.md #4 (vLLM PR #2658 / #10604: accepted.sum() instead of the prefix)", TS,
           ("return torch.minimum(rejected_at.amin(dim=1), num_draft_tokens)", "return (valid & accept).sum(dim=1)"),
           killed_by="L1/injected/full-mixed"),
    _torch("bonus-last-coin", "bonus token drawn by inverse CDF with the last acceptance coin (coin reused)",
           "docs/bugs.md #35 (SGLang PR #7207 / #7231: same coin for acceptance and the final sample)", TD,
           ("        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)\n",
            "        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)\n"
            "        if num_tokens:\n"
            "            bonus = (num_accepted == num_draft_tokens) & (num_draft_tokens > 0)\n"
            "            last_coin = uniforms[(layout.starts + num_draft_tokens - 1).clamp(0, num_tokens - 1)]\n"
            "            by_coin = (target_rows.to(torch.float64).cumsum(dim=-1) <= last_coin.unsqueeze(1)).sum(dim=-1)\n"
            "            token = torch.where(bonus, by_coin.clamp(max=vocab_size - 1), token)\n"),
           killed_by="L1/injected/full-mixed"),
    _torch("greedy-tie-high", "greedy argmax ties go to the highest id",
           "docs/bugs.md C6 (argmax scanning from the end; SPEC §2 tie rule)", TS,
           ("    return logits.argmax(dim=-1)", "    return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)"),
           killed_by="L1/edge/greedy-argmax-tie"),
    _torch("top-k-ties-dropped", "top-k keeps exactly k tokens (torch.topk), dropping boundary ties",
           "docs/bugs.md C6 and #32 (vllm-ascend top-k/top-p masks differ from upstream)", TS,
           ("    return ~active | (z >= kth)",
            "    rank = torch.argsort(torch.argsort(-z, dim=-1, stable=True), dim=-1, stable=True)\n"
            "    return ~active | (rank < top_k.unsqueeze(-1))"),
           killed_by="L1/edge/top-k-boundary-ties"),
    # Size classes: correct at the small shapes of L1-injected, wrong past a size or threshold.
    _torch("sampler-bias-16-bit-ids", "logit_bias gathered at id mod 2^16 (a 16-bit column index into the bias "
           "table): right up to V = 65536, the ids past it biased as ids 0, 1, …",
           "docs/bugs.md #14 (an index narrower than the sizes real kernels run at)", TS,
           ("    return z if s.logit_bias is None else z + s.logit_bias[request].to(z.dtype)",
            "    if s.logit_bias is None:\n        return z\n"
            "    column = torch.arange(z.shape[-1], device=z.device) % 65536   # a 16-bit id\n"
            "    return z + s.logit_bias[request][..., column].to(z.dtype)"),
           killed_by="L1-sampler/edge/order-penalty-meets-bias/canonical/V151936"),
    _torch("top-k-lane-capped", "top-k's k-th value taken from each lane's four largest entries (lane = id mod "
           "2048), as a one-read top-k select without its overflow check: a row whose largest entries share a lane "
           "past V = 8192 keeps too many", "docs/bugs.md C6 (top-k candidates that drop entries)", TS,
           ("    kth = sorted_z.gather(-1, (top_k.clamp(1, vocab_size) - 1).unsqueeze(-1))",
            "    lanes = torch.nn.functional.pad(z, (0, (-vocab_size) % 2048), value=-torch.inf).unflatten(-1, (-1, 2048))\n"
            "    capped = lanes.topk(min(4, lanes.shape[-2]), dim=-2).values.flatten(-2).sort(dim=-1, descending=True)"
            ".values\n"
            "    kth = capped.gather(-1, (top_k.clamp(1, capped.shape[-1]) - 1).unsqueeze(-1))"),
           killed_by="L1/sizes/filters-V"),
    _torch("second-launch-row-offset", "batches above 256 requests run in two launches; the second's emission rows "
           "are offset by its local request index, not the global one",
           "docs/bugs.md #14 (vLLM PR #48055: wrong decisions in large batches), #7 (row offsets)", TD,
           ("emit_logits = target_logits[layout.starts + arange + num_accepted]",
            "launch_row = arange % 256 if batch > 256 else arange  # the second launch counts from 0 again\n"
            "    emit_logits = target_logits[layout.starts + launch_row + num_accepted]"),
           killed_by="L1/sizes/batch-B257"),
    _torch("residual-threshold-shortcut", "a residual of mass below 1e-6 is treated as empty: emission falls back "
           "to the target row",
           "docs/bugs.md #17 (vLLM PR #46665: the residual wrong when target ≈ draft)", TS,
           ("empty = ~(weights > 0).any(dim=1, keepdim=True)",
            "empty = weights.sum(dim=1, keepdim=True) < 1e-6  # fast path: 'no residual left'"),
           killed_by="L1/sizes/residual-tv1e-07"),
    _torch("softmax-fp16", "float32 target softmax evaluated in float16 (a reduced-precision intermediate behind "
           "the float32 declaration)", "docs/bugs.md #44 (DeepSpec#31: one side in 16-bit), #45", TS,
           ("    return torch.softmax(z, dim=-1)",
            "    low = z.to(torch.float16) if z.dtype == torch.float32 else z  # 'half is enough for a softmax'\n"
            "    return torch.softmax(low, dim=-1).to(z.dtype)"),
           killed_by="L1/injected/"),
    _torch("softmax-in-16-bit", "16-bit logits' softmax taken in their own dtype (the temperature-scaled row cast back "
           "to float16/bfloat16 for the softmax, whose probabilities stay 16-bit)",
           "docs/bugs.md #59 (keras-hub #1548, SGLang #773: sampling probabilities in the logits' 16-bit dtype)", TS,
           ("    z = scale_by_temperature(logits, rows.temperature)\n    if rows.min_p",
            "    z = scale_by_temperature(logits, rows.temperature)\n"
            "    narrow = logits.dtype if logits.dtype in SIXTEEN_BIT else z.dtype  # 'softmax in the logits' dtype'\n"
            "    if rows.min_p"),
           ("    if not (use_top_k or use_top_p):\n        probs = softmax(z)\n",
            "    if not (use_top_k or use_top_p):\n        probs = softmax(z.to(narrow)).to(z.dtype)\n"),
           ("        probs = softmax(z)\n        if use_top_p:",
            "        probs = softmax(z.to(narrow)).to(z.dtype)\n        if use_top_p:"),
           killed_by="L1-16bit/chain/"),
    _torch("temperature-in-16-bit", "16-bit logits divided by the temperature in place, in their own dtype, and "
           "widened to float32 only after", "docs/bugs.md #60 (metaseq #247: `div_(temperature)` on half logits; "
           "vllm-rbln #621)", TS,
           ("    z = widened(logits)\n    return z / temperature.to(z.dtype).unsqueeze(-1)",
            "    return widened(logits.div_(temperature.unsqueeze(-1)))   # in place: no float32 copy of the row"),
           killed_by="L1-16bit/chain/"),
    _torch("residual-in-16-bit", "the residual max(t − d, 0) formed in the 16-bit logits' dtype (target and draft "
           "rows cast down first)", "docs/bugs.md #61 (xLLM #906: probabilities stored in the logits' bf16; vLLM "
           "#53630: verifying in the head dtype)", TD,
           ("        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)",
            "        narrow = emit_logits.dtype if emit_logits.dtype in ts.SIXTEEN_BIT else target_rows.dtype\n"
            "        token = ts.race(ts.residual_weights(target_rows.to(narrow), None if draft_rows is None else "
            "draft_rows.to(narrow), draft_ids, subtract), exponentials)"),
           killed_by="L1-16bit/chain/"),
    # --- §2's top-p where the classes are nearly equal (an approximate cut: a pivot search that settles within 10%)
    _torch("top-p-short-of-p", "top-p leaves out a last class nearly equal (within 10%) to the one before it once "
           "the mass before it is within 10% of p: a kept set short of p", "docs/bugs.md #65 (vLLM 0.33.0's Triton "
           "top-p kernels keep a set of mass 0.679 at p = 0.7)", TS,
           (_TOP_P_CUT, _TOP_P_CUT + _TOP_P_AT +
            "    before = (cut - 1).clamp(min=0)\n"
            "    near = (at(sorted_probs, cut) > 0.9 * at(sorted_probs, before)) & (at(cumulative, before) >= 0.9 * p)\n"
            "    cut = torch.where((cut > 0) & near, before, cut)\n"),
           killed_by="L1/edge/top-p-reaches-p"),
    _torch("top-p-past-p", "top-p keeps one more class nearly equal (within 10%) to its last once the mass kept is "
           "within 10% past p: a kept set past the smallest that reaches p", "docs/bugs.md #65 (the same "
           "approximation the other way)", TS,
           (_TOP_P_CUT, _TOP_P_CUT + _TOP_P_AT +
            "    after = (cut + 1).clamp(max=vocab_size - 1)\n"
            "    near = (at(sorted_probs, after) > 0.9 * at(sorted_probs, cut)) & (at(cumulative, cut) < 1.1 * p)\n"
            "    cut = torch.where((cut < vocab_size - 1) & near, after, cut)\n"),
           killed_by="L1/edge/top-p-reaches-p"),
    # --- a rule kept on the path a few requests take and lost on a large batch's (SPEC 1.9's edges at batch sizes)
    _torch("race-tie-last-past-64", "the race's ties go to the largest id once the batch holds more than 64 "
           "requests (a large-batch reduction keeping the last maximum)", "docs/bugs.md C16 (a rule kept only on "
           "the small-batch path; C6's tie rule)", TS,
           ("    return score.argmax(dim=-1)\n",
            "    if score.shape[0] > 64:\n"
            "        return score.shape[-1] - 1 - score.flip(-1).argmax(dim=-1)\n"
            "    return score.argmax(dim=-1)\n"),
           killed_by="L1/edge/top-k-boundary-ties/batches"),
    _torch("accept-inclusive-past-64", "acceptance u <= ratio once the batch holds more than 64 drafts: u = 0 accepts "
           "a zero-probability draft on the large-batch path only", "docs/bugs.md C16 (a rule kept only on the "
           "small-batch path; #10, #11's strictness)", TS,
           ("    return uniforms < t_x.to(DECISION_DTYPE) / d_x.to(DECISION_DTYPE)\n",
            "    ratio = t_x.to(DECISION_DTYPE) / d_x.to(DECISION_DTYPE)\n"
            "    return (uniforms <= ratio) if uniforms.numel() > 64 else (uniforms < ratio)\n"),
           killed_by="L1/edge/u0-zero-target-full/batches"),
    # --- a rule kept on a uniform batch's path and lost on a mixed batch's (SPEC 1.10's edges among filler requests)
    _torch("accept-inclusive-when-mixed", "acceptance u <= ratio when the batch also holds greedy requests (the "
           "mixed batch's kernel): u = 0 accepts a zero-probability draft there only", "docs/bugs.md C17 (a rule "
           "kept only on a uniform batch's path; #10, #11's strictness)", TD,
           ("        accept = ts.accepts(draft_token_ids, draft_probs, probs, uniforms)\n",
            "        accept = ts.accepts(draft_token_ids, draft_probs, probs, uniforms,\n"
            "                            coin=(lambda u, t, d: u <= t.double() / d.double()) if has_greedy else ts.coin_accepts)\n"),
           killed_by="L1/edge/u0-zero-target-full/mixed"),
    _torch("accept-inclusive-when-top-p-without-greedy", "acceptance u <= ratio when some request uses top-p and "
           "none is greedy (the kernel of that one mix): u = 0 accepts a zero-probability draft there only",
           "docs/bugs.md C17 (a rule kept only on a uniform batch's path, here lost on one mix of requests; #10, #11's "
           "strictness)", TD,
           ("        accept = ts.accepts(draft_token_ids, draft_probs, probs, uniforms)\n",
            "        accept = ts.accepts(draft_token_ids, draft_probs, probs, uniforms,\n"
            "                            coin=(lambda u, t, d: u <= t.double() / d.double())\n"
            "                            if use_top_p and not has_greedy else ts.coin_accepts)\n"),
           killed_by="L1/edge/u0-zero-target-full/mixed-top-p"),
    _torch("keyed-position-when-mostly-greedy", "on the keyed path of a batch of 16 greedy requests or more, over "
           "three quarters of it, every request's streams keyed at its position plus one (a kernel variant for mostly "
           "greedy batches that derives the round itself)", "docs/bugs.md C18 (a rule kept only on the injected-noise path), C17 (a path chosen by "
           "one mix of requests)", TD,
           ("            keyed = dict(seeds=torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                         positions=as_tensor(batch.positions, torch.int64))\n",
            "            greedy = int((np.asarray(batch.temperature) == 0).sum())\n"
            "            mostly_greedy = greedy >= 16 and 4 * greedy > 3 * batch.batch_size\n"
            "            keyed = dict(seeds=torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                         positions=as_tensor(batch.positions, torch.int64) + int(mostly_greedy))\n"),
           killed_by="L1/edge/"),
    _torch("keyed-position-past-32-in-16-bit", "on the keyed path of a batch of more than 32 requests with float16 or "
           "bfloat16 logits, every request's streams keyed at its position plus one (the 16-bit kernel variant for "
           "the device's own noise at large batches derives the round itself)", "docs/bugs.md C18 (a rule kept only "
           "on the injected-noise path), C16 (a rule kept only on the small-batch path)", TD,
           ("            keyed = dict(seeds=torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                         positions=as_tensor(batch.positions, torch.int64))\n",
            "            sixteen = np.dtype(batch.target_logits.dtype).itemsize == 2 and batch.batch_size > 32\n"
            "            keyed = dict(seeds=torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                         positions=as_tensor(batch.positions, torch.int64) + int(sixteen))\n"),
           killed_by="L1/edge/"),
    _torch("race-tie-last-when-some-filtered", "the race's ties go to the largest id when some but not all requests "
           "use top-k (the filtered kernel, run over every row, keeps the last maximum)", "docs/bugs.md C17 (a rule "
           "kept only on a uniform batch's path; C6's tie rule)", TD,
           ("        token = ts.race(ts.residual_weights(target_rows, draft_rows, draft_ids, subtract), exponentials)\n",
            "        weights = ts.residual_weights(target_rows, draft_rows, draft_ids, subtract)\n"
            "        token = ts.race(weights, exponentials)\n"
            "        if use_top_k and not bool(ts.uses_top_k(temperature, top_k, vocab_size).all()):\n"
            "            token = vocab_size - 1 - ts.race(weights.flip(-1), exponentials.flip(-1))\n"),
           killed_by="L1/edge/top-k-boundary-ties/mixed"),
]
"""The bugs inside the step, as edits of the torch device's own code (``specsim.mutants.source``)."""

TT = "devices.torch_tree"

TREE = [
    _torch("tree-sibling-order", "siblings tried in reverse node order (the links built from the last node)",
           "docs/bugs.md C7 (sibling links out of the drafter's order)", TT,
           ("    for n in range(len(parents)):            # node order is sibling order",
            "    for n in reversed(range(len(parents))):"),
           killed_by="L1/trees/pattern/rrs/with-replacement"),
    _torch("tree-residual-not-updated", "the next sibling meets the parent's target row, not the residual left "
           "by the rejected one", "docs/bugs.md #46 (EAGLE #20: the rejected sibling's value adjusted instead of "
           "subtracting the draft law)", TT,
           ("    return accepted, torch.where(update, w / torch.where(total > 0, total, torch.ones_like(total)), residual)",
            "    return accepted, residual"),
           killed_by="L1/trees/pattern/rrs/with-replacement"),
    _torch("tree-chain-row", "a node's siblings verified against the row before the first sibling (the chain's "
           "row arithmetic), not their parent's row", "docs/bugs.md #47 (TRT-LLM PR #13081, vLLM PR #17560: "
           "tree nodes given a chain's context)", TT,
           ("        target = probs[slot] if probs is not None else weights",
            "        target = probs[torch.where(sibling >= 0, links.node_row[sibling.clamp(min=0)] - 1, slot)] "
            "if probs is not None else weights"),
           killed_by="L1/trees/pattern/rrs/leaves-every-depth"),
    _torch("tree-sampled-as-greedy", "sampled tree requests verified greedily (argmax), temperature ignored",
           "docs/bugs.md #48 (SGLang #31214 / #37134: EAGLE tree verify silently greedy on HIP)", TT,
           ("    greedy = temperature == 0\n    row_request", "    greedy = temperature >= 0\n    row_request"),
           killed_by="L1/trees/pattern/rrs/with-replacement"),
    _torch("tree-thresholds-relaxed", "SGLang's tree sampling run at threshold_acc 0.5 whatever the batch asks "
           "(a relaxed acceptance presented as lossless)", "docs/bugs.md #49 (SGLang PR #7702 relaxed acceptance; "
           "verl-SpeCo PR #19: lossy acceptance configs entering silently)", "devices.torch_device",
           ("threshold_acc=float(batch.threshold_acc))", "threshold_acc=min(float(batch.threshold_acc), 0.5))"),
           killed_by="L1/trees/pattern/sglang/distinct"),
    # Sibling patterns: each shows only for one layout of siblings (a placeholder, a duplicate, per-sibling
    # rows, a leaf at the deepest level), killed at every suite seed by its constructed pattern.
    _torch("tree-keyed-coin-flat-node", "a keyed tree step reads node n's coin at the word of its flattened node "
           "(cu[i] + n), not at word n of its request's ACCEPT stream",
           "docs/bugs.md C15 (a stream indexed by the batch's layout, not the request's: #40's family)", TD,
           ("                num_nodes, batch.vocab_size, int(np.sum(batch.num_nodes)), int(np.max(batch.num_nodes)))\n",
            "                num_nodes, batch.vocab_size, int(np.sum(batch.num_nodes)), int(np.max(batch.num_nodes)))\n"
            "            total = int(np.sum(batch.num_nodes))   # the tree kernel walks the flattened nodes\n"
            "            wide, _ = torch_philox.step_noise(torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                                              as_tensor(batch.positions, torch.int64),\n"
            "                                              torch.full_like(num_nodes, total), 1)\n"
            "            node_request = torch.repeat_interleave(torch.arange(len(num_nodes)), num_nodes.cpu())\n"
            "            uniforms = wide.view(len(num_nodes), total)[node_request, torch.arange(total)].to(self.device)\n"),
           killed_by="L1/trees/keyed/"),
    _torch("tree-keyed-sglang-position-past-32", "on the keyed path of an sglang tree batch of more than 32 requests, "
           "every request's streams keyed at its position plus one (a kernel variant for the device's own noise at "
           "large batches that derives the round itself)", "docs/bugs.md C18 (a rule kept only on the injected-noise "
           "path, here §11's keys)", TD,
           ("                torch_philox.seeds_to_int64(batch.seeds).to(self.device), as_tensor(batch.positions, torch.int64),\n",
            "                torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                as_tensor(batch.positions, torch.int64) + int(batch.scheme == \"sglang\" and batch.batch_size > 32),\n"),
           killed_by="L1/trees/edge/"),
    _torch("tree-own-draws-threshold-acc-zero-as-off", "on the path drawing its own noise, an sglang tree batch's "
           "threshold_acc of 0 read as unset (1, lossless) — where 0 must accept the first sibling the target allows "
           "whatever the coin", "docs/bugs.md C18 (a rule kept only on the injected-noise path, here §11.4's "
           "threshold)", TD,
           ("            threshold_acc=float(batch.threshold_acc))",
            "            threshold_acc=float(batch.threshold_acc if noise is not None else batch.threshold_acc or 1.0))"),
           killed_by="L1/trees/edge/sglang-threshold-acc-zero/keyed"),
    _torch("tree-keyed-position-in-16-bit", "on the keyed path of a tree batch with float16 or bfloat16 logits, every "
           "request's streams keyed at its position plus one (the 16-bit tree kernel's variant for the device's own "
           "noise derives the round itself)", "docs/bugs.md C18 (a rule kept only on the injected-noise path, here "
           "§11's keys in one dtype)", TD,
           ("                torch_philox.seeds_to_int64(batch.seeds).to(self.device), as_tensor(batch.positions, torch.int64),\n",
            "                torch_philox.seeds_to_int64(batch.seeds).to(self.device),\n"
            "                as_tensor(batch.positions, torch.int64) + int(np.dtype(batch.target_logits.dtype).itemsize == 2),\n"),
           killed_by="L1/declared/keyed/variant/"),
    _torch("tree-sglang-placeholder-mass", "sglang's running sum A_k gathers a placeholder sibling's probability "
           "(the -1 id clamped to 0 reads t(0))", "docs/bugs.md #12 (a placeholder id read as a token: here into "
           "SGLang's running sum)", TT,
           ("    t_x = torch.where(real, _at(target, x), torch.zeros_like(running))",
            "    t_x = _at(target, x)  # x is already clamped to a valid id"),
           killed_by="L1/trees/pattern/sglang/placeholder-first"),
    _torch("tree-rrs-placeholder-resets", "rrs restarts the residual from the parent's row after a placeholder "
           "sibling (the placeholder taken as the end of a sibling group)", "docs/bugs.md C9 (padded sibling "
           "lists read as group boundaries)", TT,
           ("                                            coins, trying & ~greedy)\n",
            "                                            coins, trying & ~greedy)\n"
            "                residual = torch.where((trying & ~real).unsqueeze(1), target, residual)\n"),
           killed_by="L1/trees/pattern/rrs/placeholder-between"),
    _torch("tree-siblings-with-replacement", "every sibling verified against its first sibling's row (the parent's "
           "drafter row), though drafting without replacement gave each its own", "docs/bugs.md C10, #46 (the "
           "without-replacement rows EAGLE #20's fix masks)", TT,
           ("None if draft_probs is None else draft_probs[node]",
            "None if draft_probs is None else draft_probs[links.first_child[slot].clamp(min=0)]"),
           killed_by="L1/trees/pattern/rrs/without-replacement"),
    _torch("tree-duplicate-skipped", "a sibling repeating an earlier sibling's token is skipped as a placeholder "
           "(siblings assumed distinct, as a merged trie's are)", "docs/bugs.md C11 (duplicate siblings merged away)",
           TT,
           ("        residual, kept = target, torch.ones_like(target, dtype=torch.bool)\n",
            "        residual, kept = target, torch.ones_like(target, dtype=torch.bool)\n"
            "        seen = torch.zeros_like(kept)\n"),
           ("            x = x.clamp(min=0)\n",
            "            x = x.clamp(min=0)\n"
            "            tried = _at(seen, x)  # an earlier sibling's token: taken as already verified\n"
            "            seen = seen | ((torch.arange(seen.shape[1], device=x.device) == x.unsqueeze(1))\n"
            "                           & (trying & real).unsqueeze(1))\n"
            "            real = real & ~tried\n"),
           killed_by="L1/trees/pattern/rrs/duplicates"),
    _torch("tree-zero-sibling-past-64", "sglang's guard t(x) > 0 dropped once the level tries more than 64 requests' "
           "siblings: at threshold_single = 0 a zero-probability sibling is accepted on the large-batch path only",
           "docs/bugs.md C16 (a rule kept only on the small-batch path; SPEC §11.4's zero-probability guard)", TT,
           ("    accepted = trying & real & (t_x > 0) & ((t_x >= threshold_single) | (coin * threshold_acc < running))\n",
            "    accepted = trying & real & ((t_x > 0) | (t_x.shape[0] > 64)) & ((t_x >= threshold_single) | "
            "(coin * threshold_acc < running))\n"),
           killed_by="L1/trees/edge/sglang-threshold-single-zero/batches"),
    _torch("tree-zero-sibling-when-mixed", "sglang's threshold_single test without its guard t(x) > 0 when the batch "
           "also holds greedy requests (the mixed batch's kernel): at threshold_single = 0 a zero-probability sibling "
           "is accepted there only", "docs/bugs.md C17 (a rule kept only on a uniform batch's path; SPEC §11.4's "
           "zero-probability guard)", TT,
           ("                sampled, kept, running = sglang_try(target, kept, running, x, real, level_coin, trying & ~greedy,\n"
            "                                                    threshold_single, threshold_acc)\n",
            "                sampled, kept, running = sglang_try(target, kept, running, x, real, level_coin, trying & ~greedy,\n"
            "                                                    threshold_single, threshold_acc)\n"
            "                if bool(greedy.any()):\n"
            "                    sampled = sampled | (trying & ~greedy & real & (_at(target, x) >= threshold_single))\n"),
           killed_by="L1/trees/edge/sglang-threshold-single-zero/mixed"),
    _torch("tree-deepest-leaf", "the walk runs one level per draft depth (a chain's K positions), so a leaf "
           "accepted at the batch's deepest level never reaches its own row: its bonus comes from empty weights",
           "docs/bugs.md C12 (the level loop one short)", TT,
           ("    for depth in range(D + 1):", "    for depth in range(D):"),
           killed_by="L1/trees/pattern/rrs/with-replacement"),
    _torch("tree-sglang-inclusive", "SGLang's tree coin compared as written there, u·a <= A or t(x) >= "
           "threshold_single: u = 0 accepts a zero-probability sibling", "docs/bugs.md #11 (SGLang #35771: "
           "the inclusive coin <= prob_acc / threshold_acc)", TT,
           ("    accepted = trying & real & (t_x > 0) & ((t_x >= threshold_single) | (coin * threshold_acc < running))",
            "    accepted = trying & real & ((t_x >= threshold_single) | (coin * threshold_acc <= running))"),
           killed_by="L1/trees/edge/sglang-u0-zero-probability"),
    _torch("tree-softmax-in-16-bit", "a tree step's target probabilities kept in the 16-bit logits' dtype and its "
           "residuals formed in it (the rows cast down after the softmax; the draft rows cast to the residual's dtype)",
           "docs/bugs.md #63 (FlexFlow #29: SpecInfer's half-precision tree verification; the class of #59, #61)", TT,
           ("    probs = ts.target_probs(target_logits, rows, **filters).to(F64) if bool((~greedy).any()) else None",
            "    narrow = target_logits.dtype if target_logits.dtype in ts.SIXTEEN_BIT else F64  # 'the logits' dtype'\n"
            "    probs = ts.target_probs(target_logits, rows, **filters).to(narrow) if bool((~greedy).any()) else None"),
           ("        d = draft_rows.to(F64)", "        d = draft_rows.to(residual.dtype)"),
           killed_by="L1-16bit/tree/"),
]
"""Tree verification bugs (SPEC §11), as edits of the torch device's tree walk."""


# --------------------------------------------------------------------------- input bugs

class TemperatureTwice(Mutant):
    id = "temperature-twice"
    killed_by = "L1/injected/full-mixed"
    bug = "logits divided by T before the kernel, which divides again"
    models = "docs/bugs.md C3 and #31 (vllm-ascend PR #6685: API drift)"

    def batch_in(self, batch):
        T = np.asarray(batch.temperature, dtype=np.float64)
        scale = np.where(T > 0, T, 1.0)[np.repeat(np.arange(batch.batch_size), batch.num_draft_tokens + 1)]
        logits = np.asarray(batch.target_logits)
        return replace(batch, target_logits=(logits / scale[:, None]).astype(logits.dtype))


class TargetParamsDefault(Mutant):
    id = "target-params-default"
    killed_by = "L1/injected/full-mixed"
    bug = "target probabilities computed with default parameters (T = 1, no top-k/top-p)"
    models = "docs/bugs.md #3 (vLLM #9834 -> PR #10198: scorer used T=1, top_p=1)"

    def batch_in(self, batch):
        T = np.asarray(batch.temperature)
        return replace(batch, temperature=np.where(T > 0, 1.0, T).astype(T.dtype),
                       top_k=np.zeros_like(batch.top_k), top_p=np.ones_like(batch.top_p))


class TopPDroppedTarget(Mutant):
    id = "top-p-one-side"
    killed_by = "L1/injected/full-mixed"
    bug = "top-p applied to the draft only; the target side ignores it"
    models = "docs/bugs.md #41 (transformers#47932: a filter applied to one side only)"

    def batch_in(self, batch):
        return replace(batch, top_p=np.ones_like(batch.top_p))


class DraftProbsIgnored(Mutant):
    id = "draft-probs-ignored"
    killed_by = "L1/injected/full-mixed"
    bug = "draft_probs dropped: drafts verified as point proposals (lossless, lower acceptance)"
    models = "docs/bugs.md #42 (vLLM #40149: draft model path passes draft_probs=None)"

    def batch_in(self, batch):
        return replace(batch, draft_probs=None)


class BonusWrongRow(Mutant):
    id = "bonus-wrong-row"
    killed_by = "L1/injected/full-mixed"
    bug = "bonus token drawn from the last draft position's row instead of the bonus row"
    models = "docs/bugs.md C4 (bonus drawn from the last draft row instead of the bonus row)"

    def batch_in(self, batch):
        cu = batch.request_offsets()
        logits = np.array(batch.target_logits, copy=True)
        i = np.flatnonzero(np.asarray(batch.num_draft_tokens) > 0)
        bonus = cu[i + 1] + i
        logits[bonus] = logits[bonus - 1]
        return replace(batch, target_logits=logits)


class RowOffset(Mutant):
    id = "row-offset"
    killed_by = "L1/injected/full-mixed"
    bug = "target row of draft j of request i read at cu[i] + j (the +i for bonus rows forgotten)"
    models = "docs/bugs.md #7 (vLLM PR #14645: rows of another request in mixed batches)"

    def batch_in(self, batch):
        cu = batch.request_offsets()
        k = np.asarray(batch.num_draft_tokens)
        req = np.repeat(np.arange(batch.batch_size), k + 1)
        j = np.arange(len(req)) - (cu[req] + req)
        logits = np.asarray(batch.target_logits)
        return replace(batch, target_logits=logits[np.minimum(cu[req] + j, len(logits) - 1)])


class PlaceholderLastId(Mutant):
    id = "placeholder-last-id"
    killed_by = "L1/injected/full-mixed"
    bug = "placeholder draft -1 used as an index: reads the last vocabulary entry"
    models = "docs/bugs.md #13 (vllm-ascend #10045 -> PR #10043), #12 (vLLM PR #46533)"

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


class WithdrawnRowNotAdvanced(Mutant):
    id = "withdrawn-row-not-advanced"
    killed_by = "L1/injected/full-withdrawn"
    killed_in_black_box_by = "L1/edge/withdrawn-every-position"
    bug = ("draft_probs rows read through a cursor that does not advance past a withdrawn draft (its row taken "
           "as absent, as in a buffer compacted to the kept drafts): past a withdrawal every row, a later "
           "withdrawn draft's included, is read one row early")
    models = "docs/bugs.md #56 (vllm-ascend PR #14368: draft-probability rows kept only for drafts that have one)"

    def batch_in(self, batch):
        withdrawn = batch.withdrawn
        if withdrawn is None or batch.draft_probs is None or not np.asarray(withdrawn).any():
            return batch
        withdrawn = np.asarray(withdrawn, dtype=np.int64)
        lag = np.cumsum(withdrawn) - withdrawn     # withdrawn drafts before each position, batch-wide
        return replace(batch, draft_probs=np.asarray(batch.draft_probs)[np.arange(len(withdrawn)) - lag])


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
    killed_by = "L1/injected/full-mixed"
    bug = "one acceptance coin reused at every position of a request"
    models = "docs/bugs.md C5 and #15 (vLLM PR #47386 -> #54282: correlated streams)"

    def bend(self, batch, noise):
        cu = batch.request_offsets()
        k = np.asarray(batch.num_draft_tokens)
        first = np.repeat(cu[:-1], k)
        return Noise(np.asarray(noise.uniforms)[first], noise.exponentials)


class NoiseSharedAcrossRequests(NoiseMutant):
    id = "noise-shared-requests"
    killed_by = "L1/injected/full-mixed"
    bug = "every request of the batch uses request 0's random streams"
    models = "docs/bugs.md #8 (vLLM #17498 -> PR #17929), #2 (#9441: streams shared or mixed between requests)"

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
    killed_by = "L1/keyed/full-mixed"
    bug = "own randomness keyed by batch row (curand subsequence = row) instead of the request seed"
    models = "docs/bugs.md #40 (FlashInfer curand_init(seed, row, offset)), #38"

    def batch_in(self, batch):
        if batch.seeds is None:
            return batch
        return replace(batch, seeds=np.arange(batch.batch_size, dtype=np.uint64))


class PositionIgnored(Mutant):
    id = "noise-reused-steps"
    killed_by = "L1/keyed/full-mixed"
    bug = "own randomness keyed by seed only: every step of a request replays the same noise"
    models = "docs/bugs.md #1 (vLLM #6038 -> PR #6034: generator state not advanced) and SPEC §5.2"

    def batch_in(self, batch):
        if batch.positions is None:
            return batch
        return replace(batch, positions=np.zeros_like(batch.positions))


class GlobalRng(NoiseMutant):
    id = "global-rng"
    killed_by = "L1/keyed/full-mixed"
    bug = "own randomness drawn from the global numpy RNG instead of the keyed streams"
    models = "docs/bugs.md #1, #38 (global RNG, seeds ignored)"

    def noise_for(self, batch, noise):
        if noise is not None or _keyed(batch) is None:  # bad input: the wrapped device raises its error
            return noise
        u = np.random.random(int(np.sum(batch.num_draft_tokens)))
        e = np.random.exponential(size=(batch.batch_size, batch.vocab_size)) + 1e-300
        return Noise(u, e)


# --------------------------------------------------------------------------- output bugs

class PaddedSlotsMismatch(Mutant):
    id = "padded-slots-mismatch"
    killed_by = "L1/injected/full-mixed"
    bug = "padded slots of requests with K_i < max K counted as mismatches: bonus dropped"
    models = "docs/bugs.md #28, #27 (vllm-gaudi PR #593: padding treated as a mismatch)"

    def output(self, batch, out):
        k = np.asarray(batch.num_draft_tokens)
        ids = np.array(out.output_token_ids, copy=True)
        acc = np.array(out.num_accepted, copy=True)
        hit = np.flatnonzero((k > 0) & (k < k.max()) & (acc == k) & _sampled(batch))
        ids[hit, k[hit]] = PLACEHOLDER_TOKEN_ID
        acc[hit] -= 1
        return VerifyOutput(ids, acc)


WRAPPERS = [
    TemperatureTwice, TargetParamsDefault, TopPDroppedTarget, DraftProbsIgnored, BonusWrongRow, RowOffset,
    PlaceholderLastId, WithdrawnRowNotAdvanced, CoinReusedAcrossPositions, NoiseSharedAcrossRequests, KeyedByRow,
    PositionIgnored, GlobalRng, PaddedSlotsMismatch,
]
"""Input, noise and output mutants: classes that wrap any device."""

# --------------------------------------------------------------------------- inside the Triton kernels

TK = "devices.triton_kernels"
TRITON_MUTANT_CONFIG = KernelConfig(block=32, num_warps=1, programs=64, race_block=None, race_warps=None)
"""The launch shape the Triton mutants (and their control) run at in the interpreter: 32-wide tiles and
up to 64 programs, so that V = 65 spans three tiles and three vocabulary chunks. At the interpreter's
default shape (one 256-wide chunk) the multi-chunk reductions a GPU runs are never executed."""


def interpreted_triton_mutant(mutant: SourceMutant, source: str):
    """A Triton mutant's device: ``source.interpreted_triton`` at ``TRITON_MUTANT_CONFIG``'s launch shape."""
    return interpreted_triton(mutant, source, TRITON_MUTANT_CONFIG)


def compiled_triton_mutant(mutant: SourceMutant, source: str):
    """A Triton mutant's device on a CUDA GPU: the edited kernels compiled, at the device's own launch shape (a
    bug that shows only at sizes the interpreter cannot reach: L1-offsets' 2^31 elements)."""
    from devices.triton_device import TritonDevice, make_device
    from devices.triton_mode import enter, kernel_module
    base = make_device()  # raises, naming why, where there is no CUDA GPU or no Triton
    enter(False, "triton")
    return TritonDevice("cuda", base.config, kernel_files={mutant.module: kernel_module(mutant.module, False, source)},
                        name=f"triton:{mutant.id}")


def _triton(mid, bug, models, *edits, killed_by="", module=TK):
    """A mutant of ``devices/triton_kernels.py`` (or of another of the device's kernel files, ``module``:
    ``devices.triton_sampler``), run by the ``triton-interpret`` device."""
    return SourceMutant(mid, bug, models, module, tuple(Edit(a, r) for a, r in edits), device="triton-interpret",
                        killed_by=killed_by, make_from="specsim.mutants.zoo:interpreted_triton_mutant")


KERNEL = [
    _triton("triton-residual-swapped", "race weights max(d - t, 0) in race_weights: residual operands swapped",
            "docs/bugs.md C1 (FlashInfer's q/p letters)",
            ("w = tl.maximum(t - d.to(dtype), 0.0)", "w = tl.maximum(d.to(dtype) - t, 0.0)"),
            killed_by="L1/injected/full-mixed/V8/float64"),
    _triton("triton-accept-inclusive", "step_kernel accepts on u <= ratio without the t > 0 guard",
            "docs/bugs.md #10 (vLLM PR #23803), #11 (SGLang #35771)",
            ("ok_random = (d > 0) & (t > 0) & (u < ratio.to(tl.float64))",
             "ok_random = (d > 0) & (u <= ratio.to(tl.float64))"),
            killed_by="L1/edge/u0-zero-target-full"),
    _triton("triton-chunk-sum-unscaled", "per-chunk softmax sums added without rescaling to the row's max",
            "docs/bugs.md C8 (split-vocabulary softmax merged without the max correction)",
            ("row_sum = tl.sum(tl.where(cm == float(\"-inf\"), 0.0, cs * tl.exp((cm - row_max[:, None]) * inv_t)), axis=1)",
             "row_sum = tl.sum(tl.where(cm == float(\"-inf\"), 0.0, cs), axis=1)"),
            killed_by="L1/injected/full-mixed/V65/float32"),
    _triton("triton-tail-tile-padding", "race_load fills the lanes past V with logit 0, not -inf: padding can win",
            "docs/bugs.md #43 (vLLM GHSA-8wr5-jm2h-8r4f: recovered id >= vocab in the tail tile), #9",
            ("z = tl.load(logits_row + cols, mask=cols < hi, other=float(\"-inf\"))",
             "z = tl.load(logits_row + cols, mask=cols < hi, other=0.0)"),
            killed_by="L1/sizes/residual-tv1e-02"),
    _triton("triton-sampler-cut-on-raw-rows", "with SPEC §12 and a top-k cut, the race reads each entry through the "
            "cut before §12's bias (the cut decided on the §12 rows, applied to the raw ones): a token the bias "
            "lifts over the cut never wins the race",
            "docs/bugs.md #50 (vLLM #42744: filters and logit_bias applied to different rows)",
            ("            if not SAMPLER:  # the raw rows' cut; the §12 rows' is taken after §12 (below)",
             "            if True:  # the raw rows' cut; the §12 rows' is taken after §12 (below)"),
            killed_by="L1-sampler/canonical/all-top-k"),
    _triton("triton-sampler-stats-past-the-bits", "on the fused SPEC §12 path without filters, fused_stats_kernel "
            "reads every entry without the live bits: banned entries and the records' raw entries enter the softmax "
            "sums and the greedy argmax (the records' processed values counted too), while the race still reads "
            "through the bits",
            "docs/bugs.md C13 (a sparse edit counted beside the dense entry), #50 (vLLM #42744: §12 applied to one "
            "pass and not the other)",
            ("            words = tl.load(live_ptr + row * W + first // 32 + line, mask=first + line * 32 < hi, other=0)",
             "            words = tl.full([LINES], -1, tl.int32)"),
            killed_by="L1-sampler/vllm/all-unfiltered", module="devices.triton_sampler"),
]
"""Bugs inside the Triton kernels, run by Triton's CPU interpreter (``specsim mutants --base triton-interpret``)."""

KERNEL_GPU = [
    SourceMutant("triton-offsets-int32", "the stats and step kernels form a row's offset row * V in int32 (the "
                 "int64 casts dropped): past 2^31 elements of target_logits or draft_probs a row is read from the "
                 "wrong memory", "docs/bugs.md #55 (vLLM 0.33.0 V1 rejection_random_sample_kernel and "
                 "sample_recovered_tokens_kernel: (start_idx + pos) * vocab_size in int32; vLLM PR #46560, #48055)",
                 TK, tuple(Edit(a, r) for a, r in (
                     ("base = logits_ptr + row.to(tl.int64) * V", "base = logits_ptr + row.to(tl.int32) * V"),
                     ("zx = tl.load(logits_ptr + rows * V + xs", "zx = tl.load(logits_ptr + rows.to(tl.int32) * V + xs"),
                     ("draft_probs_ptr + (start + j).to(tl.int64) * V", "draft_probs_ptr + (start + j).to(tl.int32) * V"),
                     ("logits_row = logits_ptr + (row0 + num_acc).to(tl.int64) * V",
                      "logits_row = logits_ptr + (row0 + num_acc).to(tl.int32) * V"),
                     ("draft_row = draft_probs_ptr + (start + num_acc).to(tl.int64) * V",
                      "draft_row = draft_probs_ptr + (start + num_acc).to(tl.int32) * V"))),
                 device="triton", killed_by="L1/offsets/injected/target-rows-2^31",
                 make_from="specsim.mutants.zoo:compiled_triton_mutant"),
]
"""Bugs inside the Triton kernels that only the compiled kernels on a CUDA GPU reach (``specsim mutants --base
triton --call-bytes 40GiB``): the interpreter cannot make a call of 2^31 elements in a test's time."""

# --------------------------------------------------------------------------- the whole sampler (SPEC §12)

SAMPLER = [
    _torch("sampler-bonus-only", "SPEC §12's parameters reach the bonus row only: the verified positions' coins "
           "and a rejection's residual read the raw logits",
           "docs/bugs.md #50 (vLLM #42744: min_p and logit_bias would reach the bonus token, not the verified ones)",
           TD,
           ("    if sampler is not None:  # §12: each row's logits after bans, penalties and bias along its drafts\n",
            "    raw_logits = target_logits\n"
            "    if sampler is not None:  # §12: each row's logits after bans, penalties and bias along its drafts\n"),
           ("    draft_logits = target_logits[layout.target_row]", "    draft_logits = raw_logits[layout.target_row]"),
           ("probs = ts.target_probs(draft_logits, rows.take(layout.request), **filters)",
            "probs = ts.target_probs(draft_logits, rows._replace(min_p=None).take(layout.request), **filters)"),
           ("    emit_logits = target_logits[layout.starts + arange + num_accepted]",
            "    emit_logits = torch.where((num_accepted == num_draft_tokens).unsqueeze(1),\n"
            "                              target_logits[layout.starts + arange + num_accepted],\n"
            "                              raw_logits[layout.starts + arange + num_accepted])"),
           killed_by="L1-sampler/edge/mask-forbids-draft"),
    _torch("sampler-penalties-pre-step", "repetition, frequency and presence penalties count the output before "
           "the step, not this step's drafts",
           "docs/bugs.md #51 (vLLM PR #19482: penalties and bad words made to count the step's draft tokens)", TS,
           ("counts = s.output_counts[request] + draft_counts(draft_token_ids, layout, num_draft_tokens, num_rows, vocab_size)",
            "counts = s.output_counts[request]"),
           killed_by="L1-sampler/edge/penalty-zeroes-draft"),
    _torch("sampler-bad-words-pre-step", "bad words matched against the output before the step (every row reads "
           "the pre-step history window)",
           "docs/bugs.md #51 (vLLM PR #19482: penalties and bad words made to count the step's draft tokens)", TS,
           ("position.unsqueeze(1) + torch.arange(L, device=drafts.device)",
            "0 * position.unsqueeze(1) + torch.arange(L, device=drafts.device)"),
           killed_by="L1-sampler/edge/bad-word-completed-by-drafts"),
    _torch("sampler-bad-words-never-across", "bad words matched inside the output before the step or inside the "
           "drafts, never across the step boundary: a word whose prefix begins in the output and ends in the drafts "
           "bans nothing",
           "docs/bugs.md #57 (vLLM PR #52311: bad-word prefixes spanning the committed/draft boundary matched wrong)",
           TS,
           ("    matched = ((prefix == -3) | (window.unsqueeze(1) == prefix)).all(dim=-1) & s.word_valid[request]\n",
            "    drafted = (position.unsqueeze(1) + torch.arange(L, device=drafts.device) >= L).unsqueeze(1)\n"
            "    used = prefix != -3\n"
            "    across = (used & drafted).any(dim=-1) & (used & ~drafted).any(dim=-1)  # left to neither matcher\n"
            "    matched = ((prefix == -3) | (window.unsqueeze(1) == prefix)).all(dim=-1) & s.word_valid[request] "
            "& ~across\n"),
           killed_by="L1-sampler/edge/bad-word-at-every-split"),
    _torch("sampler-bad-words-draft-offset", "bad-word windows read each draft at its index less one (the last output "
           "token read twice at the step boundary, the last draft never)",
           "docs/bugs.md #57 (vLLM PR #52311: _bad_words_kernel's draft reads without the + 1)", TS,
           ("    window = history[request.unsqueeze(1), position.unsqueeze(1) + torch.arange(L, device=drafts.device)]\n",
            "    column = position.unsqueeze(1) + torch.arange(L, device=drafts.device)\n"
            "    window = history[request.unsqueeze(1), column - (column >= L).long()]\n"),
           killed_by="L1-sampler/edge/bad-word-completed-by-drafts"),
    _torch("sampler-min-tokens-pre-step", "min_tokens compares the pre-step output length: off by the number of "
           "drafts before the row",
           "docs/bugs.md #51 (vLLM PR #19482: the step's drafts counted as output)", TS,
           ("short = s.output_length[request] + position < s.min_tokens[request]",
            "short = s.output_length[request] < s.min_tokens[request]"),
           killed_by="L1-sampler/edge/min-tokens-crossing"),
    _torch("sampler-min-tokens-bonus-pre-step", "min_tokens at the bonus row compares the pre-step output "
           "length (the draft rows count their drafts)",
           "docs/bugs.md #54 (vLLM 0.33.0: Sampler.apply_logits_processors runs MinTokensLogitsProcessor.apply "
           "on the bonus row)", TS,
           ("short = s.output_length[request] + position < s.min_tokens[request]",
            "bonus = position == (drafts != SAMPLER_BAN_FILL).sum(1)[request]\n"
            "        short = s.output_length[request] + torch.where(bonus, 0, position) < s.min_tokens[request]"),
           killed_by="L1-sampler/edge/min-tokens-crossing"),
    _torch("sampler-min-p-before-temperature", "min_p's cut taken on the untempered softmax (the processor order "
           "differs from the one the device declares)",
           "docs/bugs.md #41 (transformers#47932: processors applied in another place than the law assumes)", TS,
           ("z = z.masked_fill(~min_p_kept(softmax(z), rows.min_p, decision_dtype), -torch.inf)",
            "z = z.masked_fill(~min_p_kept(softmax(logits), rows.min_p, decision_dtype), -torch.inf)"),
           ("kept = torch.where(min_p_kept(probs, rows.min_p, decision_dtype), probs, torch.zeros_like(probs))",
            "kept = torch.where(min_p_kept(softmax(logits), rows.min_p, decision_dtype), probs, torch.zeros_like(probs))"),
           killed_by="L1-sampler/edge/min-p-after-temperature"),
    _torch("sampler-mask-previous-row", "the token mask of position j taken from position j − 1 (the grammar's "
           "mask one step behind the drafts)",
           "docs/bugs.md C2 (a row offset, the family of #7)", TS,
           ("        ban |= ~s.token_mask\n", "        ban |= ~s.token_mask.roll(1, dims=0)\n"),
           killed_by="L1-sampler/edge/mask-forbids-draft"),
    # --- the order profile, the bonus row below min_tokens, the rules' own arithmetic ----------------------------
    _torch("sampler-vllm-computes-canonical", "the vllm order profile declared and served, the canonical order "
           "computed (penalties before the bias, min_p after top-p)",
           "docs/bugs.md #41 (transformers#47932: processors applied in another place than the law assumes)", TS,
           ("    if s.order == \"vllm\":\n        z = penalised(biased(logits, s, request), s, counts, request)",
            "    if False:\n        z = penalised(biased(logits, s, request), s, counts, request)"),
           ("    z = scale_by_temperature(logits, rows.temperature)\n",
            "    order = \"canonical\"\n    z = scale_by_temperature(logits, rows.temperature)\n"),
           killed_by="L1-sampler/edge/order-penalty-meets-bias/vllm"),
    _torch("sampler-bonus-row-ignores-min-tokens", "the bonus row never bans the stop tokens: min_tokens applied "
           "to the draft rows only",
           "docs/bugs.md #54 (vLLM 0.33.0: the bonus row's min_tokens through another path), #25", TS,
           ("    ban = sampler_bans(s, drafts, request, position, vocab_size)\n",
            "    ban = sampler_bans(s, drafts, request, position, vocab_size)\n"
            "    bonus = (position == num_draft_tokens[request]).unsqueeze(1)\n"
            "    ban = torch.where(bonus, sampler_bans(s._replace(min_tokens=None), drafts, request, position, "
            "vocab_size), ban)\n"),
           killed_by="L1-sampler/edge/min-tokens-bonus-row-still-short"),
    _torch("sampler-first-stop-id-only", "min_tokens bans the first stop id only (EOS), not every stop id",
           "docs/bugs.md #25 (min_tokens ignored with spec decode)", TS,
           ("        fields[\"stop\"] = _id_rows(sampler.stop_token_ids, batch, vocab_size, device) > 0",
            "        fields[\"stop\"] = _id_rows([None if ids is None else np.asarray(ids)[:1] for ids in "
            "sampler.stop_token_ids], batch, vocab_size, device) > 0"),
           killed_by="L1-sampler/edge/min-tokens-bonus-row-still-short"),
    _torch("sampler-min-p-strict", "min_p keeps p > min_p · max (strict): the tokens tied at the threshold dropped",
           "docs/bugs.md C6 (a filter dropping its boundary ties; SPEC §12 keeps them)", TS,
           ("    return wide >= min_p.to(decision_dtype).unsqueeze(-1) * wide.amax(dim=-1, keepdim=True)",
            "    return wide > min_p.to(decision_dtype).unsqueeze(-1) * wide.amax(dim=-1, keepdim=True)"),
           killed_by="L1-sampler/edge/min-p-threshold-ties"),
    _torch("sampler-bias-after-temperature", "logit_bias added after the division by temperature (z/T + b for "
           "(z + b)/T)",
           "docs/bugs.md #41 (transformers#47932: processors applied in another place than the law assumes), #50", TD,
           ("        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)",
            "        if sampler.logit_bias is not None:   # the bias lands after z / T: scaled by T beforehand\n"
            "            sampler = sampler._replace(logit_bias=sampler.logit_bias * ts.safe_temperature(temperature)"
            ".unsqueeze(1))\n"
            "        target_logits = ts.process_logits(target_logits, sampler, draft_token_ids, num_draft_tokens, max_k)"),
           killed_by="L1-sampler/edge/bias-before-temperature"),
    _torch("sampler-repetition-divides-negative", "the repetition penalty divides every seen logit (z/r), raising "
           "the negative ones instead of multiplying them",
           "docs/bugs.md #51 (penalties not the non-speculative sampler's)", TS,
           ("z = torch.where(seen, torch.where(z > 0, z / r, z * r), z)", "z = torch.where(seen, z / r, z)"),
           killed_by="L1-sampler/edge/repetition-on-negative-logits"),
    _torch("sampler-frequency-not-accumulating", "the frequency penalty subtracted once per seen token (as "
           "presence), not once per occurrence",
           "docs/bugs.md #36 (frequency penalty weakened), #51", TS,
           ("z = z - (s.frequency_penalty[request].unsqueeze(1) * counts).to(z.dtype)",
            "z = z - (s.frequency_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)"),
           killed_by="L1-sampler/edge/frequency-accumulates-over-drafts"),
    _torch("sampler-allowed-ids-not-at-bonus", "allowed_token_ids applied to the draft rows only: the bonus row "
           "samples the whole vocabulary",
           "docs/bugs.md #50 (the parameters and the bonus row on different paths), #54", TS,
           ("    ban = sampler_bans(s, drafts, request, position, vocab_size)\n",
            "    ban = sampler_bans(s, drafts, request, position, vocab_size)\n"
            "    bonus = (position == num_draft_tokens[request]).unsqueeze(1)\n"
            "    ban = torch.where(bonus, sampler_bans(s._replace(allowed=None), drafts, request, position, "
            "vocab_size), ban)\n"),
           killed_by="L1-sampler/edge/allowed-ids-at-the-bonus-row"),
    _torch("sampler-penalties-fp16", "penalties computed in float16 behind the float32 declaration (the penalised "
           "row rounded to half precision)",
           "docs/bugs.md #44 (DeepSpec#31: one side in 16-bit), #51", TS,
           ("    if s.repetition_penalty is not None:\n        r = s.repetition_penalty[request].to(z.dtype)",
            "    dtype = z.dtype\n    z = z.to(torch.float16) if dtype == torch.float32 else z   # 'half is enough'\n"
            "    if s.repetition_penalty is not None:\n        r = s.repetition_penalty[request].to(z.dtype)"),
           ("        z = z - (s.presence_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)\n    return z\n",
            "        z = z - (s.presence_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)\n    return z.to(dtype)\n"),
           killed_by="L1-sampler/precision"),
    # --- SPEC §5.2's keyed streams on the §12 path (a device taking injected noise and declaring Philox) ---------
    _torch("keyed-sampler-position-from-history", "the §12 path keys its Philox round by the length of the history "
           "it holds (the output so far, as min_tokens and the penalties read it), not the step's positions",
           "docs/bugs.md C14 (a keyed sampler deriving its own position; vLLM Model Runner V2 keys by a per-row pos)",
           TD,
           ("    if keyed and has_sampled:\n        uniforms, exponentials = torch_philox.step_noise(",
            "    if keyed and has_sampled and sampler is not None:   # 'the history already says where we are'\n"
            "        positions = sampler.output_length.to(positions.dtype)\n"
            "    if keyed and has_sampled:\n        uniforms, exponentials = torch_philox.step_noise("),
           killed_by="L1/keyed-sampler/"),
    _torch("keyed-sampler-coin-flat-row", "the §12 path reads draft j's coin at the word of its flattened draft row "
           "(cu[i] + j), not at word j of its request's ACCEPT stream",
           "docs/bugs.md C15 (a stream indexed by the batch's row, not the request's: #40's family)", TD,
           ("                                                         num_tokens, max_k)\n",
            "                                                         num_tokens, max_k)\n"
            "        if sampler is not None and num_tokens:   # the §12 kernel walks the flattened draft rows\n"
            "            wide, _ = torch_philox.step_noise(seeds, positions, torch.full_like(num_draft_tokens, num_tokens), 1)\n"
            "            uniforms = wide.view(batch, num_tokens)[layout.request, torch.arange(num_tokens, device=device)]\n"),
           killed_by="L1/keyed-sampler/"),
    _torch("sampler-penalties-bf16", "penalties computed in bfloat16 behind the float32 declaration",
           "docs/bugs.md #44 (DeepSpec#31: one side in 16-bit), #51", TS,
           ("    if s.repetition_penalty is not None:\n        r = s.repetition_penalty[request].to(z.dtype)",
            "    dtype = z.dtype\n    z = z.to(torch.bfloat16) if dtype == torch.float32 else z\n"
            "    if s.repetition_penalty is not None:\n        r = s.repetition_penalty[request].to(z.dtype)"),
           ("        z = z - (s.presence_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)\n    return z\n",
            "        z = z - (s.presence_penalty[request].unsqueeze(1) * (counts > 0)).to(z.dtype)\n    return z.to(dtype)\n"),
           killed_by="L1-sampler/precision"),
    # --- §2's tie rules in the vllm order profile (the filters the engine of that name runs) ---------------------
    _torch("sampler-vllm-top-k-exactly-k", "in the vllm order profile, top-k keeps exactly k tokens by their place "
           "in the sort: a tie class at the k-th value is cut (the canonical order keeps it)",
           "docs/bugs.md #58 (vLLM 0.33.0's Triton top-k breaks a tie at the k-th value by position), C6", TS,
           ("            z = z.masked_fill(~top_k_kept(z, sorted_z, rows.top_k), -torch.inf)",
            "            kept = top_k_kept(z, sorted_z, rows.top_k)\n"
            "            if order == \"vllm\":   # k tokens by sort position, as the engine's kernel keeps them\n"
            "                place = torch.arange(z.shape[-1], device=z.device).expand_as(order_ids)\n"
            "                rank = torch.empty_like(order_ids).scatter_(-1, order_ids, place)\n"
            "                kept = kept & ((rows.top_k <= 0).unsqueeze(-1) | (rank < rows.top_k.unsqueeze(-1)))\n"
            "            z = z.masked_fill(~kept, -torch.inf)"),
           killed_by="L1-sampler/edge/top-k-tie-class-kept/vllm"),
    _torch("sampler-vllm-top-p-sorted-prefix", "in the vllm order profile, top-p keeps the first m* tokens of the "
           "sort (a sorted prefix): a tie class at the cut is split (the canonical order keeps it)",
           "docs/bugs.md #58 (vLLM 0.33.0's top-p cuts inside a run of tokens tied at the cut), C6", TS,
           ("            probs = renormalise_kept(probs, top_p_kept(probs, order_ids, rows.top_p, decision_dtype), rows.top_p)",
            "            kept = top_p_kept(probs, order_ids, rows.top_p, decision_dtype)\n"
            "            if order == \"vllm\":   # the sorted prefix up to the cut, as the engine masks it\n"
            "                sums = probs.gather(-1, order_ids).cumsum(dim=-1, dtype=decision_dtype)\n"
            "                cut = (sums < rows.top_p.to(decision_dtype).unsqueeze(-1)).sum(dim=-1, keepdim=True)\n"
            "                place = torch.arange(z.shape[-1], device=z.device).expand_as(order_ids)\n"
            "                rank = torch.empty_like(order_ids).scatter_(-1, order_ids, place)\n"
            "                kept = (rows.top_p >= 1).unsqueeze(-1) | (rank <= cut)\n"
            "            probs = renormalise_kept(probs, kept, rows.top_p)"),
           killed_by="L1-sampler/edge/top-p-tie-class-kept/vllm"),
    # --- a §12 rule kept on a uniform batch's path and lost on a mixed batch's (SPEC 1.11's edges among fillers)
    _torch("sampler-repetition-divides-when-mixed", "the repetition penalty divides negative logits too (raising "
           "them) when some request of the batch is unpenalised (the mixed batch's kernel)", "docs/bugs.md C17 (a "
           "rule kept only on a uniform batch's path; #57's penalty on negative logits)", TS,
           ("        z = torch.where(seen, torch.where(z > 0, z / r, z * r), z)\n",
            "        mixed = bool((s.repetition_penalty == 1).any())\n"
            "        z = torch.where(seen, torch.where((z > 0) | mixed, z / r, z * r), z)\n"),
           killed_by="L1-sampler/edge-neighbours/"),
    # --- a §12 rule kept under injected noise and lost on the device's own keyed path (SPEC 1.12's twins)
    _torch("sampler-keyed-position-past-32", "on the keyed path of a §12 batch of more than 32 requests, every "
           "request's streams keyed at its position plus one (a kernel variant for the device's own noise at large "
           "batches that derives the round itself)", "docs/bugs.md C18 (a rule kept only on the injected-noise "
           "path; C14's position derived on a §12 path)", TD,
           ("        uniforms, exponentials = torch_philox.step_noise(seeds, positions, num_draft_tokens, vocab_size,\n",
            "        uniforms, exponentials = torch_philox.step_noise(\n"
            "            seeds, positions + 1 if (sampler is not None and batch > 32) else positions, num_draft_tokens,\n"
            "            vocab_size,\n"),
           killed_by="L1-sampler/edge/"),
    _torch("penalties-in-16-bit", "penalties and bias written back into the 16-bit logits (computed in their "
           "float16/bfloat16 dtype, widened only at the temperature)",
           "docs/bugs.md #62 (vLLM #53630: penalties written back to the head dtype)", TS,
           ("    logits = widened(logits)   # penalties and bias written into 16-bit logits would round them (SPEC §6)\n", ""),
           killed_by="L1-16bit/sampler/"),
]
"""SPEC §12 bugs in the torch device's sampler path, each killed by a named L1-sampler or L1-16bit check."""

SOURCE_MUTANTS = INSIDE + TREE + KERNEL + KERNEL_GPU + SAMPLER
"""Mutants of real device code, each of the one device it names (``SourceMutant.device``)."""

MUTANTS = {m.id: m for m in SOURCE_MUTANTS + WRAPPERS}
"""Every mutant by id (a ``SourceMutant`` or a wrapper class; both carry ``id``, ``bug`` and ``models``)."""


def mutant_ids(base) -> list[str]:
    """The ids ``make_mutants(base)`` would give, without building the source mutants' devices."""
    return [m.id for m in SOURCE_MUTANTS if m.device == base.name] + [cls.id for cls in WRAPPERS]


def make_mutant(base, mutant_id: str):
    """The one mutant of ``make_mutants(base)`` named ``mutant_id`` (what a campaign worker builds)."""
    for m in SOURCE_MUTANTS:
        if m.device == base.name and m.id == mutant_id:
            return m.make()
    for cls in WRAPPERS:
        if cls.id == mutant_id:
            return cls(base)
    raise KeyError(f"mutant: no mutant {mutant_id!r} applies to {base.name!r}")


def make_mutants(base) -> list:
    """Every mutant that applies to ``base``: the source mutants of ``base.name``'s code, then every
    wrapper around ``base``. A source mutant builds its own device from its mutated module."""
    own = [m.make() for m in SOURCE_MUTANTS if m.device == base.name]
    return own + [cls(base) for cls in WRAPPERS]
