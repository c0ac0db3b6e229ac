"""vLLM's rejection sampler without vLLM: its modules out of the pinned wheel.

vLLM's full install is GBs of CUDA packages and its wheel alone is 336 MiB;
the sampler is a handful of Python files with Triton kernels. This loader

1. fetches exactly those members of the vLLM 0.33.0 wheel into a cache
   outside the repository (``cache_dir()``), from a local wheel
   (``$SPECSIM_VLLM_WHEEL``, read with ``zipfile``), a wheelhouse
   (``$SPECSIM_WHEELHOUSE``), or the package index pip is configured with
   (its PEP 691 page; HTTP range requests, ``remote_wheel``: the zip's
   central directory, then each member — about 1 MiB of traffic, not
   336 MiB); ``wheels`` says where it looks, in which order;
2. checks every member's sha256 against the wheel's own ``RECORD`` *and*
   against the hashes pinned below (``RECORD`` itself is pinned too), on
   every load, not only on download;
3. executes them as the modules ``vllm.v1.sample.rejection_sampler`` and
   friends over minimal stand-ins for what they import
   (``_vllm_standins``: logging, the platform query, the Triton launcher;
   absent features raise). The stand-ins are in ``sys.modules`` only while
   the members execute; afterwards no ``vllm`` name is left behind.

If vLLM 0.33.0 itself is installed, its modules are used instead (the same
files; ``source`` says which). No vLLM code is in this repository.

The members of the V1 runner's sampler (``MODULES``): ``vllm/v1/sample/rejection_sampler.py`` (the sampler and its
Triton kernels), ``vllm/v1/sample/ops/topk_topp_sampler.py`` and
``topk_topp_triton.py`` (``apply_top_k_top_p``: vLLM's top-k/top-p, the
Triton "Qrita" kernels on a Triton host), ``vllm/v1/sample/metadata.py`` and
``vllm/v1/spec_decode/metadata.py`` (the dataclasses it takes),
``vllm/v1/spec_decode/vocab_mapping.py`` (seed 001's ``VocabMapping``), and
SPEC §12's path: ``vllm/v1/sample/sampler.py`` (``Sampler.apply_logits_processors``,
the bonus row's), ``ops/penalties.py`` and ``ops/bad_words.py`` (penalties and
bad words along the drafts), ``logits_processor/{interface,state,builtin}.py``
(``MinTokensLogitsProcessor``), and named definitions out of three larger
files (``PARTS``: the penalty arithmetic, the padding helper, ``async_tensor_h2d``).
The Model Runner V2 verifier's members (``V2_PINNED``) are pinned here too, so that one
fetch fills the cache for both; ``vllm_v2_loader`` executes them. The V1 drafters' base,
``vllm/v1/spec_decode/llm_base_proposer.py`` (``PROPOSER_PINNED``, its own ``VLLM_PROPOSER_WHEEL``),
is pinned for its probabilistic draft sampler alone (``vllm_drafter``).

For a machine without network, fetch on one with network, copy the directory over and point the
loader at it::

    python -m devices.field.vllm_loader fetch --cache DIR
    # on the machine without network, after copying DIR there:
    export SPECSIM_VLLM_CACHE=DIR

Offline, from a wheel already on disk (its members are checked against the same pins)::

    python -m devices.field.vllm_loader fetch --wheel /path/to/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl

For same-run comparisons (``specsim bench``)::

    from devices.field.vllm_loader import load_rejection_sampler
    vllm = load_rejection_sampler()                 # compiled kernels (CUDA)
    vllm.rejection_sampler.rejection_sample(...)    # vLLM's own function
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import pathlib
import sys
import threading
import types
from dataclasses import dataclass

from devices.field.wheels import (PinnedWheelError, WheelSpec, cached, fetch_members, record_hashes, sha256_hex,
                                  verify, write_atomic)

VLLM_VERSION = "0.33.0"
WHEEL_FILENAME = "vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SIZE = 336_361_138
WHEEL_SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"
"""The whole wheel's size and sha256 as its index lists them: an index listing the file otherwise is refused
(the range reader never holds the whole file, so the members are checked, below)."""

RECORD = "vllm-0.33.0.dist-info/RECORD"
PINNED: dict[str, str] = {
    RECORD: "a860951d44545b1b68c2d1484b9a03bbde52f6eae34850a6c22741c60ac386c4",
    "vllm/utils/torch_utils.py": "6af248aa54c1c880a6cd46abba69207fd2d69992a7669648673fe99b18a8e911",
    "vllm/_custom_ops.py": "f7add10b87105ad21539625d7409c771b0228ea015f06a891468f3ba40bf6fa1",
    "vllm/model_executor/layers/utils.py": "d045926d733d71e32a3aae306043b4bfd99093737898ac80919da7d4774d3878",
    "vllm/v1/spec_decode/metadata.py": "a6696487b3c8823c119f601de81504341bdefefe95bafe673c1f570ab2028da8",
    "vllm/v1/sample/logits_processor/interface.py": "e150de82592133038999da5c8f0a9b3d2abfceecffa2ff19ea61bba89c41fdd9",
    "vllm/v1/sample/logits_processor/state.py": "72593878f558aa9f79196c7f7cafd5874aceb635c8c8c504e1aae90aa6a32dad",
    "vllm/v1/sample/logits_processor/builtin.py": "dd563972a8dc6a068b43fe9048790db4d76f41e6e86b896b7f26692bf4455029",
    "vllm/v1/sample/metadata.py": "6582cfe1a240c7ddb975f0ef6dd7dcd28dcf0fc7670394390250013977aa7ffd",
    "vllm/v1/sample/ops/topk_topp_triton.py": "6264a524884274824b65c3a3a91d4d34418561cde566c31879cb394acd85f2ef",
    "vllm/v1/sample/ops/topk_topp_sampler.py": "a8234f8dc8180c7b7d2417d4d04ca4af25bd2761dc93332f7bd2993a19c2120f",
    "vllm/v1/sample/ops/bad_words.py": "0b1d0a9b13b92ddcae2c83393c07a34c0f107813725700dee794caa7fe7f3b12",
    "vllm/v1/sample/ops/penalties.py": "e3600a716e76348d198194f4fd18c91cd45b4a3b4b47b4980a379e337f0bff03",
    "vllm/v1/sample/sampler.py": "7d3d001b8b6e1f25f02572df29609a4ab5c50abb023b48f5ebdb4752a2b5f7c5",
    "vllm/v1/sample/rejection_sampler.py": "9f035dd0c5af33b29ffcc63e2192f7b2fb85f8a6b4ac89275ecb5698f7ca2ff1",
    "vllm/v1/spec_decode/vocab_mapping.py": "563cdbcde7e199b0e5fe5d95bf82fa10b88299e8fdc0ad26d28aa70e3b22a516",
}
"""sha256 (hex) of each member the V1 runner's sampler uses, as in the 0.33.0 wheel; checked on every load."""

