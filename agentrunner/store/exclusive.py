"""Having a store to oneself: no other process has it open, and none can read it until done.

What gc (:mod:`agentrunner.store.gc`, whose docstring says why it needs this) deletes under:
on SQLite, the store file's exclusive lock taken only when the POSIX locks of its files show
no other process (every connection to a WAL store holds a shared lock on the file and a
read lock on its ``-shm`` while open); on Postgres, the content tables locked ``ACCESS
EXCLUSIVE`` and no other client session connected to the database.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentrunner.store import control
from agentrunner.store.connection import BUSY_TIMEOUT_S
from agentrunner.store.dialect import Conn
from agentrunner.store.driver import SqliteConnection
from agentrunner.values.errors import StoreError

_TRY_S = 1.0
"""How long to try for the exclusive lock (processes opening the store wait meanwhile)."""


class StoreInUseError(StoreError):
    """Other processes have the store open: deleting content now could break their runs."""


def live_leases(conn: Conn) -> list[str]:
    ids = [str(r[0]) for r in conn.execute("SELECT episode_id FROM control")]
    return [e for e in ids if control.read_lease(conn, e).alive()]


def _other_holders(path: Path) -> list[int]:
    """Processes other than this one holding POSIX locks on the store's files."""
    inodes = set()
    for name in (path, Path(f"{path}-shm"), Path(f"{path}-wal")):
        try:
            inodes.add(os.stat(name).st_ino)
        except OSError:
            continue
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError as exc:
        raise StoreError(
            f"cannot tell whether other processes use the store ({exc}); nothing was deleted"
        ) from None
    pids: set[int] = set()
    for line in lines:
        tokens = line.split()
        for i, token in enumerate(tokens):
            where = token.split(":")
            if len(where) == 3 and where[2].isdigit() and i > 0 and int(where[2]) in inodes:
                pid = int(tokens[i - 1]) if tokens[i - 1].isdigit() else 0
                if pid != os.getpid():
                    pids.add(pid)
    return sorted(pids)


def _describe(pids: list[int]) -> str:
    """``pid N: program args`` of the first few processes (as far as /proc tells)."""
    out = []
    for pid in pids[:3]:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            out.append(f"pid {pid}")
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if words:
            words[0] = os.path.basename(words[0])
        text = " ".join(" ".join(words).split())  # one line
        out.append(f"pid {pid}: {text if len(text) <= 60 else text[:57] + '...'}")
    return "; ".join(out) + (", ..." if len(pids) > 3 else "")


@contextmanager
def sqlite_exclusive(path: Path) -> Iterator[Conn]:
    """A write transaction on a connection that holds the store file's exclusive lock until
    it is closed; StoreInUseError (nothing done) when another process has the store open."""
    others = _other_holders(path)
    if others:  # not even try: waiting for the lock would hold newcomers off meanwhile
        raise StoreInUseError(
            f"{len(others)} other process(es) have the store open ({_describe(others)})"
        )
    conn = sqlite3.connect(path, timeout=_TRY_S, isolation_level=None)
    try:  # closing the connection gives the lock back
        try:
            conn.execute("SELECT count(*) FROM episodes").fetchone()  # WAL, with its -shm
            conn.execute("PRAGMA locking_mode = EXCLUSIVE")
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("SELECT count(*) FROM blobs").fetchone()  # takes the file's lock
        except sqlite3.OperationalError as exc:
            raise StoreInUseError(f"another process opened the store meanwhile ({exc})") from None
        translated = SqliteConnection(conn)
        try:
            translated.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            yield translated
            translated.execute("COMMIT")
        except BaseException:
            if translated.in_transaction:
                translated.execute("ROLLBACK")
            raise
    finally:
        conn.close()


@contextmanager
def postgres_exclusive(conn: Conn) -> Iterator[Conn]:
    conn.execute("BEGIN")
    try:
        conn.execute(f"SET LOCAL lock_timeout = '{int(BUSY_TIMEOUT_S)}s'")
        conn.execute(
            "LOCK TABLE event_log, episodes, control, messages, tools, snapshots, blobs"
            " IN ACCESS EXCLUSIVE MODE"
        )
        others = conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity WHERE datname ="
            " current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchall()
        if others:
            who = "; ".join(f"session {r[0]} {r[1] or ''}".strip() for r in others[:3])
            raise StoreInUseError(f"{len(others)} other session(s) are connected ({who})")
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
