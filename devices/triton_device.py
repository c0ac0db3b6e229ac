"""The Triton device: one verification step in Triton kernels (``devices/triton_kernels.py``).

It implements SPEC §3–§5 with the keyed Philox streams of §5.2 made in
registers (``capabilities.rng == "philox"``: same seeds, same tokens as the
reference and the torch device), or with injected noise (§5.1). Temperature
is applied inside the kernels; top-k and top-p (and §12's min_p), when a
request uses them, are one cut a row (``filter_cuts``: float64 decisions on the
top-k candidates, ``devices/filter_cut.py``, ``devices/triton_topk.py``) that the
kernels read the rows through — no filtered copy; batches without them pay nothing.

Two layers, like the torch device:

* ``verify_tensors(...)`` — torch tensors already on the GPU, no host sync,
  no validation: what ``specsim bench`` times and what an engine would call;
* ``TritonDevice.verify(batch, noise)`` — the numpy protocol of
  ``devices/protocol.py``: validates (SPEC §6), copies in, calls the above.

``TritonDevice.verify`` is a ladder of small named steps: ``check_call`` (SPEC §6)
→ ``choose_path`` → ``prepare_rows`` (the path's rung, giving ``StepRows``) →
``launch`` (``step_tensors``) → ``assemble``. A batch takes one of three paths:

* ``plain_rows`` — no §12 parameters: the kernels read the raw rows, through
  each row's cut where a request uses top-k or top-p;
* ``fused_rows`` — §12 without top-k, top-p or min_p: bans, penalties and bias
  applied inside the step's own loads (``devices/triton_sampler.py``:
  ``fused_inputs``, then ``fused_stats`` in place of the statistics kernel);
  no processed copy of the rows. With them, where every request's top-k is at most
  ``FUSED_TOP_K`` (``cut_in_one_sweep``), the same: the top-k candidates' sweep reads
  the rows through the same live bits, bias and records (``sampler_cut``), and
  the step reads them through those and the cut, its statistics the cut's;
* ``processed_rows`` — §12 with other filters (top-p or min_p without top-k, a larger
  top-k, a greedy request beside filtered ones): the filters decide on the processed
  rows, so ``triton_sampler.process_logits`` writes them first and the step reads
  them through their cut.

The Triton modules import one way: ``devices/triton_step.py`` imports this module;
this module imports ``devices/triton_mode.py`` and ``devices/triton_host.py`` and
loads the kernel modules (``triton_kernels``, ``triton_sampler``, ``triton_topk``,
``triton_tree``) in its Triton mode; none of them imports this module back.

Two registered names, never confused: ``triton`` is the compiled kernels on a
CUDA GPU (``make_device``; without CUDA, or with ``TRITON_INTERPRET=1`` set,
it raises and the registry lists it as unavailable), and ``triton-interpret``
is the same kernels in Triton's CPU interpreter (``make_interpreter_device``:
slow, small sizes, for tests and CI). A process runs Triton one way only
(``devices/triton_mode.py``): the device's first call puts an undecided
process in its mode, and a device whose mode the process is not in says so
when it is loaded.

>>> import numpy as np                                         # doctest: +SKIP
>>> from devices.protocol import VerifyBatch                   # doctest: +SKIP
>>> dev = make_interpreter_device()                            # doctest: +SKIP
>>> b = VerifyBatch(np.array([1]), np.array([2]), None, np.log(np.full((2, 3), 1/3)),
...                 np.ones(1), np.zeros(1, np.int64), np.ones(1),
...                 seeds=np.array([7], np.uint64), positions=np.array([0]))  # doctest: +SKIP
>>> dev.verify(b).output_token_ids.shape                       # doctest: +SKIP
(1, 2)
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from types import ModuleType
from typing import NamedTuple

import numpy as np

from devices.protocol import (SAMPLER_ORDERS, SAMPLER_PARAMETERS, Capabilities, Noise, SamplerParams, TreeBatch,
                              TreeOutput, VerifyBatch, VerifyOutput)
from devices.triton_host import to_torch, vocab_chunks

MAX_K = 64
FUSED_TOP_K = 256  # the largest top-k whose candidates one sweep finds (devices.triton_topk.SWEEP_WIDTH − 1)
MAX_TREE_NODES = 1024  # declared: the walk keeps no per-node buffer; the largest tree the checks hold it to
MAX_VOCAB_SIZE = 2**22  # declared where every group checks the value itself within a call's default 1 GiB: 16x
# Gemma 3's 262144. The kernels index columns in int32 and rows in int64 (L1-offsets crosses 2^31 and 2^32
# elements); a larger declaration would be checked only up to the V one call holds (38,347,922 at 1 GiB).


@dataclass(frozen=True)
class KernelConfig:
    """Launch shape. ``block``, ``num_warps``: the statistics pass's vocabulary tile (power of
    two, multiple of 4) and warps; ``race_block``, ``race_warps``: the step kernel's (None: the
    same); ``programs``: how many programs a pass aims for (rows × chunks), so that a small batch
    still spreads over every multiprocessor. Defaults from the H100 sweep
    (``tools/gpu/triton_sweep.py``, anchor 256 × 4 × 128256): statistics 2048 × 4 warps
    0.220 ms (8 warps: 0.239), race 512 × 2 warps 0.100 ms with draft probs (2048 × 8: 0.138)."""

    block: int = 2048
    num_warps: int = 4
    programs: int = 2112  # 16 per SM on a 132-SM H100
    race_block: int | None = 512
    race_warps: int | None = 2
    num_stages: int | None = None  # software pipelining depth of the vocabulary loops (None: Triton's default)
    bound: bool = True  # race: skip the logarithms of tiles that cannot hold the winner (triton_kernels.below_bound)
    block16: int | None = 1024  # 16-bit logits: the statistics tile at most this (None: block); H100 sweep at the
    # anchor, bfloat16: 1024 × 4 warps 0.133 ms, 2048 × 4 0.143, 4096 × 8 0.162 (tools/gpu/triton_sweep.py)
    pdl: bool = True  # the plain step's two launches with programmatic dependent launch where the GPU has it
    # (pdl_launch): step_kernel's gathers overlap the statistics pass
    pdl_early_per_sm: int = 4  # ... and step_kernel launches as the statistics programs start where they are at most
    # this many a multiprocessor (one wave with room to spare), else as they finish (pdl_launch says why)

    programs_by_batch: tuple = ()
    """``((batch, programs), ...)``, batches ascending: the programs a plain step's passes aim for from that
    batch size up (``programs_at``), tuned apart (``specsim bench --tune``; docs/results/tune-h200.json: the
    H200's B = 256 runs fastest at twice the programs of its B = 32). Empty: ``programs`` at every batch size."""
    race_by_batch: tuple = ()
    """``((batch, race_block, race_warps), ...)``, batches ascending: the step kernel's tile and warps from that
    batch size up (``race_at``), tuned apart (``specsim bench --tune``; docs/results/tune-h200.json: at B = 1 the
    step kernel is one tile a program, and its walk over every row's statistics runs faster on more warps).
    Empty: ``race_block`` and ``race_warps`` at every batch size."""
    race_programs_by_batch: tuple = ()
    """``((batch, programs), ...)``, batches ascending: the programs the step kernel's race aims for from that batch
    size up (``race_programs_at``), tuned apart from the statistics pass's (``specsim bench --tune``): the race's
    programs are one warp each where the pass's are four, so the count that fills the GPU for one can spill the
    other into a second wave. Empty: ``programs_at``'s."""
    by_call: tuple = ()
    """Launch shapes for one kind of call, tuned apart: ``((key, KernelConfig), ...)``, ``key`` a
    ``call_key`` (``"draft/32"``: draft probabilities with 32-bit logits; ``"point/16"``: point proposals
    with 16-bit logits). A call of a kind not listed uses this config's own fields (``for_call``)."""
    source: str = "defaults (an H100 sweep)"
    """Where these values come from, in words (``devices.triton_tuning``: a GPU's tuned entry)."""

    def stats_block(self, itemsize: int) -> int:
        """The statistics pass's tile for logits of ``itemsize`` bytes an entry."""
        return min(self.block, self.block16) if itemsize == 2 and self.block16 else self.block

    def programs_at(self, batch: int) -> int:
        """The programs a step of ``batch`` requests aims for: ``programs_by_batch``' entry of the largest batch
        size at most ``batch`` (below the first: the first's), else ``programs``.

        >>> KernelConfig(programs=1056, programs_by_batch=((1, 528), (256, 4224))).programs_at(32)
        528
        >>> KernelConfig(programs=1056, programs_by_batch=((8, 528), (256, 4224))).programs_at(1), KernelConfig().programs_at(7)
        (528, 2112)
        """
        return _by_batch(self.programs_by_batch, batch, self.programs)

    def race_at(self, batch: int) -> tuple[int, int]:
        """The step kernel's ``(tile, warps)`` for ``batch`` requests: ``race_by_batch``' entry of the largest batch
        size at most ``batch`` (below the first: the first's), else ``race_block`` and ``race_warps`` (None: the
        statistics pass's).

        >>> c = KernelConfig(race_block=256, race_warps=1, race_by_batch=((1, 1024, 4), (32, 256, 1)))
        >>> c.race_at(1), c.race_at(31), c.race_at(32), KernelConfig().race_at(7)
        ((1024, 4), (1024, 4), (256, 1), (512, 2))
        """
        return _by_batch(tuple((at, (block, warps)) for at, block, warps in self.race_by_batch), batch,
                         (self.race_block or self.block, self.race_warps or self.num_warps))

    def race_programs_at(self, batch: int) -> int:
        """The programs the step kernel's race aims for at ``batch`` requests: ``race_programs_by_batch``' entry of
        the largest batch size at most ``batch`` (below the first: the first's), else ``programs_at(batch)``.

        >>> KernelConfig(programs=4224, race_programs_by_batch=((1, 1056), (256, 3168))).race_programs_at(300)
        3168
        >>> KernelConfig(programs=4224).race_programs_at(300)
        4224
        """
        return _by_batch(self.race_programs_by_batch, batch, self.programs_at(batch))

    def for_call(self, has_draft: bool, itemsize: int) -> KernelConfig:
        """The launch shape of one call: its kind's tuned entry of ``by_call`` (``call_key``), else this config."""
        key = call_key(has_draft, itemsize)
        return next((c for k, c in self.by_call if k == key), self)


def _by_batch(entries: tuple, batch: int, otherwise):
    """The value of ``entries`` (``((batch, value), ...)``, ascending) for ``batch``: the entry of the largest batch
    size at most ``batch``, below the first the first's; ``otherwise`` where there are none."""
    if not entries:
        return otherwise
    found = entries[0][1]
    for at, value in entries:
        if at <= batch:
            found = value
    return found


def call_key(has_draft: bool, itemsize: int) -> str:
    """The kind of a call a launch shape is tuned for: draft probabilities or point proposals, and the
    logits' bits (a ``KernelConfig.by_call`` key).

    >>> call_key(True, 4), call_key(False, 2), call_key(True, 8)
    ('draft/32', 'point/16', 'draft/64')
    """
    return f"{'draft' if has_draft else 'point'}/{8 * itemsize}"


INTERPRETER_CONFIG = KernelConfig(block=256, num_warps=1, programs=1, race_block=None, race_warps=None,
                                  source="the interpreter's (small tiles, one program)")


def default_config(device=None) -> KernelConfig:
    """The launch shape for ``device`` (a torch device; default the current CUDA device): its GPU's tuned
    entry (``devices.triton_tuning.tuned_entry``, ``config_of``), else ``KernelConfig()``; ``KernelConfig()``
    off CUDA."""
    if device is not None and getattr(device, "type", "cuda") != "cuda":
        return KernelConfig()
    import torch
    index = getattr(device, "index", None)
    return _config_of_gpu(torch.cuda.current_device() if index is None else index)


@functools.lru_cache(maxsize=None)
def _config_of_gpu(index: int) -> KernelConfig:
    # once per GPU and process: a step's hot path asks on every call
    import torch

    from devices.triton_tuning import tuned_entry
    return config_of(*tuned_entry(torch.cuda.get_device_name(index)))


def config_of(entry: dict | None, source: str) -> KernelConfig:
    """The ``KernelConfig`` a tuned entry (``devices.triton_tuning``) describes: its ``config`` over the
    defaults, each ``by_call`` entry over that; ``KernelConfig()`` where ``entry`` is None."""
    import dataclasses
    if entry is None:
        return KernelConfig(source=source)
    base = dataclasses.replace(KernelConfig(), **_fields(entry["config"]), source=source)
    by_call = tuple((key, dataclasses.replace(base, **_fields(fields), source=f"{source} ({key})"))
                    for key, fields in sorted(entry.get("by_call", {}).items()))
    return dataclasses.replace(base, by_call=by_call)


def _fields(fields: dict) -> dict:
    """A tuned entry's fields as ``KernelConfig`` holds them (JSON's lists of pairs made tuples)."""
    for name in ("programs_by_batch", "race_by_batch", "race_programs_by_batch"):
        if name in fields:
            fields = dict(fields, **{name: tuple(tuple(entry) for entry in fields[name])})
    return fields


def _pow2(n: int, at_least: int = 2) -> int:
    return max(at_least, 1 << max(0, int(n) - 1).bit_length())


def kernels(interpret: bool | None = None) -> ModuleType:
    """``devices/triton_kernels.py`` compiled for CUDA, or run by the CPU interpreter
    (default: the mode this process is in; compiled if undecided)."""
    from devices.triton_mode import interpreting, kernel_module
    return kernel_module("devices.triton_kernels", bool(interpreting()) if interpret is None else interpret)


def verify_tensors(cu, draft_token_ids, draft_probs, target_logits, temperature, *, max_k: int,
                   seeds=None, positions=None, uniforms=None, exponentials=None,
                   config: KernelConfig | None = None, kernels_module: ModuleType | None = None,
                   sampler=None, sampler_kernels: ModuleType | None = None, cut=None, withdrawn=None, prepared=None):
    """One step on torch tensors (one device, no validation, no host sync).

    - ``cu``: ``[batch + 1]`` int64, exclusive cumsum of num_draft_tokens;
    - ``draft_token_ids``: ``[num_tokens]`` int64 (placeholder -1 allowed);
    - ``draft_probs``: ``[num_tokens, V]`` float32/64 or None (point proposals);
    - ``target_logits``: ``[num_tokens + batch, V]`` (top-k/top-p/min_p: ``cut``);
    - ``temperature``: ``[batch]`` in the logits' dtype, 0 = greedy;
    - keyed: ``seeds`` ``[batch]`` int64 holding the uint64 bits, ``positions``
      ``[batch]`` int64; injected: ``uniforms`` ``[num_tokens]`` float64,
      ``exponentials`` ``[batch, V]``;
    - ``max_k``: a Python int ≥ every K_i (the output width is max_k + 1).

    - ``config``: the launch shape (default ``default_config``: this GPU's tuned entry); each call takes
      its kind's entry (``KernelConfig.for_call``);
    - ``kernels_module``: the kernels to launch (default ``kernels()``);
    - ``sampler``: SPEC §12 fused into the step (``devices.triton_sampler.FusedSampler``, for
      ``target_logits`` as given: no top-k/top-p/min_p), launched from ``sampler_kernels``
      (default: ``devices/triton_sampler.py`` in the kernels' mode). None: the plain step.
    - ``cut``: a ``filter_cut.Cut`` or None: top-k/top-p/min_p, each row read as
      ``z ≥ cut.floor[r]`` (``-inf`` below; ``filter_cuts``); with ``cut.stats`` the statistics
      pass is not launched (the rows' kept maxima and sums are given). With ``sampler``: the cut
      of the §12 rows (``sampler_cut``), with its ``stats``, and ``prepared``.
    - ``prepared``: ``(live, edit_z)`` of ``triton_sampler.fused_prepare`` (with ``sampler`` and
      ``cut``: the launches the cut's candidates already read).
    - ``withdrawn``: ``[num_tokens]`` int8 or None (SPEC §4): nonzero where a placeholder is a
      withdrawn draft, whose residual reads its ``draft_probs`` row (needs ``draft_probs``).

    Returns ``(output_token_ids [batch, max_k + 1] int64, num_accepted [batch] int64)``.
    """
    return step_tensors(cu, draft_token_ids, draft_probs, target_logits, temperature, max_k=max_k, seeds=seeds,
                        positions=positions, uniforms=uniforms, exponentials=exponentials, config=config,
                        kernels_module=kernels_module, sampler=sampler, sampler_kernels=sampler_kernels,
                        cut=cut, withdrawn=withdrawn, prepared=prepared)[:2]


def step_tensors(cu, draft_token_ids, draft_probs, target_logits, temperature, *, max_k: int, seeds=None,
                 positions=None, uniforms=None, exponentials=None, config: KernelConfig | None = None,
                 kernels_module: ModuleType | None = None, sampler=None, sampler_kernels: ModuleType | None = None,
                 cut=None, withdrawn=None, prepared=None):
    """``verify_tensors`` (same arguments), also returning each row's chunk maxima ``[rows, columns]``
    (a row whose every column is ``-inf`` allows no token: SPEC §12.4's check on the fused path)."""
    import torch

    from devices import torch_sampling as ts
    tk = kernels_module or kernels()

    rows, V = target_logits.shape
    batch = cu.shape[0] - 1
    dev = target_logits.device
    config = (config or default_config(dev)).for_call(draft_probs is not None, target_logits.element_size())
    fp64 = target_logits.dtype == torch.float64
    compute = torch.float64 if fp64 else torch.float32  # float16/bfloat16 logits are up-cast in the kernels
    keyed = uniforms is None
    has_draft = draft_probs is not None
    width = ts.output_width(max_k)
    stages = {} if config.num_stages is None else {"num_stages": config.num_stages}

    block = config.stats_block(target_logits.element_size())
    programs = config.programs_at(batch)
    chunk, nchunk = vocab_chunks(V, rows, block, programs)
    race_block, race_warps = config.race_at(batch)
    race_chunk, race_nchunk = vocab_chunks(V, batch, race_block, config.race_programs_at(batch))
    given = cut is not None and cut.stats is not None  # the rows' statistics come with the cut: no first pass
    nstat = 1 if given else nchunk + (sampler is not None)  # the fused path's records: a column of their own
    # Three allocations, no kernel: every element below is written by the launches.
    floats = torch.empty(2 * rows * nstat + 2 * batch * race_nchunk, dtype=compute, device=dev)
    ints = torch.empty(rows * nstat + batch + 2 * batch * race_nchunk, dtype=torch.int32, device=dev)
    outs = torch.empty(batch * width + batch, dtype=torch.int64, device=dev)
    stat_max, stat_sum, best_w, best_t = floats.split([rows * nstat, rows * nstat, batch * race_nchunk,
                                                       batch * race_nchunk])
    stat_arg, counter, best_w_id, best_t_id = ints.split([rows * nstat, batch, batch * race_nchunk,
                                                          batch * race_nchunk])
    out, num_accepted = outs[:batch * width].view(batch, width), outs[batch * width:]

    fused = {}
    if cut is not None:
        if sampler is not None and (not given or prepared is None):
            raise ValueError("verify_tensors: with sampler, cut must be the §12 rows' cut with its stats "
                             "(sampler_cut) and prepared their (live, edit_z) (triton_sampler.fused_prepare)")
        fused = dict(cut_ptr=cut.floor, CUT=True)
    if given:
        stat_max, stat_sum = cut.stats[0], cut.stats[1]  # one column each, read in place
        ints[:rows + batch].zero_()                      # stat_arg (every row random: unread), counter
    # Programmatic dependent launch on the plain step only: elsewhere the walk's gathers read what earlier launches
    # wrote (the cut's floors, §12's records), so step_kernel may not start before they finish.
    plain = cut is None and sampler is None
    pdl, early = pdl_launch(dev, batch * (max_k + 1) * nchunk, config) if plain else (False, False)
    if not given and sampler is None:
        tk.stats_kernel[(batch, max_k + 1, nchunk)](
            target_logits, cu, temperature, counter, stat_max, stat_sum, stat_arg, V, chunk, nchunk,
            TILES=chunk // block, BLOCK=block, FP64=fp64, **stats_form(target_logits.element_size(), block),
            num_warps=config.num_warps, PDL=pdl, PDL_EARLY=early, **stages, **fused)
    if sampler is not None:
        if block % 32 or race_block % 32:
            raise ValueError(f"KernelConfig: the fused §12 path reads 32-bit live words, so block ({block}) "
                             f"and race_block ({race_block}) must be multiples of 32")
        ks = sampler_kernels or _sampler_kernels(tk)
        if given:  # the cut's candidates read the §12 rows: their live bits and records are made
            live, edit_z = prepared
        else:
            live, edit_z = ks.fused_stats(ks, target_logits, cu, temperature, counter, sampler,
                                          tuple(t.view(rows, nstat) for t in (stat_max, stat_sum, stat_arg)), max_k,
                                          chunk, block, config.num_warps)
        fused.update(live_ptr=live, bias_ptr=target_logits if sampler.logit_bias is None else sampler.logit_bias,
                     edit_start_ptr=sampler.edit_start, edit_tok_ptr=sampler.edit_token, edit_z_ptr=edit_z,
                     draft_edit_ptr=sampler.draft_edit, W=live.shape[1], SAMPLER=True,
                     bias_max_ptr=target_logits if sampler.bias_max is None else sampler.bias_max,
                     HAS_BIAS=sampler.logit_bias is not None)
    if withdrawn is not None:
        if not has_draft:
            raise ValueError("verify_tensors: withdrawn drafts need draft_probs (their residual reads the draft row)")
        fused.update(withdrawn_ptr=withdrawn, WITHDRAWN=True)
    dummy = target_logits
    tk.step_kernel[(batch, race_nchunk)](
        cu, draft_token_ids, draft_probs if has_draft else dummy, target_logits, temperature,
        seeds if keyed else dummy, positions if keyed else dummy, dummy if keyed else uniforms,
        dummy if keyed else exponentials, stat_max, stat_sum, stat_arg, counter,
        best_w, best_w_id, best_t, best_t_id, out, num_accepted,
        V, width, nstat, race_chunk, race_nchunk, TILES=race_chunk // race_block, HAS_DRAFT=has_draft,
        KEYED=keyed, BLOCK_K=_pow2(width, 8), BLOCK_C=_pow2(nstat), BLOCK_R=_pow2(race_nchunk), BLOCK=race_block,
        FP64=fp64, BOUND=config.bound, num_warps=race_warps, PDL=pdl,
        **({"launch_pdl": True} if pdl else {}), **stages, **fused)
    return out, num_accepted, stat_max.view(rows, nstat)


def pdl_launch(device, stats_programs: int, config: KernelConfig) -> tuple[bool, bool]:
    """``(PDL, PDL_EARLY)`` of the plain step's launches on ``device`` (a torch device): programmatic dependent
    launch where ``config.pdl`` and the GPU has it (compute capability 9.0 or later: Hopper's ``griddepcontrol``;
    never on the CPU, where the kernels run in the interpreter); early where the statistics pass is at most
    ``config.pdl_early_per_sm`` programs a multiprocessor — one wave with room to spare: in a grid of several
    waves, a later wave's programs would wait behind step programs holding their multiprocessors.

    >>> import torch
    >>> pdl_launch(torch.device("cpu"), 10, KernelConfig())
    (False, False)
    """
    if not config.pdl or getattr(device, "type", "cpu") != "cuda":
        return False, False
    import torch
    has_pdl, multiprocessors = _gpu_traits(torch.cuda.current_device() if device.index is None else device.index)
    return has_pdl, has_pdl and stats_programs <= config.pdl_early_per_sm * multiprocessors


@functools.lru_cache(maxsize=None)
def _gpu_traits(index: int) -> tuple[bool, int]:
    # once per GPU and process: a step's hot path asks on every call
    import torch
    props = torch.cuda.get_device_properties(index)
    return (props.major, props.minor) >= (9, 0), props.multi_processor_count


STATS_SUB = 4
"""Rows of the statistics pass's tile for 32- and 64-bit logits (``triton_kernels.softmax_tiles``). Four rows ran
fastest of 2, 4 and 8 on an H200 at the anchor."""
ROWS_BYTES = 16
"""Bytes of 16-bit logits one lane of the statistics pass takes contiguously (``triton_kernels.softmax_tiles``
with ``ROWS``, ``argmax_rows``): one 16-byte load, eight entries."""


def stats_form(itemsize: int, block: int) -> dict:
    """``stats_kernel``'s ``SUB`` and ``ROWS`` for logits of ``itemsize`` bytes and a tile of ``block``: 16-bit
    logits in tiles of ``[block / 8, 8]``, each lane's eight entries contiguous (``ROWS``); wider logits in
    ``STATS_SUB`` rows (``softmax_tiles``; greedy rows ``argmax_lanes``); either only where it leaves at least 8
    lanes, else lane-wise (``SUB`` 1).

    >>> stats_form(4, 2048), stats_form(2, 2048), stats_form(8, 16), stats_form(2, 32)
    ({'SUB': 4, 'ROWS': False}, {'SUB': 8, 'ROWS': True}, {'SUB': 1, 'ROWS': False}, {'SUB': 1, 'ROWS': False})
    """
    if itemsize == 2:
        sub = ROWS_BYTES // itemsize
        return {"SUB": sub, "ROWS": True} if block >= 8 * sub else {"SUB": 1, "ROWS": False}
    return {"SUB": STATS_SUB if block >= 8 * STATS_SUB else 1, "ROWS": False}


def _sampler_kernels(tk: ModuleType) -> ModuleType:
    """``devices/triton_sampler.py`` in the same Triton mode as the kernels ``tk``."""
    from devices.triton_mode import kernel_module
    return kernel_module("devices.triton_sampler", type(tk.step_kernel).__name__ == "InterpretedFunction")


def filtered_requests(vocab_size: int, temperature, top_k, top_p, min_p=None) -> np.ndarray:
    """Which requests top-k, top-p or min_p filter (random rows only): bool ``[batch]``; the
    arguments ``[batch]`` numpy (``min_p`` None: off)."""
    from devices import torch_sampling as ts
    uses = ts.uses_top_k(temperature, top_k, vocab_size) | ts.uses_top_p(temperature, top_p)
    if min_p is not None:
        uses = uses | ((temperature > 0) & (min_p > 0))
    return uses


def request_rows(cu, req) -> np.ndarray:
    """The target rows of requests ``req`` (numpy ``[m]``, ascending), in order: request ``i``'s
    ``K_i + 1`` rows ``cu[i] + i .. cu[i + 1] + i`` (``cu`` ``[batch + 1]`` numpy). Vectorised:
    a Python loop over 256 requests cost 0.66 ms of host time a step on a 2-core CPU.

    >>> request_rows(np.array([0, 2, 2, 5]), np.array([0, 2])).tolist()
    [0, 1, 2, 4, 5, 6, 7]
    """
    counts = cu[req + 1] - cu[req] + 1
    first = np.cumsum(counts) - counts
    return np.repeat(cu[req] + req, counts) + np.arange(counts.sum()) - np.repeat(first, counts)


class FilterRows(NamedTuple):
    """The target rows that top-k, top-p or min_p filter, and their parameters (``filter_rows``).

    ``rows`` numpy ``[m]`` (ascending); ``params`` ``SamplingRows`` ``[m]`` on the device;
    ``top_k`` numpy ``[m]``, the same ``k`` on the host (``filter_cut.cut_plan`` reads it)."""

    rows: np.ndarray
    params: object
    top_k: np.ndarray


KEPT_SIGNATURES = 32
"""How many parameter signatures ``filter_plan`` keeps on the device (least recently used dropped)."""

_plans: OrderedDict = OrderedDict()


def filter_plan(target_logits, cu, temperature, top_k, top_p, min_p=None):
    """``(FilterRows or None, filter_cut.CutPlan or None)`` of a step: ``filter_rows``, and where every
    target row filters, its ``cut_plan`` (None: ``filter_cuts`` gathers the rows that filter).
    Arguments as ``filter_cuts``'. An engine's parameters
    repeat step after step, so the last ``KEPT_SIGNATURES`` signatures (the logits' device, shape and
    dtype, the parameters' bytes) keep theirs on the device: a repeat costs a lookup, not the host
    work and the copy (H100, 256 requests: 0.15 ms of a step's host time)."""
    from devices.filter_cut import cut_plan
    key = (str(target_logits.device), tuple(target_logits.shape), target_logits.dtype) + tuple(
        None if a is None else np.asarray(a).tobytes() for a in (cu, temperature, top_k, top_p, min_p))
    if key in _plans:
        _plans.move_to_end(key)
        return _plans[key]
    f = filter_rows(target_logits, cu, temperature, top_k, top_p, min_p)
    every = f is not None and len(f.rows) == target_logits.shape[0]
    plan = f, cut_plan(target_logits.shape[1], f.params, f.top_k) if every else None
    _plans[key] = plan
    if len(_plans) > KEPT_SIGNATURES:
        _plans.popitem(last=False)
    return plan


def filter_rows(target_logits, cu, temperature, top_k, top_p, min_p=None) -> FilterRows | None:
    """``FilterRows`` of a step (None: no request filters). Arguments as ``filter_cuts``'. The
    parameters travel to the device in one asynchronous copy (``filter_cut.to_device``: a pageable
    copy is a stream sync in torch)."""
    import torch

    from devices import torch_sampling as ts
    from devices.filter_cut import to_device
    uses = filtered_requests(target_logits.shape[1], temperature, top_k, top_p, min_p)
    if not uses.any():
        return None
    req = np.flatnonzero(uses)
    counts = cu[req + 1] - cu[req] + 1
    columns = [temperature, top_k, top_p] + ([] if min_p is None else [min_p])
    packed = to_device(np.stack([np.repeat(np.asarray(c, np.float64)[req], counts) for c in columns]),
                       target_logits.device)  # top_k as float64: exact below 2^53
    params = ts.SamplingRows(packed[0], packed[1].to(torch.int64), packed[2], None if min_p is None else packed[3])
    return FilterRows(request_rows(cu, req), params, np.repeat(np.asarray(top_k, np.int64)[req], counts))


def filter_cuts(target_logits, cu, temperature, top_k, top_p, min_p=None, order: str = "canonical",
                top_values=None):
    """SPEC §2 top-k then top-p (and §12's min_p) as one cut a row: a ``filter_cut.Cut`` whose
    floor ``[rows]`` (compute dtype) has row ``r`` keep ``z ≥ floor[r]`` (``-inf``: every entry),
    with the kept rows' statistics where every row decides on its candidates, for
    ``verify_tensors(cut=...)``; None when no request uses them (the plain step).

    ``target_logits`` ``[rows, V]`` torch; ``cu`` ``[batch + 1]``, ``temperature``, ``top_k``,
    ``top_p`` ``[batch]`` numpy (known on the host: the engine sets them). What a row keeps is
    ``devices.torch_sampling.filter_kept`` on float64 ``z = logits / T`` — by value, so boundary
    ties are kept, as the spec says; with ``min_p`` (``[batch]`` numpy, or None) the tokens
    ``torch_sampling.target_probs`` gives a positive float64 probability in the ``order``
    profile (min_p after top-p, or before top-k): a token it zeroes underflows in the kernels'
    float32 too. Rows with top-k decide on their ``k + 1`` largest entries
    (``devices.filter_cut.row_cut``), found by ``top_values`` (``filter_cut.TopValues``;
    None: ``torch.topk``). No host sync: every decision stays on the device, every size comes
    from the host's parameters, and the host's arrays travel by asynchronous copies. Step after
    step: ``devices.filter_graph.FilterCuts``.
    """
    import torch

    from devices.filter_cut import Cut, candidate_cut, compute_dtype, finish_cut, row_cut, to_device, torch_top_values

    top_values = top_values or torch_top_values
    f, plan = filter_plan(target_logits, cu, temperature, top_k, top_p, min_p)
    if f is None:
        return None
    if plan is not None:  # every row filtered (the usual batch): no gathers, the plan kept
        return finish_cut(target_logits, f.params, plan,
                          candidate_cut(target_logits, f.params, plan, order, top_values), order)
    how = dict(order=order, top_k=f.top_k, top_values=top_values)
    cut = torch.full((target_logits.shape[0],), float("-inf"), dtype=compute_dtype(target_logits),
                     device=target_logits.device)
    idx = to_device(f.rows, target_logits.device)
    cut[idx] = row_cut(target_logits[idx], f.params, **how).floor
    return Cut(cut)


def filter_logits(target_logits, cu, temperature, top_k, top_p, min_p=None, order: str = "canonical",
                  top_values=None):
    """``filter_cuts`` (same arguments) as a filtered copy of ``target_logits`` (``-inf`` below
    each row's cut), or ``target_logits`` itself when no request filters: for a step that takes
    no cut (the torch-side checks). The device passes the cut to the kernels instead."""
    cut = filter_cuts(target_logits, cu, temperature, top_k, top_p, min_p, order, top_values)
    if cut is None:
        return target_logits
    return target_logits.masked_fill(target_logits.to(cut.floor.dtype) < cut.floor.unsqueeze(1), float("-inf"))


def triton_top_values(module: ModuleType, config: KernelConfig, sampler=None):
    """``filter_cut.TopValues`` by ``devices/triton_topk.py`` (``module``: it in the device's
    Triton mode), with the statistics pass's tile, warps and program count, and its decisions
    (``decide``: one launch of ``triton_topk.decide_kernel``). ``sampler``: a
    ``triton_topk.RowsSampler``, the candidates of the rows as SPEC §12 leaves them."""
    def top_values(logits, row_ids, ks, width):
        return module.top_values(module, logits, row_ids, ks, width, block=config.block, programs=config.programs,
                                 num_warps=config.num_warps, sampler=sampler)
    top_values.decide = lambda *a: module.decide(module, *a)
    return top_values


def cut_in_one_sweep(vocab_size: int, temperature, top_k) -> bool:
    """Whether every request's filters decide on top-k candidates one sweep finds: each request
    random with ``1 ≤ top_k ≤ FUSED_TOP_K`` and ``top_k < V`` (``temperature``, ``top_k`` ``[batch]``
    numpy). Then every row gets its cut and kept statistics from its candidates (``filter_cuts``),
    so the §12 rows need not be written: ``sampler_cut``."""
    t, k = np.asarray(temperature), np.asarray(top_k)
    return bool(((t > 0) & (k >= 1) & (k <= FUSED_TOP_K) & (k < vocab_size)).all())


def rows_sampler(topk_module: ModuleType, sampler, prepared):
    """``triton_topk.RowsSampler`` (from ``topk_module``, the device's Triton mode) of the fused step's
    inputs: ``sampler`` a ``triton_sampler.FusedSampler``, ``prepared`` its ``(live, edit_z)``
    (``triton_sampler.fused_prepare``) — the rows as SPEC §12 leaves them, for the candidates' sweep."""
    return topk_module.RowsSampler(prepared[0], sampler.logit_bias, sampler.row_request, sampler.edit_start,
                                   prepared[1])


def sampler_cut(target_logits, cu, temperature, top_k, top_p, min_p, order: str, sampler, prepared,
                topk_module: ModuleType, config: KernelConfig):
    """``filter_cuts`` of the rows as SPEC §12 leaves them, which are never written: the candidates'
    sweep reads the raw ``target_logits`` ``[rows, V]`` through the fused step's live bits, bias and
    records (``sampler``: ``triton_sampler.FusedSampler``; ``prepared``: ``(live, edit_z)`` of
    ``triton_sampler.fused_prepare``), so the step then reads them through the same inputs and the
    cut (``verify_tensors(sampler=..., cut=..., prepared=...)``). ``cu``, ``temperature``, ``top_k``,
    ``top_p``, ``min_p`` (or None) ``[batch]`` numpy, ``cut_in_one_sweep``; ``order`` the profile."""
    if not cut_in_one_sweep(target_logits.shape[1], temperature, top_k):
        raise ValueError("sampler_cut: every request must be random with 1 <= top_k <= FUSED_TOP_K and top_k < V "
                         "(cut_in_one_sweep); otherwise the filters decide on the processed rows "
                         "(TritonDevice.processed_logits)")
    return filter_cuts(target_logits, cu, temperature, top_k, top_p, min_p, order,
                       triton_top_values(topk_module, config, rows_sampler(topk_module, sampler, prepared)))


# --- the numpy protocol's rungs (TritonDevice.verify) ------------------------------------

PLAIN, FUSED, PROCESSED = "plain", "fused", "processed"
"""The paths of ``TritonDevice.verify`` (``choose_path``; the module docstring says what each does)."""


def given_sampler(batch: VerifyBatch) -> SamplerParams | None:
    """The batch's SPEC §12 parameters, or None when it gives none."""
    return batch.sampler if batch.sampler is not None and batch.sampler.given() else None


def filter_parameters(batch: VerifyBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(temperature, top_k, top_p)``, each ``[batch]`` numpy (float64, int64, float64), as the filters read them."""
    return (np.asarray(batch.temperature, np.float64), np.asarray(batch.top_k, np.int64),
            np.asarray(batch.top_p, np.float64))


def choose_path(batch: VerifyBatch) -> str:
    """``PLAIN`` without §12 parameters; with them ``FUSED`` where no request uses top-k, top-p or
    min_p (``filtered_requests``), or where every request's filters decide on one sweep's top-k
    candidates (``cut_in_one_sweep``: the sweep reads the §12 rows unwritten); otherwise the
    filters decide on the processed rows: ``PROCESSED``."""
    sampler = given_sampler(batch)
    if sampler is None:
        return PLAIN
    temperature, top_k, top_p = filter_parameters(batch)
    if not filtered_requests(batch.vocab_size, temperature, top_k, top_p, sampler.min_p).any():
        return FUSED
    return FUSED if cut_in_one_sweep(batch.vocab_size, temperature, top_k) else PROCESSED


class StepRows(NamedTuple):
    """What the step kernels read for one batch (``TritonDevice.prepare_rows``).

    ``cu`` ``[batch + 1]`` int64 numpy; ``logits`` ``[rows, V]`` torch on the device (the target
    logits, or §12's processed rows in the compute dtype); ``cut`` ``[rows]`` in the compute dtype
    or None (``filter_cuts``); ``fused`` ``triton_sampler.FusedSampler`` or None (the fused path);
    ``empty`` ``[rows]`` bool on the device or None: the processed rows every ban leaves empty,
    read with the step's outputs (``assemble``) so that the filters and the step are queued first;
    ``prepared`` ``(live, edit_z)`` or None: the fused path's live bits and records, made before its
    cut (``triton_sampler.fused_prepare``)."""

    cu: np.ndarray
    logits: object
    cut: object
    fused: object
    empty: object = None
    prepared: object = None


def noise_tensors(batch: VerifyBatch, noise: Noise | None, device: str) -> dict:
    """The step's noise arguments on ``device``: keyed (``noise`` None) ``seeds`` (the uint64 bits as
    int64) and ``positions`` ``[batch]``; injected ``uniforms`` ``[num_tokens]`` float64 and
    ``exponentials`` ``[batch, V]`` in the compute dtype (float64 for float64 logits, else float32)."""
    if noise is None:
        return dict(seeds=to_torch(np.asarray(batch.seeds).astype(np.uint64).view(np.int64), device),
                    positions=to_torch(np.asarray(batch.positions, np.int64), device))
    dtype = np.float64 if batch.target_logits.dtype == np.float64 else np.float32
    return dict(uniforms=to_torch(np.asarray(noise.uniforms, np.float64), device),
                exponentials=to_torch(np.asarray(noise.exponentials, dtype), device))


class TritonDevice:
    """The numpy-protocol face of ``verify_tensors`` (see the module docstring); ``name`` is
    ``"triton"`` on CUDA and ``"triton-interpret"`` in the CPU interpreter."""

    capabilities = Capabilities(injected_noise=True, rng="philox", max_vocab_size=MAX_VOCAB_SIZE, max_k=MAX_K,
                                greedy=True, draft_probs=True, point_proposals=True, top_k=True, top_p=True,
                                dtypes=("float16", "bfloat16", "float32", "float64"),
                                sampler=SAMPLER_PARAMETERS, sampler_orders=SAMPLER_ORDERS, withdrawn_drafts=True,
                                tree_schemes=("greedy", "rrs", "sglang"),   # SPEC §11: devices/triton_tree.py
                                max_tree_nodes=MAX_TREE_NODES)
    # (compiled: held to the reference on an H100 by ``specsim.bench.trees --check``, docs/trees.md)

    def __init__(self, device: str, config: KernelConfig, kernels_module: ModuleType | None = None,
                 name: str | None = None, kernel_files: dict | None = None):
        self.device = device
        self.config = config
        self.interpret = device == "cpu"
        self.name = name or ("triton-interpret" if self.interpret else "triton")
        self._files = dict(kernel_files or {})  # edited kernel files by module name (a mutant's)
        self._kernels = kernels_module or self._files.get("devices.triton_kernels")

    @property
    def kernels(self) -> ModuleType:
        """The kernels, loaded on first use, when this process enters the device's Triton mode."""
        if self._kernels is None:
            from devices.triton_mode import enter
            enter(self.interpret, self.name)
            self._kernels = kernels(self.interpret)
        return self._kernels

    def _kernel_file(self, module: str) -> ModuleType:
        """``module`` (e.g. ``devices.triton_tree``) in the device's Triton mode, which this process
        enters on first use (``triton_mode.kernel_module`` keeps one copy per mode)."""
        from devices.triton_mode import enter, kernel_module
        enter(self.interpret, self.name)
        return self._files.get(module) or kernel_module(module, self.interpret)

    @property
    def sampler_kernels(self) -> ModuleType:
        """``devices/triton_sampler.py`` (SPEC §12), in the device's Triton mode."""
        return self._kernel_file("devices.triton_sampler")

    @property
    def tree_kernels(self) -> ModuleType:
        """``devices/triton_tree.py``, in the device's Triton mode."""
        return self._kernel_file("devices.triton_tree")

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        """One step on a numpy batch (``noise`` None: keyed Philox noise from the batch's seeds)."""
        from devices.validate import check_call
        check_call(batch, noise, self.capabilities)
        path = choose_path(batch)
        rows = self.prepare_rows(path, batch)
        out, num_accepted, row_maxima = self.launch(batch, noise, rows)
        return self.assemble(rows, out, num_accepted, row_maxima)

    def prepare_rows(self, path: str, batch: VerifyBatch) -> StepRows:
        """The rows the step reads on ``path`` (``choose_path``): the target logits copied to the device,
        then that path's rung."""
        rung = {PLAIN: self.plain_rows, FUSED: self.fused_rows, PROCESSED: self.processed_rows}[path]
        return rung(batch, batch.request_offsets(), to_torch(batch.target_logits, self.device))

    def plain_rows(self, batch: VerifyBatch, cu: np.ndarray, logits) -> StepRows:
        """No §12 parameters: the raw rows, through each row's top-k/top-p cut (None: no request filters)."""
        return StepRows(cu, logits, self.filter_cut(batch, logits, cu), None)

    def fused_rows(self, batch: VerifyBatch, cu: np.ndarray, logits) -> StepRows:
        """SPEC §12 inside the step's loads: the raw rows, and the sampler's records and packed masks;
        where requests filter (each on one sweep's candidates: ``choose_path``), the live bits and
        records first, then the cut of the §12 rows (``sampler_cut``)."""
        from devices.filter_cut import compute_dtype
        ks = self.sampler_kernels
        fused = ks.fused_inputs(batch.sampler, batch.num_draft_tokens, batch.draft_token_ids, batch.vocab_size,
                                self.device, compute_dtype(logits))
        temperature, top_k, top_p = filter_parameters(batch)
        if not filtered_requests(batch.vocab_size, temperature, top_k, top_p, batch.sampler.min_p).any():
            return StepRows(cu, logits, None, fused)
        prepared = ks.fused_prepare(ks, logits, to_torch(cu, self.device), to_torch(temperature, self.device), fused,
                                    batch.max_k)
        cut = sampler_cut(logits, cu, temperature, top_k, top_p, batch.sampler.min_p, batch.sampler.order, fused,
                          prepared, self._kernel_file("devices.triton_topk"), self.config)
        return StepRows(cu, logits, cut, fused, prepared=prepared)

    def processed_rows(self, batch: VerifyBatch, cu: np.ndarray, logits) -> StepRows:
        """SPEC §12, then top-k/top-p/min_p: the processed rows (the filters decide on them), through their
        cut. The rows every ban leaves empty are found here and refused in ``assemble`` (§12.4)."""
        processed, empty = self.processed_logits(batch, logits, cu)
        return StepRows(cu, processed, self.filter_cut(batch, processed, cu), None, empty)

    def processed_logits(self, batch: VerifyBatch, logits, cu: np.ndarray):
        """SPEC §12: every row after bans, penalties and bias (``devices/triton_sampler.py``), and which
        of them every ban leaves empty: ``([rows, V]`` in the compute dtype, ``[rows]`` bool), on the device."""
        import torch

        from devices.filter_cut import compute_dtype
        ks = self.sampler_kernels
        inputs = ks.sampler_inputs(batch.sampler, batch.num_draft_tokens, batch.draft_token_ids, batch.vocab_size,
                                   self.device, compute_dtype(logits))
        chunk, _ = vocab_chunks(batch.vocab_size, logits.shape[0], self.config.block, self.config.programs)
        out = ks.process_logits(ks, logits, to_torch(cu, self.device), batch.max_k, inputs, self.config.block, chunk,
                                self.config.num_warps)
        return out, torch.isneginf(out).all(dim=1)

    def sampler_logits(self, batch: VerifyBatch, logits, cu: np.ndarray):
        """``processed_logits``' rows; a row every ban leaves empty (a bad word the drafts complete,
        min_tokens) is ``InvalidInput`` (§12.4)."""
        out, empty = self.processed_logits(batch, logits, cu)
        self.sampler_kernels.raise_if_empty(empty.cpu().numpy(), cu)
        return out

    def filter_cut(self, batch: VerifyBatch, logits, cu: np.ndarray):
        """``filter_cuts`` of ``logits`` ``[rows, V]`` with the batch's top-k, top-p (and its sampler's
        min_p, in its order profile); the candidates by ``devices/triton_topk.py``. None: no request filters."""
        sampler = given_sampler(batch)
        return filter_cuts(logits, cu, *filter_parameters(batch), None if sampler is None else sampler.min_p,
                           "canonical" if sampler is None else sampler.order,
                           triton_top_values(self._kernel_file("devices.triton_topk"), self.config))

    def launch(self, batch: VerifyBatch, noise: Noise | None, rows: StepRows):
        """``step_tensors`` on the prepared rows, the batch's drafts, temperatures and noise copied to the
        device: ``(output_token_ids [batch, max_k + 1], num_accepted [batch], row maxima [rows, columns])``."""
        on = lambda a, dt=None: to_torch(a if dt is None else np.asarray(a, dt), self.device)  # noqa: E731
        return step_tensors(
            on(rows.cu), on(batch.draft_token_ids, np.int64),
            None if batch.draft_probs is None else on(batch.draft_probs),
            rows.logits, on(batch.temperature, np.float64), max_k=batch.max_k, config=self.config,
            kernels_module=self.kernels, sampler=rows.fused,
            sampler_kernels=None if rows.fused is None else self.sampler_kernels, cut=rows.cut, prepared=rows.prepared,
            withdrawn=on(batch.withdrawn, np.int8) if batch.has_withdrawn() else None,
            **noise_tensors(batch, noise, self.device))

    def assemble(self, rows: StepRows, out, num_accepted, row_maxima) -> VerifyOutput:
        """The step's tensors as the protocol's numpy output. On the fused path SPEC §12.4 is checked
        here: a row without one finite chunk maximum allows no token (``InvalidInput``); on the processed
        path, a row ``processed_logits`` left empty."""
        if rows.fused is not None:
            import torch
            self.sampler_kernels.raise_if_empty(torch.isneginf(row_maxima).all(dim=1).cpu().numpy(), rows.cu)
        if rows.empty is not None:
            self.sampler_kernels.raise_if_empty(rows.empty.cpu().numpy(), rows.cu)
        return VerifyOutput(out.cpu().numpy(), num_accepted.cpu().numpy())

    def verify_tree(self, batch: TreeBatch, noise: Noise | None = None) -> TreeOutput:
        """SPEC §11: each row's top-k/top-p cut where a request filters (``filter_cuts``, as the chain
        step's), then one program per request walking its tree, reading the rows it visits
        (``devices.triton_tree``)."""
        from devices.validate import check_tree_call
        depths = check_tree_call(batch, noise, self.capabilities)
        logits = to_torch(batch.target_logits, self.device)
        cut = filter_cuts(logits, batch.request_offsets(), np.asarray(batch.temperature), np.asarray(batch.top_k),
                          np.asarray(batch.top_p), top_values=triton_top_values(
                              self._kernel_file("devices.triton_topk"), self.config))
        out, num_accepted, nodes = self.tree_kernels.verify_tree_triton(
            self.tree_kernels, batch, noise, depths, self.device, cut=None if cut is None else cut.floor,
            logits=logits)
        return TreeOutput(out, num_accepted, nodes)


def _loadable(name: str, interpret: bool) -> None:
    """Raise unless torch and triton are installed and this process can run Triton as ``name`` needs."""
    import importlib.util

    from devices.triton_mode import conflict
    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"{name} device: needs {' and '.join(missing)} installed (pip install 'specsim[triton]')")
    why = conflict(interpret, f"{name} device")
    if why:
        raise RuntimeError(why)


def make_device(config: KernelConfig | None = None) -> TritonDevice:
    """The Triton device: compiled kernels on a CUDA GPU (never the interpreter)."""
    _loadable("triton", interpret=False)
    import torch
    if not torch.cuda.is_available():
        raise RuntimeError("triton device: no CUDA GPU here; the same kernels run on CPU in Triton's "
                           "interpreter as the device 'triton-interpret' (slow, for tests)")
    return TritonDevice("cuda", config or default_config())


def make_interpreter_device(config: KernelConfig | None = None) -> TritonDevice:
    """The same kernels in Triton's CPU interpreter, named ``triton-interpret`` (any machine)."""
    _loadable("triton-interpret", interpret=True)
    return TritonDevice("cpu", config or INTERPRETER_CONFIG)
