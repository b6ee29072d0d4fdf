"""The few SQL spellings that differ between the store's databases (SQLite, Postgres).

The store's queries are written once, in the subset both databases read alike (``?``
placeholders, which the Postgres connection turns into its own), and ask a :class:`Dialect`
for what is spelled differently: a column's type, the check that a column holds JSON, reading
a field of a JSON column, summing it, the insert that keeps an existing row, case-insensitive
and glob matching, the smaller of two values.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

ColumnType = Literal["text", "integer", "bigint", "smallint", "real", "bytes"]
"""A column's type as :mod:`agentrunner.store.tables` names it, for both databases."""

_TYPE_SPELLINGS: dict[str, dict[ColumnType, str]] = {
    # SQLite keeps one INTEGER (64 bits) for every width: its type is the column's affinity.
    "sqlite": {
        "text": "TEXT",
        "integer": "INTEGER",
        "bigint": "INTEGER",
        "smallint": "INTEGER",
        "real": "REAL",
        "bytes": "BLOB",
    },
    "postgres": {
        "text": "TEXT",
        "integer": "INTEGER",
        "bigint": "BIGINT",
        "smallint": "SMALLINT",
        "real": "DOUBLE PRECISION",
        "bytes": "BYTEA",
    },
}


DURABLE = "set_config('synchronous_commit', 'on', true)"
"""Postgres: this transaction's commit waits for the WAL flush (whatever the session says)."""
TRANSACTION_TRIES = 10
"""How often a write transaction cut short by a lost server is run again (each try first
waits for the server, up to the store's patience)."""


