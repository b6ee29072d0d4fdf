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

A store whose server is out of reach for a while (restarting, a network blip) is waited out
(:mod:`agentrunner.store.postgres_pool`), and the writer makes sure its log came through it
whole: an insert whose reply was lost with its connection but which committed is found when
tried again (the same attempt wrote the same row at that seq: it stands); a transaction cut
short is run again unless it committed; and a row following chunks not yet flushed (which a
crash of the server loses) is inserted only if the chunk before it is there: when it is not,
the lost chunks are written again first, so the seqs never have a gap, not even for a
moment.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agentrunner.store import control, eventlog
from agentrunner.store.dialect import DURABLE, SQLITE, TRANSACTION_TRIES, Conn, Dialect
from agentrunner.store.eventlog import KIND_CODE, now_us
from agentrunner.values.critical import critical
from agentrunner.values.errors import (
    StoreDriverError,
    StoreError,
    StoreFailedError,
    StoreRefusedError,
    StoreUnreachableError,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

_NO_KIND = {"kind"}
_CHUNK = "model.chunk"
Row = tuple[int, int, int, int, int, str]


class _Mended(Exception):
    """A transaction of events gave way to writing again the chunks before it (lost with the
    server): it runs again."""


_SELECT_ROW = "INSERT INTO event_log (id, attempt, turn, kind, ts, payload) SELECT ?, ?, ?, ?, ?, ?"


def _inserts(sql: Dialect, *, durable: bool, guarded: bool = False) -> tuple[str, str]:
    """The plain insert and the insert of a leased writer, which adds the row only while the
    control row still holds the writer's token (Postgres: locking that row against a takeover
    until the commit). ``durable`` (Postgres): both commit with ``synchronous_commit`` on.
    ``guarded`` (Postgres): both add the row only if the row before it (its id minus one,
    the last parameter) is there."""
    fence = (
        f"EXISTS (SELECT 1 FROM control WHERE episode_id = ? AND lease_token = ?{sql.share_lock})"
    )
    if not sql.postgres:
        return eventlog.INSERT, f"{_SELECT_ROW} WHERE {fence}"
    tail = (f" AND {DURABLE} = 'on'" if durable else "") + (
        " AND EXISTS (SELECT 1 FROM event_log WHERE id = ?)" if guarded else ""
    )
    return f"{_SELECT_ROW} WHERE true{tail}", f"{_SELECT_ROW} WHERE {fence}{tail}"


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
        self._unflushed: list[Row] = []
        """Chunks committed since the last flushed event (Postgres: ``synchronous_commit``
        off), which a crash of the server may have lost."""
        self._track = sql.postgres
        self._leases = leases if leases is not None else {}
        """The store's leases: while the store holds one of this writer's episode, every
        append is fenced by its token."""
        self._sql = {
            (chunk, guarded): _inserts(sql, durable=not chunk, guarded=guarded)
            for chunk in (False, True)
            for guarded in (False, True)
        }
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
        chunk = kind == _CHUNK
        if not self._insert(row, kind, chunk=chunk):
            self._lose()
        if self._track:
            if chunk:
                self._unflushed.append(row)
            else:
                self._unflushed.clear()
        self.next_seq = seq + 1
        return seq

    def _insert(self, row: Row, kind: str, *, chunk: bool, mend: bool = True) -> bool:
        """Insert ``row`` (fenced while the store holds the lease, and after unflushed chunks
        only if the row before it is there); False when the fence refused it. Its lost
        predecessors are written again first (``mend``). A row refused as already there
        stands when this attempt wrote it (its commit's reply was lost with the connection,
        and the insert was tried again)."""
        token = self._leases.get(self.episode_id)
        guarded = bool(self._unflushed) and row[0] - 1 == self._unflushed[-1][0]
        plain, fenced = self._sql[(chunk, guarded)]
        sql, params = (plain, row) if token is None else (fenced, (*row, self.episode_id, token))
        if guarded:
            params = (*params, row[0] - 1)
        try:
            cur = self._conn.execute(sql, params)
            if not cur.rowcount and guarded and mend and self._rewrite_lost_chunks():
                cur = self._conn.execute(sql, params)  # its predecessors are back
        except StoreRefusedError as exc:
            if self._landed(row):
                return True
            raise StoreError(
                f"cannot record {kind} as seq {row[0] - self._base} of {self.episode_id}: {exc}"
                " (is another run writing this episode?)"
            ) from None
        except StoreFailedError as exc:
            raise StoreError(f"cannot record {kind} of {self.episode_id}: {exc}") from None
        return bool(cur.rowcount)

    def _landed(self, row: Row) -> bool:
        """Whether the log holds ``row`` as this attempt wrote it (time aside)."""
        found = self._conn.execute(
            "SELECT attempt, turn, kind, payload FROM event_log WHERE id = ?", (row[0],)
        ).fetchone()
        return found is not None and tuple(found) == (row[1], row[2], row[3], row[5])

    def _rewrite_lost_chunks(self) -> bool:
        """Write again the unflushed chunks the server lost in a crash (a suffix of them: its
        log is flushed in order); whether any was missing."""
        first, last = self._unflushed[0][0], self._unflushed[-1][0]
        have = {
            int(r[0])
            for r in self._conn.execute(
                "SELECT id FROM event_log WHERE id >= ? AND id <= ?", (first, last)
            ).fetchall()
        }
        lost = [row for row in self._unflushed if row[0] not in have]
        kept = [row for row in self._unflushed if row[0] in have]
        self._unflushed = kept
        for row in lost:
            if not self._insert(row, _CHUNK, chunk=True, mend=False):
                self._lose()
            self._unflushed.append(row)
        return bool(lost)

    def _lose(self) -> None:
        error = control.lease_lost(self.episode_id, self._conn)
        self.lost = str(error)
        raise error

    def append_together(self, turn: int, payloads: Sequence[BaseModel]) -> list[int]:
        """Commit events that belong together (a response and its usage) in one transaction:
        all or none; return their seqs."""
        if self.lost is not None:
            raise StoreError(self.lost)
        rows: list[Row] = []
        kinds = []
        seq = self.next_seq
        for payload in payloads:
            kind = payload.kind  # type: ignore[attr-defined]
            body = payload.model_dump_json(exclude={"kind"})
            rows.append((self._base | seq, self.attempt, turn, KIND_CODE[kind], self.clock(), body))
            kinds.append(kind)
            seq += 1
        with critical:
            for tries in range(1, TRANSACTION_TRIES + 1):
                try:
                    self._insert_together(rows, kinds[0])
                    break
                except _Mended:
                    continue
                except StoreUnreachableError:
                    if self._landed(rows[0]):  # the COMMIT went through; its reply did not
                        break
                    if tries == TRANSACTION_TRIES:
                        raise
            else:
                raise StoreError(
                    f"cannot record {kinds[0]} of {self.episode_id}: its store's server kept"
                    f" losing what was written before it ({TRANSACTION_TRIES} tries)"
                )
            first = self.next_seq
            self.next_seq = seq
            self._unflushed.clear()
        return list(range(first, seq))

    def _insert_together(self, rows: list[Row], kind: str) -> None:
        """One transaction of ``rows``, fenced by the lease (see :meth:`append_together`)."""
        try:
            self._conn.execute(self._begin)
            if self._durable is not None:
                self._conn.execute(self._durable)
            token = self._leases.get(self.episode_id)
            if (
                token is not None
                and not self._conn.execute(
                    "SELECT 1 FROM control WHERE episode_id = ? AND lease_token = ?" + self._lock,
                    (self.episode_id, token),
                ).fetchone()
            ):
                self._rollback()
                self._lose()
            if (
                self._unflushed
                and not self._conn.execute(
                    "SELECT 1 FROM event_log WHERE id = ?", (self._unflushed[-1][0],)
                ).fetchone()
            ):
                self._rollback()  # chunks before them were lost with the server
                self._rewrite_lost_chunks()
                raise _Mended
            self._conn.executemany(eventlog.INSERT, rows)
            self._conn.execute("COMMIT")
        except StoreRefusedError as exc:
            self._rollback()
            raise StoreError(
                f"cannot record {kind} as seq {self.next_seq} of {self.episode_id}: {exc}"
                " (is another run writing this episode?)"
            ) from None
        except StoreUnreachableError:
            self._rollback()
            raise
        except StoreFailedError as exc:
            self._rollback()
            raise StoreError(f"cannot record {kind} of {self.episode_id}: {exc}") from None

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(StoreDriverError):
                self._conn.execute("ROLLBACK")
