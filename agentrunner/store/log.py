"""The store's log and its content: events read by seq (keyset pages, never a whole episode),
content-addressed messages and tool sets, the exact request of a turn, and workspace
snapshot blobs. Appends go through :class:`~agentrunner.store.writer.EpisodeWriter`.
"""

from __future__ import annotations

import contextlib
import json
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agentrunner.store import blobs, eventlog, lookups, search
from agentrunner.store.base import utc_now
from agentrunner.store.lineage import LineageStore
from agentrunner.store.records import EventRow, ModelInput, Segment
from agentrunner.values.critical import critical
from agentrunner.values.errors import (
    EpisodeNotFoundError,
    StoreCorruptError,
    StoreDriverError,
    StoreError,
    StoreFailedError,
)
from agentrunner.values.hashing import message_hash, message_json, tools_hash, tools_json

if TYPE_CHECKING:  # pydantic: imported by the readers of messages and tools
    from agentrunner.values.types import Message, ToolSpec

_T = TypeVar("_T")


class LogStore(LineageStore):
    """The append-only log read back: events by seq, messages and tool sets by hash, the
    exact request of a turn, and the workspace snapshots' content."""

    def put_message(self, parent_hash: str | None, message: Message) -> str:
        """Store a message once (content-addressed); return its hash, the chain's new tip."""
        text = message_json(message)
        digest = message_hash(parent_hash, text)
        with critical:
            self._conn.execute(
                self.sql.keep_flushed(
                    "INSERT INTO messages (hash, parent_hash, message) VALUES (?, ?, ?)"
                ),
                (digest, parent_hash, text),
            )
        return digest

    def put_tools(self, tools: Sequence[ToolSpec]) -> str:
        text = tools_json(tools)
        digest = tools_hash(text)
        with critical:
            self._conn.execute(
                self.sql.keep_flushed("INSERT INTO tools (hash, tools) VALUES (?, ?)"),
                (digest, text),
            )
        return digest

    def events(
        self,
        episode_id: str,
        *,
        after_seq: int = 0,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]:
        """One page of an episode's full history (inherited events included), by seq."""
        out: list[EventRow] = []
        kind_sql, kind_args = eventlog.kinds_sql(kinds) if kinds else ("", ())
        for seg in segments if segments is not None else self.segments(episode_id):
            if len(out) >= limit:
                break
            if seg.end is not None and seg.end <= after_seq:
                continue
            lo, hi = eventlog.span(seg.key, max(after_seq + 1, seg.start), seg.end)
            rows = self._conn.execute(
                f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{kind_sql}"
                " ORDER BY id LIMIT ?",
                (lo, hi, *kind_args, limit - len(out)),
            ).fetchall()
            out.extend(eventlog.to_row(seg.episode_id, r) for r in rows)
        return out

    def iter_events(self, episode_id: str, *, page: int = 2000, **kw: Any) -> Iterator[EventRow]:
        """Every event of an episode, paged."""
        after = 0
        segs = self.segments(episode_id)
        while True:
            batch = self.events(episode_id, after_seq=after, limit=page, segments=segs, **kw)
            yield from batch
            if len(batch) < page:
                return
            after = batch[-1].seq

    def last_events(self, episode_id: str, n: int = 50) -> list[EventRow]:
        """The last ``n`` events of an episode's own rows, in seq order (for tails)."""
        rows = self._conn.execute(
            f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?"
            " ORDER BY id DESC LIMIT ?",
            (*eventlog.span(self._key(episode_id)), n),
        ).fetchall()
        return [eventlog.to_row(episode_id, r) for r in reversed(rows)]

    def has_own_event(self, episode_id: str, kind: str) -> bool:
        """Whether the episode's own rows (not inherited ones) hold an event of ``kind``."""
        clause, codes = eventlog.kinds_sql([kind])
        row = self._conn.execute(
            f"SELECT 1 FROM event_log WHERE id BETWEEN ? AND ?{clause} LIMIT 1",
            (*eventlog.span(self._key(episode_id)), *codes),
        ).fetchone()
        return row is not None

    def last_of_kind(self, episode_id: str, kind: str) -> EventRow | None:
        """The episode's own last event of ``kind`` (not an inherited one), or None."""
        clause, codes = eventlog.kinds_sql([kind])
        row = self._conn.execute(
            f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{clause}"
            " ORDER BY id DESC LIMIT 1",
            (*eventlog.span(self._key(episode_id)), *codes),
        ).fetchone()
        return None if row is None else eventlog.to_row(episode_id, row)

    def count_chunks(self, episode_id: str, call_id: str) -> int:
        """How many chunks the episode's own rows hold for model call ``call_id``."""
        row = self._conn.execute(
            f"SELECT count(*) FROM event_log WHERE id BETWEEN ? AND ? AND kind = {eventlog.CHUNK}"
            f" AND {self.sql.text('payload', 'call_id')} = ?",
            (*eventlog.span(self._key(episode_id)), call_id),
        ).fetchone()
        return int(row[0])

    def message_chain(self, tip_hash: str | None) -> list[Message]:
        """The messages of a chain, root first, ending at ``tip_hash``."""
        from agentrunner.values.types import Message

        if tip_hash is None:
            return []
        rows = self._conn.execute(
            "WITH RECURSIVE chain(hash, parent_hash, message, depth) AS ("
            " SELECT hash, parent_hash, message, 0 FROM messages WHERE hash = ?"
            " UNION ALL SELECT m.hash, m.parent_hash, m.message, c.depth + 1"
            " FROM messages m JOIN chain c ON m.hash = c.parent_hash)"
            " SELECT message FROM chain ORDER BY depth DESC",
            (tip_hash,),
        ).fetchall()
        if not rows:
            raise StoreError(f"message {tip_hash[:12]} is missing from {self.where}")
        return [Message.model_validate_json(r[0]) for r in rows]

    def message(self, message_hash_: str) -> Message:
        from agentrunner.values.types import Message

        row = self._conn.execute(
            "SELECT message FROM messages WHERE hash = ?", (message_hash_,)
        ).fetchone()
        if row is None:
            raise StoreError(f"message {message_hash_[:12]} is missing from {self.where}")
        return Message.model_validate_json(row[0])

    def message_json(self, message_hash_: str) -> dict[str, Any]:
        """A stored message as its JSON object, not validated (a reader that shows a plain
        message needs no model for it); StoreError when it is missing."""
        row = self._conn.execute(
            "SELECT message FROM messages WHERE hash = ?", (message_hash_,)
        ).fetchone()
        if row is None:
            raise StoreError(f"message {message_hash_[:12]} is missing from {self.where}")
        data = json.loads(row[0])
        if not isinstance(data, dict):
            raise StoreError(f"message {message_hash_[:12]} in {self.where} is not an object")
        return data

    def tools(self, tools_hash_: str) -> list[ToolSpec]:
        from agentrunner.values.types import ToolSpec

        row = self._conn.execute(
            "SELECT tools FROM tools WHERE hash = ?", (tools_hash_,)
        ).fetchone()
        if row is None:
            raise StoreError(f"tool set {tools_hash_[:12]} is missing from {self.where}")
        return [ToolSpec.model_validate(t) for t in json.loads(row[0])]

    def last_at_turn(self, episode_id: str, kind: str, turn: int) -> EventRow | None:
        """The last event of ``kind`` at model turn ``turn`` in the episode's full history."""
        found: EventRow | None = None
        clause, codes = eventlog.kinds_sql([kind])
        for seg in self.segments(episode_id):
            row = self._conn.execute(
                f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{clause}"
                " AND turn = ? ORDER BY id DESC LIMIT 1",
                (*eventlog.span(seg.key, seg.start, seg.end), *codes, turn),
            ).fetchone()
            if row is not None:
                found = eventlog.to_row(seg.episode_id, row)
        return found

    def reconstruct_request(self, episode_id: str, turn: int) -> ModelInput:
        """The exact input the model received at ``turn`` (its last request at that turn)."""
        episode_id = self.resolve(episode_id)
        row = self.last_at_turn(episode_id, "model.request", turn)
        if row is None:
            raise EpisodeNotFoundError(f"episode {episode_id} has no model request at turn {turn}")
        request = row.payload
        return ModelInput(
            messages=self.message_chain(request["tip_hash"]),
            tools=self.tools(request["tools_hash"]),
            params=request.get("params", {}),
            provider=request.get("provider", ""),
            model=request.get("model", ""),
            tip_hash=request["tip_hash"],
        )

    def read_snapshot(self) -> contextlib.AbstractContextManager[None]:
        """Reads inside the ``with`` block see one state of the store."""
        return lookups.read_snapshot(self)

    def events_before(
        self,
        episode_id: str,
        before_seq: int | None = None,
        *,
        limit: int = 1000,
        kinds: Sequence[str] | None = None,
        segments: Sequence[Segment] | None = None,
    ) -> list[EventRow]:
        """One page of an episode's full history before ``before_seq`` (None: up to its
        end), newest first: :meth:`events` read backwards."""
        return lookups.events_before(self, episode_id, before_seq, limit, kinds, segments)

    def nonchunk_seqs(self, segments: Sequence[Segment]) -> array:
        """Seqs of a history's events that are not streamed chunks, ascending (index only)."""
        return lookups.nonchunk_seqs(self, segments)

    def last_seq(self, segments: Sequence[Segment]) -> int:
        """The last seq of a history: its own last event's, else its fork point."""
        return lookups.last_seq(self, segments)

    def find(
        self, segments: Sequence[Segment], term: str, seq: int, *, forward: bool
    ) -> int | None:
        """The seq of the nearest match of ``term`` after (or before) ``seq`` in a history
        (an event, or the first chunk of a stream whose text matches; see store/search.py)."""
        return search.find(self._conn, self.sql, segments, term, seq, forward)

    def messages(self, hashes: Iterable[str]) -> dict[str, Message]:
        """The stored messages with these hashes, by hash (missing ones left out)."""
        return lookups.messages_by_hash(self, hashes)

    def message_parent(self, message_hash_: str) -> str | None:
        """The hash of the message before this one in its chain (None: a root, or unknown)."""
        return lookups.message_parent(self, message_hash_)

    def missing_blobs(self, hashes: Collection[str]) -> set[str]:
        return self._translated(lambda: blobs.missing_blobs(self._conn, hashes))

    def put_blobs(self, items: Iterable[tuple[str, Iterable[bytes]]]) -> int:
        """Store workspace file contents by sha256 (skipping those already present)."""
        return self._translated(lambda: blobs.put_blobs(self._conn, self.sql, items))

    def read_blob(self, digest: str) -> bytes:
        return self._translated(lambda: blobs.read_blob(self._conn, digest))

    def put_snapshot(
        self,
        snapshot_id: str,
        parent_id: str | None,
        depth: int,
        changes: str,
        files: int,
        size: int,
    ) -> None:
        self._translated(
            lambda: blobs.put_snapshot(
                self._conn,
                self.sql,
                snapshot_id,
                parent_id,
                depth,
                changes,
                files,
                size,
                utc_now(),
            )
        )

    def snapshot_changes(self, snapshot_id: str) -> list[str] | None:
        return self._translated(lambda: blobs.snapshot_changes(self._conn, snapshot_id))

    def _translated(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StoreFailedError as exc:
            raise StoreError(f"{self.where}: workspace snapshot: {exc}") from None
        except StoreDriverError as exc:
            raise StoreCorruptError(f"{self.where}: workspace snapshot: {exc}") from None