V2_PINNED: dict[str, str] = {
    "vllm/utils/math_utils.py": "33a8fa109989654855abdc32c48e499349caf8339a5642f06b4d625572e472b1",
    "vllm/v1/worker/gpu/buffer_utils.py": "e8789b87f4185c0805bd8e2a39b50581e882102bc852ab7e6e1963af7115a475",
    "vllm/v1/worker/gpu/states.py": "ae5d600c17fbad3a529a27b234ca48ffd3ffe21a99e6866c9570906a76f3115f",
    "vllm/v1/worker/gpu/sample/gumbel.py": "1eca2fb5fb3407c12138b7ea88187cc48a9b290dea0000229b8564985f51f777",
    "vllm/v1/worker/gpu/sample/min_p.py": "4cb5e2f45e1ced6f9685283a7a5c8cfd7204d9a249822e866cfff756c7f04f62",
    "vllm/v1/worker/gpu/sample/states.py": "1eb8100c15ffefb45d7a71312bc5e7a508d771228f244474de0efe27c91627d8",
    "vllm/v1/worker/gpu/sample/logits_processor/interface.py":
        "4172bdc4d3b736cb6670323f84aa8eb310567cd4f288c6ea4ab29e4bb6c9bcdd",
    "vllm/v1/worker/gpu/sample/logit_bias.py": "39dc683f5dc58ee7a266702b1ddcd1e1e1f44457d5ff689a88bae3401305f5c2",
    "vllm/v1/worker/gpu/sample/penalties.py": "6f462b64e53ef91dde3047d5c88821c1db6eae275e1ea477162b6aa0d275aac7",
    "vllm/v1/worker/gpu/sample/bad_words.py": "85c2f1a4a34eac0f1784cd75bd9ed317e1ef3b82a953c07de02a548a48b4aad4",
    "vllm/v1/worker/gpu/sample/logprob.py": "ac58bfedaa325ae29e7b652063455239c7354a2af4751396930d5670f890ce2d",
    "vllm/v1/worker/gpu/sample/output.py": "05083221ebf85457baf8e4039b1a5dca6285fda1f91aeb327cca4ff02b5340f2",
    "vllm/v1/worker/gpu/sample/thinking_budget.py": "89d4255450c1659c6d3f49dbfc0e8af5035904cdd98e3e8fc0a1bd21650203d0",
    "vllm/v1/worker/gpu/sample/sampler.py": "7f9941f9d7d04a7481ec393925ed5d000d4d77ee6db2ca6a8d9547c211d00a09",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py":
        "a4167068d1d10a36c130e2924b12cbf01f99c968f2fcf47e75a1129d3d8022c8",
    "vllm/v1/worker/gpu/spec_decode/rejection_sampler.py":
        "0cbfc55f4d98ffa740ca9e1b4092c16eb635192c8ee86a15b88e3c21215d5920",
}
"""sha256 (hex) of the Model Runner V2 verifier's members (``vllm_v2_loader``), as in the 0.33.0 wheel."""

