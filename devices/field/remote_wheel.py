"""Members of a wheel on a package index, fetched by HTTP range requests.

A wheel is a zip archive: its central directory (at the end) lists every
member with its offset, sizes and CRC-32. Reading the last 64 KiB, then the
central directory, then one member's local header and data fetches a few
members of a 300 MiB wheel in about 1 MiB of traffic — instead of the whole
file, which is what ``pip download`` would take.

Nothing here trusts the server: every member's CRC-32 is checked on the
way in, and callers check each member's sha256 against the wheel's
``RECORD`` and their own pins (``devices.field.vllm_loader``).

>>> member_hash(b"abc")       # the RECORD spelling of sha256 (urlsafe base64, no padding)
'sha256=ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0'
"""

from __future__ import annotations

import base64
import hashlib
import struct
import time
import urllib.request
import zlib
from dataclasses import dataclass

TAIL_BYTES = 65536
"""The end-of-central-directory record is within the last 64 KiB (its comment is at most 65,535 bytes)."""

RETRIES = 3
TIMEOUT_S = 30.0


class WheelFetchError(RuntimeError):
    """A range request failed or the archive is not what was expected; the message says which."""


@dataclass(frozen=True)
class Member:
    name: str
    method: int            # 0 stored, 8 deflated
    crc32: int
    compressed_size: int
    size: int
    header_offset: int


def member_hash(data: bytes) -> str:
    """``sha256=<urlsafe-b64>`` as a wheel's RECORD writes it."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _get_range(url: str, start: int, stop: int) -> bytes:
    """Bytes ``[start, stop)`` of ``url``; retried; refuses a server that ignores ``Range``."""
    last = None
    for attempt in range(RETRIES):
        try:
            request = urllib.request.Request(url, headers={"Range": f"bytes={start}-{stop - 1}"})
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                if response.status != 206:
                    raise WheelFetchError(f"{url}: expected a 206 partial answer to a range request, "
                                          f"got HTTP {response.status} (the whole file is not fetched)")
                data = response.read()
            if len(data) != stop - start:
                raise WheelFetchError(f"{url}: asked for {stop - start} bytes at {start}, got {len(data)}")
            return data
        except WheelFetchError:
            raise
        except Exception as e:  # network errors: retry with backoff
            last = e
            time.sleep(0.5 * 2 ** attempt)
    raise WheelFetchError(f"{url}: range {start}-{stop - 1} failed {RETRIES} times: {last!r}")


def _central_directory(tail: bytes, file_size: int) -> tuple[int, int]:
    """(offset, size) of the central directory from the archive's last bytes (zip64 aware)."""
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise WheelFetchError("no end-of-central-directory record in the last 64 KiB: not a zip archive")
    _, _, _, _, _, size, offset, _ = struct.unpack("<IHHHHIIH", tail[at:at + 22])
    if offset == 0xFFFFFFFF or size == 0xFFFFFFFF:
        at64 = tail.rfind(b"PK\x06\x06")
        if at64 < 0:
            raise WheelFetchError("zip64 archive without a zip64 end-of-central-directory record")
        size, offset = struct.unpack("<QQ", tail[at64 + 40:at64 + 56])
    if offset + size > file_size:
        raise WheelFetchError(f"central directory [{offset}, {offset + size}) runs past the file ({file_size} bytes)")
    return offset, size


def _parse_members(directory: bytes) -> dict[str, Member]:
    members, at = {}, 0
    while at + 46 <= len(directory) and directory[at:at + 4] == b"PK\x01\x02":
        (_, _, _, _, method, _, _, crc, csize, size, name_len, extra_len, comment_len,
         _, _, _, offset) = struct.unpack("<IHHHHHHIIIHHHHHII", directory[at:at + 46])
        name = directory[at + 46:at + 46 + name_len].decode("utf-8")
        members[name] = Member(name, method, crc, csize, size, offset)
        at += 46 + name_len + extra_len + comment_len
    return members


class RemoteWheel:
    """A wheel at ``url`` of ``size`` bytes (both from the index's pins); members on demand."""

    def __init__(self, url: str, size: int):
        self.url, self.size = url, size
        tail = _get_range(url, max(0, size - TAIL_BYTES), size)
        offset, length = _central_directory(tail, size)
        self.members = _parse_members(_get_range(url, offset, offset + length))
        if not self.members:
            raise WheelFetchError(f"{url}: the central directory lists no member")

    def read(self, name: str) -> bytes:
        """One member's bytes, CRC-32 checked."""
        if name not in self.members:
            raise WheelFetchError(f"{self.url}: no member {name!r} in the wheel")
        m = self.members[name]
        header = _get_range(self.url, m.header_offset, m.header_offset + 30)
        if header[:4] != b"PK\x03\x04":
            raise WheelFetchError(f"{name}: no local file header at offset {m.header_offset}")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        start = m.header_offset + 30 + name_len + extra_len
        raw = _get_range(self.url, start, start + m.compressed_size)
        if m.method == 8:
            data = zlib.decompress(raw, -15)
        elif m.method == 0:
            data = raw
        else:
            raise WheelFetchError(f"{name}: compression method {m.method} is neither stored (0) nor deflate (8)")
        if len(data) != m.size or zlib.crc32(data) != m.crc32:
            raise WheelFetchError(f"{name}: CRC-32 or size mismatch after download (size {len(data)}, "
                                  f"expected {m.size})")
        return data


__all__ = ["RemoteWheel", "Member", "WheelFetchError", "member_hash"]
