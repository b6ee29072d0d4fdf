"""Driver errors translated where a statement runs: the SQLite connection the store uses.

Every statement the store runs goes through a connection that turns the driver's errors into
:class:`~agentrunner.values.errors.StoreDriverError` subclasses (the message stays the driver's), so
nothing outside ``agentrunner/store/`` knows which database it met. :class:`SqliteConnection`
does it for ``sqlite3``; the Postgres connection (:mod:`agentrunner.store.postgres`) does the
same for psycopg. Only :meth:`TraceStore.raw_connection` (tests, ad-hoc tools), the schema's
migrations (sqlite-utils) and the event writer's hot path see the bare driver connection: the
writer takes it with :meth:`SqliteConnection.bare` (a :class:`Bare`) and translates the
driver's errors itself, at its own boundary, sparing a wrapper a statement.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from agentrunner.values.errors import (
    StoreDamagedError,
    StoreDriverError,
    StoreFailedError,
    StoreRefusedError,
)


def from_sqlite(exc: sqlite3.Error) -> StoreDriverError:
    """A ``sqlite3`` error as the store's error of the same meaning."""
    kind: type[StoreDriverError] = StoreDamagedError
    if isinstance(exc, sqlite3.IntegrityError):
        kind = StoreRefusedError
    elif isinstance(exc, sqlite3.OperationalError):
        kind = StoreFailedError
    return kind(str(exc), driver=type(exc).__name__, server="sqlite")


class Bare(NamedTuple):
    """A connection's driver as a hot path uses it without the translating wrapper."""

    execute: Callable[[str, Sequence[Any]], Any]
    """The driver connection's own ``execute`` (its cursor's ``rowcount`` says what it did)."""
    error: type[Exception]
    """The driver's base error: every error ``execute`` raises is one."""
    translated: Callable[[Any], StoreDriverError]
    """The store's error of the same meaning (raise it ``from None``)."""
    native: Callable[[str], str]
    """The store's SQL in the driver's placeholder style."""


@runtime_checkable
class HasBare(Protocol):
    """A store connection that hands out its bare driver (both backends' connections)."""

    def bare(self) -> Bare: ...


def _same(sql: str) -> str:
    return sql


class SqliteCursor:
    """A ``sqlite3`` cursor whose reads raise the store's errors (a damaged page is met when
    the row is read, not only when the statement starts)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        try:
            return self._cursor.fetchone()
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from None

    def fetchall(self) -> list[Any]:
        try:
            return self._cursor.fetchall()
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from None

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._cursor
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from None


class SqliteConnection:
    """A ``sqlite3`` connection speaking the store's connection interface
    (:class:`~agentrunner.store.dialect.Conn`), its errors translated."""

    __slots__ = ("raw",)

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        """The bare connection (for sqlite-utils and :meth:`TraceStore.raw_connection`)."""

    def execute(self, sql: str, parameters: Any = (), /) -> SqliteCursor:
        try:
            return SqliteCursor(self.raw.execute(sql, parameters))
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from None

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> SqliteCursor:
        try:
            return SqliteCursor(self.raw.executemany(sql, seq_of_parameters))
        except sqlite3.Error as exc:
            raise from_sqlite(exc) from None

    def bare(self) -> Bare:
        """The bare ``sqlite3`` connection's ``execute``, for a caller that translates its
        errors (:func:`from_sqlite`) where they leave it."""
        return Bare(self.raw.execute, sqlite3.Error, from_sqlite, _same)

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def close(self) -> None:
        self.raw.close()