class Cursor(Protocol):
    """What the store reads from a query's result (``sqlite3.Cursor`` and the Postgres
    connection's cursor both are)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Any: ...


class Conn(Protocol):
    """A store connection: autocommit statements and explicit ``BEGIN`` ... ``COMMIT``."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Any: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any: ...

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class Pool(Protocol):
    """A store's connections: one per thread."""

    def get(self) -> Conn: ...

    def close_current(self) -> None: ...

    def open_count(self) -> int: ...

    def unreachable(self) -> str | None:
        """What a live view shows while the store's server is out of reach, else None."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Dialect:
    """How one database spells what the other spells differently."""

    name: str

    @property
    def postgres(self) -> bool:
        return self.name == "postgres"

    @property
    def begin_write(self) -> str:
        """Start a write transaction (SQLite: taking the write lock at once)."""
        return "BEGIN" if self.postgres else "BEGIN IMMEDIATE"

    @property
    def begin_read(self) -> str:
        """Start a transaction whose reads all see one state of the store."""
        return "BEGIN ISOLATION LEVEL REPEATABLE READ" if self.postgres else "BEGIN"

    @property
    def share_lock(self) -> str:
        """Said after a subquery that must hold the row it reads until the commit (Postgres:
        a concurrent update of it waits, or this statement re-reads it; SQLite's one writer
        at a time needs nothing)."""
        return " FOR SHARE" if self.postgres else ""

    def column_type(self, portable: ColumnType) -> str:
        """How this database spells a column of type ``portable``."""
        return _TYPE_SPELLINGS[self.name][portable]

    def is_json(self, column: str) -> str:
        """The condition that a text column holds a JSON document (a CHECK constraint's)."""
        return f"{column}::json IS NOT NULL" if self.postgres else f"json_valid({column})"

    def text(self, column: str, field: str) -> str:
        """A JSON column's top-level ``field`` as text (NULL when absent)."""
        if self.postgres:
            return f"({pg_json(column)} ->> '{field}')"
        return f"json_extract({column}, '$.{field}')"

    def text_at(self, column: str, *path: str) -> str:
        """A JSON column's field at ``path`` (keys of nested objects) as text (NULL when
        absent). The keys are the caller's own names, never input."""
        if self.postgres:
            return f"({pg_json(column)} #>> '{{{','.join(path)}}}')"
        return f"json_extract({column}, '$.{'.'.join(path)}')"

    def number(self, column: str, field: str) -> str:
        """A JSON column's top-level ``field`` as a number (NULL when absent)."""
        if self.postgres:
            return f"({pg_json(column)} ->> '{field}')::float8"
        return f"json_extract({column}, '$.{field}')"

    def total(self, expr: str) -> str:
        """The sum of ``expr`` over the rows, 0.0 when there are none."""
        return f"coalesce(sum({expr}), 0.0)" if self.postgres else f"total({expr})"

    def keep_flushed(self, insert: str) -> str:
        """:meth:`keep_existing` whose commit waits for the WAL flush on Postgres (whose
        connections commit with ``synchronous_commit`` off): for content a later event names
        (a message, a tool set, a snapshot), which must never be lost to a crash of the
        server that the event outlives."""
        if not self.postgres:
            return self.keep_existing(insert)
        head, values = insert.split(" VALUES ", 1)
        marks = values.strip().removeprefix("(").removesuffix(")")
        return f"{head} SELECT {marks} WHERE {DURABLE} = 'on' ON CONFLICT DO NOTHING"

    @property
    def flush_on_commit(self) -> str | None:
        """A statement making the open transaction's commit wait for the WAL flush (None: a
        SQLite commit does by itself)."""
        return f"SELECT {DURABLE}" if self.postgres else None

    def keep_existing(self, insert: str) -> str:
        """``insert`` (``INSERT INTO t (...) VALUES (...)``) that leaves a row with the same
        key as it is."""
        if self.postgres:
            return f"{insert} ON CONFLICT DO NOTHING"
        return insert.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1)

    def least(self, a: str, b: str) -> str:
        return f"LEAST({a}, {b})" if self.postgres else f"min({a}, {b})"

    @property
    def like(self) -> str:
        """The operator matching a LIKE pattern case-insensitively (ASCII at least)."""
        return "ILIKE" if self.postgres else "LIKE"

    def glob(self, expr: str) -> str:
        """``expr`` matched against a shell glob (``*``, ``?``) given as the parameter
        :meth:`glob_pattern` makes."""
        return f"{expr} LIKE ? ESCAPE '\\'" if self.postgres else f"{expr} GLOB ?"

    def glob_pattern(self, pattern: str) -> str:
        """The parameter for :meth:`glob`: SQLite reads the glob, Postgres a LIKE pattern."""
        if not self.postgres:
            return pattern
        out = []
        for ch in pattern:
            if ch in "%_\\":
                out.append("\\" + ch)
            elif ch == "*":
                out.append("%")
            elif ch == "?":
                out.append("_")
            else:
                out.append(ch)
        return "".join(out)


def pg_json(column: str) -> str:
    """A JSON text column as Postgres' ``json``, ready for ``->>``. Postgres stores a NUL
    (``\\u0000``, which tool output and streamed text can hold) in ``json`` but refuses to
    extract any field of such a document, so it reads as U+FFFD here (the stored text keeps
    it; the replacement leaves valid JSON even after an escaped backslash)."""
    return f"replace({column}, '\\u0000', '\\ufffd')::json"


def table_sizes(conn: Conn, dialect: Dialect) -> dict[str, int]:
    """Every table of the store and the bytes it takes, its indexes included (SQLite: the
    ``dbstat`` pages of each table and its indexes; Postgres: the current schema's tables,
    with their TOAST and indexes), largest first."""
    if dialect.postgres:
        query = (
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'"
            " ORDER BY 2 DESC, 1"
        )
    else:
        query = (
            "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d"
            " LEFT JOIN sqlite_master m ON m.name = d.name"
            " GROUP BY coalesce(m.tbl_name, d.name) ORDER BY 2 DESC, 1"
        )
    return {str(name): int(size) for name, size in conn.execute(query).fetchall()}


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgres")
