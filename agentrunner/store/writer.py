"""``EpisodeWriter``: appends one episode's events, dense seqs, one commit per event.

The hot append path uses the store's connection directly: one autocommitted INSERT per event
(a response and its usage: one transaction). While the writer's store holds the episode's
lease, every insert is fenced by the lease's token (see :mod:`agentrunner.store.control`): a
writer whose lease was taken over fails at its next append and writes nothing more.

On Postgres, whose connections commit with ``synchronous_commit`` off, every event but a
``model.chunk`` turns it on for its own transaction (``set_config(..., true)`` in the same
statement: no extra round trip), so its commit returns only once the server's WAL is flushed.
The runner acts only after such an event (a request before it is sent, a tool call before it
runs), and a flush covers everything written before it, so a crash of the server loses at
most the chunks (and heartbeats) after the last one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentrunner.store import control, eventlog
from agentrunner.store.dialect import SQLITE, Conn, Dialect
from agentrunner.store.eventlog import KIND_CODE, now_us
from agentrunner.values.critical import critical
from agentrunner.values.errors import (
    StoreDriverError,
    StoreError,
    StoreFailedError,
    StoreRefusedError,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

_NO_KIND = {"kind"}
_CHUNK = "model.chunk"
_SELECT_ROW = "INSERT INTO event_log (id, attempt, turn, kind, ts, payload) SELECT ?, ?, ?, ?, ?, ?"
DURABLE = "set_config('synchronous_commit', 'on', true)"
"""Postgres: this transaction's commit waits for the WAL flush (whatever the session says)."""


def _inserts(sql: Dialect, *, durable: bool) -> tuple[str, str]:
    """The plain insert and the insert of a leased writer, which adds the row only while the
    control row still holds the writer's token (Postgres: locking that row against a takeover
    until the commit). ``durable`` (Postgres): both commit with ``synchronous_commit`` on."""
    fence = (
        f"EXISTS (SELECT 1 FROM control WHERE episode_id = ? AND lease_token = ?{sql.share_lock})"
    )
    if not (durable and sql.postgres):
        return eventlog.INSERT, f"{_SELECT_ROW} WHERE {fence}"
    return (
        f"{_SELECT_ROW} WHERE {DURABLE} = 'on'",
        f"{_SELECT_ROW} WHERE {fence} AND {DURABLE} = 'on'",
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
        self._chunk_sql = _inserts(sql, durable=False)
        self._event_sql = _inserts(sql, durable=True)
        self._lock = sql.share_lock
        self._begin = sql.begin_write
        self._durable = f"SELECT {DURABLE}" if sql.postgres else None
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
        with critical:
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
        insert, fenced = self._chunk_sql if kind == _CHUNK else self._event_sql
        try:
            if token is None:
                cur = self._conn.execute(insert, row)
            else:
                cur = self._conn.execute(fenced, (*row, self.episode_id, token))
        except StoreRefusedError as exc:
            raise StoreError(
                f"cannot record {kind} as seq {seq} of {self.episode_id}: {exc}"
                " (is another run writing this episode?)"
            ) from None
        except StoreFailedError as exc:
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
        with critical:
            try:
                self._conn.execute(self._begin)
                if self._durable is not None:
                    self._conn.execute(self._durable)
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
            except StoreRefusedError as exc:
                self._rollback()
                raise StoreError(
                    f"cannot record {kinds[0]} as seq {self.next_seq} of {self.episode_id}: {exc}"
                    " (is another run writing this episode?)"
                ) from None
            except StoreFailedError as exc:
                self._rollback()
                raise StoreError(f"cannot record {kinds[0]} of {self.episode_id}: {exc}") from None
            first = self.next_seq
            self.next_seq = seq
        return list(range(first, seq))

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(StoreDriverError):
                self._conn.execute("ROLLBACK")
