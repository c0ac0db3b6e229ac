"""What the groups share: capability gating, calling the device, and judging its refusals.

A device may refuse a call (``UnsupportedCall``) only outside what it declares (SPEC §10). Every
group calls the device through ``ask`` (directly or via ``formed``/``call``), which turns a
refusal into ``Refusal`` carrying the call; ``refused`` then judges it from the call itself with
``devices.validate.check_call`` / ``check_tree_call``: a call those refuse for the declaration is
``not_supported``; any other refusal — a batch size (never a declared limit), a V within
``max_vocab_size``, a declared mode — is a ``fail`` naming the declaration it contradicts.

``ask`` also holds the device to SPEC §1's read-only inputs: the device gets read-only views of
every array of the call (the batch, its ``sampler`` parameters, the noise), and a fingerprint of
every one of them is taken before and after the call. A write — through numpy (a ``ValueError`` on
the read-only view) or through a tensor sharing the memory (``torch.from_numpy``, which accepts a
read-only array) — raises ``MutatedInput`` naming the fields; ``call`` turns it into a ``fail``
naming the rule, and ``runner.run_group`` into ``<group>/mutated-input`` where a group lets it
through.
"""

from __future__ import annotations

import dataclasses
import re
import traceback
import warnings
import weakref
import zlib

import numpy as np

from devices.validate import as_chain_batch, check_call, check_tree_call
from devices.protocol import PLACEHOLDER_TOKEN_ID, Capabilities, InvalidInput, TreeBatch, UnsupportedCall, VerifyBatch
from specsim.conformance.core import scope
from specsim.conformance.core.results import CheckResult
from specsim.judge.compare import output_problems, returned_type_problem


def missing(caps: Capabilities, needs, *, vocab_size: int = 0, max_k: int = 0, dtype: str | None = None) -> str | None:
    """Why the device cannot be asked this case (None if it can)."""
    lacking = sorted(n for n in needs if not getattr(caps, n))
    if lacking:
        return f"device does not declare {', '.join(lacking)}"
    if vocab_size > caps.max_vocab_size:
        return f"V={vocab_size} > declared max_vocab_size={caps.max_vocab_size}"
    if max_k > caps.max_k:
        return f"K={max_k} > declared max_k={caps.max_k}"
    if dtype is not None and dtype not in caps.dtypes:
        return f"dtype {dtype} not in declared dtypes {caps.dtypes}"
    return None


class Refusal(Exception):
    """The device raised ``UnsupportedCall`` for one call: the error, and the call (``batch``, a
    ``VerifyBatch`` or ``TreeBatch``, and ``noise``) that ``refused`` judges against the declaration.
    ``what`` names a call that is not ``batch`` itself (``verify_repeated`` of ``batch`` tiled)."""

    def __init__(self, error: UnsupportedCall, batch, noise=None, what: str = ""):
        super().__init__(error, batch, noise, what)
        self.error, self.batch, self.noise, self.what = error, batch, noise, what

    def __str__(self) -> str:
        return f"the device refused {self.what or 'a call'}: UnsupportedCall: {self.error}"


def node_limit(caps: Capabilities) -> str:
    """The node limit a tree check holds ``caps`` to, as a message says it: the declared
    ``max_tree_nodes``, or SPEC §11.1's default named as such (a default is no declaration).

    >>> node_limit(Capabilities(injected_noise=True, rng="none", max_vocab_size=8))
    "max_tree_nodes=64 (undeclared: SPEC §11.1's default)"
    """
    if caps.max_tree_nodes is None:
        return f"max_tree_nodes={caps.tree_node_limit} (undeclared: SPEC §11.1's default)"
    return f"declared max_tree_nodes={caps.max_tree_nodes}"


READ_ONLY_RULE = "SPEC §1 (inputs are read-only: a step never writes its arguments)"
"""The rule ``MutatedInput`` breaks, as every result naming it cites it."""


