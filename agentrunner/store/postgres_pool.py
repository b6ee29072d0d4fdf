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
only that it timed out). A thread that finds every connection busy waits in line (a connection
that comes back goes to the thread that has waited longest, so none starves); it opens another
while there are fewer than the most, at once when others wait too, else after a moment
(:data:`GROW_AFTER_S`); with all open it waits up to :data:`WAIT_S`. A broken connection (the
server restarted or dropped it) is closed when it comes back; the next statement opens a new one.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

from agentrunner.values.critical import state as critical_state
from agentrunner.values.errors import StoreFailedError, StoreUnreachableError, UsageError

POOL_SIZE = 8
"""The most server connections one store holds in one process."""
GROW_AFTER_S = 0.05
"""How long a thread waiting alone for a connection waits before it opens another: a heartbeat
that meets its episode's append waits for it, so a process running one episode (a Ray worker)
keeps one connection. A thread that finds others waiting already opens one at once."""
WAIT_S = 60.0
"""How long a statement waits for a connection while all are busy before it fails."""

PATIENCE_ENV = "AGENTRUNNER_STORE_PATIENCE"
PATIENCE_S = 300.0
"""How long a process waits out a store it reached before and cannot reach now (a server
restarting, a network blip) before its statements fail: seconds, ``$AGENTRUNNER_STORE_PATIENCE``
overrides. A run that fails so stops as interrupted, resumable."""
FIRST_PAUSE_S = 0.05
LONGEST_PAUSE_S = 2.0
"""The back-off between tries while the store is unreachable: doubling from the first pause
to the longest."""

_T = TypeVar("_T")


def patience_s() -> float:
    """The store's patience in seconds (see :data:`PATIENCE_S`)."""
    text = os.environ.get(PATIENCE_ENV, "").strip()
    if not text:
        return PATIENCE_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"{PATIENCE_ENV} must be a number of seconds (0 or more), not {text!r}")
    return value


def _say(line: str) -> None:
    print(f"agentrunner: {line}", file=sys.stderr, flush=True)


class Outage:
    """This process's view of its store's server being out of reach: since when (said once
    on stderr as it starts and as it ends). A statement counts the server as gone only when
    its connection broke or could not be made: an error the server answered with (or libpq's
    own refusal of a statement, such as too many parameters) is the statement's."""

    def __init__(self, where: str, say: Callable[[str], None] = _say) -> None:
        self._where = where
        self._say = say
        self._lock = threading.Lock()
        self._since: float | None = None
        self._cause = ""
        self._interrupted = False
        self.patience = patience_s()

    @property
    def on(self) -> bool:
        """Whether an outage is on record (read without the lock: a hint, checked under it)."""
        return self._since is not None

    def unreachable(self) -> str | None:
        """What a live view shows while the store is out of reach (None: it is not)."""
        with self._lock:
            if self._since is None:
                return None
            gone = time.monotonic() - self._since
        return f"store unreachable for {gone:.0f} s, retrying ({self._cause})"

    def wait(self, exc: Exception, tries: int) -> None:
        """Pause before try ``tries + 1``; raise once the outage has lasted the patience."""
        now = time.monotonic()
        with self._lock:
            if self._since is None:
                self._since, self._cause = now, _cause(exc)
                self._say(
                    f"the trace store {self._where} is unreachable ({self._cause});"
                    f" retrying for up to {self.patience:g} s"
                )
            since, cause = self._since, self._cause
        if critical_state.pending:  # Ctrl-C while a store write waits: stop waiting,
            self._interrupted = True  # and do not wait again in this outage (its cancel)
        if self._interrupted:
            raise StoreUnreachableError(
                f"the trace store {self._where} is unreachable ({cause}); stopped waiting"
                " for it (interrupted)",
                driver=type(exc).__name__,
                server="postgres",
            ) from None
        if now - since >= self.patience:
            raise StoreUnreachableError(
                f"the trace store {self._where} has been unreachable for {now - since:.0f} s"
                f" ({cause}); {PATIENCE_ENV} allows {self.patience:g} s",
                driver=type(exc).__name__,
                server="postgres",
            ) from None
        time.sleep(min(FIRST_PAUSE_S * 2**tries, LONGEST_PAUSE_S, since + self.patience - now))

    def over(self) -> None:
        """A statement ran again after a wait: the outage (if still on record) is over."""
        with self._lock:
            if self._since is None:
                return
            gone, self._since = time.monotonic() - self._since, None
            self._interrupted = False
        self._say(f"the trace store {self._where} is reachable again (after {gone:.0f} s)")


_CANNOT_CONNECT = "cannot connect to the trace store "


def _cause(exc: Exception) -> str:
    """The error's first line, without the store's name when it starts with it."""
    lines = str(exc).strip().splitlines()
    line = lines[0].strip() if lines else type(exc).__name__
    if line.startswith(_CANNOT_CONNECT) and ": " in line:
        return line.split(": ", 1)[1]
    return line


class _Waiter:
    """A thread waiting for a connection: handed one here, woken by its own condition."""

    __slots__ = ("conn", "woken")

    def __init__(self, lock: threading.Lock) -> None:
        self.conn: Any = None
        self.woken = threading.Condition(lock)


