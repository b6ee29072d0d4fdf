"""Reading the JSON entries of an Inspect AI ``.eval`` log: a zip archive whose entries Inspect
compresses with Zstandard (method 93) since 0.3.x, which Python's own ``zipfile`` reads only
from 3.14. Older Pythons read such an entry's raw bytes through ``zipfile``'s directory and
decompress them with the ``zstandard`` package; deflated and stored entries (older logs) are
read by ``zipfile`` itself."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ZSTANDARD = 93
"""The zip compression method number of Zstandard (APPNOTE 4.4.5)."""
LOCAL_HEADER = struct.Struct("<4s22xHH")
"""A zip entry's local header: its signature, then (after 22 bytes) its name's and extra
field's lengths; the entry's data follows them."""


def entries(path: Path, wanted: Callable[[str], bool]) -> dict[str, Any]:
    """The ``.json`` entries of the archive whose names are ``wanted``, parsed, by name (in
    the archive's order)."""
    try:
        with zipfile.ZipFile(path) as archive, path.open("rb") as raw:
            return {
                info.filename: _parsed(info, _bytes(archive, raw, info))
                for info in archive.infolist()
                if info.filename.endswith(".json") and wanted(info.filename)
            }
    except zipfile.BadZipFile as exc:
        raise ValueError(
            f"not a complete zip archive ({exc}); is Inspect still writing it?"
        ) from None


def _parsed(info: zipfile.ZipInfo, data: bytes) -> Any:
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"its entry {info.filename} is not JSON ({exc})") from None


def _bytes(archive: zipfile.ZipFile, raw: io.BufferedReader, info: zipfile.ZipInfo) -> bytes:
    try:
        return archive.read(info)
    except NotImplementedError:  # a compression this Python's zipfile does not know
        if info.compress_type != ZSTANDARD:
            raise ValueError(
                f"its entry {info.filename} uses zip compression method {info.compress_type},"
                " which cannot be read here"
            ) from None
    data = _unzstd(_stored(raw, info), info.filename)
    if zlib.crc32(data) != info.CRC:
        raise ValueError(f"its entry {info.filename} fails its CRC check (a damaged file?)")
    return data


def _stored(raw: io.BufferedReader, info: zipfile.ZipInfo) -> bytes:
    """An entry's bytes as stored (still compressed)."""
    raw.seek(info.header_offset)
    signature, name_length, extra_length = LOCAL_HEADER.unpack(raw.read(LOCAL_HEADER.size))
    if signature != b"PK\x03\x04":
        raise ValueError(f"its entry {info.filename} has no local header where its index says")
    raw.seek(name_length + extra_length, io.SEEK_CUR)
    return raw.read(info.compress_size)


def _unzstd(data: bytes, name: str) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise ValueError(
            f"its entry {name} is Zstandard-compressed, as Inspect writes its logs; install the"
            " [inspect] extra (pip install 'agentrunner[inspect]') to read it on this Python"
        ) from None
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    try:
        return reader.read()
    except zstandard.ZstdError as exc:
        raise ValueError(f"its entry {name} is not valid Zstandard data ({exc})") from None
