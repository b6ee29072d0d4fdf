"""The physical event log and the public ``events`` view over it.

One rowid table, ``event_log``, holds every event. Its integer primary key packs the episode's
integer key and the event's seq, ``(key << 32) | seq``, so the table's own b-tree is ordered by
episode, then seq: an episode's events are one range of it, an append touches one page, and
no separate (episode, seq) index exists. ``kind`` is a small integer and ``ts`` integer
microseconds. A partial index on ``kind`` skips ``model.chunk`` rows (most of the log), so
finding an episode's requests, calls or results is a range scan of the index.

Readers of the contract see ``events(episode_id, seq, attempt, turn, kind, ts, payload)``, a
view that spells the columns as before (ISO 8601 UTC times, kind names): ``sqlite3``,
Datasette and pandas read it unchanged. Writing through the view is refused with a message
that names the cause (an older agentrunner still running against an upgraded store).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from agentrunner.store.records import EventRow
from agentrunner.values.statuses import EVENT_KINDS

SEQ_BITS = 32
SEQ_MASK = (1 << SEQ_BITS) - 1
KIND_CODE: dict[str, int] = {kind: i for i, kind in enumerate(EVENT_KINDS, start=1)}
KIND_NAME: dict[int, str] = {i: kind for kind, i in KIND_CODE.items()}
CHUNK = KIND_CODE["model.chunk"]


def row_id(key: int, seq: int) -> int:
    """The event's primary key: its episode's key and its seq in one integer."""
    return (key << SEQ_BITS) | seq


def span(key: int, start: int = 1, end: int | None = None) -> tuple[int, int]:
    """The primary-key range of an episode's seqs ``start..end`` (end: its last)."""
    return row_id(key, start), row_id(key, SEQ_MASK if end is None else end)


def now_us() -> int:
    """The current time as integer microseconds since the epoch (UTC)."""
    return time.time_ns() // 1000


def stored_time(text: str) -> int:
    """An ISO 8601 time (as older stores hold it) as microseconds (0 when unreadable)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return 0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1_000_000)


_KIND_CASE = (
    "CASE l.kind " + " ".join(f"WHEN {c} THEN '{k}'" for k, c in KIND_CODE.items()) + " END"
)
_ISO_SQL = (
    "strftime('%Y-%m-%dT%H:%M:%S', l.ts / 1000000, 'unixepoch') || '.'"
    " || printf('%06d', l.ts % 1000000) || '+00:00'"
)

_UPGRADED = (
    "this trace store was upgraded by a newer agentrunner (events is a view over event_log"
    " now): stop this run, upgrade agentrunner and resume it"
)

DDL = (
    """
    CREATE TABLE event_log (
        id INTEGER PRIMARY KEY,
        attempt INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        payload TEXT NOT NULL CONSTRAINT payload_must_be_json_text CHECK (json_valid(payload))
    )
    """,
    f"CREATE INDEX event_log_kind ON event_log(kind) WHERE kind <> {CHUNK}",
    """
    CREATE TRIGGER event_log_refuse_update BEFORE UPDATE ON event_log
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: UPDATE is refused');
    END
    """,
    f"""
    CREATE TRIGGER event_log_refuse_delete BEFORE DELETE ON event_log
    WHEN NOT EXISTS (
        SELECT 1 FROM removals r JOIN episodes e ON e.id = r.episode_id
        WHERE e.key = OLD.id >> {SEQ_BITS}
    )
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: DELETE is refused (use agentrunner rm)');
    END
    """,
    f"""
    CREATE VIEW events (episode_id, seq, attempt, turn, kind, ts, payload) AS
    SELECT e.id, l.id & {SEQ_MASK}, l.attempt, l.turn, {_KIND_CASE}, {_ISO_SQL}, l.payload
    FROM episodes e JOIN event_log l
      ON l.id BETWEEN (e.key << {SEQ_BITS}) + 1 AND (e.key << {SEQ_BITS}) + {SEQ_MASK}
    """,
    """
    CREATE TRIGGER events_view_refuses_update INSTEAD OF UPDATE ON events
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: UPDATE is refused');
    END
    """,
    """
    CREATE TRIGGER events_view_refuses_delete INSTEAD OF DELETE ON events
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: DELETE is refused (use agentrunner rm)');
    END
    """,
    f"""
    CREATE TRIGGER events_view_refuses_writes INSTEAD OF INSERT ON events
    BEGIN
        SELECT RAISE(ABORT, '{_UPGRADED}');
    END
    """,
)


INSERT = "INSERT INTO event_log (id, attempt, turn, kind, ts, payload) VALUES (?, ?, ?, ?, ?, ?)"
COLUMNS = "id, attempt, turn, kind, ts, payload"
NOT_CHUNK = f"kind <> {CHUNK}"
"""Said in every query that skips chunks, so SQLite uses the partial kind index."""


def kinds_sql(kinds: Sequence[str]) -> tuple[str, tuple[int, ...]]:
    """An ``AND kind IN (...)`` clause for ``kinds`` (the partial index when no chunks)."""
    codes = tuple(KIND_CODE[k] for k in kinds)
    clause = f" AND kind IN ({', '.join('?' for _ in codes)})"
    if CHUNK not in codes:
        clause += f" AND {NOT_CHUNK}"
    return clause, codes


def to_row(episode_id: str, row: tuple[Any, ...]) -> EventRow:
    """A stored row (``COLUMNS``) of ``episode_id`` as the contract spells it."""
    rid, attempt, turn, kind, ts, payload = row
    return EventRow(episode_id, rid & SEQ_MASK, attempt, turn, KIND_NAME[kind], ts, payload)
