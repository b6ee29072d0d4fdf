"""The Postgres store's schema: a new store made from the one table definition
(:mod:`agentrunner.store.tables`) with the event log's triggers and the views spelled for
Postgres, and the named, append-only migrations (table ``agentrunner_migrations``) that bring
a store of an earlier schema to it.

A migration, once released, is never edited or removed; changes are new migrations appended
at the end. A new store is recorded as having applied every migration. A client opening a
store never migrates it (it is shared: a migration locks out every older client); only
``agentrunner db migrate`` (:func:`upgrade`) does. A database that has
applied a migration this code does not know was written by a newer agentrunner and is
refused, as is one holding an ``episodes`` table agentrunner did not make.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.store import eventlog
from agentrunner.store.ddl import create_tables
from agentrunner.store.dialect import POSTGRES, Conn, pg_json
from agentrunner.store.status import status_sql
from agentrunner.store.tables import tables
from agentrunner.values.errors import StoreError, StoreSchemaError

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase

LOCK_KEY = 0x61_67_65_6E_74  # "agent": the store's write lock (pg_advisory_xact_lock)

_MASK, _BITS = eventlog.SEQ_MASK, eventlog.SEQ_BITS
_KIND_CASE = (
    "CASE l.kind "
    + " ".join(f"WHEN {c} THEN '{k}'" for k, c in eventlog.KIND_CODE.items())
    + " END"
)
_ISO = (
    "to_char(timestamp 'epoch' + l.ts * interval '1 microsecond',"
    " 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+00:00'"
)
_END, _USAGE = eventlog.KIND_CODE["episode.end"], eventlog.KIND_CODE["usage"]
_OWN = f"l.id BETWEEN (e.key << {_BITS}) + 1 AND (e.key << {_BITS}) + {_MASK}"


def _usage_sum(field: str, *, total: bool = True) -> str:
    value = f"({pg_json('l.payload')} ->> '{field}')::float8"
    expr = f"coalesce(sum({value}), 0.0)" if total else f"sum({value})"
    return (
        f"(SELECT {expr} FROM event_log l WHERE l.kind = {_USAGE}"
        f" AND l.kind <> {eventlog.CHUNK} AND {_OWN})"
    )


_STATUS = (
    f"CASE WHEN last.kind = {_END} THEN CASE {pg_json('last.payload')} ->> 'stop_reason'"
    " WHEN 'done' THEN 'completed' WHEN 'max_turns' THEN 'completed'"
    " WHEN 'max_steps' THEN 'completed' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END"
    " ELSE 'running or interrupted' END"
)


def _summary_view(status: str) -> str:
    """The ``episode_summary`` view with ``status`` as its status expression (the one rule
    of the release that made it: a later rule is a new migration)."""
    return f"""
    CREATE VIEW episode_summary AS
    SELECT e.id AS episode_id, e.parent_episode_id, e.fork_seq, e.task_id, e.seed,
        {pg_json("e.model")} ->> 'spec' AS model, e.created_at,
        last.id & {_MASK} AS last_seq, last.turn AS turns, {status} AS status,
        CASE WHEN last.kind = {_END} THEN {pg_json("last.payload")} ->> 'stop_reason' END
            AS stop_reason,
        CASE WHEN last.kind = {_END}
            THEN ({pg_json("last.payload")} ->> 'total_reward')::float8 END
            AS total_reward,
        {_usage_sum("input_tokens")} AS input_tokens,
        {_usage_sum("output_tokens")} AS output_tokens,
        {_usage_sum("cost_usd", total=False)} AS cost_usd,
        c.writer_pid, c.heartbeat_at
    FROM episodes e
    LEFT JOIN event_log last ON last.id = (SELECT max(l.id) FROM event_log l WHERE {_OWN})
    LEFT JOIN control c ON c.episode_id = e.id
    """


_LOG_GUARDS = (
    # The log is append-only: UPDATE refused, DELETE only of an episode `rm` permitted,
    # TRUNCATE refused; the contract's `events` view reads it as the SQLite store's does.
    """
    CREATE FUNCTION agentrunner_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        RAISE EXCEPTION 'events are append-only: UPDATE is refused';
    END $$
    """,
    f"""
    CREATE FUNCTION agentrunner_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'TRUNCATE' OR NOT EXISTS (
            SELECT 1 FROM removals r JOIN episodes e ON e.id = r.episode_id
            WHERE e.key = OLD.id >> {_BITS}
        ) THEN
            RAISE EXCEPTION 'events are append-only: DELETE is refused (use agentrunner rm)';
        END IF;
        RETURN OLD;
    END $$
    """,
    "CREATE TRIGGER event_log_refuse_update BEFORE UPDATE ON event_log"
    " FOR EACH ROW EXECUTE FUNCTION agentrunner_refuse_update()",
    "CREATE TRIGGER event_log_refuse_delete BEFORE DELETE ON event_log"
    " FOR EACH ROW EXECUTE FUNCTION agentrunner_refuse_delete()",
    "CREATE TRIGGER event_log_refuse_truncate BEFORE TRUNCATE ON event_log"
    " FOR EACH STATEMENT EXECUTE FUNCTION agentrunner_refuse_delete()",
    f"""
    CREATE VIEW events (episode_id, seq, attempt, turn, kind, ts, payload) AS
    SELECT e.id, l.id & {_MASK}, l.attempt, l.turn, {_KIND_CASE}, {_ISO}, l.payload
    FROM episodes e JOIN event_log l ON {_OWN}
    """,
)


_HISTORY_VIEW = f"""
    CREATE VIEW episode_history AS
    WITH RECURSIVE part(episode_id, source, lo, hi, parent, next_hi) AS (
        SELECT id, id, coalesce(fork_seq, 0) + 1, {_MASK}::bigint, parent_episode_id,
            coalesce(fork_seq, {_MASK})::bigint
        FROM episodes
        UNION ALL
        SELECT p.episode_id, a.id, coalesce(a.fork_seq, 0) + 1, p.next_hi, a.parent_episode_id,
            LEAST(p.next_hi, coalesce(a.fork_seq, p.next_hi))::bigint
        FROM part p JOIN episodes a ON a.id = p.parent
    )
    SELECT p.episode_id, v.seq, p.source AS source_episode_id, v.attempt, v.turn, v.kind,
        v.ts, v.payload
    FROM part p JOIN events v ON v.episode_id = p.source AND v.seq BETWEEN p.lo AND p.hi
    """

P001_INITIAL = (
    """
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        key BIGINT NOT NULL UNIQUE,
        parent_episode_id TEXT REFERENCES episodes(id),
        fork_seq INTEGER,
        task_id TEXT NOT NULL,
        seed BIGINT NOT NULL,
        created_at TEXT NOT NULL,
        env TEXT NOT NULL CHECK (env::json IS NOT NULL),
        model TEXT NOT NULL CHECK (model::json IS NOT NULL),
        CHECK ((parent_episode_id IS NULL) = (fork_seq IS NULL))
    )
    """,
    "CREATE INDEX episodes_parent ON episodes(parent_episode_id)",
    "CREATE TABLE removals (episode_id TEXT PRIMARY KEY, requested_at TEXT NOT NULL)",
    """
    CREATE TABLE event_log (
        id BIGINT PRIMARY KEY,
        attempt INTEGER NOT NULL CHECK (attempt >= 1),
        turn INTEGER NOT NULL CHECK (turn >= 0),
        kind SMALLINT NOT NULL,
        ts BIGINT NOT NULL,
        payload TEXT NOT NULL CONSTRAINT payload_must_be_json_text
            CHECK (payload::json IS NOT NULL)
    )
    """,
    f"CREATE INDEX event_log_kind ON event_log(kind, id) WHERE kind <> {eventlog.CHUNK}",
    *_LOG_GUARDS,
    "CREATE TABLE messages (hash TEXT PRIMARY KEY, parent_hash TEXT, message TEXT NOT NULL)",
    "CREATE TABLE tools (hash TEXT PRIMARY KEY, tools TEXT NOT NULL)",
    """
    CREATE TABLE control (
        episode_id TEXT PRIMARY KEY REFERENCES episodes(id),
        writer_pid INTEGER,
        writer_host TEXT,
        writer_started TEXT,
        heartbeat_at DOUBLE PRECISION,
        cancel_requested_at TEXT,
        cancel_reason TEXT,
        totals TEXT,
        totals_seq INTEGER,
        lease_token TEXT
    )
    """,
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
    "CREATE TABLE batches (id TEXT PRIMARY KEY, created_at TEXT NOT NULL, config TEXT NOT NULL)",
    """
    CREATE TABLE batch_members (
        batch_id TEXT NOT NULL REFERENCES batches(id),
        task_id TEXT NOT NULL,
        seed BIGINT NOT NULL,
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        PRIMARY KEY (batch_id, task_id, seed)
    )
    """,
    "CREATE INDEX batch_members_episode ON batch_members(episode_id)",
    """
    CREATE TABLE verifications (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        episode_id TEXT NOT NULL REFERENCES episodes(id),
        verifier TEXT NOT NULL,
        score DOUBLE PRECISION,
        passed INTEGER,
        details TEXT NOT NULL,
        created_at TEXT NOT NULL
    )
    """,
    "CREATE INDEX verifications_episode ON verifications(episode_id, verifier)",
    """
    CREATE TABLE blobs (
        hash TEXT NOT NULL,
        part INTEGER NOT NULL CHECK (part >= 0),
        data BYTEA NOT NULL,
        PRIMARY KEY (hash, part)
    )
    """,
    """
    CREATE TABLE snapshots (
        id TEXT PRIMARY KEY,
        parent_id TEXT REFERENCES snapshots(id),
        depth INTEGER NOT NULL CHECK (depth >= 0),
        created_at TEXT NOT NULL,
        files INTEGER NOT NULL,
        bytes BIGINT NOT NULL,
        changes TEXT NOT NULL CHECK (changes::json IS NOT NULL),
        CHECK ((parent_id IS NULL) = (depth = 0))
    )
    """,
    "CREATE TABLE imports (source_key TEXT PRIMARY KEY,"
    " episode_id TEXT NOT NULL UNIQUE REFERENCES episodes(id))",
    _summary_view(_STATUS),
    _HISTORY_VIEW,
)

P002_DECISION_OUTCOMES = (
    "CREATE TABLE decision_outcomes (group_id TEXT PRIMARY KEY REFERENCES fork_groups(id),"
    " outcome TEXT NOT NULL CHECK (outcome::json IS NOT NULL), created_at TEXT NOT NULL)",
)

_SUMMARY_WITH_ONE_STATUS_RULE = _summary_view(status_sql(POSTGRES))

P003_ONE_STATUS_RULE = ("DROP VIEW episode_summary", _SUMMARY_WITH_ONE_STATUS_RULE)
"""``episode_summary.status`` follows the rule ``agentrunner ls`` follows
(:mod:`agentrunner.store.status`), made from the rule of this release (a later change of the
rule is a new migration)."""

P004_BLOB_BUCKET = (
    "CREATE TABLE blob_objects (hash TEXT NOT NULL PRIMARY KEY,"
    " bytes BIGINT NOT NULL CHECK (bytes >= 0))",
    "CREATE TABLE blob_bucket (id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),"
    " url TEXT NOT NULL, store_id TEXT NOT NULL, created_at TEXT NOT NULL)",
)
"""Workspace blobs may live in an S3-compatible bucket: where it is, and the index of the
blobs it holds for the store (see :mod:`agentrunner.store.blob_bucket`)."""

MIGRATIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("p001_initial", P001_INITIAL),
    ("p002_decision_outcomes", P002_DECISION_OUTCOMES),
    ("p003_one_status_rule", P003_ONE_STATUS_RULE),
    ("p004_blob_bucket", P004_BLOB_BUCKET),
)
"""Named, append-only: a released migration is never edited; changes are new ones."""
KNOWN = [name for name, _ in MIGRATIONS]

NEW_STORE: tuple[str, ...] = (
    *create_tables(POSTGRES),
    *_LOG_GUARDS,
    _SUMMARY_WITH_ONE_STATUS_RULE,
    _HISTORY_VIEW,
)
"""A new store, as every migration above leaves one."""


def migrate(conn: Conn, where: str, *, create: bool = True) -> None:
    """Check the store as a client opens it, and never migrate it: a store is shared, and a
    migration locks every older client out, so only ``agentrunner db migrate`` (:func:`upgrade`)
    applies one. A newer-schema store is refused. A store one or more migrations behind is
    only read: a reader reads what it holds (:func:`pending` says what it lacks); a client
    that writes (``create``) is refused, told to run ``db migrate``. Without a store, ``create``
    makes a new one (nothing shares it yet); otherwise nothing is made and that is an error."""
    if conn.execute("SELECT current_schema()").fetchone()[0] is None:
        path = conn.execute("SHOW search_path").fetchone()[0]
        first = str(path).split(",")[0].strip().strip('"') or "agentrunner"
        raise StoreError(
            f"{where}: its search_path ({path}) names no schema that exists, so there is no"
            f" store and nowhere to make one; create the schema first (CREATE SCHEMA {first};"
            " as a role that may) or give a URL without -csearch_path"
        )
    if conn.execute("SELECT to_regclass('agentrunner_migrations')").fetchone()[0]:
        behind = pending(conn, where)
        if behind and create:
            raise StoreSchemaError(behind_message(where, behind))
        return
    if not create:
        raise StoreError(
            f"no trace store in {where}; make one there with `agentrunner run --db URL ...`"
            " (or `agentrunner copy --to URL`, or `agentrunner db migrate --db URL`)"
        )
    upgrade(conn, where)


def unwritable(store: StoreBase) -> tuple[str, list[str]]:
    """The role an open Postgres store is used as, and the store's own tables it may not add
    rows to (none: it may write; a role granted only ``SELECT`` may not write any). Other
    tables of a schema the store shares are not its business."""
    conn = store.raw_connection()
    role = str(conn.execute("SELECT current_user").fetchone()[0])
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
        " AND c.relname = ANY(?) AND NOT has_table_privilege(c.oid, 'INSERT')"
        " ORDER BY c.relname",
        (sorted(tables(POSTGRES)),),
    ).fetchall()
    return role, [str(name) for (name,) in rows]


def lagging(store: StoreBase) -> list[str]:
    """The migrations an open store has not applied: a Postgres store's pending ones (a
    client never applies them); none for a SQLite file (migrated as it is opened)."""
    if not store.sql.postgres:
        return []
    return pending(store.raw_connection(), store.where)


def behind_message(where: str, behind: list[str]) -> str:
    """What a client that writes says of a store ``behind`` this agentrunner's schema."""
    return (
        f"{where} has an earlier schema than this agentrunner ({len(behind)} migration(s)"
        f" pending: {', '.join(behind)}); a shared store is migrated only by"
        " `agentrunner db migrate --db URL` (as the role that owns its tables, once every"
        " client that writes to it is upgraded)"
    )


