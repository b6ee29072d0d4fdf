"""Writing rows to a file or stdout: JSON Lines, or Parquet through :mod:`.parquet`.

A file is written next to its destination and moved into place when complete, so a failed
or interrupted export never leaves a half-written file, and an existing file is replaced
only by a complete one. The file is created with the permissions the user's umask gives a
new file (``0o666 & ~umask``, as ``open`` does). Zero rows give an empty JSONL file (0 bytes)
or a valid Parquet file with the format's columns and no rows.

Rows pass :class:`RecordableRows` first: a lone surrogate (which UTF-8, JSON Lines and Parquet
cannot carry) becomes U+FFFD and a note counts the rows it touched, so one bad string never
costs the rest of an export; a known secret (in any form :mod:`agentrunner.values.redaction` knows)
becomes a marker, with a note too.

Errors on the way become the project's own: an output that is a directory or not a regular
file, or a folder where no file can be created, is a :class:`UsageError` (raised before any
row is read); a write that fails midway is an :class:`AgentRunnerError`.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from agentrunner.export import parquet
from agentrunner.values.errors import AgentRunnerError, UsageError
from agentrunner.values.redaction import Redactor, scrub


class RecordableRows:
    """Passes rows through with every lone surrogate (keys too) replaced by U+FFFD, and every
    known secret of this process's environment (in all its forms) by a marker."""

    def __init__(self) -> None:
        self.changed = 0
        self.redacted = 0
        self.redactor = Redactor()

    def rows(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for row in rows:
            clean, replaced = scrub(row, None)
            if replaced:
                self.changed += 1
                row = clean
            if self.redactor:  # a store recorded where the key was not known, or not all forms
                redacted = self.redactor.deep_value(row)
                if redacted != row:
                    self.redacted += 1
                    row = redacted
            yield row

    def notes(self) -> list[str]:
        notes = []
        if self.changed:
            notes.append(
                f"{self.changed} row(s) held text UTF-8 cannot carry (lone surrogates); written"
                " with U+FFFD in its place"
            )
        if self.redacted:
            notes.append(f"{self.redacted} row(s) held a known secret; written redacted")
        return notes


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def check_output(path: Path) -> None:
    """Refuse an output that cannot be a file (before anything is read or written)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{path} is a directory: give -o a file name")
    if not stat.S_ISREG(mode):
        raise UsageError(
            f"{path} is not a regular file; export to a file (or leave out -o for stdout)"
        )


def _create_temp(path: Path) -> tuple[int, Path]:
    """A new file beside ``path``, created with mode 0o666 less the umask."""
    check_output(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.part"
            try:
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
                return os.open(tmp, flags, 0o666), tmp
            except FileExistsError:
                continue
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {_reason(exc)}") from None


def _atomic(path: Path, binary: bool, write: Callable[[IO[Any]], int]) -> int:
    fd, tmp = _create_temp(path)
    try:
        f: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8")
        with f:
            count = write(f)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise AgentRunnerError(f"could not write {path}: {_reason(exc)}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path | None) -> int:
    """Write rows as JSON Lines to ``path`` (stdout when None); return how many."""
    if path is None:
        return _write_lines(rows, sys.stdout)
    return _atomic(path, False, lambda f: _write_lines(rows, f))


def _write_lines(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    count = 0
    for row in rows:
        out.write(_line(row))
        count += 1
    out.flush()
    return count


def write_parquet(
    rows: Iterable[dict[str, Any]], path: Path, fmt: str, reasoning_key: str | None = None
) -> int:
    """Write rows of format ``fmt`` as one Parquet table (see :mod:`.parquet`); return how many."""
    parquet.require_pyarrow()
    table_schema = parquet.schema(fmt, reasoning_key)
    return _atomic(path, True, lambda f: parquet.write_table(rows, f, table_schema))
