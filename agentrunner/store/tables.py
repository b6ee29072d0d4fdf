"""The store's tables, defined once for both databases: columns (a portable type, whether
they may be NULL, defaults, which are unique, which refer to another table's row, checks),
primary keys, indexes, and the views and triggers each database holds.

A new store's tables and indexes are made from this definition (:mod:`agentrunner.store.ddl`
spells it for each database). Both migration lists (:mod:`agentrunner.store.schema` for
SQLite, :mod:`agentrunner.store.postgres_schema` for Postgres) bring a store of any earlier
schema to it; ``tests/test_store_schema.py`` checks that against real databases. A schema
change is therefore made here and in a new migration of each list. Where the two databases
truly differ, :func:`tables` says so, in one place; the type and JSON-check spellings are
:class:`agentrunner.store.dialect.Dialect`'s. One allowance is for old stores only: a SQLite
store made before this definition made new stores keeps its ``event_log`` without the checks
on ``attempt`` and ``turn`` (adding a CHECK to a SQLite table means copying the whole log).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentrunner.store import eventlog
from agentrunner.store.dialect import POSTGRES, ColumnType, Dialect


@dataclass(frozen=True)
class Column:
    name: str
    type: ColumnType
    not_null: bool = False
    unique: bool = False
    references: str | None = None
    """The ``table.column`` whose row this column's value names (a foreign key)."""
    default: str | None = None
    """The value an insert that names no value gets, as SQL (none of the store's has one)."""
    identity: bool = False
    """Numbered by the database when an insert gives none (Postgres: an identity column;
    SQLite's rowid does it for any ``INTEGER PRIMARY KEY``)."""
    check: str | None = None
    """A condition every value meets, as SQL both databases read alike."""
    json: bool = False
    """The value is a JSON document (checked, as each database spells it)."""
    constraint: str | None = None
    """The name of the column's check (the database names an unnamed one)."""


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple[str, ...]
    unique: bool = False
    where: str | None = None
    """A partial index's condition."""


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]
    indexes: tuple[Index, ...] = ()
    without_rowid: bool = False
    """SQLite only: the table is its primary key's b-tree (no rowid)."""
    checks: tuple[str, ...] = ()
    """Conditions on more than one column of a row, as SQL both databases read alike."""


def _text(
    name: str,
    *,
    not_null: bool = True,
    unique: bool = False,
    references: str | None = None,
    json: bool = False,
) -> Column:
    return Column(name, "text", not_null=not_null, unique=unique, references=references, json=json)


def _int(
    name: str, type_: ColumnType = "integer", *, not_null: bool = True, check: str | None = None
) -> Column:
    return Column(name, type_, not_null=not_null, check=check)


