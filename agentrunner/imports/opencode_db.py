"""Reading opencode's session database (``$XDG_DATA_HOME/opencode/opencode.db``, by default
``~/.local/share/opencode/opencode.db``) into the records the opencode importer feeds its
parser: one record per message, in the order opencode made them.

The layout, as opencode 1.18 writes it: a SQLite database (in WAL mode) whose ``session``
table holds one row per session (``id``, ``parent_id`` for a sub-agent's session, ``title``,
``directory``, ``version``, ``model`` as JSON), ``message`` one row per message (``id``,
``session_id``, ``time_created`` in ms, ``data``: the message's JSON without its id) and
``part`` one row per part of a message (``id``, ``message_id``, ``data``: its JSON). Ids are
ascending in time (``msg_<time-based hex>...``), so ordering the messages of every session by
id gives the order they were made, and a message made later sorts after every earlier one: the
records only grow at the end while opencode runs, which is what lets an import continue where
an earlier one stopped. The database is opened read-only (opencode may be writing it) through
sqlite-utils' table API.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlite_utils import Database

TABLES = {"session", "message", "part"}
SQLITE_HEADER = "SQLite format 3\x00"


def is_opencode_db(path: Path, head: str) -> bool:
    """Whether ``path`` is a SQLite database with opencode's session tables."""
    if not head.startswith(SQLITE_HEADER):
        return False
    try:
        db = _open(path)
    except sqlite3.Error:
        return False
    try:
        return set(db.table_names()) >= TABLES
    except sqlite3.Error:
        return False
    finally:
        db.close()


def _open(path: Path) -> Database:
    return Database(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True))


def message_records(path: Path, *, live: bool) -> list[dict[str, Any]]:
    """Every message of every session, ordered by id: ``{"session": <its session's row>,
    "message": <its JSON with id and time_created>, "parts": [<each part's JSON with id and
    time_created>, ...]}``. With ``live`` the records stop before the first message opencode
    has not finished (an answer without ``time.completed``, a prompt without its parts yet):
    its next parts may come, and a later look imports it whole."""
    db = _open(path)
    try:
        tables = set(db.table_names())
        missing = ", ".join(sorted(TABLES - tables))
        if missing:
            raise ValueError(f"not an opencode session database (no table {missing})")
        sessions = {row["id"]: row for row in db["session"].rows}
        parts: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in db["part"].rows_where(order_by="id"):
            parts[row["message_id"]].append(_json_row(row))
        records = [
            {
                "session": _session(sessions.get(row["session_id"]), row["session_id"]),
                "message": _json_row(row),
                "parts": parts.get(row["id"], []),
            }
            for row in db["message"].rows_where(order_by="id")
        ]
    except sqlite3.Error as exc:
        raise ValueError(f"cannot read the opencode database: {exc}") from None
    finally:
        db.close()
    if live:
        done = [_finished(r) for r in records]
        return records[: done.index(False)] if False in done else records
    return records


def _json_row(row: dict[str, Any]) -> dict[str, Any]:
    """A message's or part's JSON with its row's id and creation time (ms)."""
    try:
        data = json.loads(row["data"])
    except (TypeError, json.JSONDecodeError):
        data = {"unreadable": row["data"]}
    data = data if isinstance(data, dict) else {"value": data}
    return {**data, "id": row["id"], "time_created": row["time_created"]}


def _session(row: dict[str, Any] | None, session_id: str) -> dict[str, Any]:
    """What a session's row says of it (its totals, which change as it runs, left out)."""
    if row is None:
        return {"id": session_id}
    keep = ("id", "parent_id", "title", "directory", "version", "agent", "model", "slug")
    out = {k: row.get(k) for k in keep if row.get(k) is not None}
    out["time_created"] = row.get("time_created")
    return out


def _finished(record: dict[str, Any]) -> bool:
    message = record["message"]
    if message.get("role") == "assistant":
        time = message.get("time")
        return isinstance(time, dict) and time.get("completed") is not None
    return bool(record["parts"])
