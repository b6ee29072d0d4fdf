"""Reading trace files saved whole as one JSON value (mini-swe-agent, SWE-agent, ATIF), and
naming their sessions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def whole_json(path: Path) -> Any:
    """A file written as one JSON value; a clear ValueError when it is not (yet) complete
    (its text does not name the file: whoever reports it does)."""
    try:
        return json.loads(path.read_bytes())
    except json.JSONDecodeError as exc:
        at = "" if exc.msg.endswith(" at") else " at"
        raise ValueError(
            f"the file is not complete JSON ({exc.msg}{at} line {exc.lineno}, column"
            f" {exc.colno}); such a trace is saved whole, so import it once its writer has"
            " finished saving it"
        ) from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"the file is not UTF-8 JSON ({exc.reason})") from None


def one_extends(a: Path, b: Path, block: int = 1 << 20) -> bool:
    """Whether one of two files is a byte prefix of the other (a snapshot of a file that
    grew, and a later one)."""
    left = min(a.stat().st_size, b.stat().st_size)
    with a.open("rb") as fa, b.open("rb") as fb:
        while left > 0:
            size = min(block, left)
            if fa.read(size) != fb.read(size):
                return False
            left -= size
    return True


def file_tail(path: Path, size: int = 4096) -> str:
    """The last ``size`` bytes of a file as text ("" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            f.seek(max(path.stat().st_size - size, 0))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def session_id(name: str | None, path: Path) -> str:
    """``name@<12 hex of the file's resolved path>``, or the path's whole sha256 without a
    name. The path is part of it because these names repeat: every run of a benchmark writes
    ``django__django-16255``, and ATIF's ``session_id`` names a run, not a document; one id
    would make a second file look imported already. (Moving a file imports it anew.)"""
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()
    return f"{name}@{digest[:12]}" if name else digest
