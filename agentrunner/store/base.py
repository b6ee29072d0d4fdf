"""The ground every trace store stands on: connections, the write lock, episode keys and
segments. :class:`StoreBase` is the root of the shared core (:mod:`agentrunner.store.core`);
the SQLite and Postgres stores supply what differs (connections, lock, dialect).
"""

from __future__ import annotations

import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Self, TypeVar

from agentrunner.store import eventlog
from agentrunner.store.dialect import TRANSACTION_TRIES, Conn, Dialect, Pool
from agentrunner.store.notices import NOTIFY
from agentrunner.store.records import Segment, iso
from agentrunner.values.errors import EpisodeNotFoundError, StoreUnreachableError

_T = TypeVar("_T")


def utc_now() -> str:
    """Now, as the contract's ISO 8601 UTC text."""
    return iso(eventlog.now_us())


class _Depth(threading.local):
    depth = 0


class StoreBase(ABC):
    """What every store stands on: its connections (one per thread), its write lock, its
    dialect, and where an episode's rows live. A backend supplies the connection pool
    (``_conns``), the lock (:meth:`_begin_writing`), the dialect (``sql``) and its names."""

    sql: Dialect
    """How this store's database spells what SQLite and Postgres spell differently."""

    path: Path

    def __init__(self, conns: Pool) -> None:
        self._conns = conns
        self._leases: dict[str, str] = {}
        """The attempt tokens of the leases this store holds, by episode."""
        self._atomic = _Depth()

    @property
    @abstractmethod
    def location(self) -> str:
        """What opens this store again (``TraceStore(store.location)``), in another thread,
        process or machine: the file's absolute path, or the database's URL. Never print it
        (a URL may hold a password); :attr:`where` is for messages."""

    @property
    @abstractmethod
    def identity(self) -> str:
        """Equal for two stores exactly when they are the same data (no secret in it)."""

    @property
    @abstractmethod
    def where(self) -> str:
        """The store's name for messages: its path, or its URL without credentials."""

    @abstractmethod
    def identity_problem(self) -> str | None:
        """Why this store is no longer the one opened (its file deleted or replaced), if so."""

    @abstractmethod
    def raw_connection(self) -> Conn:
        """This thread's bare database connection, for tests and ad-hoc tools only:
        agentrunner itself reads and writes through the store's named methods."""

    @abstractmethod
    def _begin_writing(self) -> contextlib.AbstractContextManager[None]:
        """One write transaction holding the store's write lock (SQLite: ``BEGIN
        IMMEDIATE``; Postgres: an advisory lock)."""

    @property
    def _conn(self) -> Conn:
        """This thread's connection (store-internal: only ``agentrunner/store/`` holds SQL)."""
        return self._conns.get()

    def close(self) -> None:
        self._conns.close()

    def done_in_this_thread(self) -> None:
        """Close the calling thread's connection (a thread that ends, such as a heartbeat,
        would otherwise keep it, on Postgres a server connection, until :meth:`close`)."""
        self._conns.close_current()

    def unreachable(self) -> str | None:
        """While the store's server is out of reach and this process waits for it, what a
        live view says (``store unreachable for 12 s, retrying (...)``); else None."""
        return self._conns.unreachable()

    def open_connections(self) -> int:
        """How many connections this store holds open (one per thread that used it)."""
        return self._conns.open_count()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Make the store writes this thread does inside the block one transaction: all of
        them or none (a fan-out's fork group and its forks). Not for appends of events,
        which commit one by one."""
        if self._atomic.depth:
            yield
            return
        with self._begin_writing():
            self._atomic.depth = 1
            try:
                yield
            finally:
                self._atomic.depth = 0

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One write transaction that no other writer of the store interleaves with (inside
        :meth:`atomic`: part of that one)."""
        if self._atomic.depth:
            yield
        else:
            with self._begin_writing():
                yield

    def _changed(self) -> None:
        """Tell live views on other connections that how episodes are listed changed (on
        Postgres a notice, sent when this statement's transaction commits:
        :mod:`agentrunner.store.notices`; a file's views poll)."""
        if self.sql.postgres:
            self._conn.execute(NOTIFY)

    def _patiently(self, transaction: Callable[[bool], _T]) -> _T:
        """``transaction(again)``, one write transaction of its own, run again (``again``
        True) when the store's server was lost in its middle: the server rolled it back,
        unless the loss came as it committed, which ``again`` tells it to look for. Inside
        :meth:`atomic` it runs once, the outer transaction's caller answering for it."""
        if self._atomic.depth:
            return transaction(False)
        for tries in range(1, TRANSACTION_TRIES + 1):
            try:
                return transaction(tries > 1)
            except StoreUnreachableError:
                if tries == TRANSACTION_TRIES:
                    raise
        raise AssertionError("unreachable")  # the loop returns or raises

    def episode_key(self, episode_id: str) -> int:
        """The episode's integer key in the event log (store-internal)."""
        return self._key(episode_id)

    def _key(self, episode_id: str) -> int:
        row = self._conn.execute("SELECT key FROM episodes WHERE id = ?", (episode_id,)).fetchone()
        if row is None:
            raise EpisodeNotFoundError(f"no episode {episode_id!r} in {self.where}")
        return int(row[0])

    def segments(self, episode_id: str) -> list[Segment]:
        """Where an episode's history lives: ancestors' prefixes, then its own rows (a segment
        may be empty: a fork of a fork before the parent's own fork point skips the parent)."""
        chain: list[Segment] = []
        current: str | None = episode_id
        limit: int | None = None
        while current is not None:
            row = self._conn.execute(
                "SELECT parent_episode_id, fork_seq, key FROM episodes WHERE id = ?", (current,)
            ).fetchone()
            if row is None:
                raise EpisodeNotFoundError(f"no episode {current!r} in {self.where}")
            parent, fork_seq, key = row
            start = (fork_seq or 0) + 1
            chain.append(Segment(current, start, limit, key))
            # A fork made before its parent's own fork point inherits only up to its point:
            # every ancestor's part ends at the lowest fork point below it.
            if fork_seq is not None:
                limit = fork_seq if limit is None else min(limit, fork_seq)
            current = parent
        return list(reversed(chain))
