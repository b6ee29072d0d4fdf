"""The control table: writer leases, heartbeats and cancel requests, and writer liveness.

These are the only rows updated in place. An episode's status is derived from its log plus
this table: an episode without an ``episode.end`` whose writer process is gone (or whose
heartbeat is stale, for a writer on another host) is ``interrupted``.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.store.connection import immediate

HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_STALE_S = 15.0
HOST = socket.gethostname()


def process_start_token(pid: int) -> str | None:
    """An id for a process incarnation (its start time), so a reused pid is not mistaken."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: fall back to a signal probe
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat[stat.rindex(")") + 2 :].split()[0]
    return state not in ("Z", "X")


@dataclass(frozen=True, slots=True)
class Lease:
    """Who writes an episode, and when they last said so."""

    pid: int | None
    host: str | None
    started: str | None
    heartbeat_at: float | None

    def alive(self, now: float | None = None) -> bool:
        if self.pid is None:
            return False
        if self.host == HOST:
            if not _pid_alive(self.pid):
                return False
            token = process_start_token(self.pid)
            return token is None or self.started is None or token == self.started
        beat = self.heartbeat_at or 0.0
        return (now or time.time()) - beat < HEARTBEAT_STALE_S


def read_lease(conn: sqlite3.Connection, episode_id: str) -> Lease:
    row = conn.execute(
        "SELECT writer_pid, writer_host, writer_started, heartbeat_at FROM control"
        " WHERE episode_id = ?",
        (episode_id,),
    ).fetchone()
    return Lease(*row) if row else Lease(None, None, None, None)


def write_lease(conn: sqlite3.Connection, episode_id: str) -> None:
    """Make this process the episode's writer (inside the caller's transaction)."""
    pid = os.getpid()
    conn.execute(
        "INSERT INTO control (episode_id, writer_pid, writer_host, writer_started,"
        " heartbeat_at, cancel_requested_at, cancel_reason) VALUES (?, ?, ?, ?, ?, NULL, NULL)"
        " ON CONFLICT(episode_id) DO UPDATE SET writer_pid = excluded.writer_pid,"
        " writer_host = excluded.writer_host, writer_started = excluded.writer_started,"
        " heartbeat_at = excluded.heartbeat_at, cancel_requested_at = NULL,"
        " cancel_reason = NULL",
        (episode_id, pid, HOST, process_start_token(pid), time.time()),
    )


def claim(conn: sqlite3.Connection, episode_id: str) -> bool:
    """Become the episode's writer unless a live one holds it (another process, or another
    run in this one: one writer per episode). Clears old cancel requests."""
    with immediate(conn):
        if read_lease(conn, episode_id).alive():
            return False  # nothing written: the commit ends the read
        write_lease(conn, episode_id)
    return True


def heartbeat(
    conn: sqlite3.Connection,
    episode_id: str,
    checkpoint: tuple[int, dict[str, Any]] | None = None,
) -> str | None:
    """Refresh the heartbeat (and the totals checkpoint: totals as of a seq); return the
    pending cancel reason, if any."""
    if checkpoint is None:
        conn.execute(
            "UPDATE control SET heartbeat_at = ? WHERE episode_id = ? AND writer_pid = ?",
            (time.time(), episode_id, os.getpid()),
        )
    else:
        seq, totals = checkpoint
        conn.execute(
            "UPDATE control SET heartbeat_at = ?, totals = ?, totals_seq = ?"
            " WHERE episode_id = ? AND writer_pid = ?",
            (time.time(), json.dumps(totals), seq, episode_id, os.getpid()),
        )
    return cancel_reason(conn, episode_id)


def read_checkpoint(conn: sqlite3.Connection, episode_id: str) -> tuple[int, dict[str, Any]] | None:
    """The writer's last totals checkpoint: (seq, totals), if it wrote one."""
    row = conn.execute(
        "SELECT totals_seq, totals FROM control WHERE episode_id = ?", (episode_id,)
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return int(row[0]), json.loads(row[1])


def release(conn: sqlite3.Connection, episode_id: str) -> None:
    conn.execute(
        "UPDATE control SET writer_pid = NULL, heartbeat_at = ? WHERE episode_id = ?"
        " AND writer_pid = ?",
        (time.time(), episode_id, os.getpid()),
    )


def request_cancel(conn: sqlite3.Connection, episode_id: str, reason: str) -> None:
    conn.execute(
        "UPDATE control SET cancel_requested_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),"
        " cancel_reason = ? WHERE episode_id = ?",
        (reason, episode_id),
    )


def cancel_reason(conn: sqlite3.Connection, episode_id: str) -> str | None:
    row = conn.execute(
        "SELECT cancel_requested_at, cancel_reason FROM control WHERE episode_id = ?",
        (episode_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return str(row[1] or "cancel requested")