class MutatedInput(Exception):
    """The device wrote to the arrays of its call (``READ_ONLY_RULE``). ``fields``: the arrays whose
    contents changed (``batch.top_k``, ``batch.sampler.logit_bias``, ``noise.uniforms``), in the
    call's field order; ``attempt``: a write numpy refused on a read-only view (the field is then
    unknown, and ``fields`` may be empty)."""

    def __init__(self, fields: tuple[str, ...], attempt: str = ""):
        super().__init__(fields, attempt)
        self.fields, self.attempt = tuple(fields), attempt

    def __str__(self) -> str:
        said = [f"{', '.join(self.fields)} changed during the call"] if self.fields else []
        said += [f"it tried to write a read-only input ({self.attempt})"] if self.attempt else []
        return f"the device wrote to its inputs: {'; '.join(said)}. {READ_ONLY_RULE}"


def _arrays(value, path: str):
    """``(path, array)`` for every numpy array in ``value`` (a dataclass's fields, nested), and ``(path, sequence)``
    for each tuple or list (``batch.sampler.bad_words``: SPEC §12's per-request lists, hashed whole by
    ``_sequence_entry``)."""
    if isinstance(value, np.ndarray):
        yield path, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _arrays(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, (tuple, list)):
        yield path, value


def fingerprint(inputs: dict, *, remembered: bool = False) -> dict[str, tuple]:
    """Every array of ``inputs`` (name → a batch, noise, sampler parameters or array) → its shape, dtype
    and a CRC-32 of its bytes: equal fingerprints before and after a call mean nothing was written
    (CRC-32 misses a change with probability 2⁻³², and any change of at most 32 adjacent bits never).

    Each array's value is remembered for arrays no numpy path can write (``_sealed``: the suite's
    shared read-only tiles); ``remembered=True`` takes those from the last fingerprint instead of
    hashing them again. Only a call can change them, and every call's after-fingerprint is fresh.

    >>> a = np.arange(4)
    >>> before = fingerprint({"top_k": a})
    >>> a[0] = 9
    >>> [k for k in before if before[k] != fingerprint({"top_k": a})[k]]
    ['top_k']
    """
    return {path: _entry(a, remembered) if isinstance(a, np.ndarray) else _sequence_entry(a)
            for name, value in inputs.items() for path, a in _arrays(value, name)}


def _sequence_entry(items) -> tuple:
    """One entry for a tuple or list, nested, of arrays (and None): each item's form (shape and dtype, or its
    type) and one CRC-32 of every array's bytes in turn. A step's per-request lists hold thousands of small
    arrays: an entry each made most of a call's cost."""
    form, arrays, stack = [], [], [items]
    while stack:
        item = stack.pop()
        if isinstance(item, np.ndarray):
            form.append((item.shape, item.dtype.str))
            arrays.append(item)
        elif isinstance(item, (tuple, list)):
            form.append(len(item))
            stack.extend(reversed(item))
        else:
            form.append(type(item).__name__)
    return tuple(form), zlib.crc32(b"".join(a.tobytes() for a in arrays))


_SEALED: dict[int, tuple] = {}
"""id → (weak reference, fingerprint entry) of the sealed arrays last fingerprinted."""


def _entry(a: np.ndarray, remembered: bool) -> tuple:
    sealed = _sealed(a)
    if remembered and sealed:
        ref, entry = _SEALED.get(id(a), (None, None))
        if ref is not None and ref() is a:
            return entry
    entry = (a.shape, a.dtype.str, zlib.crc32(_bytes(a)))
    if sealed:
        if len(_SEALED) > 4096:   # dead arrays' entries: drop them all now and then
            _SEALED.clear()
        _SEALED[id(a)] = (weakref.ref(a), entry)
    return entry


def _sealed(a: np.ndarray) -> bool:
    """No numpy path can write ``a``: it and every array it views are read-only."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return a is None


def _bytes(a: np.ndarray):
    """``a``'s bytes without a copy where it is contiguous (any dtype: bfloat16 has no buffer format)."""
    if a.dtype.hasobject:  # the objects' identities: an item replaced shows
        return a.tobytes()
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


def read_only(value):
    """``value`` with every array replaced by a read-only view of it (the caller's arrays stay writable:
    the suite may reuse them; the device's writes through numpy raise, writes through shared memory
    show in ``fingerprint``)."""
    if isinstance(value, np.ndarray):
        view = value.view()
        view.flags.writeable = False
        return view
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: read_only(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, (tuple, list)):
        return type(value)(read_only(item) for item in value)
    return value


