"""``specsim bench --tune``: the Triton device's launch shapes for the GPU it runs on, chosen by a sweep.

Each candidate launch shape (``devices.triton_device.KernelConfig``) is timed as ``specsim bench`` times
its ``triton graph`` row on the device alone (``step.graph_time(queued=True)``: a CUDA graph of the step per
input set, replayed behind a sleeping kernel, the median), one part of the shape at a time, each part's
winner kept for the next:

1. ``programs``: how many programs a pass aims for, at B = 1, 32 and 256 (``PROGRAM_BATCHES``): each batch
   size's fastest, kept per batch size (``KernelConfig.programs_by_batch``: from that batch size up), the
   anchor's as ``programs`` (what the other passes, the filters' and §12's, aim for). First, since the
   other parts' best moves with it (more programs a request leave each fewer entries: the race's best
   tile moves with them);
2. ``stats``: the statistics pass's tile, warps and pipelining stages, at the anchor with draft probabilities
   (``ANCHOR``: B = 256, K = 4, V = 128256, float32);
3. ``race``: the step kernel's tile and warps, for draft probabilities and for point proposals apart;
4. ``race by batch``: the same at B = 1, 8 and 32 (``RACE_BATCHES``), each mode apart, kept per batch size
   (``KernelConfig.race_by_batch``: from that batch size up; the anchor's from the anchor up). A small batch's
   step kernel has a tile or two a program, and its walk over every row's statistics wants more warps than
   the anchor's long race does;
5. ``race programs``: the programs the race aims for, at B = 1, 8, 32 and the anchor, each mode apart, as
   multiples of the statistics pass's (``RACE_PROGRAM_SCALES``; ``KernelConfig.race_programs_by_batch``). The
   race's one-warp programs are many more a multiprocessor than the pass's: the pass's count can spill a few
   into a second wave;
6. ``16-bit``: the statistics tile and warps for bfloat16 logits, draft and point apart (their step kernel
   takes the 32-bit call's shapes).

The winners make one tuned entry (``devices.triton_tuning``): the draft shape as every call's, the other
kinds of call (``point/32``, ``draft/16``, ``point/16``) as what they change. ``--tune-out FILE`` adds it to
a tuning file under this GPU's name (``SPECSIM_TRITON_TUNING=FILE`` uses it); ``--record FILE`` keeps every
candidate's time as a record of ``specsim.figures.records``. The sweep's logic (``sweep``, ``pick``,
``programs_of``) takes any timer, so it runs without a GPU in tests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

ANCHOR = dict(batch=256, k=4, vocab=128256)
PROGRAM_BATCHES = (1, 32, 256)
RACE_BATCHES = (1, 8, 32)
RACE_PROGRAM_SCALES = (0.5, 0.75, 1.0, 1.5, 2.0)
"""The race's programs tried, as multiples of the statistics pass's at the same batch size."""
STATS_BLOCKS, STATS_WARPS, STAGES = (1024, 2048, 4096), (4, 8), (None, 2, 3)
RACE_SHAPES = tuple((b, w) for b in (256, 512, 1024, 2048) for w in (1, 2, 4, 8) if b >= 64 * w)
"""The step kernel's tiles and warps: at least two elements a thread."""
PROGRAMS_PER_SM = (1, 2, 4, 8, 16, 32, 64)
BLOCKS16, WARPS16 = (512, 1024, 2048, 4096), (4, 8)


@dataclass
class Trial:
    """One candidate timed: which part of the sweep, the kind of call, the shape it ran at, its launch
    shape in words, seconds (None: refused by the compiler, ``why``)."""

    part: str
    key: str
    shape: str
    label: str
    seconds: float | None
    why: str = ""
    chosen: bool = False


@dataclass
class Sweep:
    """A sweep's outcome: the tuned launch shape of each kind of call, and every trial."""

    configs: dict
    trials: list = field(default_factory=list)