class SharedConnections:
    """At most ``size`` connections from ``connect`` (psycopg, autocommit), lent out one
    statement or one transaction at a time."""

    def __init__(
        self,
        connect: Callable[[], Any],
        where: str,
        *,
        size: int = POOL_SIZE,
    ) -> None:
        self._connect = connect
        self._where = where
        self._reached = False
        """Whether a connection was ever opened: until then a failure is the user's (a wrong
        URL, a server not started) and reported at once, never waited out."""
        self.outage = Outage(where)
        self._size = size
        self._idle_status = importlib.import_module("psycopg.pq").TransactionStatus.IDLE
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._all: set[Any] = set()
        self._opening = 0
        self._waiting: deque[_Waiter] = deque()
        self._held = threading.local()
        self._failed = threading.local()

    def run(self, statement: Callable[[Any], _T]) -> _T:
        """``statement`` on the connection of this thread's open transaction, else on one
        lent for it (kept by the thread when ``statement`` leaves a transaction open).

        Outside a transaction, once the store has been reached, a server out of reach (a
        connection refused, or one the statement found broken: see :class:`Outage`) is
        waited out and the statement run again on a new connection; in one, the error goes
        to the transaction's caller (:meth:`lost_connection` says it was the connection's),
        whose transaction the server rolled back with the connection."""
        conn = getattr(self._held, "conn", None)
        if conn is not None:
            try:
                return self._on(conn, statement)
            except Exception:
                self._failed.lost = self._gone(conn)
                raise
        tries = 0
        while True:
            try:
                conn = self._lend()
            except StoreUnreachableError as exc:  # only once reached (see ``_connect``)
                self.outage.wait(exc, tries)
                tries += 1
                continue
            try:
                result = self._on(conn, statement)
            except Exception as exc:
                if not self._gone(conn):  # the statement's own error (the server answered)
                    self._failed.lost = False
                    raise
                self.outage.wait(exc, tries)
                tries += 1
                continue
            if tries or self.outage.on:
                self.outage.over()
            return result

    def lost_connection(self) -> bool:
        """Whether this thread's last failed statement failed because its connection was
        lost (not because the server refused it)."""
        return bool(getattr(self._failed, "lost", False))

    @staticmethod
    def _gone(conn: Any) -> bool:
        return bool(conn.closed or conn.broken)

    def _on(self, conn: Any, statement: Callable[[Any], _T]) -> _T:
        try:
            return statement(conn)
        finally:
            if self._settled(conn):
                self._held.conn = None
                self._take_back(conn)
            else:
                self._held.conn = conn

    @property
    def reached(self) -> bool:
        """Whether a connection was ever opened (see ``_reached``)."""
        return self._reached

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
        with self._lock:
            return len(self._all)

    def close(self) -> None:
        """Close every connection (a later statement opens new ones)."""
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(Exception):
                    conn.close()
            self._all.clear()
            self._idle.clear()
            for waiter in self._waiting:
                waiter.woken.notify()
        self._held = threading.local()

    def _settled(self, conn: Any) -> bool:
        """Whether ``conn`` may go back: idle outside a transaction, or broken."""
        return bool(conn.closed or conn.broken or conn.info.transaction_status == self._idle_status)

    def _lend(self) -> Any:
        """An idle connection, or one handed over in turn, or a new one (see the module)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()  # the most recently used: its session is warm
            if self._all or self._opening:
                conn = self._wait_in_line()
                if conn is not None:
                    return conn
            self._opening += 1
        try:
            conn = self._connect()
        except BaseException:
            with self._lock:
                self._opening -= 1
                self._wake_first()  # it may open one in this one's stead
            raise
        with self._lock:
            self._opening -= 1
            self._all.add(conn)
            self._reached = True
        return conn

    def _wait_in_line(self) -> Any:
        """(Holding the lock) the connection handed to this thread, or None when it is to
        open one."""
        now = time.monotonic()
        grow_at, deadline = now + GROW_AFTER_S, now + WAIT_S
        waiter = _Waiter(self._lock)
        crowded = bool(self._waiting)
        self._waiting.append(waiter)
        try:
            while waiter.conn is None:
                room = len(self._all) + self._opening < self._size
                if room and (crowded or now >= grow_at or not (self._all or self._opening)):
                    return None
                if now >= deadline:
                    raise StoreFailedError(
                        f"all {self._size} connections of this process to {self._where}"
                        f" stayed busy for {WAIT_S:.0f} s",
                        driver="pool",
                        server="postgres",
                    )
                waiter.woken.wait((grow_at if room else deadline) - now)
                now = time.monotonic()
            return waiter.conn
        except BaseException:
            if waiter.conn is not None:  # handed one as it stopped waiting: the next one's
                self._hand_over(waiter.conn)
            raise
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)

    def _take_back(self, conn: Any) -> None:
        with self._lock:
            if conn not in self._all:  # closed with the pool meanwhile
                return
            if not self._settled(conn) or conn.closed or conn.broken:  # never lend a transaction
                self._all.discard(conn)
                with contextlib.suppress(Exception):
                    conn.close()
                self._wake_first()  # room for a new one
            else:
                self._hand_over(conn)

    def _hand_over(self, conn: Any) -> None:
        """(Holding the lock) ``conn`` to the thread that has waited longest, else idle."""
        if self._waiting:
            waiter = self._waiting.popleft()
            waiter.conn = conn
            waiter.woken.notify()
        else:
            self._idle.append(conn)

    def _wake_first(self) -> None:
        if self._waiting:
            self._waiting[0].woken.notify()