TABLES: tuple[Table, ...] = (
    Table(
        "episodes",
        (
            _text("id", not_null=False),
            Column("key", "bigint", not_null=True, unique=True),
            _text("parent_episode_id", not_null=False, references="episodes.id"),
            _int("fork_seq", not_null=False),
            _text("task_id"),
            _int("seed", "bigint"),
            _text("created_at"),
            _text("env", json=True),
            _text("model", json=True),
        ),
        ("id",),
        (Index("episodes_parent", ("parent_episode_id",)),),
        checks=("(parent_episode_id IS NULL) = (fork_seq IS NULL)",),
    ),
    Table(
        "removals", (_text("episode_id", not_null=False), _text("requested_at")), ("episode_id",)
    ),
    Table(
        "event_log",
        (
            Column("id", "bigint"),
            _int("attempt", check="attempt >= 1"),
            _int("turn", check="turn >= 0"),
            _int("kind", "smallint"),
            _int("ts", "bigint"),
            Column(
                "payload", "text", not_null=True, json=True, constraint="payload_must_be_json_text"
            ),
        ),
        ("id",),
        (Index("event_log_kind", ("kind",), where=f"kind <> {eventlog.CHUNK}"),),
    ),
    Table(
        "messages",
        (_text("hash", not_null=False), _text("parent_hash", not_null=False), _text("message")),
        ("hash",),
    ),
    Table("tools", (_text("hash"), _text("tools")), ("hash",), without_rowid=True),
    Table(
        "control",
        (
            _text("episode_id", not_null=False, references="episodes.id"),
            _int("writer_pid", not_null=False),
            _text("writer_host", not_null=False),
            _text("writer_started", not_null=False),
            Column("heartbeat_at", "real"),
            _text("cancel_requested_at", not_null=False),
            _text("cancel_reason", not_null=False),
            _text("totals", not_null=False),
            _int("totals_seq", not_null=False),
            _text("lease_token", not_null=False),
        ),
        ("episode_id",),
    ),
    Table(
        "fork_groups",
        (
            _text("id", not_null=False),
            _text("parent_episode_id", references="episodes.id"),
            _int("fork_seq"),
            _int("turn"),
            _text("created_at"),
            _text("config"),
        ),
        ("id",),
    ),
    Table(
        "fork_group_members",
        (
            _text("group_id", references="fork_groups.id"),
            _text("episode_id", references="episodes.id"),
            _int("candidate"),
            _int("sample"),
            _text("action", not_null=False),
        ),
        ("group_id", "candidate", "sample"),
        (Index("fork_group_members_episode", ("episode_id",)),),
    ),
    Table(
        "batches",
        (_text("id", not_null=False), _text("created_at"), _text("config")),
        ("id",),
    ),
    Table(
        "batch_members",
        (
            _text("batch_id", references="batches.id"),
            _text("task_id"),
            _int("seed", "bigint"),
            _text("episode_id", references="episodes.id"),
        ),
        ("batch_id", "task_id", "seed"),
        (Index("batch_members_episode", ("episode_id",)),),
    ),
    Table(
        "verifications",
        (
            Column("id", "bigint", identity=True),
            _text("episode_id", references="episodes.id"),
            _text("verifier"),
            Column("score", "real"),
            _int("passed", not_null=False),
            _text("details"),
            _text("created_at"),
        ),
        ("id",),
        (Index("verifications_episode", ("episode_id", "verifier")),),
    ),
    Table(
        "blobs",
        (_text("hash"), _int("part", check="part >= 0"), Column("data", "bytes", not_null=True)),
        ("hash", "part"),
    ),
    Table(
        "blob_objects",
        (_text("hash"), _int("bytes", "bigint", check="bytes >= 0")),
        ("hash",),
        without_rowid=True,
    ),
    Table(
        "blob_bucket",
        (_int("id", check="id = 1"), _text("url"), _text("store_id"), _text("created_at")),
        ("id",),
    ),
    Table(
        "snapshots",
        (
            _text("id", not_null=False),
            _text("parent_id", not_null=False, references="snapshots.id"),
            _int("depth", check="depth >= 0"),
            _text("created_at"),
            _int("files"),
            _int("bytes", "bigint"),
            _text("changes", json=True),
        ),
        ("id",),
        checks=("(parent_id IS NULL) = (depth = 0)",),
    ),
    Table(
        "imports",
        (
            _text("source_key", not_null=False),
            _text("episode_id", unique=True, references="episodes.id"),
        ),
        ("source_key",),
    ),
    Table(
        "decision_outcomes",
        (
            _text("group_id", not_null=False, references="fork_groups.id"),
            _text("outcome", json=True),
            _text("created_at"),
        ),
        ("group_id",),
    ),
)
"""Every table of the store, as both databases hold it but for :func:`tables`' differences.
A column's ``not_null`` is what its definition says: SQLite lets a primary key that is not an
``INTEGER PRIMARY KEY`` hold NULL unless it says ``NOT NULL``."""

VIEWS = ("events", "episode_summary", "episode_history")
"""The views both databases hold, with the same columns (the contract's reading of the log)."""

TRIGGERS: dict[str, frozenset[str]] = {
    # SQLite refuses writes through the events view and numbers an episode another tool
    # inserts; Postgres refuses TRUNCATE too, and its key has no default to fill.
    "sqlite": frozenset(
        {
            "episodes_key_given",
            "event_log_refuse_update",
            "event_log_refuse_delete",
            "events_view_refuses_update",
            "events_view_refuses_delete",
            "events_view_refuses_writes",
        }
    ),
    "postgres": frozenset(
        {"event_log_refuse_update", "event_log_refuse_delete", "event_log_refuse_truncate"}
    ),
}
"""The triggers each database holds, by name."""

_SQLITE_EPISODE_KEY = Column("key", "bigint")
_SQLITE_EPISODE_KEY_INDEX = Index("episodes_key", ("key",), unique=True)


def tables(dialect: Dialect) -> dict[str, Table]:
    """The store's tables as ``dialect``'s database holds them, by name: :data:`TABLES` with
    where the two truly differ applied (all of it is here):

    - SQLite's ``episodes.key`` was added by ``ALTER TABLE`` (``m005``), which can add
      neither NOT NULL nor UNIQUE, and puts it last: it may be NULL (the trigger
      ``episodes_key_given`` fills it) and the unique index ``episodes_key`` keeps it unique.
      Postgres made it ``NOT NULL UNIQUE`` at once, second.
    - A Postgres primary key is NOT NULL whatever its column says.
    - SQLite's ``event_log_kind`` holds the rowid (``id``) with each entry by itself;
      Postgres' names ``id`` as its second column.
    """
    by_name: dict[str, Table] = {}
    for table in TABLES:
        if dialect == POSTGRES:
            table = replace(
                table,
                columns=tuple(
                    replace(c, not_null=c.not_null or c.name in table.primary_key)
                    for c in table.columns
                ),
                indexes=tuple(
                    replace(i, columns=(*i.columns, "id")) if i.name == "event_log_kind" else i
                    for i in table.indexes
                ),
                without_rowid=False,
            )
        elif table.name == "episodes":
            table = replace(
                table,
                columns=(*(c for c in table.columns if c.name != "key"), _SQLITE_EPISODE_KEY),
                indexes=(*table.indexes, _SQLITE_EPISODE_KEY_INDEX),
            )
        by_name[table.name] = table
    return by_name