_TORCH_READ_ONLY_WARNING = "The given NumPy array is not writable"


def _quiet_read_only_tensors() -> None:
    """Silence torch's warning that a read-only array gives a writable tensor (``torch.from_numpy``,
    ``as_tensor``): the suite made the array read-only, and the fingerprint judges writes. One filter for
    the process, added once: a ``catch_warnings`` around each call would reset the registry of warnings
    already shown, so a device's own warning would print at every call instead of once."""
    if not any(f[1] is not None and f[1].pattern == _TORCH_READ_ONLY_WARNING for f in warnings.filters):
        warnings.filterwarnings("ignore", message=_TORCH_READ_ONLY_WARNING, category=UserWarning)


def frozen_call(invoke, inputs: dict):
    """``invoke(**read_only(inputs))``, held to ``READ_ONLY_RULE``: ``MutatedInput`` if an array of
    ``inputs`` changed during the call (raised even when the call itself raised: the write comes
    first) or if the device tried to write a read-only view."""
    before = fingerprint(inputs, remembered=True)
    _quiet_read_only_tensors()
    try:
        out = invoke(**{name: read_only(value) for name, value in inputs.items()})
    except ValueError as e:
        _unchanged(before, inputs)
        if "read-only" in str(e):
            raise MutatedInput((), f"ValueError: {e}") from e
        raise
    except BaseException:
        _unchanged(before, inputs)
        raise
    _unchanged(before, inputs)
    return out


def _unchanged(before: dict, inputs: dict) -> None:
    after = fingerprint(inputs)
    changed = tuple(path for path in before if before[path] != after.get(path))
    if changed:
        raise MutatedInput(changed)


class WrongReturn(Exception):
    """``verify`` (``verify_tree``) returned something that is no ``VerifyOutput`` (``TreeOutput``): the message
    names the type; a check through ``call`` fails with it."""


def ask(device, batch, noise=None):
    """``device.verify(batch, noise)`` (``verify_tree`` for a ``TreeBatch``) on read-only inputs
    (``frozen_call``: ``MutatedInput`` if the device wrote any); a refusal is raised again as
    ``Refusal`` carrying the call, so that the group can judge it (``refused``); a return value that is no
    ``VerifyOutput`` (``TreeOutput``) raises ``WrongReturn`` naming its type."""
    tree = isinstance(batch, TreeBatch)
    verify = device.verify_tree if tree else device.verify
    try:
        out = frozen_call(lambda batch, noise: verify(batch, noise), {"batch": batch, "noise": noise})
    except UnsupportedCall as e:
        raise Refusal(e, batch, noise) from e
    problem = returned_type_problem(out, *(("verify_tree", "TreeOutput") if tree else ("verify", "VerifyOutput")))
    if problem:
        raise WrongReturn(problem)
    scope.record(batch, noise, getattr(getattr(device, "capabilities", None), "rng", "none"))
    return out


def mutated_result(name: str, layer: str, e: MutatedInput, **fields) -> CheckResult:
    """A ``MutatedInput`` as check ``name``'s failing result, naming the fields and the rule."""
    return CheckResult(name, layer, "fail", f"{e} Hand the arrays over untouched: copy what the kernel "
                       "must change (clamps, casts in place, scratch use)", **fields)


def outside_declaration(caps: Capabilities | None, batch, noise=None) -> str | None:
    """Why the call lies outside what ``caps`` declare — the ``UnsupportedCall`` that
    ``check_call`` (``check_tree_call`` for a tree) raises for it — or None: it is inside, and the
    device must serve it. Batch size is never a declared limit. ``InvalidInput`` (the call breaks
    SPEC §6's input rules) propagates: such a call is no question of the declaration."""
    if caps is None:
        return "the device declares no capabilities"
    try:
        if isinstance(batch, TreeBatch):
            check_tree_call(batch, noise, caps)
        else:
            check_call(batch, noise, caps)
    except UnsupportedCall as e:
        return str(e)
    return None