def stats_candidates(base) -> list:
    """``(label, config)`` of every statistics tile × warps × stages over ``base``."""
    return [(f"stats {b} x {w} warps, stages {s or 'default'}",
             dataclasses.replace(base, block=b, num_warps=w, num_stages=s))
            for b in STATS_BLOCKS for w in STATS_WARPS for s in STAGES]


def race_candidates(base) -> list:
    """``(label, config)`` of every step-kernel tile × warps of ``RACE_SHAPES`` over ``base``."""
    return [(f"race {b} x {w} warps", dataclasses.replace(base, race_block=b, race_warps=w)) for b, w in RACE_SHAPES]


def program_candidates(base, sms: int) -> list:
    """``(label, config)`` of each ``PROGRAMS_PER_SM`` × ``sms`` over ``base``."""
    return [(f"programs {p * sms} ({p} per SM)", dataclasses.replace(base, programs=p * sms)) for p in PROGRAMS_PER_SM]


def block16_candidates(base) -> list:
    """``(label, config)`` of every 16-bit statistics tile × warps over ``base``: the tiles up to ``base``'s own
    (``KernelConfig.stats_block`` runs a 16-bit tile of at most ``block``; a larger one would time it again).

    >>> from devices.triton_device import KernelConfig
    >>> [label for label, _ in block16_candidates(KernelConfig(block=1024))]
    ['16-bit stats 512 x 4 warps', '16-bit stats 512 x 8 warps', '16-bit stats 1024 x 4 warps', '16-bit stats 1024 x 8 warps']
    """
    return [(f"16-bit stats {b} x {w} warps", dataclasses.replace(base, block16=b, num_warps=w))
            for b in BLOCKS16 if b <= base.block for w in WARPS16]


def pick(trials: list) -> int:
    """The index of the fastest trial that ran (a refused one never wins); ``ValueError`` when none ran.

    >>> pick([Trial("", "", "", "a", None, "refused"), Trial("", "", "", "b", 2.0), Trial("", "", "", "c", 1.0)])
    2
    """
    ran = [i for i, t in enumerate(trials) if t.seconds is not None]
    if not ran:
        raise ValueError("every candidate was refused: " + "; ".join(f"{t.label}: {t.why}" for t in trials))
    return min(ran, key=lambda i: trials[i].seconds)


def sweep(timer, base, sms: int, out=print) -> Sweep:
    """The sweep of the module docstring. ``timer(config, key, batch)`` is the median seconds of one step
    of kind ``key`` (``"draft/32"``, ``"point/16"``, ...) at ``ANCHOR`` with ``batch`` requests, or raises
    (the compiler refused the shape); ``base`` the launch shape it starts from; ``sms`` the GPU's
    multiprocessors. Returns each kind of call's tuned shape and every trial.

    The step kernel's shapes and programs per batch size (``race_by_batch``, ``race_programs_by_batch``) are
    tuned here from none: ``base``'s are dropped first, since at a batch size they name they take the place of
    the single race shape and programs the earlier parts try (a candidate race would not be the race timed)."""
    trials: list[Trial] = []
    base = dataclasses.replace(base, race_by_batch=(), race_programs_by_batch=())
    draft = programs_of(timer, base, sms, trials, out)
    draft = best_of(timer, trials, "stats", "draft/32", stats_candidates(draft), out=out)
    draft = best_of(timer, trials, "race", "draft/32", race_candidates(draft), out=out)
    point = best_of(timer, trials, "race", "point/32", race_candidates(draft), out=out)
    draft = races_by_batch(timer, draft, "draft/32", trials, out)
    point = races_by_batch(timer, point, "point/32", trials, out)
    draft = race_programs_of(timer, draft, "draft/32", trials, out)
    point = race_programs_of(timer, point, "point/32", trials, out)
    configs = {"draft/32": draft, "point/32": point}
    for key, over in (("draft/16", draft), ("point/16", point)):
        configs[key] = best_of(timer, trials, "16-bit", key, block16_candidates(over), out=out)
    return Sweep(configs, trials)


