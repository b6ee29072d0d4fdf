"""``EpisodeWriter``: appends one episode's events, dense seqs, one commit per event.

The hot append path uses the store's connection directly: one autocommitted INSERT per event
(a response and its usage: one transaction). While the writer's store holds the episode's
lease, every insert is fenced by the lease's token (see :mod:`agentrunner.store.control`): a
writer whose lease was taken over fails at its next append and writes nothing more.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from agentrunner import interrupts
from agentrunner.errors import StoreError
from agentrunner.store import control, eventlog
from agentrunner.store.dialect import SQLITE, Conn, Dialect
from agentrunner.store.eventlog import KIND_CODE, now_us

_INSERT = eventlog.INSERT
_NO_KIND = {"kind"}


def _fenced_insert(sql: Dialect) -> str:
    """The insert of a leased writer: it adds the row only while the control row still holds
    the writer's token (Postgres: locking that row against a takeover until the commit)."""
    return (
        "INSERT INTO event_log (id, attempt, turn, kind, ts, payload) SELECT ?, ?, ?, ?, ?, ?"
        f" WHERE EXISTS (SELECT 1 FROM control WHERE episode_id = ? AND lease_token = ?"
        f"{sql.share_lock})"
    )


class EpisodeWriter:
    """Appends events for one episode: dense seqs, one commit per event."""

    def __init__(
        self,
        conn: Conn,
        episode_id: str,
        key: int,
        next_seq: int,
        attempt: int,
        *,
        leases: dict[str, str] | None = None,
        sql: Dialect = SQLITE,
    ):
        self._conn = conn
        self._leases = leases if leases is not None else {}
        """The store's leases: while the store holds one of this writer's episode, every
        append is fenced by its token."""
        self._fenced = _fenced_insert(sql)
        self._lock = sql.share_lock
        self._begin = sql.begin_write
        self.episode_id = episode_id
        self._base = eventlog.row_id(key, 0)
        self.next_seq = next_seq
        self.attempt = attempt
        self.lost: str | None = None
        """Set (by the writer's heartbeat) when the store file was deleted or replaced."""
        self.clock: Callable[[], int] = now_us
        """The time (µs since the epoch) an event is stamped with: now, or the time an
        imported record says it happened."""

    def append(self, turn: int, payload: BaseModel) -> int:
        """Commit one event; return its seq. Ctrl-C is deferred until it is committed."""
        with interrupts.critical:
            return self.append_deferred(turn, payload)

    def append_deferred(self, turn: int, payload: BaseModel) -> int:
        """:meth:`append` for a caller that already defers Ctrl-C (the recorder)."""
        kind = payload.kind  # type: ignore[attr-defined]
        return self.append_json(turn, kind, payload.model_dump_json(exclude=_NO_KIND))

    def append_json(self, turn: int, kind: str, body: str) -> int:
        """The hot path: one event whose payload is already JSON text, one insert, one
        commit (the caller defers Ctrl-C and made ``body`` from the event's model fields)."""
        if self.lost is not None:
            raise StoreError(self.lost)
        seq = self.next_seq
        row = (self._base | seq, self.attempt, turn, KIND_CODE[kind], self.clock(), body)
        token = self._leases.get(self.episode_id)
        try:
            if token is None:
                cur = self._conn.execute(_INSERT, row)
            else:
                cur = self._conn.execute(self._fenced, (*row, self.episode_id, token))
        except sqlite3.IntegrityError as exc:
            raise StoreError(
                f"cannot record {kind} as seq {seq} of {self.episode_id}: {exc}"
                " (is another run writing this episode?)"
            ) from None
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot record {kind} of {self.episode_id}: {exc}") from None
        if cur.rowcount == 0:  # the fence: the control row holds another writer's token
            self._lose()
        self.next_seq = seq + 1
        return seq

    def _lose(self) -> None:
        error = control.lease_lost(self.episode_id, self._conn)
        self.lost = str(error)
        raise error

    def append_together(self, turn: int, payloads: Sequence[BaseModel]) -> list[int]:
        """Commit events that belong together (a response and its usage) in one transaction:
        all or none; return their seqs."""
        if self.lost is not None:
            raise StoreError(self.lost)
        rows = []
        kinds = []
        seq = self.next_seq
        for payload in payloads:
            kind = payload.kind  # type: ignore[attr-defined]
            body = payload.model_dump_json(exclude={"kind"})
            rows.append((self._base | seq, self.attempt, turn, KIND_CODE[kind], self.clock(), body))
            kinds.append(kind)
            seq += 1
        with interrupts.critical:
            try:
                self._conn.execute(self._begin)
                token = self._leases.get(self.episode_id)
                if (
                    token is not None
                    and not self._conn.execute(
                        "SELECT 1 FROM control WHERE episode_id = ? AND lease_token = ?"
                        + self._lock,
                        (self.episode_id, token),
                    ).fetchone()
                ):
                    self._rollback()
                    self._lose()
                self._conn.executemany(eventlog.INSERT, rows)
                self._conn.execute("COMMIT")
            except sqlite3.IntegrityError as exc:
                self._rollback()
                raise StoreError(
                    f"cannot record {kinds[0]} as seq {self.next_seq} of {self.episode_id}: {exc}"
                    " (is another run writing this episode?)"
                ) from None
            except sqlite3.OperationalError as exc:
                self._rollback()
                raise StoreError(f"cannot record {kinds[0]} of {self.episode_id}: {exc}") from None
            first = self.next_seq
            self.next_seq = seq
        return list(range(first, seq))

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
