"""The ``transformers`` device: HF transformers' own speculative-sampling step, one request per call.

What runs is ``transformers.generation.utils._speculative_sampling`` (the
acceptance test, the residual and the bonus draw of its assisted generation
with ``do_sample=True``), imported from the installed package, whatever
release it is: the device's ``engine`` names it (``"transformers 5.24.0"``),
and so do ``specsim devices``, ``conformance.json`` and the field table. The
shipped judgements (``transformers_waivers.toml``) were made on
``JUDGED_RELEASE``; on another release a check they cover is shown as judged
on that release, not waived. At load the adapter checks that the installed
release has what it calls, with the arguments it passes (:func:`check_release`);
a release without them is refused with a ``DeviceLoadError`` naming what is
missing. Its target rows go through transformers'
own ``TemperatureLogitsWarper``, ``TopKLogitsWarper`` and ``TopPLogitsWarper``
in the order and with the arguments ``GenerationMixin._get_logits_processor``
uses for ``do_sample=True`` (``min_tokens_to_keep=1``; a warper is added only
when its parameter is active: temperature != 1, top_k != 0, top_p < 1), so
SPEC §2 is checked against transformers' processors, not ours.

What the adapter supplies, and nothing more:

* **layout** — the ragged batch split into requests; for request i:
  ``candidate_input_ids [1, K_i]`` (its drafts; the function reads only the
  last ``K_i`` ids, so no prompt is needed), ``candidate_logits [1, K_i, V] =
  log(draft_probs)`` (the function takes the assistant's *logits* and
  softmaxes them; ``log`` of a probability row softmaxes back to it, zeros to
  ``-inf`` and so to 0), ``new_logits [1, K_i + 1, V]`` the processed target
  rows in float32 (``_assisted_decoding`` casts them with ``.float()``);
  the output ``valid_tokens`` and ``n_matches`` put back in SPEC §7's layout;
* **the randomness hook** — transformers draws from the *global* torch CPU
  generator (``torch.rand_like``, ``torch.multinomial``). Per request the
  adapter seeds that generator with ``request_seed(seed, position)`` inside
  ``torch.random.fork_rng``, which saves and restores its state, so the
  caller's global RNG is neither read nor advanced (L2) and a request's
  tokens depend on its own seed and position only (``rng="seeded"``);
* **the input rules** of SPEC §6 (``devices.validate.check_call``) before
  anything runs, and ``UnsupportedCall`` for what transformers' function does
  not do (below).

Declared honestly:

* ``draft_probs=True`` — the function needs the assistant's distribution;
  ``point_proposals=False`` — without it transformers takes another path
  (``do_sample`` sampling of the target and a token match, no
  ``_speculative_sampling``);
* ``greedy=False`` — greedy verification is inline code of
  ``_assisted_decoding`` (an argmax match), not a function the adapter could
  call; copying it would test the adapter (``specsim.field.engines``' end-to-end
  check covers transformers' greedy path token for token through ``generate``);
* ``injected_noise=False`` — the function's coin and draw are torch calls on
  the global generator, with no hook for given uniforms or exponentials;
* ``top_k``, ``top_p``: through transformers' warpers, as above;
* ``dtypes=("float32",)`` — the dtype transformers computes the step in.
* Not adapted: placeholder draft ids (-1) are passed through as they come;
  transformers has no such notion (SPEC §4 says they are always rejected), so
  whatever it does with one is its behaviour, recorded by the suite (judged in
  ``transformers_waivers.toml``: placeholder-not-an-input, with the edges where transformers itself parts
  from SPEC; evidence in ``repro/transformers_spec_edges.py``).

>>> import numpy as np
>>> from devices.protocol import VerifyBatch
>>> device = make_device()
>>> batch = VerifyBatch(np.array([1]), np.array([0]), np.array([[1.0, 0.0]], np.float32),
...     np.log(np.array([[1.0, 1e-30], [0.5, 0.5]], np.float32)), np.ones(1), np.zeros(1, np.int64),
...     np.ones(1), np.array([7], np.uint64), np.array([3]))
>>> out = device.verify(batch)                       # t(0) = 1 = d(0): the draft is always accepted
>>> out.num_accepted.tolist(), out.output_token_ids[0, 0].item()
([1], 0)
"""

from __future__ import annotations

import hashlib

import numpy as np

from devices.validate import check_call
from devices.protocol import PLACEHOLDER_TOKEN_ID, Capabilities, Noise, UnsupportedCall, VerifyBatch, VerifyOutput