def best_of(timer, trials: list, part: str, key: str, candidates: list, batch: int = ANCHOR["batch"], out=print):
    """The config of the fastest of ``candidates`` (``(label, config)``), each timed at ``batch`` requests for calls
    of kind ``key`` (``trial``); every trial appended to ``trials``, the winner's marked chosen."""
    found = [trial(timer, part, key, batch, label, config, out) for label, config in candidates]
    trials.extend(found)
    i = pick(found)
    found[i].chosen = True
    return candidates[i][1]


def programs_of(timer, base, sms: int, trials: list, out=print):
    """``base`` with each of ``PROGRAM_BATCHES``' fastest of ``program_candidates`` as ``programs_by_batch``, and
    the anchor's as ``programs``. A candidate the compiler refuses at one batch size is never picked at any."""
    candidates = program_candidates(base, sms)
    rows = []
    for label, config in candidates:
        found = [trial(timer, "programs", "draft/32", b, label, dataclasses.replace(config, programs_by_batch=()), out)
                 for b in PROGRAM_BATCHES]
        trials.extend(found)
        rows.append(found)
    ran = [row for row in rows if all(t.seconds is not None for t in row)]
    if not ran:
        raise ValueError("every candidate was refused at some batch size: "
                         + "; ".join(f"{t.label}: {t.why}" for row in rows for t in row if t.why))
    chosen = []
    for j, batch in enumerate(PROGRAM_BATCHES):
        row = min(ran, key=lambda r: r[j].seconds)
        row[j].chosen = True
        chosen.append((batch, candidates[rows.index(row)][1].programs))
    anchor = dict(chosen).get(ANCHOR["batch"], chosen[-1][1])
    return dataclasses.replace(base, programs=anchor, programs_by_batch=tuple(chosen))


def races_by_batch(timer, base, key: str, trials: list, out=print):
    """``base`` with ``race_by_batch``: each of ``RACE_BATCHES``' fastest of ``race_candidates`` for calls of kind
    ``key``, then ``base``'s own race from the anchor's batch size up; an entry the same as the one before it is
    left out (none at all where every batch size runs fastest at the anchor's race)."""
    single = dataclasses.replace(base, race_by_batch=())
    chosen = [(batch,) + best_of(timer, trials, "race by batch", key, race_candidates(single), batch, out).race_at(batch)
              for batch in RACE_BATCHES]
    chosen.append((ANCHOR["batch"],) + single.race_at(ANCHOR["batch"]))
    kept = [entry for n, entry in enumerate(chosen) if n == 0 or entry[1:] != chosen[n - 1][1:]]
    return dataclasses.replace(base, race_by_batch=() if len(kept) == 1 else tuple(kept))


def race_programs_of(timer, base, key: str, trials: list, out=print):
    """``base`` with ``race_programs_by_batch``: at each of ``RACE_BATCHES`` and the anchor's batch size, the fastest
    of ``RACE_PROGRAM_SCALES`` times the statistics pass's programs there, for calls of kind ``key``."""
    chosen = []
    for batch in (*RACE_BATCHES, ANCHOR["batch"]):
        programs = base.programs_at(batch)
        counts = sorted({max(1, round(programs * scale)) for scale in RACE_PROGRAM_SCALES})
        candidates = [(f"race programs {n} ({n / programs:g}x the pass's)",
                       dataclasses.replace(base, race_programs_by_batch=((1, n),))) for n in counts]
        best = best_of(timer, trials, "race programs", key, candidates, batch, out)
        chosen.append((batch, best.race_programs_at(batch)))
    return dataclasses.replace(base, race_programs_by_batch=tuple(chosen))