MODULES = [name for name in PINNED if name.endswith(".py")]
"""The V1 runner's sampler members executed, in dependency order."""

PARTS: dict[str, tuple[str, ...]] = {
    "vllm/utils/torch_utils.py": ("T", "TORCH_DTYPE_TO_NUMPY_DTYPE", "async_tensor_h2d", "make_ndarray_with_pad",
                                  "make_tensor_with_pad"),
    "vllm/_custom_ops.py": ("apply_repetition_penalties_torch", "apply_repetition_penalties"),
    "vllm/model_executor/layers/utils.py": ("get_token_bin_counts_and_mask", "apply_penalties"),
}
"""Members of which only these top-level definitions (and the member's own non-vLLM imports) are executed,
into the stand-in module of that name: the rest of each file is vLLM's GEMM, custom-op and CUDA-stream
machinery, which the sampler never calls. The whole file is still sha256-checked. What the penalties path
calls: ``apply_all_penalties`` → ``make_tensor_with_pad`` (padding with V) → ``apply_penalties``
(``get_token_bin_counts_and_mask``, then ``apply_repetition_penalties``, whose CPU branch is
``apply_repetition_penalties_torch``)."""

CACHE_ENV = "SPECSIM_VLLM_CACHE"
WHEEL_ENV = "SPECSIM_VLLM_WHEEL"

VLLM_WHEEL = WheelSpec(project="vllm", version=VLLM_VERSION, filename=WHEEL_FILENAME, size=WHEEL_SIZE,
                       sha256=WHEEL_SHA256, record=RECORD, pins={**PINNED, **V2_PINNED}, cache_env=CACHE_ENV,
                       wheel_env=WHEEL_ENV)
"""The pinned wheel and every member taken out of it (both runners')."""

