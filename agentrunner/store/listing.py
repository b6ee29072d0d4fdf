"""Incremental episode listings: what changed since a live view last looked.

A live view (the TUI's episodes screen) lists every episode once, then asks only for what
changed since: a store of 100,000 episodes is not re-read every second. What can change an
episode's row in a listing leaves a mark the next look finds:

- a new episode (made, forked, imported, copied in) has a larger ``key`` than any before;
- its writer claiming, heartbeating and releasing its lease stamps ``control.heartbeat_at``
  (the writer's clock: rows stamped within :data:`CLOCK_SLACK_S` of the newest stamp seen
  before are read again, so machines' clocks may differ by that much);
- a verification adds a row with a larger ``id``;
- a running episode's writer may die without writing anything, so every episode last seen
  running is read again;
- a removed episode changes the count: the next look is a whole listing again.
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
    newest_beat: float
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
    whole = since is None
    if since is not None:
        (added,) = conn.execute(
            "SELECT count(*) FROM episodes WHERE key > ?", (since.max_key,)
        ).fetchone()
        whole = count != since.count + int(added)  # one was removed (and maybe others added)
    if whole:
        episodes = summaries(store, "ORDER BY e.id DESC", ())
    else:
        assert since is not None
        ids = _changed_ids(store, since, max_key, verified)
        episodes = _read(store, sorted(ids, reverse=True))
    # every episode running before was read again, so this is every one running now
    running = {e.episode_id for e in episodes if e.status == Status.RUNNING}
    cursor = ListingCursor(count, max_key, beat, verified, frozenset(running))
    return ListingChanges(episodes, whole, cursor)


def _changed_ids(store: StoreBase, since: ListingCursor, max_key: int, verified: int) -> set[str]:
    conn = store._conn
    ids = {
        str(r[0])
        for r in conn.execute(
            "SELECT e.id FROM episodes e LEFT JOIN control c ON c.episode_id = e.id"
            " WHERE e.key > ? OR c.heartbeat_at >= ?",
            (since.max_key, since.newest_beat - CLOCK_SLACK_S),
        ).fetchall()
    }
    if verified > since.max_verification:
        ids.update(
            str(r[0])
            for r in conn.execute(
                "SELECT DISTINCT episode_id FROM verifications WHERE id > ?",
                (since.max_verification,),
            ).fetchall()
        )
    return ids | since.running


def _read(store: StoreBase, ids: list[str]) -> list[EpisodeSummary]:
    out: list[EpisodeSummary] = []
    for i in range(0, len(ids), _IDS_PER_READ):
        part = ids[i : i + _IDS_PER_READ]
        marks = ", ".join("?" for _ in part)
        out += summaries(store, f"WHERE e.id IN ({marks}) ORDER BY e.id DESC", tuple(part))
    return out