def trial(timer, part: str, key: str, batch: int, label: str, config, out=print) -> Trial:
    """One candidate timed (``timer``), or refused with the compiler's reason; one line through ``out``."""
    shape = f"B={batch} K={ANCHOR['k']} V={ANCHOR['vocab']} {key}"
    try:
        t = Trial(part, key, shape, label, timer(config, key, batch))
    except Exception as e:  # noqa: BLE001 - a shape the compiler refuses (registers, shared memory): said, not fatal
        t = Trial(part, key, shape, label, None, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    out(f"  {part:8} {shape:32} {label:40} " + (f"{t.seconds * 1e3:.4f} ms" if t.seconds is not None
                                                   else f"refused ({t.why})"), flush=True)
    return t


def tuned_entry(result: Sweep, measured: dict) -> dict:
    """The sweep's winners as a tuned entry of ``devices.triton_tuning`` (``draft/32`` as every call's shape)."""
    from devices.triton_tuning import entry_of
    others = {k: c for k, c in result.configs.items() if k != "draft/32"}
    return entry_of(result.configs["draft/32"], others, measured)


TRIALS_HEADER = ("part", "kind of call", "shape", "launch shape", "median ms", "chosen")


def trial_cells(t: Trial) -> tuple:
    """One printed row of ``TRIALS_HEADER``."""
    return (t.part, t.key, t.shape, t.label, f"{t.seconds * 1e3:.4f}" if t.seconds is not None else f"refused: {t.why}",
            "chosen" if t.chosen else "")


# --- on the GPU ------------------------------------------------------------------------------------------

def gpu_timer(torch, reps: int, warmup: int):
    """``timer(config, key, batch)`` for ``sweep``: the step's graph on ``specsim bench``'s inputs at ``ANCHOR``
    (input sets made once per kind and batch), timed as its ``triton graph`` row on the device alone
    (``harness.time_queued``: at B = 1 a replay timed from the host is mostly the graph's submission, whose
    noise would pick the programs)."""
    from specsim.bench import harness, workloads
    from specsim.bench.step import graph_time
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    made = {}

    def inputs(key: str, batch: int) -> list:
        if (key, batch) not in made:
            made.clear()   # one kind and batch at a time on the GPU
            torch.cuda.empty_cache()
            mode, bits = key.split("/")
            dtype = torch.bfloat16 if bits == "16" else torch.float32
            _, made[(key, batch)] = workloads.shape_inputs(torch, batch, ANCHOR["k"], ANCHOR["vocab"], dtype, mode, l2)
        return made[(key, batch)]

    def timer(config, key: str, batch: int) -> float:
        return graph_time(torch, harness, inputs(key, batch), config, reps, warmup, queued=True)
    return timer


def run(torch, reps: int, warmup: int, out=print):
    """The sweep on this GPU from its current launch shape (``triton_device.default_config``): ``(gpu name,
    Sweep, entry)``, ``entry`` the tuned entry with how it was measured."""
    import datetime

    import triton

    from devices.triton_device import default_config
    from specsim.figures import records
    name = torch.cuda.get_device_name(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    base = dataclasses.replace(default_config(), by_call=())
    out(f"tuning the Triton device on {name} ({sms} SMs), from {base.source}")
    result = sweep(gpu_timer(torch, reps, warmup), base, sms, out)
    measured = {"command": records.command_line(), "date": datetime.date.today().isoformat(),
                "torch": torch.__version__, "triton": triton.__version__,
                "shape": f"B={ANCHOR['batch']} K={ANCHOR['k']} V={ANCHOR['vocab']} (programs: B = "
                         f"{', '.join(map(str, PROGRAM_BATCHES))}; race by batch: B = "
                         f"{', '.join(map(str, RACE_BATCHES))}; race programs: B = "
                         f"{', '.join(map(str, (*RACE_BATCHES, ANCHOR['batch'])))})",
                "from": base.source}
    return name, result, tuned_entry(result, measured)


def record(name: str, result: Sweep, entry: dict, command: str, hardware: str, versions: dict) -> dict:
    """The sweep as a record: table ``trials`` (every candidate) and ``tuned`` (each kind of call's winner)."""
    from specsim.bench import step
    from specsim.figures import records
    rec = records.new_record(command, hardware=hardware, versions=versions)
    rec["tables"]["trials"] = {"columns": list(TRIALS_HEADER), "rows": [list(trial_cells(t)) for t in result.trials],
                               "note": f"{name}: each candidate's step as a CUDA graph, median of its replays."}
    rec["tables"]["tuned"] = {"columns": ["kind of call", "launch shape"],
                              "rows": [[k, step.launch_text(c)] for k, c in result.configs.items()]}
    rec["values"] = {f"tuned-{k.replace('/', '-')}": step.launch_text(c) for k, c in result.configs.items()}
    rec["values"].update(trial_values(rec["tables"]["trials"]["rows"]))
    rec["entry"] = entry
    return rec


def trial_values(rows: list) -> dict:
    """Values a page cites from a sweep's trials (rows of ``TRIALS_HEADER``), milliseconds as printed:
    ``programs-b{B}-{P}-ms`` for each programs count ``P`` and ``programs-b{B}-tuned`` (its ``-ms``,
    ``-min-ms``, ``-max-ms``); ``race-{mode}-b{B}-tuned`` (the race by batch's winner, its ``-ms``) and
    ``race-{mode}-b{B}-anchor-ms`` (the anchor's race at that batch size); ``race-programs-{mode}-b{B}-tuned`` (its
    ``-ms``) and ``race-programs-{mode}-b{B}-pass-ms`` (the race at the statistics pass's programs).

    >>> rows = [["programs", "draft/32", "B=1 K=4 V=9 draft/32", "programs 132 (1 per SM)", "0.0158", ""],
    ...         ["programs", "draft/32", "B=1 K=4 V=9 draft/32", "programs 264 (2 per SM)", "0.0140", "chosen"],
    ...         ["race", "draft/32", "B=256 K=4 V=9 draft/32", "race 256 x 1 warps", "0.2267", "chosen"],
    ...         ["race by batch", "draft/32", "B=1 K=4 V=9 draft/32", "race 256 x 1 warps", "0.0127", ""],
    ...         ["race by batch", "draft/32", "B=1 K=4 V=9 draft/32", "race 1024 x 4 warps", "0.0108", "chosen"]]
    >>> v = trial_values(rows)
    >>> v["programs-b1-tuned"], v["programs-b1-min-ms"], v["race-draft-b1-tuned"], v["race-draft-b1-anchor-ms"]
    ('264', '0.0140', '1024 x 4', '0.0127')
    """
    values, anchor_race, program_times = {}, {}, {}
    batch_of = lambda shape: shape.split()[0][2:]  # noqa: E731 - "B=32 K=4 ..." -> "32"
    for part, key, shape, label, ms, chosen in rows:
        if part == "race" and chosen:
            anchor_race[key] = label
    for part, key, shape, label, ms, chosen in rows:
        if ms.startswith("refused"):
            continue
        batch = batch_of(shape)
        if part == "programs":
            values[f"programs-b{batch}-{label.split()[1]}-ms"] = ms
            program_times.setdefault(batch, []).append(float(ms))
            if chosen:
                values[f"programs-b{batch}-tuned"], values[f"programs-b{batch}-tuned-ms"] = label.split()[1], ms
        elif part == "race by batch":
            mode = key.split("/")[0]
            if chosen and key.endswith("/32"):
                values[f"race-{mode}-b{batch}-tuned"] = label.removeprefix("race ").removesuffix(" warps")
                values[f"race-{mode}-b{batch}-tuned-ms"] = ms
            if label == anchor_race.get(key):
                values[f"race-{mode}-b{batch}-anchor-ms"] = ms
        elif part == "race programs" and key.endswith("/32"):
            mode = key.split("/")[0]
            if chosen:
                values[f"race-programs-{mode}-b{batch}-tuned"] = label.split()[2]
                values[f"race-programs-{mode}-b{batch}-tuned-ms"] = ms
            if "(1x the pass's)" in label:
                values[f"race-programs-{mode}-b{batch}-pass-ms"] = ms
    for batch, times in program_times.items():
        values[f"programs-b{batch}-min-ms"], values[f"programs-b{batch}-max-ms"] = f"{min(times):.4f}", f"{max(times):.4f}"
    return values