PROPOSER_MEMBER = "vllm/v1/spec_decode/llm_base_proposer.py"
PROPOSER_PINNED: dict[str, str] = {
    PROPOSER_MEMBER: "6e0420cc3910414a34aaebdc7c029b5befb4b7609c40df044d37bf8a68d3429d",
}
"""sha256 (hex) of the V1 drafters' base (``devices.field.vllm_drafter`` runs its probabilistic draft sampler), as
the 0.33.0 wheel's ``RECORD`` lists it. A wheel spec of its own (``VLLM_PROPOSER_WHEEL``, the same wheel and
cache), so that a cache filled before it was pinned still loads both runners' samplers without fetching it."""

VLLM_PROPOSER_WHEEL = dataclasses.replace(VLLM_WHEEL, pins={RECORD: PINNED[RECORD], **PROPOSER_PINNED})
"""The pinned wheel's drafter member: ``fetch(spec=VLLM_PROPOSER_WHEEL)`` reads only it (and ``RECORD``)."""


class VllmLoadError(RuntimeError):
    """The sampler modules could not be fetched, verified or executed; the message says which and what to do."""


@dataclass(frozen=True)
class VllmSampler:
    """vLLM's sampler modules, loaded. ``source``: where they came from; ``mode``: ``"cuda"`` or ``"cpu"``
    (Triton's interpreter)."""

    version: str
    source: str
    mode: str
    rejection_sampler: types.ModuleType
    topk_topp_sampler: types.ModuleType
    topk_topp_triton: types.ModuleType
    sample_metadata: types.ModuleType
    spec_decode_metadata: types.ModuleType
    vocab_mapping: types.ModuleType
    sampler: types.ModuleType | None = None           # vllm.v1.sample.sampler (Sampler.apply_logits_processors)
    logits_processors: types.ModuleType | None = None  # vllm.v1.sample.logits_processor.builtin (min_tokens)
    batch_update: type | None = None                   # vllm.v1.sample.logits_processor.interface.BatchUpdate


def cache_dir() -> pathlib.Path:
    """``$SPECSIM_VLLM_CACHE``, else ``$XDG_CACHE_HOME/specsim/vllm-0.33.0``, else ``~/.cache/...``."""
    return VLLM_WHEEL.cache_dir()


def _sha256(data: bytes) -> str:
    return sha256_hex(data)


_record_hashes = record_hashes
_write_atomic = write_atomic


def _verify(name: str, data: bytes, record: dict[str, str] | None, spec: WheelSpec = VLLM_WHEEL) -> None:
    try:
        verify(spec, name, data, record)
    except PinnedWheelError as e:
        raise VllmLoadError(str(e)) from None


def _cached(cache: pathlib.Path, name: str, spec: WheelSpec = VLLM_WHEEL) -> bytes | None:
    return cached(spec, cache, name)


def fetch(cache: pathlib.Path | None = None, spec: WheelSpec = VLLM_WHEEL, wheel=None, wheelhouse=None) -> pathlib.Path:
    """Make sure every pinned member of ``spec`` is in ``cache`` (default ``cache_dir()``), verified; read only
    what is missing or corrupt, from ``wheel`` (a local file; default ``$SPECSIM_VLLM_WHEEL``), a
    ``wheelhouse`` (default ``$SPECSIM_WHEELHOUSE``) or pip's index (``wheels.open_wheel``). Returns the cache
    directory. Safe to run concurrently (atomic writes)."""
    try:
        return fetch_members(spec, pathlib.Path(cache) if cache is not None else spec.cache_dir(), wheel, wheelhouse)
    except PinnedWheelError as e:
        raise VllmLoadError(f"vLLM {spec.version}'s members: {e}. Without network, fetch elsewhere and point "
                            f"{spec.cache_env} at the copy (python -m devices.field.vllm_loader fetch --cache DIR)"
                            ) from e


def _installed_vllm() -> bool:
    try:
        return importlib.metadata.version("vllm") == VLLM_VERSION
    except importlib.metadata.PackageNotFoundError:
        return False


def _module_name(member: str) -> str:
    return member[:-3].replace("/", ".")


