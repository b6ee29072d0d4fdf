"""Writing rows: JSON Lines (default) or Parquet (with pyarrow, when installed).

A file is written next to its destination and moved into place when complete, so a failed
or interrupted export never leaves a half-written file. Zero rows give an empty JSONL file
(0 bytes) or a valid Parquet file with no rows.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from agentrunner.errors import UsageError

PARQUET_JSON_COLUMNS = ("tools",)  # JSON schemas vary in shape; stored as JSON text


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_jsonl(rows: Iterable[dict[str, Any]], path: Path | None) -> int:
    """Write rows as JSON Lines to ``path`` (stdout when None); return how many."""
    if path is None:
        return _write_lines(rows, sys.stdout)
    return _atomic(path, lambda f: _write_lines(rows, f))


def _write_lines(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    count = 0
    for row in rows:
        out.write(_line(row))
        count += 1
    out.flush()
    return count


def _atomic(path: Path, write: Any) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            count: int = write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UsageError(
            "Parquet output needs pyarrow, which is not installed: pip install pyarrow "
            "(or export JSON Lines without --parquet)"
        ) from None


def write_parquet(rows: Iterable[dict[str, Any]], path: Path) -> int:
    """Write rows as one Parquet table (``tools`` as JSON text); return how many."""
    require_pyarrow()
    import pyarrow as pa
    import pyarrow.parquet as pq

    table_rows = [
        {
            k: json.dumps(v, ensure_ascii=False) if k in PARQUET_JSON_COLUMNS else v
            for k, v in r.items()
        }
        for r in rows
    ]
    try:
        table = pa.Table.from_pylist(table_rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise UsageError(
            f"these rows do not fit one Parquet schema ({exc}); export JSON Lines, or keep "
            "tool arguments as strings (--tool-args string)"
        ) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return table.num_rows
