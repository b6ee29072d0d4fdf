"""The Postgres trace store: the SQLite store's contract on a database a team shares.

``TraceStore("postgresql://...")`` (or ``--db`` / ``AGENTRUNNER_DB`` set to such a URL) opens
a :class:`PostgresStore`, a sibling of the SQLite store over the same shared core
(:mod:`agentrunner.store.core`). It keeps the same tables, the same physical event log (an integer
primary key packing the episode's key and the seq, integer kinds and µs times) behind the
same ``events`` view, and runs the store's own queries (see :mod:`agentrunner.store.dialect`):
only connecting, the schema and its migrations, and the write lock differ.

- Connections: psycopg 3, a few per process that its threads share (a statement borrows one,
  a transaction keeps its own until it ends: :mod:`agentrunner.store.postgres_pool`),
  autocommit (one commit per event), ``synchronous_commit`` off by default and on with
  ``synchronous="FULL"``. Off, every event but a streamed chunk still commits with it on
  (see :mod:`agentrunner.store.writer`): a crash of the server itself may lose the chunks and
  heartbeats of its last fraction of a second, never an event the runner acted on (nor
  anything written before that event).
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
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from agentrunner.store.connection import Synchronous
from agentrunner.store.core import StoreCore
from agentrunner.store.dialect import DURABLE, POSTGRES, Conn, Dialect
from agentrunner.store.driver import Bare
from agentrunner.store.postgres_pool import SharedConnections
from agentrunner.store.postgres_schema import LOCK_KEY, migrate
from agentrunner.store.store import register_backend
from agentrunner.values.errors import (
    StoreDriverError,
    StoreError,
    StoreFailedError,
    StoreRefusedError,
    StoreUnreachableError,
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


_GONE_STATES = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs of a server out of reach: connection exceptions, and a server shutting down
(admin or crash) or not yet accepting connections."""


def _unreachable(exc: Exception) -> bool:
    """Whether a failed connection attempt says the server is out of reach (refused, gone,
    shutting down or starting up) rather than that the login was refused: libpq's own
    failures carry no SQLSTATE."""
    psycopg = _psycopg()
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith(_GONE_STATES)


def _translated(exc: Exception, *, lost: bool = False) -> StoreDriverError:
    """A psycopg error as the store's error of the same meaning (see the module docstring);
    ``lost``: the statement failed with its connection (the server went away)."""
    psycopg = _psycopg()
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    refused = (psycopg.errors.IntegrityError, psycopg.errors.RaiseException, psycopg.DataError)
    kind: type[StoreDriverError] = StoreFailedError
    if lost:
        kind = StoreUnreachableError
    elif isinstance(exc, refused):
        kind = StoreRefusedError
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
    """The store's connection interface over its pooled psycopg connections: each statement
    runs on the connection of this thread's open transaction, else on one lent for it (see
    :mod:`agentrunner.store.postgres_pool`)."""

    def __init__(self, pool: SharedConnections) -> None:
        self._pool = pool
        self._psycopg = _psycopg()

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        native, values = _pg_sql(sql), tuple(parameters)
        try:
            return self._pool.run(lambda conn: conn.execute(native, values))
        except self._psycopg.Error as exc:
            raise _translated(exc, lost=self._pool.lost_connection()) from None

    def _execute_native(self, sql: str, parameters: Sequence[Any]) -> Any:
        return self._pool.run(lambda conn: conn.execute(sql, parameters))

    def bare(self) -> Bare:
        """``execute`` of psycopg's own (parameters as a tuple, its errors untranslated), for
        a caller that translates its errors where they leave it."""
        return Bare(self._execute_native, self._psycopg.Error, _translated, _pg_sql)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any:
        native, rows = _pg_sql(sql), [tuple(p) for p in seq_of_parameters]

        def run(conn: Any) -> Any:
            with conn.cursor() as cur:
                cur.executemany(native, rows)
                return cur

        try:
            return self._pool.run(run)
        except self._psycopg.Error as exc:
            raise _translated(exc, lost=self._pool.lost_connection()) from None

    @property
    def in_transaction(self) -> bool:
        return self._pool.in_transaction()

    def close(self) -> None:
        self._pool.close()


class PgConnections:
    """The store's Postgres connections in this process: at most
    :data:`~agentrunner.store.postgres_pool.POOL_SIZE`, shared by its threads."""

    def __init__(self, url: str, where: str, synchronous: Synchronous) -> None:
        self._url = url
        self._where = where
        self._synchronous = synchronous
        self._pool = SharedConnections(self._open, where)
        self._conn = PgConnection(self._pool)

    def get(self) -> PgConnection:
        return self._conn

    def close_current(self) -> None:
        """This thread is done with the store: a transaction it left open is rolled back and
        its connection goes back to the pool."""
        self._pool.release_current()

    def open_count(self) -> int:
        return self._pool.open_count()

    def unreachable(self) -> str | None:
        return self._pool.outage.unreachable()

    def _open(self) -> Any:
        psycopg = _psycopg()
        sync = "on" if self._synchronous == "FULL" else "off"
        try:
            given = psycopg.conninfo.conninfo_to_dict(self._url).get("options") or ""
        except psycopg.Error:  # libpq's reason quotes the URL's text, password included
            raise StoreError(
                "cannot read the trace store's Postgres URL (a malformed %-escape, or a"
                " character that must be escaped); it is not shown, since it may hold a password"
            ) from None
        try:
            return psycopg.connect(
                self._url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name="agentrunner",
                options=f"{given} -c synchronous_commit={sync}".strip(),
            )
        except psycopg.Error as exc:
            message = f"cannot connect to the trace store {self._where}: {why_not_connected(exc)}"
            if self._pool.reached and _unreachable(exc):  # else: a wrong URL, no server yet
                raise StoreUnreachableError(
                    message, driver=type(exc).__name__, server="postgres"
                ) from None
            raise StoreError(message) from None

    def close(self) -> None:
        self._pool.close()


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
        """The store's Postgres connection (its errors translated; a transaction begun on it
        stays on one server session in this thread), for tests and ad-hoc tools only."""
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
