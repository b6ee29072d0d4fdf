"""Store reads behind the trace screen (and the short ids every screen shows). Each function
runs inside a thread worker, on that thread's own connection (``TraceStore`` keeps one per
thread), and never loads a whole episode: pages are read by ``seq`` (keyset) and lookups go
through the store's indexes.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from agentrunner.events import EVENT_KINDS
from agentrunner.formatting import unique_prefixes
from agentrunner.store import EpisodeSummary, EventRow, Segment, TraceStore
from agentrunner.tui.format import one_line
from agentrunner.tui.rows import RowInfo, summarize

PAGE = 256  # events per cached page of the trace list
POLL_BATCH = 2000  # live events read per poll
NONCHUNK_KINDS = tuple(k for k in EVENT_KINDS if k != "model.chunk")
_COLS = "episode_id, seq, attempt, turn, kind, ts, payload"
_MAX = 2**62


def id_prefixes(store: TraceStore, wanted: Iterable[str] | None = None) -> dict[str, str]:
    """The shortest prefix (at least 8 characters) of each ``wanted`` episode id (default:
    every one) that no other episode of the store shares. Episodes made in the same
    millisecond share their first 10 characters: those get a few more."""
    ids = store.episode_ids()  # sorted
    if wanted is None:
        return unique_prefixes(ids, minimum=8)
    out: dict[str, str] = {}
    for episode_id in set(wanted):
        i = bisect_left(ids, episode_id)
        around = ids[max(0, i - 1) : i + 2]  # its neighbours in sort order decide
        out[episode_id] = unique_prefixes([*around, episode_id], minimum=8)[episode_id]
    return out


@dataclass(frozen=True)
class TraceData:
    """Everything the trace list needs to lay itself out, read in one snapshot."""

    episode_id: str
    segments: list[Segment]
    nonchunk: array  # seqs of every event that is not a streamed chunk, ascending
    last_seq: int
    prefixes: dict[str, str]  # short ids of the episode and its ancestors


def _bounds(seg: Segment, lo: int = 1, hi: int = _MAX) -> tuple[int, int]:
    return max(lo, seg.start), min(hi, seg.end if seg.end is not None else _MAX)


def nonchunk_seqs(conn: sqlite3.Connection, segments: Sequence[Segment]) -> array:
    """Seqs of all non-chunk events, from the ``(episode_id, kind, seq)`` index only."""
    runs: list[list[int]] = []
    for seg in segments:
        lo, hi = _bounds(seg)
        for kind in NONCHUNK_KINDS:
            rows = conn.execute(
                "SELECT seq FROM events WHERE episode_id = ? AND kind = ? AND seq BETWEEN ? AND ?"
                " ORDER BY seq",
                (seg.episode_id, kind, lo, hi),
            ).fetchall()
            if rows:
                runs.append([r[0] for r in rows])
    return array("q", heapq.merge(*runs))


def open_trace(store: TraceStore, id_or_prefix: str) -> TraceData:
    """The episode's segments and row layout, from one read snapshot. (Its summary, which
    can cost a scan of a long unfinished episode, is read separately: see ``summary``.)"""
    conn = store.conn
    conn.execute("BEGIN")
    try:
        episode_id = store.resolve(id_or_prefix)
        segments = store.segments(episode_id)
        seqs = nonchunk_seqs(conn, segments)
        own = segments[-1]
        (last,) = conn.execute(
            "SELECT max(seq) FROM events WHERE episode_id = ?", (own.episode_id,)
        ).fetchone()
        prefixes = id_prefixes(store, [seg.episode_id for seg in segments])
    finally:
        conn.execute("COMMIT")
    last_seq = last if last is not None else own.start - 1
    return TraceData(episode_id, segments, seqs, last_seq, prefixes)


def summary(store: TraceStore, episode_id: str) -> EpisodeSummary:
    """The episode with its derived status and totals."""
    return store.episode(episode_id)


def message_previews(store: TraceStore, hashes: Iterable[str]) -> dict[str, str]:
    """First line(s) of the given messages' content, by hash."""
    wanted = sorted(set(hashes))
    out: dict[str, str] = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i : i + 500]
        rows = store.conn.execute(
            f"SELECT hash, message FROM messages WHERE hash IN ({','.join('?' * len(part))})",
            part,
        ).fetchall()
        for digest, text in rows:
            message = json.loads(text)
            out[digest] = one_line(str(message.get("content", "")), 200)
    return out


def to_rows(store: TraceStore, events: list[EventRow]) -> list[RowInfo]:
    hashes = [e.payload.get("message_hash", "") for e in events if e.kind == "message"]
    previews = message_previews(store, hashes) if hashes else {}
    return [
        summarize(e, previews.get(e.payload.get("message_hash", "")) if previews else None)
        for e in events
    ]


def load_pages(
    store: TraceStore, episode_id: str, segments: Sequence[Segment], pages: Iterable[int]
) -> dict[int, list[RowInfo]]:
    """Pages of rows (page ``p`` holds seqs ``p*PAGE+1 .. (p+1)*PAGE``), read by keyset;
    consecutive pages are read with one query."""
    out: dict[int, list[RowInfo]] = {}
    ordered = sorted(set(pages))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        first, count = ordered[i], j - i + 1
        events = store.events(
            episode_id, after_seq=first * PAGE, limit=count * PAGE, segments=segments
        )
        rows = to_rows(store, events)
        for p in range(first, first + count):
            out[p] = [r for r in rows if (r.seq - 1) // PAGE == p]
        i = j + 1
    return out


@dataclass(frozen=True)
class PollResult:
    rows: list[RowInfo]
    summary: EpisodeSummary | None


def poll(
    store: TraceStore,
    episode_id: str,
    segments: Sequence[Segment],
    after_seq: int,
    *,
    with_summary: bool,
) -> PollResult:
    """Events appended after ``after_seq`` (one batch), and the summary when asked for."""
    events = store.events(episode_id, after_seq=after_seq, limit=POLL_BATCH, segments=segments)
    return PollResult(to_rows(store, events), store.episode(episode_id) if with_summary else None)


EDITED_TURN = "message/edit"
"""For ``next_of_kinds``: a fork's edited turn (a ``message`` event with reason ``edit``)."""


def next_of_kinds(
    store: TraceStore, segments: Sequence[Segment], kinds: Sequence[str], seq: int, forward: bool
) -> int | None:
    """The nearest seq after (or before) ``seq`` whose kind is one of ``kinds`` (or, for
    ``EDITED_TURN``, that is an edited turn)."""
    best: int | None = None
    order = "ASC" if forward else "DESC"
    for seg in segments if forward else list(reversed(segments)):
        lo, hi = _bounds(seg, seq + 1, _MAX) if forward else _bounds(seg, 1, seq - 1)
        if lo > hi:
            continue
        for kind in kinds:
            edits = kind == EDITED_TURN
            row = store.conn.execute(
                "SELECT seq FROM events WHERE episode_id = ? AND kind = ? AND seq BETWEEN ? AND ?"
                + (" AND json_extract(payload, '$.reason') = 'edit'" if edits else "")
                + f" ORDER BY seq {order} LIMIT 1",
                (seg.episode_id, "message" if edits else kind, lo, hi),
            ).fetchone()
            if row is not None and (best is None or (row[0] < best if forward else row[0] > best)):
                best = row[0]
        if best is not None:
            return best
    return best
