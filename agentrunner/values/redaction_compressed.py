"""What a compressed file holds, for redaction: the uncompressed bytes of a gzip stream, of a
zlib stream (a git loose object) and of every object of a git pack file, in pieces.

Nothing is written anywhere; a stream that is cut short or corrupt yields what it holds up to
the damage. At most :data:`INFLATE_CAP` bytes are uncompressed from one file (a bomb costs no
more than that).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

INFLATE_CAP = 1 << 30
"""Uncompressed bytes looked at in one file."""
_PIECE = 1 << 20
_FEED = 64 << 10
_GZIP, _ZLIB = 31, 15
_OFS_DELTA, _REF_DELTA = 6, 7


def compression(data: bytes) -> str | None:
    """``gzip``, ``zlib`` or ``pack`` when ``data`` begins like one, else None."""
    if data[:2] == b"\x1f\x8b":
        return "gzip"
    if data[:4] == b"PACK" and len(data) >= 12:
        return "pack"
    if len(data) > 1 and data[0] & 0x0F == 8 and int.from_bytes(data[:2], "big") % 31 == 0:
        return "zlib"
    return None


def inflated(data: bytes, cap: int = INFLATE_CAP) -> Iterator[bytes]:
    """The uncompressed bytes ``data`` holds, in pieces of at most 1 MiB (none when it is not
    compressed in a way :func:`compression` knows)."""
    kind = compression(data)
    budget = [cap]
    view = memoryview(data)
    if kind == "gzip":
        yield from _Stream(view, 0, _GZIP, budget)
    elif kind == "zlib":
        yield from _Stream(view, 0, _ZLIB, budget)
    elif kind == "pack":
        yield from _pack(view, budget)


class _Stream:
    """One compressed stream of ``data`` from ``pos``: its output in pieces; ``end`` is where
    it ended (None when it did not, or the budget ran out)."""

    def __init__(self, data: memoryview, pos: int, wbits: int, budget: list[int]) -> None:
        self.data, self.pos, self.wbits, self.budget = data, pos, wbits, budget
        self.end: int | None = None

    def __iter__(self) -> Iterator[bytes]:
        inflater = zlib.decompressobj(self.wbits)
        pos, pending = self.pos, b""
        while self.budget[0] > 0:
            if pending:
                chunk: bytes | memoryview = pending
            elif pos < len(self.data):
                chunk = self.data[pos : pos + _FEED]
                pos += len(chunk)
            else:
                return
            try:
                out = inflater.decompress(chunk, _PIECE)
            except zlib.error:
                return
            pending = inflater.unconsumed_tail
            self.budget[0] -= len(out)
            if out:
                yield out
            if inflater.eof:
                self.end = pos - len(inflater.unused_data)
                return


def _pack(data: memoryview, budget: list[int]) -> Iterator[bytes]:
    """Every object of a git pack, in order (a delta's inserted bytes hold what it adds)."""
    count = int.from_bytes(data[8:12], "big")
    pos = 12
    for _ in range(count):
        if pos >= len(data):
            return
        byte = data[pos]
        kind = (byte >> 4) & 7
        pos += 1
        while byte & 0x80 and pos < len(data):  # the rest of the object's size
            byte = data[pos]
            pos += 1
        if kind == _OFS_DELTA:
            while pos < len(data) and data[pos] & 0x80:
                pos += 1
            pos += 1
        elif kind == _REF_DELTA:
            pos += 20
        stream = _Stream(data, pos, _ZLIB, budget)
        yield from stream
        if stream.end is None:
            return
        pos = stream.end
