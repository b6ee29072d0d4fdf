"""Opening a trace store file: validation, pragmas, migrations, one connection per thread."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from agentrunner.store.dialect import Conn
from agentrunner.store.driver import SqliteConnection
from agentrunner.store.location import user_db_path
from agentrunner.store.schema import (
    KNOWN_MIGRATIONS,
    MIGRATION_SET,
    MIGRATIONS_TABLE,
    applied,
    apply,
    pending,
)
from agentrunner.values.errors import StoreCorruptError, StoreError, StoreSchemaError

Synchronous = Literal["NORMAL", "FULL"]
BUSY_TIMEOUT_S = 30.0


def _check_file(path: Path, *, create: bool) -> None:
    if path.is_dir():
        raise StoreError(f"{path} is a directory, not a trace store file")
    if not path.exists():
        if create:
            return
        if path == user_db_path():
            where = "the per-user default store"
        elif path.is_absolute():
            where = "the store"
        else:
            where = f"the store, looked for from {Path.cwd()}"
        raise StoreError(
            f"no trace store at {path} ({where}); give --db PATH or set AGENTRUNNER_DB,"
            " or make one with `agentrunner run`"
        )
    if path.stat().st_size == 0:
        if create:
            return
        raise StoreError(f"{path} is an empty file, not a trace store; give another --db")
    # The header is read by SQLite, not here: closing a descriptor of the file would drop the
    # POSIX locks this process's open connections to it hold (SQLite's "how to corrupt", 2.2).


def _switch_to_wal(conn: sqlite3.Connection) -> str:
    """Set WAL mode. Two processes creating one new store race for the exclusive lock the
    switch needs, and SQLite refuses the loser at once (the busy timeout does not apply),
    so retry with a short backoff."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    delay = 0.005
    while True:
        try:
            mode: str = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return mode
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


def _writable(path: Path) -> bool:
    folder = path.parent if str(path.parent) else Path(".")
    return os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


class Connections:
    """Per-thread SQLite connections to one store file, opened with the store's pragmas, their
    driver errors translated (:mod:`agentrunner.store.driver`)."""

    def __init__(self, path: Path, synchronous: Synchronous = "NORMAL") -> None:
        self.path = path
        self.synchronous = synchronous
        self._local = threading.local()
        self._all: list[SqliteConnection] = []
        self._lock = threading.Lock()

    def get(self) -> SqliteConnection:
        conn: SqliteConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = SqliteConnection(self._open())
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            mode = _switch_to_wal(conn)
            if mode.lower() != "wal":
                raise StoreError(f"{self.path}: could not switch the store to WAL mode ({mode})")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        except sqlite3.OperationalError as exc:
            if not _writable(self.path):
                raise StoreError(
                    f"{self.path}: the trace store is read-only (SQLite's WAL needs the file and"
                    f" its folder writable, also to read it): {exc}"
                ) from None
            raise StoreError(f"{self.path}: cannot open trace store: {exc}") from None
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise StoreCorruptError(
                    f"{self.path} is not a SQLite database (is it the right --db path?)"
                ) from None
            raise StoreCorruptError(f"{self.path}: cannot open trace store: {exc}") from None
        return conn

    def close_current(self) -> None:
        """Close this thread's connection (a thread that is done with the store)."""
        conn: SqliteConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            with self._lock:
                self._all.remove(conn)
            conn.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._all)

    def unreachable(self) -> str | None:
        return None

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
        self._local = threading.local()


@contextmanager
def immediate(conn: Conn) -> Iterator[None]:
    """One write transaction, its lock taken at once (``BEGIN IMMEDIATE``): committed when the
    block ends, rolled back when it raises (if SQLite has not already rolled it back, as it
    does on a full disk)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a newer-schema store; apply pending migrations under an exclusive write lock.
    A store that is up to date is only read (with ``sqlite3``: sqlite-utils loads when a
    migration runs)."""
    try:
        _refuse_newer(conn, path)
        if not pending(conn):
            return
        with immediate(conn):
            # Re-read under the lock: another process may have migrated meanwhile.
            done = _refuse_newer(conn, path)
            if pending(conn):
                _check_foreign_tables(conn, path, done)
                apply(conn)  # savepoints nest inside this transaction
    except sqlite3.OperationalError as exc:
        raise StoreError(f"{path}: cannot update the store's schema: {exc}") from None
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(f"{path}: cannot read the store's schema: {exc}") from None


def _refuse_newer(conn: sqlite3.Connection, path: Path) -> list[str]:
    done = applied(conn)
    unknown = [name for name in done if name not in KNOWN_MIGRATIONS]
    if unknown:
        raise StoreSchemaError(
            f"{path} was written by a newer agentrunner (unknown schema migration "
            f"{unknown[0]!r} in set {MIGRATION_SET!r}); upgrade agentrunner to read it"
        )
    return done


def _check_foreign_tables(conn: sqlite3.Connection, path: Path, done: list[str]) -> None:
    if done:
        return
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    foreign = [name for (name,) in tables if name != MIGRATIONS_TABLE]
    if foreign:
        raise StoreError(
            f"{path} is a SQLite database but not an agentrunner trace store "
            f"(it has tables {', '.join(sorted(foreign)[:5])}); pick another --db path"
        )


def open_connections(
    path: Path, synchronous: Synchronous = "NORMAL", *, create: bool = True, migrated: bool = True
) -> Connections:
    """Validate ``path`` and return its connection pool, with the schema up to date.

    Only with ``create`` is a missing store (and its folder) made. A store file is migrated
    as it is opened: it is one user's (every process that can read it, WAL needs to write
    its folder too, so there is no reader that cannot migrate, and no server shares it with
    other machines' clients); a shared store is Postgres, migrated only by ``db migrate``.
    Without ``migrated`` the schema is left as found (``db status``, ``db migrate``)."""
    if synchronous not in ("NORMAL", "FULL"):
        raise StoreError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
    _check_file(path, create=create)
    if create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the store's folder {path.parent}: {exc}") from None
    conns = Connections(path, synchronous)
    if migrated:
        migrate(conns.get().raw, path)
    return conns