def _vllm_import(modules: dict[str, types.ModuleType]):
    """``__import__`` for the members' globals: ``vllm.*`` names resolve to the loaded members and stand-ins,
    also when a member imports inside a function after loading (``apply_penalties`` imports
    ``apply_repetition_penalties`` at call time), when no ``vllm`` name is in ``sys.modules`` any more."""
    import builtins

    def vllm_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "vllm" or name.startswith("vllm.")):
            if name not in modules:
                from devices.field._vllm_standins import StandInError
                raise StandInError(f"vllm_loader: {name} is neither a loaded member nor a stand-in")
            return modules[name] if fromlist else modules["vllm"]
        return builtins.__import__(name, globals, locals, fromlist, level)
    return dict(vars(builtins), __import__=vllm_import)


def _part(member: str, data: bytes, names: tuple[str, ...]):
    """The code of ``names``' top-level definitions in ``member`` (with its non-vLLM imports), line numbers kept."""
    import ast
    tree = ast.parse(data, member)

    def defines(node) -> set:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return {node.name}
        if isinstance(node, ast.Assign):
            return {t.id for t in node.targets if isinstance(t, ast.Name)}
        return set()

    def foreign_import(node) -> bool:
        if isinstance(node, ast.Import):
            return all(not a.name.startswith("vllm") for a in node.names)
        return isinstance(node, ast.ImportFrom) and not (node.module or "").startswith("vllm") and node.level == 0

    body = [n for n in tree.body if foreign_import(n) or defines(n) & set(names)]
    found = set().union(*map(defines, body))
    if set(names) - found:
        raise VllmLoadError(f"{member}: no top-level {sorted(set(names) - found)}; the loader's PARTS need updating")
    return compile(ast.Module(body=body, type_ignores=[]), member, "exec")


def _execute_members(cache: pathlib.Path, platform: str, members: list[str] | None = None,
                     parts: dict[str, tuple[str, ...]] | None = None, build=None,
                     spec: WheelSpec = VLLM_WHEEL) -> dict[str, types.ModuleType]:
    """Execute ``members`` (default the V1 runner's ``MODULES``; ``parts``: members of which only some
    definitions run, default ``PARTS``) out of ``cache``, each verified first, over the stand-ins ``build``
    returns for ``platform`` (default ``_vllm_standins.build``). Returns every module by name."""
    from devices.field import _vllm_standins as standins
    members = MODULES if members is None else members
    parts = PARTS if parts is None else parts
    record = _record_hashes((cache / spec.record).read_bytes())
    modules = (build or standins.build)(platform)
    builtins_for_members = _vllm_import(modules)
    with standins.installed(modules):
        for member in members:
            path = cache / member
            data = path.read_bytes()
            _verify(member, data, record, spec)
            name = _module_name(member)
            if member in parts:   # only some definitions, into the stand-in module of that name
                module = modules.setdefault(name, standins._module(name))
                code = _part(str(path), data, parts[member])
            else:
                module = types.ModuleType(name)
                module.__package__ = name.rpartition(".")[0]
                code = compile(data, str(path), "exec")
            module.__file__ = str(path)    # Triton and inspect read kernel source from the file
            module.__builtins__ = builtins_for_members
            modules[name] = module
            sys.modules[name] = module
            standins.link_parents(modules)
            exec(code, module.__dict__)
            standins.reexport(modules, name)
    return modules


def member_modules(mode: str) -> dict[str, types.ModuleType]:
    """Every member, fetched, verified and executed for ``mode`` (``"cuda"`` or ``"cpu"``), with the stand-ins,
    by module name: what a script written against an installed vLLM imports (``devices/field/repro/
    on_vllm_members.py`` puts them in ``sys.modules`` around such a script). The caller decides the process's
    Triton mode first (``devices.triton_mode.enter``)."""
    return _execute_members(fetch(), mode)


