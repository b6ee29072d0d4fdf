"""Store reads behind the trace screen (and the short ids every screen shows). Each function
runs inside a thread worker, on that thread's own connection (``TraceStore`` keeps one per
thread), and never loads a whole episode: pages are read by ``seq`` (keyset) and lookups go
through the store's named methods, which use its indexes.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.store import EpisodeSummary, EventRow, Segment
from agentrunner.tui.format import action_line, one_line
from agentrunner.tui.rows import RowInfo, summarize, typed
from agentrunner.values.events import MessageEvent
from agentrunner.values.formatting import unique_prefixes

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

PAGE = 256  # events per cached page of the trace list
POLL_BATCH = 2000  # live events read per poll
ENDING_KINDS = frozenset({"cancel", "error", "episode.end"})  # a poll reads the summary too
_STEP = 64  # events of one kind read at a time when looking for the nearest one


def id_prefixes(store: StoreBackend, wanted: Iterable[str] | None = None) -> dict[str, str]:
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


def prefixes_around(known: list[str], new: Iterable[str]) -> dict[str, str]:
    """The short prefixes of ``new`` ids joining the sorted ``known`` ones, and of their
    neighbours (the only ids a new one can lengthen), from the ids in memory."""
    ids = sorted({*known, *new})
    out: dict[str, str] = {}
    for episode_id in new:
        i = bisect_left(ids, episode_id)
        around = ids[max(0, i - 2) : i + 3]  # it, its neighbours, and theirs
        prefixes = unique_prefixes(around, minimum=8)
        for j in range(max(0, i - 1), min(len(ids), i + 2)):  # their prefixes need theirs
            out[ids[j]] = prefixes[ids[j]]
    return out


@dataclass(frozen=True)
class TraceData:
    """Everything the trace list needs to lay itself out, read in one snapshot."""

    episode_id: str
    segments: list[Segment]
    nonchunk: array  # seqs of every event that is not a streamed chunk, ascending
    last_seq: int
    prefixes: dict[str, str]  # short ids of the episode and its ancestors


def open_trace(store: StoreBackend, id_or_prefix: str) -> TraceData:
    """The episode's segments and row layout, from one read snapshot. (Its summary, which
    can cost a scan of a long unfinished episode, is read separately: see ``summary``.)"""
    with store.read_snapshot():
        episode_id = store.resolve(id_or_prefix)
        segments = store.segments(episode_id)
        seqs = store.nonchunk_seqs(segments)
        last_seq = store.last_seq(segments)
        prefixes = id_prefixes(store, [seg.episode_id for seg in segments])
    return TraceData(episode_id, segments, seqs, last_seq, prefixes)


def summary(store: StoreBackend, episode_id: str) -> EpisodeSummary:
    """The episode with its derived status and totals."""
    return store.episode(episode_id)


def message_previews(store: StoreBackend, hashes: Iterable[str]) -> dict[str, str]:
    """First line(s) of the given messages' content, by hash."""
    return {
        digest: one_line(message.content, 200) for digest, message in store.messages(hashes).items()
    }


def to_rows(store: StoreBackend, rows: list[EventRow]) -> list[RowInfo]:
    events = [typed(row) for row in rows]
    hashes = [e.message_hash for e in events if isinstance(e, MessageEvent)]
    previews = message_previews(store, hashes) if hashes else {}
    adopted = [
        e.message_hash for e in events if isinstance(e, MessageEvent) and e.reason == "adopted"
    ]
    if adopted:  # a decision point's action reads as the action: its tool calls, its text
        previews |= {d: action_line(m, 200) for d, m in store.messages(adopted).items()}
    return [
        summarize(
            row,
            event,
            previews.get(event.message_hash) if isinstance(event, MessageEvent) else None,
        )
        for row, event in zip(rows, events, strict=True)
    ]


def load_pages(
    store: StoreBackend, episode_id: str, segments: Sequence[Segment], pages: Iterable[int]
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
    store: StoreBackend,
    episode_id: str,
    segments: Sequence[Segment],
    after_seq: int,
    *,
    with_summary: bool,
) -> PollResult:
    """Events appended after ``after_seq`` (one batch), and the summary when asked for or
    when the batch holds an event that may end the run (a cancel, an error, the end): its
    status shows on the same tick the event does."""
    events = store.events(episode_id, after_seq=after_seq, limit=POLL_BATCH, segments=segments)
    ending = any(row.kind in ENDING_KINDS for row in events)
    summary = store.episode(episode_id) if with_summary or ending else None
    return PollResult(to_rows(store, events), summary)


EDITED_TURN = "message/edit"
"""For ``next_of_kinds``: a fork's edited turn (a ``message`` event with reason ``edit``)."""
ADOPTED_TURN = "message/adopted"
"""For ``next_of_kinds``: a decision point's adopted turn (reason ``adopted``)."""


def _nearest(
    store: StoreBackend, segments: Sequence[Segment], kind: str, seq: int, forward: bool
) -> Iterator[EventRow]:
    """The history's events of ``kind`` after (or before) ``seq``, nearest first."""
    episode_id = segments[-1].episode_id
    while True:
        if forward:
            rows = store.events(
                episode_id, after_seq=seq, limit=_STEP, kinds=(kind,), segments=segments
            )
        else:
            rows = store.events_before(
                episode_id, seq, limit=_STEP, kinds=(kind,), segments=segments
            )
        yield from rows
        if len(rows) < _STEP:
            return
        seq = rows[-1].seq


def _with_reason(reason: str) -> Callable[[EventRow], bool]:
    def check(row: EventRow) -> bool:
        event = typed(row)
        return isinstance(event, MessageEvent) and event.reason == reason

    return check


def next_of_kinds(
    store: StoreBackend, segments: Sequence[Segment], kinds: Sequence[str], seq: int, forward: bool
) -> int | None:
    """The nearest seq after (or before) ``seq`` whose kind is one of ``kinds`` (or, for
    ``EDITED_TURN`` and ``ADOPTED_TURN``, a ``message`` event with that reason)."""
    found: list[int] = []
    for kind in kinds:
        if kind in (EDITED_TURN, ADOPTED_TURN):
            reason = kind.split("/", 1)[1]
            rows: Iterator[EventRow] = filter(
                _with_reason(reason), _nearest(store, segments, "message", seq, forward)
            )
        else:
            rows = _nearest(store, segments, kind, seq, forward)
        nearest = next(rows, None)
        if nearest is not None:
            found.append(nearest.seq)
    if not found:
        return None
    return min(found) if forward else max(found)


@dataclass(frozen=True)
class Match:
    """Where a find landed: ``seq`` (None: no match anywhere), and whether the search went
    past the end (or the start) of the trace and came round to find it."""

    seq: int | None
    wrapped: bool = False


def find(
    store: StoreBackend,
    segments: Sequence[Segment],
    term: str,
    seq: int,
    forward: bool,
    last_seq: int,
) -> Match:
    """The nearest match of ``term`` after (or before) ``seq`` (case-insensitive for
    ASCII): an event, or the first chunk of a stream whose assembled text contains it. With
    none there, the search wraps round from the start (or the end) of the trace, up to and
    including ``seq`` itself (so the only match, under the cursor, is found again)."""
    found = store.find(segments, term, seq, forward=forward)
    if found is not None:
        return Match(found)
    start = 0 if forward else last_seq + 1
    again = store.find(segments, term, start, forward=forward)
    return Match(again, wrapped=again is not None)
