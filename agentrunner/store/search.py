"""Find in an episode's history (the TUI's ``/``, ``n``, ``N``): the nearest event, after or
before a seq, whose text contains a term.

An event matches by its kind, its payload or (a ``message`` event) its message's content.
A model call's streamed output matches by its *assembled* text, which no single chunk
holds ("integer division" streamed as " integer" and " division"): the message its
``model.response`` stored, or, for a stream that has no response (cancelled, or still
running), its chunks joined channel by channel. Such a match is placed on the stream's
first chunk, the row that shows it (a folded run).

Reads ``event_log`` by primary-key range, one segment of the fork lineage at a time;
requests and responses are found through the partial kind index. Matching is
case-insensitive (for ASCII at least: SQLite's ``LIKE``, Postgres' ``ILIKE``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from agentrunner.store import eventlog
from agentrunner.store.dialect import Conn, Dialect
from agentrunner.store.records import Segment

_MAX = 2**62
_ESC = "\\"
_REQUEST = eventlog.KIND_CODE["model.request"]
_RESPONSE = eventlog.KIND_CODE["model.response"]
_MESSAGE = eventlog.KIND_CODE["message"]
_INDEXED = eventlog.NOT_CHUNK  # said with each kind test, so SQLite uses the kind index
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _like(term: str) -> str:
    """``term`` as a LIKE pattern over JSON text (escaped as the store writes it)."""
    body = json.dumps(term, ensure_ascii=False)[1:-1]
    body = body.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{body}%"


def _kinds_named(term: str) -> tuple[int, ...]:
    """Codes of the kinds whose name contains ``term`` (as ``kind LIKE`` matched names)."""
    needle = json.dumps(term, ensure_ascii=False)[1:-1].translate(_ASCII_LOWER)
    return tuple(c for k, c in eventlog.KIND_CODE.items() if needle in k)


def _bounds(seg: Segment, lo: int, hi: int) -> tuple[int, int]:
    return max(lo, seg.start), min(hi, seg.end if seg.end is not None else _MAX)


def _ids(seg: Segment, lo: int, hi: int) -> tuple[int, int]:
    """Primary keys of the segment's seqs ``lo..hi`` (clamped to what a seq can be)."""
    return eventlog.span(seg.key, max(lo, 0), min(hi, eventlog.SEQ_MASK))


def _seq(row_id: int) -> int:
    return row_id & eventlog.SEQ_MASK