def interpreter_scalars_as_compiled() -> None:
    """Make Triton's CPU interpreter treat vLLM's loop scalars as compiled Triton does.

    Two gaps between the interpreter (3.6) and compiled kernels, both in loop plumbing:
    a loaded scalar is a 1-element array that the interpreter turns into an int with
    ``int(array)``, which NumPy 2.4 refuses ("only 0-dimensional arrays can be converted"),
    so ``for pos in range(num_draft_tokens)`` fails; and ``tl.range`` yields Python ints
    where compiled Triton yields int32 tensors, so ``row_id.to(tl.int64)`` fails. For kernels
    of vLLM's modules only (by ``__module__``, and the device functions they call), the interpreter gets ``__index__`` via
    ``.item()`` and a ``tl.range`` yielding int32 scalars. No arithmetic of vLLM's or anybody's
    changes; compiled kernels are untouched; other interpreted kernels see the interpreter as is.

    Two shortcuts, inside a vLLM kernel's grid only, neither changing a value: the interpreter patches
    ``triton.language`` again at every device-function call (``inspect.getmembers`` of the module each time; a
    third of the V2 verifier's time) and never restores those patches, so a call whose language modules this
    grid has patched already skips the repeat, which would set the same attributes to equivalent wrappers;
    and without ``debug`` the interpreter computes each 32-bit integer operation's overflow check
    (``sanitize_overflow``) only to hand it to a ``device_assert`` that drops it, so the check is not computed
    (compiled kernels drop it the same way).
    """
    import dataclasses
    import inspect

    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter
    if getattr(interpreter._patch_lang, "specsim_vllm", False):
        return
    original = interpreter._patch_lang

    def scalar(i: int):
        return tl.core.tensor(interpreter.TensorHandle(np.array([i], dtype=np.int32), tl.int32), tl.int32)

    inside = threading.local()   # a vLLM kernel's grid is running: its nested device calls get the fix too

    def fix(scope) -> None:
        plain_range = inside.plain_range
        scope.set_attr(tl.core.tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0].item()))
        scope.set_attr(tl, "range", lambda *args, **kwargs: (scalar(i) for i in plain_range(*args, **kwargs)))

    def languages(fn) -> set:
        return {id(v) for v in getattr(fn, "__globals__", {}).values() if inspect.ismodule(v) and v in (tl, tl.core)}

    def patch_lang(fn):
        if getattr(inside, "vllm", False):           # a device function called from a vLLM kernel
            langs = languages(fn)
            if langs <= inside.patched:
                return interpreter._LangPatchScope()
            scope = original(fn)
            inside.patched |= langs
            fix(scope)
            return scope
        scope = original(fn)
        if (getattr(fn, "__module__", None) or "").startswith("vllm."):
            inside.vllm, inside.patched, inside.plain_range = True, languages(fn), tl.range
            restore = scope.restore                  # the outermost call: its scope is restored at the end

            def restore_and_leave():
                inside.vllm, inside.patched = False, set()
                restore()
            scope.restore = restore_and_leave
            fix(scope)
            builder = interpreter.interpreter_builder
            if not builder.options.debug and builder.options.sanitize_overflow:
                scope.set_attr(builder, "options", dataclasses.replace(builder.options, sanitize_overflow=False))
        return scope

    patch_lang.specsim_vllm = True
    interpreter._patch_lang = patch_lang


_LOCK = threading.Lock()
_LOADED: dict[str, VllmSampler] = {}


def enter_triton_mode(name: str, interpret: bool) -> None:
    """Put this process's Triton in the mode a loader of ``name`` asks (compiled or interpreted), or raise
    ``VllmLoadError`` saying why it cannot: another mode already entered, or compiled kernels without a
    CUDA GPU."""
    import torch

    from devices import triton_mode
    mode = "cpu" if interpret else "cuda"
    why = triton_mode.conflict(interpret, f"{name} ({mode})")
    if why:
        raise VllmLoadError(why)
    if not interpret and not torch.cuda.is_available():
        raise VllmLoadError(f"{name}: compiled Triton kernels need a CUDA GPU; none is available "
                            "(on CPU use the interpreter: interpret=True)")
    triton_mode.enter(interpret, f"{name} ({mode})")
    if interpret:
        interpreter_scalars_as_compiled()


