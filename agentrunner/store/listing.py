"""Incremental episode listings: what changed since a live view last looked.

A live view (the TUI's episodes screen) lists every episode once, then asks only for what
changed since: a store of 100,000 episodes is not re-read every second. What can change an
episode's row in a listing leaves a mark the next look finds:

- a new episode (made, forked, imported, copied in) has a larger ``key`` than any before;
- its writer claiming, heartbeating and releasing its lease stamps ``control.heartbeat_at``
  (the writer's clock: the stamps within :data:`CLOCK_SLACK_S` of the newest one are kept in
  the cursor, and an episode is read again when its stamp differs from the kept one, so
  machines' clocks may differ by that much);
- a verification adds a row with a larger ``id``;
- a running episode's writer may die without writing anything, so every episode last seen
  running is read again;
- a removed episode changes the count, or frees the newest key for the next new episode:
  either way the next look is a whole listing again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentrunner.store.records import EpisodeSummary
from agentrunner.store.summaries import summaries
from agentrunner.values.statuses import Status

if TYPE_CHECKING:
    from agentrunner.store.base import StoreBase

CLOCK_SLACK_S = 30.0
"""How far behind the newest heartbeat seen a writer's clock may be and its changes still be
found (the lease staleness threshold assumes clocks within seconds anyway)."""
_IDS_PER_READ = 500


@dataclass(frozen=True, slots=True)
class ListingCursor:
    """Where the last look left off (opaque to callers: pass it back)."""

    count: int
    max_key: int
    newest: str | None
    """The id of the episode holding ``max_key`` (a key freed by removing the newest episode
    is given again: then this no longer matches, and the next look is a whole one)."""
    newest_beat: float
    stamps: dict[str, float]
    """The lease stamps within the slack window as last read: one read again only changed."""
    max_verification: int
    running: frozenset[str]


@dataclass(frozen=True, slots=True)
class ListingChanges:
    """What changed: ``episodes`` holds each new or changed episode's summary, newest first;
    with ``whole`` it is the whole listing (drop what it lacks)."""

    episodes: list[EpisodeSummary]
    whole: bool
    cursor: ListingCursor


def changes(store: StoreBase, since: ListingCursor | None) -> ListingChanges:
    """Every episode (``since`` None, or episodes were removed since), else those that
    changed since ``since``; with the cursor for the next look."""
    conn = store._conn
    count, max_key = conn.execute("SELECT count(*), coalesce(max(key), 0) FROM episodes").fetchone()
    (beat,) = conn.execute("SELECT coalesce(max(heartbeat_at), 0) FROM control").fetchone()
    (verified,) = conn.execute("SELECT coalesce(max(id), 0) FROM verifications").fetchone()
    count, max_key, beat, verified = int(count), int(max_key), float(beat), int(verified)
    newest = _id_at(store, max_key)
    whole = since is None or _removed_since(store, since, count)
    cutoff = min(beat, since.newest_beat if since is not None else beat) - CLOCK_SLACK_S
    stamped = {
        str(r[0]): (int(r[1]), None if r[2] is None else float(r[2]))
        for r in conn.execute(
            "SELECT e.id, e.key, c.heartbeat_at FROM episodes e"
            " LEFT JOIN control c ON c.episode_id = e.id"
            " WHERE e.key > ? OR c.heartbeat_at >= ?",
            (since.max_key if since is not None and not whole else max_key, cutoff),
        ).fetchall()
    }
    stamps = {
        i: at for i, (_, at) in stamped.items() if at is not None and at >= beat - CLOCK_SLACK_S
    }
    if whole:
        episodes = summaries(store, "ORDER BY e.id DESC", ())
    else:
        assert since is not None
        ids = {
            i
            for i, (key, at) in stamped.items()
            if key > since.max_key or at != since.stamps.get(i)
        }
        ids |= since.running  # a writer may have died without a word
        if verified > since.max_verification:
            ids.update(
                str(r[0])
                for r in conn.execute(
                    "SELECT DISTINCT episode_id FROM verifications WHERE id > ?",
                    (since.max_verification,),
                ).fetchall()
            )
        episodes = _read(store, sorted(ids, reverse=True))
    # every episode running before was read again, so this is every one running now
    running = {e.episode_id for e in episodes if e.status == Status.RUNNING}
    cursor = ListingCursor(count, max_key, newest, beat, stamps, verified, frozenset(running))
    return ListingChanges(episodes, whole, cursor)


def _id_at(store: StoreBase, key: int) -> str | None:
    row = store._conn.execute("SELECT id FROM episodes WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _removed_since(store: StoreBase, since: ListingCursor, count: int) -> bool:
    """Whether an episode was removed since ``since``: fewer than were added since, or the
    key it saw newest now holds another episode (given again after a removal)."""
    (added,) = store._conn.execute(
        "SELECT count(*) FROM episodes WHERE key > ?", (since.max_key,)
    ).fetchone()
    return count != since.count + int(added) or _id_at(store, since.max_key) != since.newest


def _read(store: StoreBase, ids: list[str]) -> list[EpisodeSummary]:
    out: list[EpisodeSummary] = []
    for i in range(0, len(ids), _IDS_PER_READ):
        part = ids[i : i + _IDS_PER_READ]
        marks = ", ".join("?" for _ in part)
        out += summaries(store, f"WHERE e.id IN ({marks}) ORDER BY e.id DESC", tuple(part))
    return out
