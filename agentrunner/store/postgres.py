"""The Postgres trace store: the SQLite store's contract on a database a team shares.

``TraceStore("postgresql://...")`` (or ``--db`` / ``AGENTRUNNER_DB`` set to such a URL) opens
a :class:`PostgresStore`, a sibling of the SQLite store over the same shared core
(:mod:`agentrunner.store.core`). It keeps the same tables, the same physical event log (an integer
primary key packing the episode's key and the seq, integer kinds and µs times) behind the
same ``events`` view, and runs the store's own queries (see :mod:`agentrunner.store.dialect`):
only connecting, the schema and its migrations, and the write lock differ.

- Connections: one psycopg 3 connection per thread, autocommit (one commit per event),
  ``synchronous_commit`` off by default and on with ``synchronous="FULL"``. Off, every event
  but a streamed chunk still commits with it on (see :mod:`agentrunner.store.writer`): a
  crash of the server itself may lose the chunks and heartbeats of its last fraction of a
  second, never an event the runner acted on (nor anything written before that event).
- Write transactions that SQLite serializes with ``BEGIN IMMEDIATE`` (a new episode's key,
  claiming a lease, removing a tree) take a transaction-scoped advisory lock, which works
  behind transaction-pooling proxies (PgBouncer) because it ends with the transaction, and
  commit with ``synchronous_commit`` on (a new episode's ``episode.start`` is among them).
- Errors are translated where the connection raises them, as the SQLite connection's are
  (:mod:`agentrunner.store.driver`): :class:`~agentrunner.values.errors.StoreRefusedError` for a
  refused row, :class:`~agentrunner.values.errors.StoreFailedError` for the rest.
- Credentials never leave this module: :attr:`PostgresStore.where` (used in messages) names
  user, host, port and database only; nothing of the URL is written into the store.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentrunner.store.connection import Synchronous
from agentrunner.store.core import StoreCore
from agentrunner.store.dialect import POSTGRES, Conn, Dialect
from agentrunner.store.driver import Bare
from agentrunner.store.postgres_schema import LOCK_KEY, migrate
from agentrunner.store.store import register_backend
from agentrunner.store.writer import DURABLE
from agentrunner.values.errors import (
    StoreDriverError,
    StoreError,
    StoreFailedError,
    StoreRefusedError,
    UsageError,
)

SCHEMES = ("postgresql://", "postgres://")
INSTALL_HINT = "Postgres support is not installed: pip install 'agentrunner[postgres]'"
CONNECT_TIMEOUT_S = 10


def is_url(location: str | os.PathLike[str] | None) -> bool:
    return location is not None and str(location).startswith(SCHEMES)


def _psycopg() -> Any:
    """The psycopg module (an optional extra)."""
    try:
        return importlib.import_module("psycopg")
    except ImportError:
        raise UsageError(INSTALL_HINT) from None


def display_name(url: str) -> str:
    """The URL without its password or options: ``postgresql://user@host:port/db``."""
    psycopg = _psycopg()
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://(an unreadable URL)"
    user = f"{info['user']}@" if info.get("user") else ""
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{host}{port}/{info.get('dbname') or ''}"


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    """The store's SQL with Postgres placeholders: ``?`` outside quotes becomes ``%s`` and a
    literal ``%`` is doubled (psycopg's paramstyle)."""
    out = []
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


def _translated(exc: Exception) -> StoreDriverError:
    """A psycopg error as the store's error of the same meaning (see the module docstring)."""
    psycopg = _psycopg()
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    refused = (psycopg.errors.IntegrityError, psycopg.errors.RaiseException, psycopg.DataError)
    kind = StoreRefusedError if isinstance(exc, refused) else StoreFailedError
    return kind(message, driver=type(exc).__name__, server="postgres")


_FAILED = ("connection failed: ", "connection is bad: ")


def why_not_connected(exc: Exception) -> str:
    """libpq's reason a connection failed, on one line: each address's cause (``connection to
    server at "127.0.0.1", port 5999 failed: Connection refused``), then its hint."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    causes, hints = [], []
    for line in lines:
        if line.startswith("Is the server"):
            hints.append(line[0].lower() + line[1:])
        else:
            causes.append(next((line[len(p) :] for p in _FAILED if line.startswith(p)), line))
    text = "; ".join(dict.fromkeys(causes)) or "the connection failed"
    return f"{text} ({' '.join(dict.fromkeys(hints))})" if hints else text


class PgConnection:
    """A psycopg connection speaking the store's connection interface."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._psycopg = _psycopg()

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        try:
            return self._conn.execute(_pg_sql(sql), tuple(parameters))
        except self._psycopg.Error as exc:
            raise _translated(exc) from None

    def bare(self) -> Bare:
        """The bare psycopg connection's ``execute`` (parameters as a tuple), for a caller
        that translates its errors where they leave it."""
        return Bare(self._conn.execute, self._psycopg.Error, _translated, _pg_sql)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any:
        try:
            with self._conn.cursor() as cur:
                cur.executemany(_pg_sql(sql), [tuple(p) for p in seq_of_parameters])
                return cur
        except self._psycopg.Error as exc:
            raise _translated(exc) from None

    @property
    def in_transaction(self) -> bool:
        status = self._conn.info.transaction_status
        return bool(status != self._psycopg.pq.TransactionStatus.IDLE)

    @property
    def broken(self) -> bool:
        return bool(self._conn.closed or self._conn.broken)

    def close(self) -> None:
        self._conn.close()


