"""A live view lists every episode once, then reads only what changed: a new episode, a
claimed, ended or released lease, a verification, an episode that was running (its writer may
have died); a removal makes the next look a whole listing again. On both backends."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.store.listing import ListingChanges, ListingCursor
from agentrunner.store.protocol import StoreBackend
from agentrunner.values.events import EpisodeEnd, EpisodeStart


@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreBackend]:
    if request.param == "sqlite":
        location = str(tmp_path / "t.db")
    else:
        location = request.getfixturevalue("pg_url")
    with TraceStore(location) as store:
        yield store


def _new(store: StoreBackend, seed: int) -> str:
    return store.create_episode(task_id="t", seed=seed, env={}, model={})


def _ids(changes: ListingChanges) -> list[str]:
    return [e.episode_id for e in changes.episodes]


def _look(store: StoreBackend, since: ListingCursor | None) -> ListingChanges:
    return store.listing_changes(since)


def test_after_the_first_look_only_what_changed_is_read(any_store: StoreBackend) -> None:
    store = any_store
    old = [_new(store, seed) for seed in range(20)]
    first = _look(store, None)
    assert first.whole and sorted(_ids(first)) == sorted(old)
    assert _ids(first) == sorted(old, reverse=True)  # newest first, as list_episodes
    idle = _look(store, first.cursor)
    assert not idle.whole and idle.episodes == []  # nothing changed: nothing read

    added = _new(store, 99)
    after_new = _look(store, idle.cursor)
    assert _ids(after_new) == [added]

    running = old[3]
    with store.lease(running):
        start = EpisodeStart(task_id="t", seed=3, env={}, model={}, config={}, version="0")
        writer = store.writer(running)
        writer.append(0, start)
        claimed = _look(store, after_new.cursor)
        assert running in _ids(claimed)
        assert {e.episode_id: e.status for e in claimed.episodes}[running] == "running"
        writer.append(0, EpisodeEnd(stop_reason="done", turns=0, total_reward=1.0))
    ended = _look(store, claimed.cursor)
    assert {e.episode_id: e.status for e in ended.episodes}[running] == "completed"
    assert set(_ids(ended)) <= {running}  # the others stayed unread

    store.add_verification(old[5], "v", 1.0, True, {})
    verified = _look(store, ended.cursor)
    assert old[5] in _ids(verified)
    assert set(_ids(verified)) <= {old[5], running}

    store.remove_episode(old[0])
    removed = _look(store, verified.cursor)
    assert removed.whole and old[0] not in _ids(removed) and len(removed.episodes) == 20


_HOLDER = (
    "import sys, time; from agentrunner import TraceStore;"
    " store = TraceStore(sys.argv[1]); assert store.claim_writer(sys.argv[2]);"
    " print('held', flush=True); time.sleep(600)"
)


def test_an_episode_whose_writer_died_is_read_again_though_nothing_was_written(
    any_store: StoreBackend,
) -> None:
    store = any_store
    dying, other = _new(store, 0), _new(store, 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, store.location, dying], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        store.raw_connection().execute(  # its one stamp, long ago: only "running" finds it
            "UPDATE control SET heartbeat_at = 0 WHERE episode_id = ?", (dying,)
        )
        store.claim_writer(other)  # a fresh stamp: the newest seen
        store.release_writer(other)
        seen = _look(store, None)
        assert {e.episode_id: e.status for e in seen.episodes}[dying] == "running"
    finally:
        holder.kill()
        holder.wait()
    again = _look(store, seen.cursor)
    assert {e.episode_id: e.status for e in again.episodes}[dying] == "pending"  # no event yet


def test_removing_the_newest_episode_and_making_more_is_a_whole_listing_again(
    any_store: StoreBackend,
) -> None:
    store = any_store
    kept, newest = _new(store, 0), _new(store, 1)
    seen = _look(store, None)
    store.remove_episode(newest)  # its key is given again to the next one
    made = [_new(store, 2), _new(store, 3)]
    again = _look(store, seen.cursor)
    assert again.whole and sorted(_ids(again)) == sorted([kept, *made])


def test_episodes_released_a_moment_ago_are_read_once_not_on_every_look(
    any_store: StoreBackend,
) -> None:
    store = any_store
    done = [_new(store, seed) for seed in range(30)]
    seen = _look(store, None)
    for episode_id in done:  # a batch that just finished: 30 fresh stamps
        assert store.claim_writer(episode_id)
        store.release_writer(episode_id)
    once = _look(store, seen.cursor)
    assert sorted(_ids(once)) == sorted(done)
    assert _look(store, once.cursor).episodes == []  # their stamps have not changed since