def refused(name: str, layer: str, refusal: Refusal, caps: Capabilities | None, **fields) -> CheckResult:
    """A refusal as check ``name``'s result (SPEC §10): ``not_supported`` for a call outside the
    declaration (naming the declared limit it passes), ``fail`` for one inside it (naming the
    declaration it contradicts), ``error`` if the call itself broke SPEC §6 (the check's fault).
    ``fields``: more ``CheckResult`` fields (``seed``, ``n``, ``extra``)."""
    said = f"UnsupportedCall: {refusal.error}" + (f" (from {refusal.what})" if refusal.what else "")
    try:
        outside = outside_declaration(caps, refusal.batch, refusal.noise)
    except InvalidInput as e:
        return CheckResult(name, layer, "error", f"the device refused ({said}) a call that breaks SPEC §6 ({e}): "
                           "the check built an invalid call, so the refusal cannot be judged", **fields)
    if outside is not None:
        return CheckResult(name, layer, "not_supported", f"device raised {said}; the call is outside its "
                           f"declaration ({outside})", **fields)
    return CheckResult(name, layer, "fail", f"device refused a call inside its declaration "
                       f"({declaration_against(caps, refusal.batch, refusal.noise, str(refusal.error))}): {said}. "
                       "UnsupportedCall is for calls outside the declared capabilities (SPEC §10): serve the call, "
                       "or declare the limit it passes", **fields)


_HINTS = {"V": r"vocab|\bV\b", "K": r"max_k|num_draft|depth|\bK\b", "dtype": r"dtype|float|bf16|fp16",
          "nodes": r"node", "tree": r"tree|scheme", "modes": r"greedy|draft_probs|point|top_k|top_p|noise|rng|sampler",
          "batch": r"batch|request"}


def declaration_against(caps: Capabilities, batch, noise, said: str = "") -> str:
    """The declaration a call inside it meets, limit by limit, against the call's own figures —
    those the refusal's message ``said`` mentions first.

    >>> import numpy as np
    >>> from devices.protocol import VerifyBatch
    >>> caps = Capabilities(injected_noise=True, rng="none", max_vocab_size=262144)
    >>> b = VerifyBatch(np.array([2]), np.array([1, 2]), None, np.zeros((3, 301), np.float32),
    ...                 np.ones(1), np.zeros(1, np.int64), np.ones(1))
    >>> declaration_against(caps, b, None, "V <= 300 (got 301)").split("; ")[0]
    'max_vocab_size=262144, V=301'
    """
    tree = isinstance(batch, TreeBatch)
    chain = as_chain_batch(batch) if tree else batch
    depth = int(batch.depths().max(initial=0)) if tree else batch.max_k
    parts = {"V": f"max_vocab_size={caps.max_vocab_size}, V={batch.vocab_size}",
             "K": f"max_k={caps.max_k}, {'tree depth' if tree else 'K'}={depth}",
             "dtype": f"dtypes={'/'.join(caps.dtypes)}, dtype={batch.target_logits.dtype.name}"}
    if tree:
        parts["nodes"] = (f"{node_limit(caps)}, "
                          f"nodes={int(np.asarray(batch.num_nodes).max(initial=0))} in the largest request")
        parts["tree"] = (f"tree_schemes={'/'.join(caps.tree_schemes)}, "
                         f"needs {'/'.join(sorted(batch.schemes_needed()))}")
    parts["modes"] = "declared modes used: " + ", ".join(_modes_used(chain, noise, caps))
    parts["batch"] = f"B={batch.batch_size}: batch size is never a declared limit"
    first = [k for k, pattern in _HINTS.items() if k in parts and re.search(pattern, said)]
    return "; ".join(parts[k] for k in first + [k for k in parts if k not in first])


def _modes_used(batch, noise, caps: Capabilities) -> list[str]:
    temperature = np.asarray(batch.temperature)
    sampled = temperature > 0
    top_k = np.asarray(batch.top_k)
    used = ["greedy"] * bool((~sampled).any()) + ["temperature"] * bool(sampled.any())
    used.append("draft_probs" if batch.draft_probs is not None else "point_proposals")
    used += ["top_k"] * bool((sampled & (top_k > 0) & (top_k < batch.vocab_size)).any())
    used += ["top_p"] * bool((sampled & (np.asarray(batch.top_p) < 1)).any())
    used.append("injected_noise" if noise is not None else f"rng={caps.rng}")
    if getattr(batch, "sampler", None) is not None and batch.sampler.given():
        used.append(f"sampler {'/'.join(batch.sampler.given())} (order {batch.sampler.order})")
    return used