class PgConnections:
    """One Postgres connection per live thread (reopened when the server dropped it)."""

    def __init__(self, url: str, where: str, synchronous: Synchronous) -> None:
        self._url = url
        self._where = where
        self._synchronous = synchronous
        self._local = threading.local()
        self._all: set[PgConnection] = set()
        self._lock = threading.Lock()

    def get(self) -> PgConnection:
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is None or conn.broken:
            if conn is not None:
                self._drop(conn)
            conn = self._open()
            with self._lock:
                self._all.add(conn)
            self._local.conn = conn
        return conn

    def close_current(self) -> None:
        """Close this thread's connection (a thread that is done with the store)."""
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            self._local.conn = None
            self._drop(conn)

    def _drop(self, conn: PgConnection) -> None:
        with self._lock:
            self._all.discard(conn)
        with contextlib.suppress(Exception):
            conn.close()

    def open_count(self) -> int:
        with self._lock:
            return len(self._all)

    def _open(self) -> PgConnection:
        psycopg = _psycopg()
        sync = "on" if self._synchronous == "FULL" else "off"
        try:
            given = psycopg.conninfo.conninfo_to_dict(self._url).get("options") or ""
            raw = psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="agentrunner",
                options=f"{given} -c synchronous_commit={sync}".strip(),
            )
        except psycopg.Error as exc:
            reason = why_not_connected(exc)
            raise StoreError(f"cannot connect to the trace store {self._where}: {reason}") from None
        return PgConnection(raw)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()
        self._local = threading.local()


class PostgresStore(StoreCore):
    """A trace store in a Postgres database. Safe to share between threads; any number of
    processes on any number of machines may open one database."""

    sql: Dialect = POSTGRES

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        synchronous: Synchronous = "NORMAL",
        create: bool = True,
    ):
        """Open the store in the database ``path`` (a ``postgresql://`` URL; default:
        $AGENTRUNNER_DB); with ``create``, its tables are made when missing (the database
        itself must exist)."""
        url = str(path) if path is not None else os.environ.get("AGENTRUNNER_DB", "")
        if not is_url(url):
            raise StoreError(f"not a Postgres URL: {display_name(url) if url else '(empty)'}")
        if synchronous not in ("NORMAL", "FULL"):
            raise StoreError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self._url = url
        self._where = display_name(url)
        self.path = Path(self._where)
        self._pool = PgConnections(url, self._where, synchronous)
        super().__init__(self._pool)
        try:
            migrate(self._pool.get(), self._where, create=create)
        except StoreDriverError as exc:
            self._conns.close()
            raise StoreError(f"{self._where}: cannot set up the store's schema: {exc}") from None
        except BaseException:
            self._conns.close()
            raise

    @property
    def location(self) -> str:
        return self._url

    def raw_connection(self) -> Conn:
        """This thread's Postgres connection (its errors translated), for tests and ad-hoc
        tools only."""
        return self._pool.get()

    @property
    def where(self) -> str:
        return self._where

    @property
    def identity(self) -> str:
        """The connection's target without the password: host, port, database, user and the
        options that pick a schema (two schemas of one database are two stores)."""
        info = _psycopg().conninfo.conninfo_to_dict(self._url)
        keep = ("host", "port", "dbname", "user", "options")
        return " ".join(f"{k}={info[k]}" for k in keep if info.get(k))

    def identity_problem(self) -> str | None:
        return None  # a database cannot be deleted from under its open connections unseen

    @contextlib.contextmanager
    def _begin_writing(self) -> Iterator[None]:
        conn = self._conn
        conn.execute("BEGIN")
        try:  # durable too: a new episode (with its episode.start), a claimed lease
            conn.execute(f"SELECT pg_advisory_xact_lock(?), {DURABLE}", (LOCK_KEY,))
            yield
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


register_backend(is_url, PostgresStore)
