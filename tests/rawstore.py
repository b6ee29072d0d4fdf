"""Writing rows as another tool would (bypassing the store), for tests of what the store
does with them. The physical log is ``event_log`` (see ``agentrunner/store/eventlog.py``)."""

from __future__ import annotations

import sqlite3

from agentrunner.store import eventlog


def episode_key(conn: sqlite3.Connection, episode_id: str) -> int:
    return int(conn.execute("SELECT key FROM episodes WHERE id = ?", (episode_id,)).fetchone()[0])


def insert_event(
    conn: sqlite3.Connection,
    episode_id: str,
    seq: int,
    kind: str,
    payload: str,
    *,
    attempt: int = 1,
    turn: int = 0,
    ts_us: int = 0,
) -> None:
    """One event row, as is (no check but the schema's)."""
    conn.execute(
        eventlog.INSERT,
        (
            eventlog.row_id(episode_key(conn, episode_id), seq),
            attempt,
            turn,
            eventlog.KIND_CODE[kind],
            ts_us,
            payload,
        ),
    )


def next_seq(conn: sqlite3.Connection, episode_id: str) -> int:
    lo, hi = eventlog.span(episode_key(conn, episode_id))
    row = conn.execute("SELECT max(id) FROM event_log WHERE id BETWEEN ? AND ?", (lo, hi))
    last = row.fetchone()[0]
    return 1 if last is None else (last & eventlog.SEQ_MASK) + 1
