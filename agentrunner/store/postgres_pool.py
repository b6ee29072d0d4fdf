"""The server connections of one Postgres store in one process: a few, shared by its threads.

A thread of its own connection each meant two server connections per running episode (its
run and its heartbeat), so ``batch --concurrency 64`` wanted more than Postgres' default
``max_connections`` of 100. Here a statement borrows a connection for as long as it runs and
gives it back, so a process holds at most :data:`POOL_SIZE` however many threads it runs.

A transaction keeps its connection: once a statement leaves the connection inside one (after
``BEGIN``, until ``COMMIT`` or ``ROLLBACK``), it stays with the thread, and every statement the
thread runs meanwhile runs in that one session; the transaction's locks (the store's write lock
is ``pg_advisory_xact_lock``, a fenced append's ``FOR SHARE``) and its ``set_config(..., true)``
end with it. Nothing else of a session outlives a statement: every connection is opened with the
same options, the store takes no session-level lock and sets nothing with ``SET``, psycopg
prepares statements per connection, and a statement's rows are on the client when it returns,
so a cursor is read after its connection went back.

A connection is opened in the thread that needs one, so a failure is that thread's own error
with libpq's cause (``psycopg_pool`` opens them in worker threads and tells a waiting thread
only that it timed out). A thread that finds every connection busy waits for one: a moment
(:data:`GROW_AFTER_S`) before it opens another while there are fewer than the most, else up to
:data:`WAIT_S`. A broken connection (the server restarted or dropped it) is closed when it comes
back; the next statement opens a new one.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentrunner.values.errors import StoreFailedError

POOL_SIZE = 8
"""The most server connections one store holds in one process."""
GROW_AFTER_S = 0.05
"""How long a statement waits for a busy connection before it opens another: a heartbeat that
meets its episode's append waits for it, so a process running one episode (a Ray worker) keeps
one connection; many episodes at once, each waiting longer, open more."""
WAIT_S = 60.0
"""How long a statement waits for a connection while all are busy before it fails."""

_T = TypeVar("_T")


class SharedConnections:
    """At most ``size`` connections from ``connect`` (psycopg, autocommit), lent out one
    statement or one transaction at a time."""

    def __init__(self, connect: Callable[[], Any], where: str, size: int = POOL_SIZE) -> None:
        self._connect = connect
        self._where = where
        self._size = size
        self._idle_status = importlib.import_module("psycopg.pq").TransactionStatus.IDLE
        self._ready = threading.Condition()
        self._idle: list[Any] = []
        self._all: set[Any] = set()
        self._opening = 0
        self._held = threading.local()

    def run(self, statement: Callable[[Any], _T]) -> _T:
        """``statement`` on the connection of this thread's open transaction, else on one
        lent for it (kept by the thread when ``statement`` leaves a transaction open)."""
        conn = getattr(self._held, "conn", None)
        if conn is None:
            conn = self._lend()
        try:
            return statement(conn)
        finally:
            if self._settled(conn):
                self._held.conn = None
                self._take_back(conn)
            else:
                self._held.conn = conn

    def in_transaction(self) -> bool:
        """Whether this thread has a transaction open."""
        conn = getattr(self._held, "conn", None)
        return conn is not None and not self._settled(conn)

    def release_current(self) -> None:
        """Give back the connection of a transaction this thread left open (rolled back)."""
        conn = getattr(self._held, "conn", None)
        if conn is not None:
            self._held.conn = None
            with contextlib.suppress(Exception):
                conn.rollback()
            self._take_back(conn)

    def open_count(self) -> int:
        with self._ready:
            return len(self._all)

    def close(self) -> None:
        """Close every connection (a later statement opens new ones)."""
        with self._ready:
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()
            self._idle.clear()
            self._ready.notify_all()
        self._held = threading.local()

    def _settled(self, conn: Any) -> bool:
        """Whether ``conn`` may go back: idle outside a transaction, or broken."""
        return bool(conn.closed or conn.broken or conn.info.transaction_status == self._idle_status)

    def _lend(self) -> Any:
        """An idle connection; else a new one, when none came back within
        :data:`GROW_AFTER_S` (at once for the first) and there are fewer than ``size``."""
        now = time.monotonic()
        grow_at, deadline = now + GROW_AFTER_S, now + WAIT_S
        with self._ready:
            while not self._idle:
                opened = len(self._all) + self._opening
                if opened < self._size and (opened == 0 or now >= grow_at):
                    break
                if now >= deadline:
                    raise StoreFailedError(
                        f"all {self._size} connections of this process to {self._where}"
                        f" stayed busy for {WAIT_S:.0f} s",
                        driver="pool",
                        server="postgres",
                    )
                self._ready.wait((grow_at if opened < self._size else deadline) - now)
                now = time.monotonic()
            if self._idle:
                return self._idle.pop()  # the most recently used: its session is warm
            self._opening += 1
        try:
            conn = self._connect()
        except BaseException:
            with self._ready:
                self._opening -= 1
                self._ready.notify()
            raise
        with self._ready:
            self._opening -= 1
            self._all.add(conn)
        return conn

    def _take_back(self, conn: Any) -> None:
        with self._ready:
            if conn not in self._all:  # closed with the pool meanwhile
                return
            if conn.closed or conn.broken:
                self._all.discard(conn)
                with contextlib.suppress(Exception):
                    conn.close()
            else:
                self._idle.append(conn)
            self._ready.notify()
