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

from datetime import UTC, datetime

from agentrunner.events import EVENT_KINDS

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
    return int(datetime.now(UTC).timestamp() * 1_000_000)


def iso(ts_us: int) -> str:
    """Microseconds since the epoch as the contract's ISO 8601 UTC text."""
    return datetime.fromtimestamp(ts_us / 1_000_000, UTC).isoformat(timespec="microseconds")


def parse_iso(text: str) -> int:
    """The contract's ISO 8601 text (as older stores hold it) as microseconds."""
    value = datetime.fromisoformat(text)
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

DDL = (
    """
    CREATE TABLE event_log (
        id INTEGER PRIMARY KEY,
        attempt INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        kind INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        payload TEXT NOT NULL
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
    """
    CREATE TRIGGER event_log_payload_is_json BEFORE INSERT ON event_log
    WHEN NOT json_valid(NEW.payload)
    BEGIN
        SELECT RAISE(ABORT, 'events.payload must be JSON text');
    END
    """,
    f"""
    CREATE VIEW events (episode_id, seq, attempt, turn, kind, ts, payload) AS
    SELECT e.id, l.id & {SEQ_MASK}, l.attempt, l.turn, {_KIND_CASE}, {_ISO_SQL}, l.payload
    FROM episodes e JOIN event_log l
      ON l.id BETWEEN (e.key << {SEQ_BITS}) + 1 AND (e.key << {SEQ_BITS}) + {SEQ_MASK}
    """,
    """
    CREATE TRIGGER events_view_refuses_writes INSTEAD OF INSERT ON events
    BEGIN
        SELECT RAISE(ABORT, 'this trace store was upgraded by a newer agentrunner (events is a'
            || ' view over event_log now): stop this run, upgrade agentrunner and resume it');
    END
    """,
)