def call(name: str, layer: str, fn, caps: Capabilities | None):
    """Run ``fn()`` (which calls the device through ``ask`` or ``formed``): ``(its value, None)``, or
    ``(None, result)``: a ``Refusal`` judged by ``refused``, a ``MutatedInput`` a ``fail`` naming
    the fields and ``READ_ONLY_RULE``, any other exception an ``error``."""
    try:
        return fn(), None
    except Malformed:  # not a crash: the group turns it into its failing well-formed-output check
        raise
    except MutatedInput as e:
        return None, mutated_result(name, layer, e)
    except Refusal as r:
        return None, refused(name, layer, r, caps)
    except WrongReturn as e:  # SPEC §7's output is not there at all: the check fails, naming what came back
        return None, CheckResult(name, layer, "fail", str(e))
    except UnsupportedCall as e:  # not through ``ask``: the call it refused is unknown, so nothing can be judged
        return None, CheckResult(name, layer, "error", f"UnsupportedCall from a call the check did not record "
                                 f"({e}): whether it was inside the declaration cannot be told\n"
                                 f"{traceback.format_exc(limit=6)}")
    except Exception as e:
        return None, CheckResult(name, layer, "error", f"device raised {type(e).__name__}: {e}\n"
                                 f"{traceback.format_exc(limit=6)}")


class Malformed(Exception):
    """A device's output broke SPEC §7 (shape, range, padding): the group reports a failing check."""


def formed(device, batch, noise=None):
    """``ask(device, batch, noise)``, or ``Malformed`` naming what is wrong with its output."""
    out = ask(device, batch, noise)
    problems = output_problems(batch, out)
    if problems:
        raise Malformed(f"batch of {batch.batch_size} request(s), V={batch.vocab_size}: " + "; ".join(problems))
    return out


def malformed_result(layer: str, e: Malformed) -> CheckResult:
    return CheckResult(f"{layer}/well-formed-output", layer, "fail", f"malformed output (SPEC §7): {e}")


def tree_device(device) -> str | None:
    """Why ``device`` cannot be asked for trees (None if it can)."""
    if not device.capabilities.tree_schemes or not callable(getattr(device, "verify_tree", None)):
        return "device declares no tree_schemes (SPEC §11)"
    return None


def structure_problems(batch: VerifyBatch | TreeBatch, out) -> list[str]:
    """What is wrong with ``out``'s form: a chain's by ``output_problems`` (SPEC §7); a tree's
    (§11.7) shapes, counts, emitted token range and padding here.
    """
    if isinstance(batch, VerifyBatch):
        return output_problems(batch, out)
    counts = np.asarray(batch.num_nodes)
    ids, acc = np.asarray(out.output_token_ids), np.asarray(out.num_accepted)
    D = int(batch.depths().max(initial=0))
    if ids.shape != (len(counts), D + 1) or acc.shape != (len(counts),):
        return [f"output shapes {ids.shape} and {acc.shape}, expected [{len(counts)}, D + 1 = {D + 1}] and "
                f"[{len(counts)}] (SPEC §11.7: D the batch's largest depth)"]
    nodes = np.asarray(getattr(out, "accepted_nodes", np.zeros((0, 0))))
    if nodes.shape != (len(counts), D):
        return [f"accepted_nodes shape {nodes.shape}, expected [{len(counts)}, D = {D}] (SPEC §11.7)"]
    problems = []
    for i, k in enumerate(counts):
        n = int(acc[i])
        if not 0 <= n <= k or n + 1 > ids.shape[1]:
            problems.append(f"request {i}: num_accepted {n} outside [0, {int(k)}]")
            continue
        emitted, pad = ids[i, : n + 1], ids[i, n + 1:]
        if ((emitted < 0) | (emitted >= batch.vocab_size)).any():
            problems.append(f"request {i}: an emitted token outside [0, {batch.vocab_size})")
        if (pad != PLACEHOLDER_TOKEN_ID).any():
            problems.append(f"request {i}: padding after the emitted tokens is not {PLACEHOLDER_TOKEN_ID}")
    return problems
