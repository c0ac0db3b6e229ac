"""A real tokenizer pair without a hub download: the two vocabularies mistral-common 1.13.1 ships in its wheel.

* ``tokenizer.model.v1`` — Mistral 7B's SentencePiece model (32,000 pieces,
  the space marker ``▁``, byte fallback ``<0x00>`` ... ``<0xFF>``);
* ``tekken_240718.json`` — Mistral NeMo's tiktoken-style byte-level BPE
  (1,000 special ids, then 130,072 ranks of the 150,000 listed: its
  ``default_vocab_size`` 131,072), spelled as Hugging Face's byte-level
  tokenizers spell it (GPT-2's byte-to-unicode map: a space is ``Ġ``), which
  is what vLLM's ``VocabMapping`` reads through ``get_vocab()``.

Only the two data members are fetched (from ``$SPECSIM_MISTRAL_COMMON_WHEEL``,
a wheelhouse, or pip's index by HTTP range requests: ``wheels``; about 2.8 MB),
each checked against its pinned sha256 and the wheel's ``RECORD``, and cached
under ``$SPECSIM_VOCAB_CACHE`` or the user's cache dir; nothing of
mistral-common is imported or committed. This module returns the piece
strings (id = index); ``specsim.vocab.vllm`` builds tokenizers from them.

>>> byte_pieces([b" the", b"\\n", bytes([0xc3, 0xa9])])
['Ġthe', 'Ċ', 'Ã©']
>>> sentencepiece_pieces(b"\\n\\x0e\\n\\x05<unk>\\x15\\x00\\x00\\x00\\x00\\x18\\x02\\n\\x0b\\n\\x04\\xe2\\x96\\x81a\\x15\\x00\\x00\\x00\\x00")
['<unk>', '▁a']
"""

from __future__ import annotations

import base64
import json
import pathlib

from devices.field.wheels import PinnedWheelError, WheelSpec, fetch_members

VERSION = "1.13.1"
RECORD = "mistral_common-1.13.1.dist-info/RECORD"
SENTENCEPIECE = "mistral_common/data/tokenizer.model.v1"
TEKKEN = "mistral_common/data/tekken_240718.json"
PINNED = {SENTENCEPIECE: "dadfd56d766715c61d2ef780a525ab43b8e6da4de6865bda3d95fdef5e134055",
          TEKKEN: "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516",
          RECORD: "c862b8ea145641de0f8f67f2d9a544230bc0ed4b52d3ae8d73dfc15b7f4033ee"}
CACHE_ENV = "SPECSIM_VOCAB_CACHE"
WHEEL = WheelSpec(project="mistral-common", version=VERSION, filename="mistral_common-1.13.1-py3-none-any.whl",
                  size=6_589_302, sha256="98b4d0755b8d90bf4691fa8f1b70cb3b4a8cd4dc1653c4ed08ef3d1c7d2c29af",
                  record=RECORD, pins=PINNED, cache_env=CACHE_ENV, wheel_env="SPECSIM_MISTRAL_COMMON_WHEEL")
"""The wheel (its index's size and sha256) and the members taken out of it."""


class VocabFetchError(RuntimeError):
    """The members could not be had (no network and no cache, or a hash mismatch); the message says which."""


def cache_dir() -> pathlib.Path:
    """``$SPECSIM_VOCAB_CACHE``, else ``$XDG_CACHE_HOME/specsim/mistral-common-1.13.1``, else ``~/.cache/...``."""
    return WHEEL.cache_dir()


def member(name: str) -> bytes:
    """One pinned member's bytes, from the cache or fetched into it (with the wheel's RECORD, checked)."""
    try:
        cache = fetch_members(WHEEL)
    except PinnedWheelError as e:
        raise VocabFetchError(f"mistral-common {VERSION}'s vocabularies: {e}; without network, point "
                              f"{CACHE_ENV} at a copy") from e
    return (cache / name).read_bytes()


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        value |= (b & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not b & 0x80:
            return value, i


def _fields(buf: bytes):
    """``(field number, wire type, value)`` of one protobuf message (varint, 64-bit, bytes, 32-bit)."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {i}")
        yield number, wire, value


def sentencepiece_pieces(model: bytes) -> list[str]:
    """The pieces of a SentencePiece ``ModelProto`` (field 1, each piece's field 1), in id order."""
    return [next(v.decode("utf-8") for n, _, v in _fields(piece) if n == 1)
            for number, wire, piece in _fields(model) if number == 1 and wire == 2]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character map (Hugging Face's ByteLevel pre-tokenizer)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


_BYTE_CHARS = _bytes_to_unicode()


def byte_pieces(tokens: list[bytes]) -> list[str]:
    """Byte strings spelled as a byte-level BPE vocabulary spells them."""
    return ["".join(_BYTE_CHARS[b] for b in t) for t in tokens]


def tekken_pieces(data: bytes) -> list[str]:
    """Tekken's vocabulary as ``get_vocab()`` keys: its special ids (``<SPECIAL_i>``, the first three named as
    Mistral's tokenizers name them), then its ranks up to ``default_vocab_size``, byte-level spelled."""
    d = json.loads(data)
    config = d["config"]
    specials = config["default_num_special_tokens"]
    ranks = config["default_vocab_size"] - specials
    named = {0: "<unk>", 1: "<s>", 2: "</s>"}
    tokens = [base64.b64decode(v["token_bytes"]) for v in d["vocab"][:ranks]]
    return [named.get(i, f"<SPECIAL_{i}>") for i in range(specials)] + byte_pieces(tokens)


def mistral_pair() -> tuple[list[str], list[str]]:
    """``(tekken pieces [131072], sentencepiece pieces [32000])``: Mistral NeMo's and Mistral 7B's vocabularies."""
    return tekken_pieces(member(TEKKEN)), sentencepiece_pieces(member(SENTENCEPIECE))