JUDGED_RELEASE = "5.23.0"
"""The transformers release the shipped waivers were judged on (``judged_on`` in ``transformers_waivers.toml``)
and CI installs; the adapter runs on any release that passes :func:`check_release`."""

PINNED_VERSION = JUDGED_RELEASE
"""The release ``specsim.field.engines``' end-to-end checks of transformers (``hf_assisted``, ``hf_candidates``) hold to."""

SPECULATIVE_SAMPLING_ARGUMENTS = ("candidate_input_ids", "candidate_logits", "candidate_length", "new_logits")
"""What the adapter passes ``_speculative_sampling``, in order; any further parameter must have a default."""

CAPABILITIES = Capabilities(injected_noise=False, rng="seeded", max_vocab_size=262_144, max_k=64,
                            greedy=False, draft_probs=True, point_proposals=False, top_k=True, top_p=True,
                            dtypes=("float32",))


def request_seed(seed: int, position: int) -> int:
    """The torch seed of one request's step: a hash of (seed, position), 63 bits.

    >>> request_seed(7, 3) == request_seed(7, 3), request_seed(7, 3) == request_seed(7, 4)
    (True, False)
    """
    digest = hashlib.blake2b(f"{int(seed)}/{int(position)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def warpers(temperature: float, top_k: int, top_p: float):
    """transformers' warpers for one request, as ``GenerationMixin._get_logits_processor`` builds them for sampling.

    Shared with ``specsim.field.engines.hf_assisted`` (the target's next-token law there).
    """
    from transformers.generation import logits_process as lp
    chain = lp.LogitsProcessorList()
    if temperature != 1.0:
        chain.append(lp.TemperatureLogitsWarper(temperature))
    if top_k != 0:
        chain.append(lp.TopKLogitsWarper(top_k=top_k, min_tokens_to_keep=1))
    if top_p < 1.0:
        chain.append(lp.TopPLogitsWarper(top_p=top_p, min_tokens_to_keep=1))
    return chain


def _parameters_missing(function, positional: tuple[str, ...]) -> str | None:
    """What keeps ``function`` from being called with ``positional`` (in order) and nothing else; None: nothing."""
    import inspect
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError) as e:
        return f"its signature cannot be read ({e})"
    names = tuple(p.name for p in params[:len(positional)])
    if names != positional:
        return f"its first parameters are ({', '.join(names)}), not ({', '.join(positional)})"
    required = [p.name for p in params[len(positional):]
                if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required:
        return f"it also requires {', '.join(required)}, which the adapter does not pass"
    return None


def _warper_missing(logits_process, name: str, args: tuple, kwargs: dict) -> str | None:
    """What keeps ``logits_process.<name>(*args, **kwargs)`` from being built as ``warpers`` builds it."""
    import inspect
    cls = getattr(logits_process, name, None)
    if cls is None:
        return f"transformers.generation.logits_process.{name} is missing"
    try:
        inspect.signature(cls).bind(*args, **kwargs)
    except TypeError as e:
        call = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
        return f"transformers.generation.logits_process.{name}({call}) does not bind: {e}"
    return None


def check_release(version: str, generation_utils, logits_process, where: str = "?"):
    """The release's ``_speculative_sampling``, or ``DeviceLoadError`` naming what release ``version`` lacks.

    ``generation_utils`` / ``logits_process``: its ``transformers.generation.utils`` and
    ``transformers.generation.logits_process`` modules; ``where``: its path, for the message. Checked without
    running anything: the function is there and takes the adapter's four arguments (any other parameter has a
    default), and the warpers take the arguments :func:`warpers` gives them.

    >>> import types
    >>> def _speculative_sampling(candidate_input_ids, candidate_logits, candidate_length, new_logits,
    ...                           is_done_candidate): ...
    >>> check_release("5.17.0", types.SimpleNamespace(_speculative_sampling=_speculative_sampling),
    ...               types.SimpleNamespace())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    devices.registry.DeviceLoadError: ...cannot run transformers 5.17.0 (?): ...also requires is_done_candidate...
    """
    from devices.registry import DeviceLoadError
    problems = []
    sampling = getattr(generation_utils, "_speculative_sampling", None)
    if sampling is None:
        problems.append("transformers.generation.utils._speculative_sampling is missing")
    else:
        why = _parameters_missing(sampling, SPECULATIVE_SAMPLING_ARGUMENTS)
        if why:
            problems.append(f"transformers.generation.utils._speculative_sampling: {why}")
    for name, args, kwargs in (("LogitsProcessorList", (), {}), ("TemperatureLogitsWarper", (0.5,), {}),
                               ("TopKLogitsWarper", (), {"top_k": 2, "min_tokens_to_keep": 1}),
                               ("TopPLogitsWarper", (), {"top_p": 0.5, "min_tokens_to_keep": 1})):
        why = _warper_missing(logits_process, name, args, kwargs)
        if why:
            problems.append(why)
    if problems:
        raise DeviceLoadError(f"the transformers device cannot run transformers {version} ({where}): "
                              + "; ".join(problems) + f". The adapter was judged on transformers {JUDGED_RELEASE}.")
    return sampling


def _installed_release(transformers_module):
    """``check_release`` of the imported package: its version, generation modules and path."""
    from devices.registry import DeviceLoadError
    version = getattr(transformers_module, "__version__", "?")
    try:
        from transformers.generation import logits_process
        from transformers.generation import utils as generation_utils
    except Exception as e:   # a release whose generation modules do not import here cannot be checked
        raise DeviceLoadError(f"the transformers device cannot run transformers {version}: importing "
                              f"transformers.generation failed: {e!r}") from e
    return check_release(version, generation_utils, logits_process, getattr(transformers_module, "__file__", "?"))


class TransformersDevice:
    """``_speculative_sampling`` of the installed transformers, one request per call (see the module docstring).

    ``engine`` / ``release``: the installed release (``"transformers 5.24.0"`` / ``"5.24.0"``).
    """

    name = "transformers"
    capabilities = CAPABILITIES

    def __init__(self, transformers_module):
        import torch

        self._speculative_sampling = _installed_release(transformers_module)
        self.version = self.release = transformers_module.__version__
        self.engine = f"transformers {self.release}"
        self._torch = torch

    def verify(self, batch: VerifyBatch, noise: Noise | None = None) -> VerifyOutput:
        """One step, request by request (batch 1 is what transformers' function serves)."""
        if noise is not None:
            raise UnsupportedCall("injected_noise (transformers draws from torch's generator; no hook for given noise)")
        check_call(batch, noise, self.capabilities)
        if batch.draft_probs is None:
            raise UnsupportedCall("point_proposals (transformers' speculative sampling needs draft_probs)")
        if (batch.temperature == 0).any():
            raise UnsupportedCall("greedy (transformers verifies greedy drafts inline in _assisted_decoding)",
                                  int(np.flatnonzero(batch.temperature == 0)[0]))
        cu = batch.request_offsets()
        out = np.full((batch.batch_size, batch.max_k + 1), PLACEHOLDER_TOKEN_ID, dtype=np.int64)
        accepted = np.zeros(batch.batch_size, dtype=np.int64)
        for i in range(batch.batch_size):
            tokens = self._one_request(batch, i, int(cu[i]), int(cu[i + 1]))
            out[i, : len(tokens)] = tokens
            accepted[i] = len(tokens) - 1
        return VerifyOutput(out, accepted)

    def _one_request(self, batch: VerifyBatch, i: int, start: int, stop: int) -> list[int]:
        """Request i's emitted tokens: its rows through transformers' warpers and ``_speculative_sampling``."""
        torch = self._torch
        k = stop - start
        target = torch.from_numpy(np.array(batch.target_logits[start + i: stop + i + 1]))   # a copy: rows may be read-only
        target = warpers(float(batch.temperature[i]), int(batch.top_k[i]), float(batch.top_p[i]))(
            None, target.float())[None]                                           # [1, K + 1, V]
        with np.errstate(divide="ignore"):
            draft_logits = torch.from_numpy(np.log(batch.draft_probs[start:stop]).astype(np.float32))[None]  # [1, K, V]
        drafts = torch.from_numpy(batch.draft_token_ids[start:stop].astype(np.int64))[None]                   # [1, K]
        with torch.random.fork_rng(devices=[]):
            torch.default_generator.manual_seed(request_seed(batch.seeds[i], batch.positions[i]))
            valid, _ = self._speculative_sampling(drafts, draft_logits, k, target)
        return valid.reshape(-1).tolist()


def make_device() -> TransformersDevice:
    """The device on the installed transformers; ImportError without one, ``DeviceLoadError`` for a release that
    lacks what the adapter calls (:func:`check_release`)."""
    try:
        import transformers
    except ImportError as e:
        raise ImportError(f"the transformers device needs transformers (pip install 'specsim[transformers]'; "
                          f"its waivers were judged on transformers=={JUDGED_RELEASE}): {e}") from e
    return TransformersDevice(transformers)
