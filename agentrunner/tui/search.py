"""Find in a trace (``/``, ``n``, ``N``): the nearest event, after or before a seq, whose text
contains a term. Runs in a thread worker.

An event matches by its kind, its payload or (a ``message`` event) its message's content.
A model call's streamed output matches by its *assembled* text, which no single chunk
holds ("integer division" streamed as " integer" and " division"): the message its
``model.response`` stored, or, for a stream that has no response (cancelled, or still
running), its chunks joined channel by channel. Such a match is placed on the stream's
first chunk, the row that shows it (a folded run).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence

from agentrunner.store import Segment, TraceStore

_MAX = 2**62
_ESC = "\\"


def _like(term: str) -> str:
    """``term`` as a LIKE pattern over JSON text (escaped as the store writes it)."""
    body = json.dumps(term, ensure_ascii=False)[1:-1]
    body = body.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{body}%"


def _bounds(seg: Segment, lo: int, hi: int) -> tuple[int, int]:
    return max(lo, seg.start), min(hi, seg.end if seg.end is not None else _MAX)


def _event(
    conn: sqlite3.Connection, seg: Segment, pattern: str, lo: int, hi: int, asc: bool
) -> int | None:
    row = conn.execute(
        "SELECT seq FROM events WHERE episode_id = ? AND seq BETWEEN ? AND ? AND ("
        f" kind LIKE ? ESCAPE '{_ESC}' OR payload LIKE ? ESCAPE '{_ESC}' OR (kind = 'message' AND"
        " json_extract(payload, '$.message_hash') IN"
        f" (SELECT hash FROM messages WHERE message LIKE ? ESCAPE '{_ESC}')))"
        f" ORDER BY seq {'ASC' if asc else 'DESC'} LIMIT 1",
        (seg.episode_id, lo, hi, pattern, pattern, pattern),
    ).fetchone()
    return None if row is None else int(row[0])


def _first_chunk(conn: sqlite3.Connection, episode_id: str, request_seq: int) -> int | None:
    row = conn.execute(
        "SELECT kind FROM events WHERE episode_id = ? AND seq = ?", (episode_id, request_seq + 1)
    ).fetchone()
    return request_seq + 1 if row is not None and row[0] == "model.chunk" else None


def _answered(
    conn: sqlite3.Connection, seg: Segment, pattern: str, lo: int, hi: int, asc: bool
) -> Iterator[int]:
    """Where the streams whose stored response message matches start, in search order."""
    rows = conn.execute(
        "SELECT seq, (SELECT max(q.seq) FROM events q WHERE q.episode_id = r.episode_id"
        " AND q.kind = 'model.request' AND q.seq < r.seq) FROM events r"
        " WHERE r.episode_id = ? AND r.kind = 'model.response' AND r.seq BETWEEN ? AND ?"
        " AND json_extract(r.payload, '$.message_hash') IN"
        f" (SELECT hash FROM messages WHERE message LIKE ? ESCAPE '{_ESC}')"
        f" ORDER BY r.seq {'ASC' if asc else 'DESC'}",
        (seg.episode_id, lo, hi, pattern),
    )
    for seq, request in rows:
        start = _first_chunk(conn, seg.episode_id, request) if request is not None else None
        yield start if start is not None and start < seq else seq


def _unanswered(
    conn: sqlite3.Connection, seg: Segment, term: str, lo: int, hi: int, asc: bool
) -> Iterator[int]:
    """Where the streams of the model calls made at seqs ``lo..hi`` that have no response
    (cancelled, or running) and whose joined chunks contain ``term`` start, in search order."""
    calls = conn.execute(
        "SELECT seq, call_id, next_request FROM (SELECT r.seq AS seq,"
        " json_extract(r.payload, '$.call_id') AS call_id,"
        " (SELECT min(n.seq) FROM events n WHERE n.episode_id = r.episode_id"
        "  AND n.kind = 'model.request' AND n.seq > r.seq) AS next_request,"
        " (SELECT min(n.seq) FROM events n WHERE n.episode_id = r.episode_id"
        "  AND n.kind = 'model.response' AND n.seq > r.seq) AS response"
        " FROM events r WHERE r.episode_id = ? AND r.kind = 'model.request'"
        " AND r.seq BETWEEN ? AND ?)"
        " WHERE response IS NULL OR response > next_request"
        f" ORDER BY seq {'ASC' if asc else 'DESC'}",
        (seg.episode_id, lo, hi),
    ).fetchall()
    needle = term.lower()
    for request, call_id, next_request in calls:
        end = min(next_request or _MAX, seg.end or _MAX)
        texts: dict[str, list[str]] = {}
        for channel, text in conn.execute(
            "SELECT json_extract(payload, '$.channel'), json_extract(payload, '$.text')"
            " FROM events WHERE episode_id = ? AND kind = 'model.chunk' AND seq > ? AND seq < ?"
            " AND json_extract(payload, '$.call_id') = ? ORDER BY seq",
            (seg.episode_id, request, end, call_id),
        ):
            texts.setdefault(str(channel), []).append(str(text or ""))
        if any(needle in "".join(parts).lower() for parts in texts.values()):
            yield request + 1


def _nearest(found: Iterator[int], seq: int, forward: bool) -> int | None:
    """The first location strictly past ``seq`` in the search direction."""
    for where in found:
        if (where > seq) if forward else (where < seq):
            return where
    return None


def _next_response(conn: sqlite3.Connection, seg: Segment, seq: int) -> int:
    row = conn.execute(
        "SELECT min(seq) FROM events WHERE episode_id = ? AND kind = 'model.response' AND seq >= ?",
        (seg.episode_id, seq),
    ).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else seq


def find(
    store: TraceStore, segments: Sequence[Segment], term: str, seq: int, forward: bool
) -> int | None:
    """The nearest match after (or before) ``seq`` (case-insensitive for ASCII): an event,
    or the first chunk of a stream whose assembled text contains ``term``."""
    conn = store.conn
    pattern = _like(term)
    for seg in segments if forward else list(reversed(segments)):
        if forward:
            lo, hi = _bounds(seg, seq + 1, _MAX)
            if lo > hi:
                continue
            found = [
                _event(conn, seg, pattern, lo, hi, True),
                # the stream around ``seq`` has its response after it: skipped by _nearest
                _nearest(_answered(conn, seg, pattern, lo, hi, True), seq, True),
                _nearest(_unanswered(conn, seg, term, max(seq, lo - 1), hi, True), seq, True),
            ]
        else:
            lo, hi = _bounds(seg, 1, seq - 1)
            if lo > hi:
                continue
            # the response of a stream that starts before ``seq`` may come after it
            around = _bounds(seg, 1, _next_response(conn, seg, seq))[1]
            found = [
                _event(conn, seg, pattern, lo, hi, False),
                _nearest(_answered(conn, seg, pattern, lo, around, False), seq, False),
                _nearest(_unanswered(conn, seg, term, lo, seq - 2, False), seq, False),
            ]
        hits = [f for f in found if f is not None]
        if hits:
            return min(hits) if forward else max(hits)
    return None
