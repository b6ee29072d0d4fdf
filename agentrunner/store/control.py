"""The control table: writer leases, heartbeats and cancel requests, and writer liveness.

These are the only rows updated in place. An episode's status is derived from its log plus
this table: an episode without an ``episode.end`` whose writer process is gone (or whose
heartbeat is older than :data:`HEARTBEAT_STALE_S`, for a writer on another host) is
``interrupted``.

A lease carries an attempt token, new at each claim: heartbeats and releases name it, and
every event a leased writer appends is inserted only while the control row still holds its
token (see ``EpisodeWriter``). A writer whose lease was taken over (its machine went silent
and another resumed the episode) therefore fails at its next append and writes nothing more.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrunner.store.dialect import Conn
from agentrunner.values.errors import StoreError

HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_STALE_S = 15.0


def _host() -> str:
    """Where a writer runs, precisely enough to check its pid: the host name, plus the
    kernel's boot id and this pid namespace (two machines or containers can share a name;
    only a writer seen with the same ones can be checked by pid, others by heartbeat)."""
    name = socket.gethostname()
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
        pid_ns = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return name
    return f"{name}#{boot}.{pid_ns}"


HOST = _host()


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


def read_lease(conn: Conn, episode_id: str) -> Lease:
    row = conn.execute(
        "SELECT writer_pid, writer_host, writer_started, heartbeat_at FROM control"
        " WHERE episode_id = ?",
        (episode_id,),
    ).fetchone()
    return Lease(*row) if row else Lease(None, None, None, None)


def new_token() -> str:
    """A new lease's attempt token."""
    return uuid.uuid4().hex


def lease_token(conn: Conn, episode_id: str) -> str | None:
    """The token of the lease the control row holds now, if any."""
    row = conn.execute(
        "SELECT lease_token FROM control WHERE episode_id = ?", (episode_id,)
    ).fetchone()
    return None if row is None else row[0]


def write_lease(conn: Conn, episode_id: str, token: str | None = None) -> str:
    """Make this process the episode's writer (inside the caller's transaction) under
    ``token`` (default: a new one); return the token."""
    pid = os.getpid()
    token = token or new_token()
    conn.execute(
        "INSERT INTO control (episode_id, writer_pid, writer_host, writer_started,"
        " heartbeat_at, cancel_requested_at, cancel_reason, lease_token)"
        " VALUES (?, ?, ?, ?, ?, NULL, NULL, ?)"
        " ON CONFLICT(episode_id) DO UPDATE SET writer_pid = excluded.writer_pid,"
        " writer_host = excluded.writer_host, writer_started = excluded.writer_started,"
        " heartbeat_at = excluded.heartbeat_at, cancel_requested_at = NULL,"
        " cancel_reason = NULL, lease_token = excluded.lease_token",
        (episode_id, pid, HOST, process_start_token(pid), time.time(), token),
    )
    return token


def lease_lost(episode_id: str, conn: Conn) -> StoreError:
    """The error a writer whose lease is gone stops with, naming who holds it now."""
    lease = read_lease(conn, episode_id)
    holder = f"pid {lease.pid} on {lease.host}" if lease.pid is not None else "nobody (released)"
    return LeaseLostError(
        f"episode {episode_id}: this run's writer lease was taken over (now held by {holder});"
        " it stops here and writes nothing more"
    )


class LeaseLostError(StoreError):
    """Another writer holds the episode now; this one must stop."""


def heartbeat(
    conn: Conn,
    episode_id: str,
    token: str | None,
    checkpoint: tuple[int, dict[str, Any]] | None = None,
) -> str | None:
    """Refresh the heartbeat (and the totals checkpoint: totals as of a seq) of the lease
    holding ``token`` (None: this process's); return the pending cancel reason, if any.
    Raises :class:`LeaseLostError` when the lease is no longer this writer's."""
    holder, who = (
        ("lease_token = ?", token) if token is not None else ("writer_pid = ?", os.getpid())
    )
    if checkpoint is None:
        cur = conn.execute(
            f"UPDATE control SET heartbeat_at = ? WHERE episode_id = ? AND {holder}",
            (time.time(), episode_id, who),
        )
    else:
        seq, totals = checkpoint
        cur = conn.execute(
            "UPDATE control SET heartbeat_at = ?, totals = ?, totals_seq = ?"
            f" WHERE episode_id = ? AND {holder}",
            (time.time(), json.dumps(totals), seq, episode_id, who),
        )
    if token is not None and cur.rowcount == 0:
        raise lease_lost(episode_id, conn)
    return cancel_reason(conn, episode_id)


def read_checkpoint(conn: Conn, episode_id: str) -> tuple[int, dict[str, Any]] | None:
    """The writer's last totals checkpoint: (seq, totals), if it wrote one."""
    row = conn.execute(
        "SELECT totals_seq, totals FROM control WHERE episode_id = ?", (episode_id,)
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return int(row[0]), json.loads(row[1])


def release(conn: Conn, episode_id: str, token: str | None) -> None:
    """Give the lease holding ``token`` (None: this process's) up; a lease taken over since
    stays with its new holder."""
    holder, who = (
        ("lease_token = ?", token) if token is not None else ("writer_pid = ?", os.getpid())
    )
    conn.execute(
        "UPDATE control SET writer_pid = NULL, lease_token = NULL, heartbeat_at = ?"
        f" WHERE episode_id = ? AND {holder}",
        (time.time(), episode_id, who),
    )


def request_cancel(conn: Conn, episode_id: str, reason: str, at: str) -> None:
    conn.execute(
        "UPDATE control SET cancel_requested_at = ?, cancel_reason = ? WHERE episode_id = ?",
        (at, reason, episode_id),
    )


def cancel_reason(conn: Conn, episode_id: str) -> str | None:
    row = conn.execute(
        "SELECT cancel_requested_at, cancel_reason FROM control WHERE episode_id = ?",
        (episode_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return None
    return str(row[1] or "cancel requested")