class _Finder:
    """One search (one term) on one connection."""

    def __init__(self, conn: Conn, sql: Dialect, term: str) -> None:
        self.conn = conn
        self.sql = sql
        self.like = sql.like
        self.term = term
        self.pattern = _like(term)
        self.kinds = _kinds_named(term)

    def event(self, seg: Segment, lo: int, hi: int, asc: bool) -> int | None:
        by_kind = f"kind IN ({', '.join(map(str, self.kinds))}) OR " if self.kinds else ""
        row = self.conn.execute(
            f"SELECT id FROM event_log WHERE id BETWEEN ? AND ? AND ({by_kind}"
            f" payload {self.like} ? ESCAPE '{_ESC}' OR (kind = {_MESSAGE} AND"
            f" {self.sql.text('payload', 'message_hash')} IN"
            f" (SELECT hash FROM messages WHERE message {self.like} ? ESCAPE '{_ESC}')))"
            f" ORDER BY id {'ASC' if asc else 'DESC'} LIMIT 1",
            (*_ids(seg, lo, hi), self.pattern, self.pattern),
        ).fetchone()
        return None if row is None else _seq(row[0])

    def _first_chunk(self, seg: Segment, request_seq: int) -> int | None:
        row = self.conn.execute(
            "SELECT kind FROM event_log WHERE id = ?",
            (eventlog.row_id(seg.key, request_seq + 1),),
        ).fetchone()
        return request_seq + 1 if row is not None and row[0] == eventlog.CHUNK else None

    def answered(self, seg: Segment, lo: int, hi: int, asc: bool) -> Iterator[int]:
        """Where the streams whose stored response message matches start, in search order."""
        first = eventlog.row_id(seg.key, 1)
        rows = self.conn.execute(
            "SELECT r.id, (SELECT max(q.id) FROM event_log q WHERE q.kind = ?"
            f" AND q.{_INDEXED} AND q.id BETWEEN ? AND r.id - 1) FROM event_log r"
            f" WHERE r.kind = ? AND r.{_INDEXED} AND r.id BETWEEN ? AND ?"
            f" AND {self.sql.text('r.payload', 'message_hash')} IN"
            f" (SELECT hash FROM messages WHERE message {self.like} ? ESCAPE '{_ESC}')"
            f" ORDER BY r.id {'ASC' if asc else 'DESC'}",
            (_REQUEST, first, _RESPONSE, *_ids(seg, lo, hi), self.pattern),
        ).fetchall()
        for response_id, request_id in rows:
            seq = _seq(response_id)
            request = _seq(request_id) if request_id is not None else None
            start = self._first_chunk(seg, request) if request is not None else None
            yield start if start is not None and start < seq else seq

    def unanswered(self, seg: Segment, lo: int, hi: int, asc: bool) -> Iterator[int]:
        """Where the streams of the model calls made at seqs ``lo..hi`` that have no response
        (cancelled, or running) and whose joined chunks contain the term start, in search
        order."""
        last = eventlog.row_id(seg.key, eventlog.SEQ_MASK)
        calls = self.conn.execute(
            "SELECT id, call_id, next_request FROM (SELECT r.id AS id,"
            f" {self.sql.text('r.payload', 'call_id')} AS call_id,"
            f" (SELECT min(n.id) FROM event_log n WHERE n.kind = ? AND n.{_INDEXED}"
            "  AND n.id BETWEEN r.id + 1 AND ?) AS next_request,"
            f" (SELECT min(n.id) FROM event_log n WHERE n.kind = ? AND n.{_INDEXED}"
            "  AND n.id BETWEEN r.id + 1 AND ?) AS response"
            f" FROM event_log r WHERE r.kind = ? AND r.{_INDEXED} AND r.id BETWEEN ? AND ?)"
            " AS calls"
            " WHERE response IS NULL OR response > next_request"
            f" ORDER BY id {'ASC' if asc else 'DESC'}",
            (_REQUEST, last, _RESPONSE, last, _REQUEST, *_ids(seg, lo, hi)),
        ).fetchall()
        needle = self.term.lower()
        for request_id, call_id, next_request_id in calls:
            request = _seq(request_id)
            next_request = _seq(next_request_id) if next_request_id is not None else None
            end = min(next_request or _MAX, seg.end or _MAX)
            texts: dict[str, list[str]] = {}
            for channel, text in self.conn.execute(
                f"SELECT {self.sql.text('payload', 'channel')}, {self.sql.text('payload', 'text')}"
                f" FROM event_log WHERE id BETWEEN ? AND ? AND kind = {eventlog.CHUNK}"
                f" AND {self.sql.text('payload', 'call_id')} = ? ORDER BY id",
                (*_ids(seg, request + 1, end - 1), call_id),
            ):
                texts.setdefault(str(channel), []).append(str(text or ""))
            if any(needle in "".join(parts).lower() for parts in texts.values()):
                yield request + 1

    def next_response(self, seg: Segment, seq: int) -> int:
        row = self.conn.execute(
            f"SELECT min(id) FROM event_log WHERE kind = ? AND {_INDEXED} AND id BETWEEN ? AND ?",
            (_RESPONSE, *_ids(seg, seq, eventlog.SEQ_MASK)),
        ).fetchone()
        return _seq(row[0]) if row is not None and row[0] is not None else seq


def _nearest(found: Iterator[int], seq: int, forward: bool) -> int | None:
    """The first location strictly past ``seq`` in the search direction."""
    for where in found:
        if (where > seq) if forward else (where < seq):
            return where
    return None


def find(
    conn: Conn, sql: Dialect, segments: Sequence[Segment], term: str, seq: int, forward: bool
) -> int | None:
    """The nearest match after (or before) ``seq``: an event, or the first chunk of a stream
    whose assembled text contains ``term``."""
    finder = _Finder(conn, sql, term)
    for seg in segments if forward else list(reversed(segments)):
        if forward:
            lo, hi = _bounds(seg, seq + 1, _MAX)
            if lo > hi:
                continue
            found = [
                finder.event(seg, lo, hi, True),
                # the stream around ``seq`` has its response after it: skipped by _nearest
                _nearest(finder.answered(seg, lo, hi, True), seq, True),
                _nearest(finder.unanswered(seg, max(seq, lo - 1), hi, True), seq, True),
            ]
        else:
            lo, hi = _bounds(seg, 1, seq - 1)
            if lo > hi:
                continue
            # the response of a stream that starts before ``seq`` may come after it
            around = _bounds(seg, 1, finder.next_response(seg, seq))[1]
            found = [
                finder.event(seg, lo, hi, False),
                _nearest(finder.answered(seg, lo, around, False), seq, False),
                _nearest(finder.unanswered(seg, lo, seq - 2, False), seq, False),
            ]
        hits = [f for f in found if f is not None]
        if hits:
            return min(hits) if forward else max(hits)
    return None
