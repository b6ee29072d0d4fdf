"""The SQLite store's schema: a new store made from the one table definition
(:mod:`agentrunner.store.tables`), and the named, append-only migrations (sqlite-utils
``Migrations``) that bring a store of an earlier schema to it.

A migration, once released, is never edited or removed; changes are new migrations appended
at the end. A new store is recorded as having applied every migration. A store that has
applied a migration this code does not know was written by a newer agentrunner and is
refused. sqlite-utils is imported only by :func:`apply`: opening an up-to-date store reads
the record of applied migrations with ``sqlite3`` alone.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from agentrunner.store import eventlog
from agentrunner.store.ddl import create_tables
from agentrunner.store.dialect import SQLITE
from agentrunner.store.status import status_sql
from agentrunner.values.statuses import EVENT_KINDS

if TYPE_CHECKING:
    from sqlite_utils import Database

MIGRATION_SET = "agentrunner"
MIGRATIONS_TABLE = "_sqlite_migrations"
"""Where sqlite-utils records the migrations applied (one row each, by set and name)."""
KNOWN_MIGRATIONS: list[str] = []
_STEPS: list[Callable[[Database], None]] = []


def _migration(fn: Callable[[Database], None]) -> Callable[[Database], None]:
    KNOWN_MIGRATIONS.append(fn.__name__)
    _STEPS.append(fn)
    return fn


_KINDS_SQL = ", ".join(f"'{k}'" for k in EVENT_KINDS)

# Rowid tables (not WITHOUT ROWID) for events and messages: their rows are often a few KB
# (tool results), which a WITHOUT ROWID b-tree spills into mostly empty overflow pages.
_INITIAL = (
    """
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        parent_episode_id TEXT REFERENCES episodes(id),
        fork_seq INTEGER,
        task_id TEXT NOT NULL,
        seed INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        env TEXT NOT NULL CHECK (json_valid(env)),
        model TEXT NOT NULL CHECK (json_valid(model)),
        CHECK ((parent_episode_id IS NULL) = (fork_seq IS NULL))
    )
    """,
    "CREATE INDEX episodes_parent ON episodes(parent_episode_id)",
    f"""
    CREATE TABLE events (
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        seq INTEGER NOT NULL CHECK (seq >= 1),
        attempt INTEGER NOT NULL CHECK (attempt >= 1),
        turn INTEGER NOT NULL CHECK (turn >= 0),
        kind TEXT NOT NULL CHECK (kind IN ({_KINDS_SQL})),
        ts TEXT NOT NULL,
        payload TEXT NOT NULL,
        PRIMARY KEY (episode_id, seq)
    )
    """,
    "CREATE INDEX events_kind ON events(episode_id, kind, seq)",
    # Explicit removal permits: a DELETE on events is refused unless `agentrunner rm`
    # (which checks fork lineage) has written a permit for that episode first.
    "CREATE TABLE removals (episode_id TEXT PRIMARY KEY, requested_at TEXT NOT NULL)",
    """
    CREATE TRIGGER events_refuse_update BEFORE UPDATE ON events
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: UPDATE is refused');
    END
    """,
    """
    CREATE TRIGGER events_refuse_delete BEFORE DELETE ON events
    WHEN NOT EXISTS (SELECT 1 FROM removals WHERE episode_id = OLD.episode_id)
    BEGIN
        SELECT RAISE(ABORT, 'events are append-only: DELETE is refused (use agentrunner rm)');
    END
    """,
    """
    CREATE TABLE messages (
        hash TEXT PRIMARY KEY,
        parent_hash TEXT,
        message TEXT NOT NULL
    )
    """,
    "CREATE TABLE tools (hash TEXT PRIMARY KEY, tools TEXT NOT NULL) WITHOUT ROWID",
    # The only rows updated in place: writer heartbeats, cancel requests, and the writer's
    # running totals as of seq `totals_seq` (a cache: readers add the events after it).
    """
    CREATE TABLE control (
        episode_id TEXT PRIMARY KEY REFERENCES episodes(id),
        writer_pid INTEGER,
        writer_host TEXT,
        writer_started TEXT,
        heartbeat_at REAL,
        cancel_requested_at TEXT,
        cancel_reason TEXT,
        totals TEXT,
        totals_seq INTEGER
    )
    """,
)


@_migration
def m001_initial(db: Database) -> None:
    """Episodes, the append-only event log, content-addressed messages and tools, control."""
    for statement in _INITIAL:
        db.execute(statement)


_GROUPS = (
    # Counterfactual fan-out: K candidate actions x N samples forked at one point.
    """
    CREATE TABLE fork_groups (
        id TEXT PRIMARY KEY,
        parent_episode_id TEXT NOT NULL REFERENCES episodes(id),
        fork_seq INTEGER NOT NULL,
        turn INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        config TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE fork_group_members (
        group_id TEXT NOT NULL REFERENCES fork_groups(id),
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        candidate INTEGER NOT NULL,
        sample INTEGER NOT NULL,
        action TEXT,
        PRIMARY KEY (group_id, candidate, sample)
    )
    """,
    "CREATE INDEX fork_group_members_episode ON fork_group_members(episode_id)",
    # Batch runs: one episode per (task, seed); re-running the same batch resumes it.
    """
    CREATE TABLE batches (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        config TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE batch_members (
        batch_id TEXT NOT NULL REFERENCES batches(id),
        task_id TEXT NOT NULL,
        seed INTEGER NOT NULL,
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        PRIMARY KEY (batch_id, task_id, seed)
    )
    """,
    "CREATE INDEX batch_members_episode ON batch_members(episode_id)",
    # Verifier results, scored after the fact.
    """
    CREATE TABLE verifications (
        id INTEGER PRIMARY KEY,
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        verifier TEXT NOT NULL,
        score REAL,
        passed INTEGER,
        details TEXT NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX verifications_episode ON verifications(episode_id, verifier)",
)


@_migration
def m002_groups_batches_verifications(db: Database) -> None:
    """Side tables for fork groups, batch runs and verifier results."""
    for statement in _GROUPS:
        db.execute(statement)


_WORKSPACES = (
    # Workspace file contents, content-addressed (sha256 of the whole file), in parts of at
    # most 8 MiB so that files of any size fit; a blob is present when its part 0 is.
    """
    CREATE TABLE blobs (
        hash TEXT NOT NULL,
        part INTEGER NOT NULL CHECK (part >= 0),
        data BLOB NOT NULL,
        PRIMARY KEY (hash, part)
    )
    """,
    # Workspace snapshots: each holds its changes against its parent ({path: entry | null},
    # see agentrunner/envs/manifest.py); a snapshot without a parent holds every entry.
    """
    CREATE TABLE snapshots (
        id TEXT PRIMARY KEY,
        parent_id TEXT REFERENCES snapshots(id),
        depth INTEGER NOT NULL CHECK (depth >= 0),
        created_at TEXT NOT NULL,
        files INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        changes TEXT NOT NULL CHECK (json_valid(changes)),
        CHECK ((parent_id IS NULL) = (depth = 0))
    )
    """,
)


@_migration
def m003_workspace_snapshots(db: Database) -> None:
    """Content-addressed workspace blobs and incremental snapshots, kept in the store."""
    for statement in _WORKSPACES:
        db.execute(statement)


@_migration
def m004_json_payloads(db: Database) -> None:
    """Refuse, at insert, an event whose payload is not JSON text (another tool's row)."""
    db.execute(
        """
        CREATE TRIGGER events_payload_is_json BEFORE INSERT ON events
        WHEN NOT json_valid(NEW.payload)
        BEGIN
            SELECT RAISE(ABORT, 'events.payload must be JSON text');
        END
        """
    )


_EPISODE_KEY_GIVEN = (  # an episode inserted by another tool gets its key too
    "CREATE TRIGGER episodes_key_given AFTER INSERT ON episodes WHEN NEW.key IS NULL"
    " BEGIN UPDATE episodes SET key = (SELECT coalesce(max(key), 0) + 1 FROM episodes)"
    " WHERE id = NEW.id; END"
)


@_migration
def m005_event_log(db: Database) -> None:
    """Move the log into ``event_log`` (episode key and seq in one integer primary key,
    integer kinds and times, a kind index without the chunks) behind an ``events`` view
    that reads as before. Stores of the previous layout are converted in place."""
    conn = db.conn
    conn.execute("ALTER TABLE episodes ADD COLUMN key INTEGER")
    conn.execute("UPDATE episodes SET key = rowid")
    conn.execute("CREATE UNIQUE INDEX episodes_key ON episodes(key)")
    conn.execute(_EPISODE_KEY_GIVEN)
    for statement in eventlog.DDL[:4]:  # the table, its index and triggers
        conn.execute(statement)
    rows = conn.execute(
        "SELECT e.key, v.seq, v.attempt, v.turn, v.kind, v.ts, v.payload"
        " FROM events v JOIN episodes e ON e.id = v.episode_id ORDER BY e.key, v.seq"
    )
    conn.executemany(
        "INSERT INTO event_log (id, attempt, turn, kind, ts, payload) VALUES (?, ?, ?, ?, ?, ?)",
        (
            (
                eventlog.row_id(key, seq),
                attempt,
                turn,
                eventlog.KIND_CODE[kind],
                eventlog.stored_time(ts),
                payload,
            )
            for key, seq, attempt, turn, kind, ts, payload in rows
        ),
    )
    for trigger in ("events_refuse_update", "events_refuse_delete", "events_payload_is_json"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    conn.execute("DROP INDEX IF EXISTS events_kind")
    conn.execute("DROP TABLE events")
    for statement in eventlog.DDL[4:]:  # the view and its refusal of writes
        conn.execute(statement)


_END = eventlog.KIND_CODE["episode.end"]
_USAGE = eventlog.KIND_CODE["usage"]
_BITS, _MASK = eventlog.SEQ_BITS, eventlog.SEQ_MASK
_OWN = f"l.id BETWEEN (e.key << {_BITS}) + 1 AND (e.key << {_BITS}) + {_MASK}"
_FIRST_STATUS = f"""CASE WHEN last.kind = {_END} THEN
            CASE json_extract(last.payload, '$.stop_reason')
                WHEN 'done' THEN 'completed' WHEN 'max_turns' THEN 'completed'
                WHEN 'max_steps' THEN 'completed' WHEN 'cancelled' THEN 'cancelled'
                ELSE 'failed' END
            ELSE 'running or interrupted' END"""
"""The view's status before ``m010_one_status_rule`` (what ``m006`` made)."""


def _summary_view(status: str) -> str:
    """The ``episode_summary`` view with ``status`` as its status expression (the rule of
    the release that made it: a later rule is a new migration)."""
    return f"""
    CREATE VIEW episode_summary AS
    SELECT e.id AS episode_id, e.parent_episode_id, e.fork_seq, e.task_id, e.seed,
        json_extract(e.model, '$.spec') AS model, e.created_at,
        last.id & {eventlog.SEQ_MASK} AS last_seq,
        last.turn AS turns,
        {status} AS status,
        CASE WHEN last.kind = {_END} THEN json_extract(last.payload, '$.stop_reason') END
            AS stop_reason,
        CASE WHEN last.kind = {_END} THEN json_extract(last.payload, '$.total_reward') END
            AS total_reward,
        (SELECT total(json_extract(l.payload, '$.input_tokens')) FROM event_log l
            WHERE l.kind = {_USAGE} AND l.kind <> {eventlog.CHUNK} AND {_OWN}) AS input_tokens,
        (SELECT total(json_extract(l.payload, '$.output_tokens')) FROM event_log l
            WHERE l.kind = {_USAGE} AND l.kind <> {eventlog.CHUNK} AND {_OWN}) AS output_tokens,
        (SELECT sum(json_extract(l.payload, '$.cost_usd')) FROM event_log l
            WHERE l.kind = {_USAGE} AND l.kind <> {eventlog.CHUNK} AND {_OWN}) AS cost_usd,
        c.writer_pid, c.heartbeat_at
    FROM episodes e
    LEFT JOIN event_log last ON last.id = (SELECT max(l.id) FROM event_log l WHERE {_OWN})
    LEFT JOIN control c ON c.episode_id = e.id
    """


# Every episode's full history, a fork's inherited events included (numbered as the fork
# numbers them): SELECT * FROM episode_history WHERE episode_id = ? ORDER BY seq.
_HISTORY_VIEW = f"""
    CREATE VIEW episode_history AS
    WITH RECURSIVE part(episode_id, source, lo, hi, parent, next_hi) AS (
        SELECT id, id, coalesce(fork_seq, 0) + 1, {eventlog.SEQ_MASK}, parent_episode_id,
            coalesce(fork_seq, {eventlog.SEQ_MASK})
        FROM episodes
        UNION ALL
        SELECT p.episode_id, a.id, coalesce(a.fork_seq, 0) + 1, p.next_hi, a.parent_episode_id,
            min(p.next_hi, coalesce(a.fork_seq, p.next_hi))
        FROM part p JOIN episodes a ON a.id = p.parent
    )
    SELECT p.episode_id, v.seq, p.source AS source_episode_id, v.attempt, v.turn, v.kind,
        v.ts, v.payload
    FROM part p JOIN events v ON v.episode_id = p.source AND v.seq BETWEEN p.lo AND p.hi
    """

_VIEWS = (
    # One row per episode: its own rows' ending, turns and spend (a fork's inherited part is
    # its ancestors'). `status` is 'running or interrupted' until an episode.end: whether its
    # writer is alive is what `agentrunner ls` checks (writer_pid, heartbeat_at help).
    _summary_view(_FIRST_STATUS),
    _HISTORY_VIEW,
)


@_migration
def m006_summary_and_history_views(db: Database) -> None:
    """Views for people who query the store: a summary per episode, a fork's full history."""
    for statement in _VIEWS:
        db.execute(statement)


@_migration
def m007_imports(db: Database) -> None:
    """Foreign sessions imported: one episode per (format, session id), found again by it."""
    db.execute(
        "CREATE TABLE imports (source_key TEXT PRIMARY KEY,"
        " episode_id TEXT NOT NULL UNIQUE REFERENCES episodes(id))"
    )


@_migration
def m008_lease_tokens(db: Database) -> None:
    """Writer leases carry an attempt token that fences the writer's appends."""
    db.execute("ALTER TABLE control ADD COLUMN lease_token TEXT")


@_migration
def m009_decision_outcomes(db: Database) -> None:
    """What each decision point decided (values, the adopted candidate), as it was decided."""
    db.execute(
        "CREATE TABLE decision_outcomes (group_id TEXT PRIMARY KEY REFERENCES fork_groups(id),"
        " outcome TEXT NOT NULL CHECK (json_valid(outcome)), created_at TEXT NOT NULL)"
    )


_SUMMARY_WITH_ONE_STATUS_RULE = _summary_view(status_sql(SQLITE))


@_migration
def m010_one_status_rule(db: Database) -> None:
    """``episode_summary.status`` follows the rule ``agentrunner ls`` follows
    (:mod:`agentrunner.store.status`): ``pending``, ``running`` or ``interrupted`` by the
    writer's lease, an imported session ``completed``, instead of 'running or interrupted'
    for every episode without an end. The view is made from the rule of this release; a
    later change of the rule is a new migration."""
    db.execute("DROP VIEW episode_summary")
    db.execute(_SUMMARY_WITH_ONE_STATUS_RULE)


@_migration
def m011_blob_bucket(db: Database) -> None:
    """Workspace blobs may live in an S3-compatible bucket: where it is, and the index of the
    blobs it holds for the store (see :mod:`agentrunner.store.blob_bucket`)."""
    db.execute(
        "CREATE TABLE blob_objects (hash TEXT NOT NULL PRIMARY KEY,"
        " bytes INTEGER NOT NULL CHECK (bytes >= 0)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE blob_bucket (id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),"
        " url TEXT NOT NULL, store_id TEXT NOT NULL, created_at TEXT NOT NULL)"
    )


NEW_STORE: tuple[str, ...] = (
    *create_tables(SQLITE),
    _EPISODE_KEY_GIVEN,
    *eventlog.DDL[2:],  # the log's triggers, the events view and its refusal of writes
    _SUMMARY_WITH_ONE_STATUS_RULE,
    _HISTORY_VIEW,
)
"""A new store, as every migration above leaves one, but for the checks of ``event_log``'s
``attempt`` and ``turn`` that only a new store holds (see :mod:`agentrunner.store.tables`)."""


def applied(conn: sqlite3.Connection) -> list[str]:
    """The migrations of this set the store has applied, in order (sqlite-utils' record)."""
    if not conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone():
        return []
    rows = conn.execute(
        f"SELECT name FROM {MIGRATIONS_TABLE} WHERE migration_set = ? ORDER BY rowid",
        (MIGRATION_SET,),
    )
    return [name for (name,) in rows]


def pending(conn: sqlite3.Connection) -> list[str]:
    """The migrations the store has not applied."""
    done = set(applied(conn))
    return [name for name in KNOWN_MIGRATIONS if name not in done]


def apply(conn: sqlite3.Connection) -> None:
    """Bring the store to this schema: one that has applied no migration is made new, from the
    one definition, and recorded as having applied them all; one of an earlier schema applies
    those it has not, each with its record in a savepoint (inside the caller's transaction,
    if any)."""
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

    db = Database(conn, execute_plugins=False)
    steps = Migrations(MIGRATION_SET)
    for step in _STEPS:
        steps(name=step.__name__)(step)
    if applied(conn):
        steps.apply(db)
        return
    with db.atomic():
        for statement in NEW_STORE:
            conn.execute(statement)
        steps.ensure_migrations_table(db)
        now = str(datetime.now(UTC))  # as sqlite-utils writes it
        conn.executemany(
            f"INSERT INTO {MIGRATIONS_TABLE} (migration_set, name, applied_at) VALUES (?, ?, ?)",
            [(MIGRATION_SET, name, now) for name in KNOWN_MIGRATIONS],
        )