def upgrade(conn: Conn, where: str, *, grant_read: str | None = None) -> list[str]:
    """Make a new store, or apply the pending migrations, one process at a time (under the
    store's write lock), and return the migrations applied. With ``grant_read``, that role
    may read the store: its schema, every table and view, and (default privileges) every
    table a later migration run by this role adds. A newer-schema store or a database with
    an ``episodes`` table agentrunner did not make is refused, and nothing is done."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (LOCK_KEY,))
        conn.execute(
            "CREATE TABLE IF NOT EXISTS agentrunner_migrations"
            " (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        todo = pending(conn, where)  # under the lock: another may have migrated
        if (
            len(todo) == len(MIGRATIONS)
            and conn.execute("SELECT to_regclass('episodes')").fetchone()[0]
        ):
            raise StoreError(
                f"{where} has a table 'episodes' that agentrunner did not make; give another"
                " database, or a schema of its own (CREATE SCHEMA agentrunner, then add"
                " ?options=-csearch_path%3Dagentrunner to the URL)"
            )
        for statement in _statements(todo):
            conn.execute(statement)
        for name in todo:
            conn.execute("INSERT INTO agentrunner_migrations (name) VALUES (?)", (name,))
        if grant_read is not None:
            if not conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = ?", (grant_read,)
            ).fetchone():
                raise StoreError(
                    f"no role {grant_read!r} on the server of {where}; create it first"
                    f" (CREATE ROLE {_identifier(grant_read)} LOGIN), nothing was changed"
                )
            schema = conn.execute("SELECT current_schema()").fetchone()[0]
            for statement in read_grants(schema, grant_read):
                conn.execute(statement)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return todo


def read_grants(schema: str, role: str) -> tuple[str, ...]:
    """What lets ``role`` read the store in ``schema``, now and after later migrations made
    by the role that grants (``ALTER DEFAULT PRIVILEGES`` covers the tables and views that
    role creates there from then on)."""
    where, who = _identifier(schema), _identifier(role)
    return (
        f"GRANT USAGE ON SCHEMA {where} TO {who}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {where} TO {who}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {where} GRANT SELECT ON TABLES TO {who}",
    )


def sessions(conn: Conn) -> list[dict[str, str | int | None]]:
    """The other client sessions connected to the store's database (``pg_stat_activity``;
    another role's sessions show what the server lets this role see)."""
    rows = conn.execute(
        "SELECT pid, usename, application_name, client_addr::text, state,"
        " to_char(backend_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"
        " FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND backend_type = 'client backend' ORDER BY backend_start"
    ).fetchall()
    keys = ("pid", "user", "application", "client", "state", "since")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def _identifier(name: str) -> str:
    """``name`` quoted as a Postgres identifier (any name, exactly as given)."""
    return '"' + name.replace('"', '""') + '"'


def _statements(pending: list[str]) -> tuple[str, ...]:
    """What brings a database without the ``pending`` migrations up to date: a new store when
    it has none of them, else each pending migration in order."""
    if len(pending) == len(MIGRATIONS):
        return NEW_STORE
    return tuple(s for name, statements in MIGRATIONS if name in pending for s in statements)


def applied(conn: Conn) -> list[str]:
    """The migrations this database has applied, in the order applied (none without a store)."""
    if not conn.execute("SELECT to_regclass('agentrunner_migrations')").fetchone()[0]:
        return []
    rows = conn.execute("SELECT name FROM agentrunner_migrations ORDER BY applied_at, name")
    return [r[0] for r in rows]


def pending(conn: Conn, where: str) -> list[str]:
    """The migrations this database has not applied (a newer one it has is refused)."""
    applied = [r[0] for r in conn.execute("SELECT name FROM agentrunner_migrations")]
    unknown = [name for name in applied if name not in KNOWN]
    if unknown:
        raise StoreSchemaError(
            f"{where} was written by a newer agentrunner (unknown schema migration"
            f" {unknown[0]!r}); upgrade agentrunner to read it"
        )
    return [name for name in KNOWN if name not in applied]