def load_rejection_sampler(interpret: bool | None = None) -> VllmSampler:
    """vLLM 0.33.0's sampler modules, compiled for the GPU (``interpret=False``) or under Triton's CPU
    interpreter (``interpret=True``); None: the interpreter unless CUDA is available. Cached per mode.

    Raises ``VllmLoadError`` (fetch, hash, Triton mode) with what to do.
    """
    import torch

    if interpret is None:
        interpret = not torch.cuda.is_available()
    mode = "cpu" if interpret else "cuda"
    with _LOCK:
        if mode in _LOADED:
            return _LOADED[mode]
        enter_triton_mode("vllm", interpret)
        if _installed_vllm():
            modules = {_module_name(m): importlib.import_module(_module_name(m)) for m in MODULES}
            source = f"installed vllm {VLLM_VERSION}"
        else:
            cache = fetch()
            modules = _execute_members(cache, mode)
            source = f"{WHEEL_FILENAME} members, sha256-pinned, cache {cache}"
        loaded = VllmSampler(
            version=VLLM_VERSION, source=source, mode=mode,
            rejection_sampler=modules["vllm.v1.sample.rejection_sampler"],
            topk_topp_sampler=modules["vllm.v1.sample.ops.topk_topp_sampler"],
            topk_topp_triton=modules["vllm.v1.sample.ops.topk_topp_triton"],
            sample_metadata=modules["vllm.v1.sample.metadata"],
            spec_decode_metadata=modules["vllm.v1.spec_decode.metadata"],
            vocab_mapping=modules["vllm.v1.spec_decode.vocab_mapping"],
            sampler=modules["vllm.v1.sample.sampler"],
            logits_processors=modules["vllm.v1.sample.logits_processor.builtin"],
            batch_update=modules["vllm.v1.sample.logits_processor.interface"].BatchUpdate)
        _LOADED[mode] = loaded
        return loaded


def load_vocab_mapping() -> type:
    """vLLM 0.33.0's ``VocabMapping`` class (seed 001). It imports only torch and a logger, so it is
    executed directly, without deciding this process's Triton mode."""
    with _LOCK:
        if "vocab" not in _LOADED:
            cache = fetch()
            from devices.field import _vllm_standins as standins
            member = "vllm/v1/spec_decode/vocab_mapping.py"
            data = (cache / member).read_bytes()
            _verify(member, data, _record_hashes((cache / RECORD).read_bytes()))
            module = types.ModuleType(_module_name(member))
            module.__file__ = str(cache / member)
            with standins.installed({"vllm": standins._module("vllm"),
                                     "vllm.logger": standins._module("vllm.logger", init_logger=standins._Logger)}):
                exec(compile(data, module.__file__, "exec"), module.__dict__)
            _LOADED["vocab"] = module
        return _LOADED["vocab"].VocabMapping


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devices.field.vllm_loader",
                                     description=f"Fetch and verify vLLM {VLLM_VERSION}'s sampler members.")
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch", help="put the pinned members into a cache, verified (from a local wheel, a "
                                      "wheelhouse, or pip's index by range requests)")
    f.add_argument("--cache", default=None, help=f"cache directory (default ${CACHE_ENV} or {cache_dir()})")
    f.add_argument("--wheel", default=None, help=f"a local {WHEEL_FILENAME} (default ${WHEEL_ENV})")
    f.add_argument("--wheelhouse", default=None, help="a directory holding it (default $SPECSIM_WHEELHOUSE)")
    args = parser.parse_args(argv)
    where = pathlib.Path(args.cache) if args.cache else None
    cache = fetch(where, wheel=args.wheel, wheelhouse=args.wheelhouse)
    fetch(where, spec=VLLM_PROPOSER_WHEEL, wheel=args.wheel, wheelhouse=args.wheelhouse)
    pins = {**VLLM_WHEEL.pins, **PROPOSER_PINNED}
    for name, digest in pins.items():
        print(f"{digest[:16]}…  {name}")
    print(f"vLLM {VLLM_VERSION}: {len(pins)} members verified in {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
