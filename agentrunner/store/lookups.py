"""Named reads for the store's readers (TUI, export): an episode's history read backwards,
the seqs of its non-chunk events, its last seq, messages by hash, forks, batches, proposals.

Event reads go to the physical ``event_log`` by primary-key range (``eventlog.span``), one
segment of the fork lineage at a time, and say ``kind <> chunk`` wherever they want the
partial kind index: finding a million-event episode's few thousand requests, calls and
results reads that index, never the chunks.
"""

from __future__ import annotations

import heapq
import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentrunner.store import eventlog
from agentrunner.store.records import EventRow, Segment

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase
    from agentrunner.values.types import Message

_NONCHUNK_CODES = tuple(code for code in eventlog.KIND_NAME if code != eventlog.CHUNK)
_BATCH = 500  # hashes per IN (...) query


@contextmanager
def read_snapshot(store: StoreBase) -> Iterator[None]:
    """Reads inside see one state of the store (a read transaction on this thread's
    connection): a layout read in parts cannot mix two states of a live episode."""
    conn = store._conn
    conn.execute(store.sql.begin_read)
    try:
        yield
    finally:
        conn.execute("COMMIT")


def events_before(
    store: StoreBase,
    episode_id: str,
    before_seq: int | None,
    limit: int,
    kinds: Sequence[str] | None,
    segments: Sequence[Segment] | None,
) -> list[EventRow]:
    """Up to ``limit`` events of the episode's full history with a seq below ``before_seq``
    (None: all of them), newest first."""
    out: list[EventRow] = []
    kind_sql, kind_args = eventlog.kinds_sql(kinds) if kinds else ("", ())
    for seg in reversed(segments if segments is not None else store.segments(episode_id)):
        if len(out) >= limit:
            break
        end = seg.end
        if before_seq is not None:
            end = before_seq - 1 if end is None else min(end, before_seq - 1)
        if end is not None and end < seg.start:
            continue
        lo, hi = eventlog.span(seg.key, seg.start, end)
        rows = store._conn.execute(
            f"SELECT {eventlog.COLUMNS} FROM event_log WHERE id BETWEEN ? AND ?{kind_sql}"
            " ORDER BY id DESC LIMIT ?",
            (lo, hi, *kind_args, limit - len(out)),
        ).fetchall()
        out.extend(eventlog.to_row(seg.episode_id, r) for r in rows)
    return out


def nonchunk_seqs(store: StoreBase, segments: Sequence[Segment]) -> array:
    """Seqs of every event of the history that is not a streamed chunk, ascending: read
    from the partial kind index alone, one kind at a time, then merged."""
    runs: list[list[int]] = []
    for seg in segments:
        lo, hi = eventlog.span(seg.key, seg.start, seg.end)
        for code in _NONCHUNK_CODES:
            rows = store._conn.execute(
                f"SELECT id FROM event_log WHERE kind = ? AND {eventlog.NOT_CHUNK}"
                " AND id BETWEEN ? AND ? ORDER BY id",
                (code, lo, hi),
            ).fetchall()
            if rows:
                runs.append([r[0] & eventlog.SEQ_MASK for r in rows])
    return array("q", heapq.merge(*runs))


def last_seq(store: StoreBase, segments: Sequence[Segment]) -> int:
    """The last seq of the history these segments make: the episode's own last event, or
    its fork point while it has none."""
    own = segments[-1]
    (last,) = store._conn.execute(
        "SELECT max(id) FROM event_log WHERE id BETWEEN ? AND ?", eventlog.span(own.key)
    ).fetchone()
    return own.start - 1 if last is None else int(last) & eventlog.SEQ_MASK


def messages_by_hash(store: StoreBase, hashes: Iterable[str]) -> dict[str, Message]:
    """The stored messages with these hashes (those missing are left out)."""
    from agentrunner.values.types import Message  # pydantic: loaded by the readers of messages

    wanted = sorted(set(hashes))
    out: dict[str, Message] = {}
    for i in range(0, len(wanted), _BATCH):
        part = wanted[i : i + _BATCH]
        rows = store._conn.execute(
            f"SELECT hash, message FROM messages WHERE hash IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
        for digest, text in rows:
            out[digest] = Message.model_validate_json(text)
    return out


def message_parent(store: StoreBase, message_hash: str) -> str | None:
    """The hash of the message before this one in its chain (None: a root, or unknown)."""
    row = store._conn.execute(
        "SELECT parent_hash FROM messages WHERE hash = ?", (message_hash,)
    ).fetchone()
    return None if row is None else row[0]


def forks(store: StoreBase) -> list[tuple[str, str, int]]:
    """Every fork in the store, by id: ``(episode_id, parent_episode_id, fork_seq)``."""
    rows = store._conn.execute(
        "SELECT id, parent_episode_id, fork_seq FROM episodes"
        " WHERE parent_episode_id IS NOT NULL ORDER BY id"
    )
    return [(r[0], r[1], r[2]) for r in rows]


def spawned(store: StoreBase) -> list[tuple[str, str, str | None]]:
    """Every sub-agent episode in the store: ``(episode_id, parent episode id, the parent's
    tool call that started it)``, from ``env.spawned_by`` (recorded and imported agents)."""
    field = store.sql.text("env", "spawned_by")
    rows = store._conn.execute(
        f"SELECT id, {field} FROM episodes WHERE {field} IS NOT NULL ORDER BY id"
    )
    out: list[tuple[str, str, str | None]] = []
    for episode_id, text in rows:
        link = json.loads(text) if isinstance(text, str) else None
        parent = link.get("episode_id") if isinstance(link, dict) else None
        if isinstance(parent, str) and parent:
            call = link.get("call_id")  # type: ignore[union-attr]
            out.append((episode_id, parent, call if isinstance(call, str) else None))
    return out


def batches_of(store: StoreBase, episode_ids: Iterable[str]) -> list[str]:
    """The ids of the batches these episodes belong to, sorted."""
    ids = list(episode_ids)
    marks = ", ".join("?" for _ in ids)
    rows = store._conn.execute(
        f"SELECT DISTINCT batch_id FROM batch_members WHERE episode_id IN ({marks})"
        " ORDER BY batch_id",
        ids,
    )
    return [r[0] for r in rows]


def proposal_forks(store: StoreBase) -> set[str]:
    """The fan-out forks that only proposed a candidate (one re-sampled turn)."""
    rows = store._conn.execute("SELECT episode_id FROM fork_group_members WHERE sample < 0")
    return {r[0] for r in rows}
