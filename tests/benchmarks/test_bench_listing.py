"""A live view's look at a store of many episodes: the whole listing (what the TUI's episodes
screen read every second before) next to a look at what changed since (what it reads now), on
SQLite and Postgres, in one run. Printed, not timed: medians of alternated rounds and the
ratio.

The store holds ``EPISODES`` episodes of a batch (made in one transaction), ``RUNNING`` of
them running (their leases held by this process) and the rest pending; between looks one new
episode is made, as a live store would.

Run on demand: ``pytest tests/benchmarks/test_bench_listing.py -m benchmark -s``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.store.protocol import StoreBackend

pytestmark = pytest.mark.benchmark

EPISODES = 20_000
RUNNING = 16
ROUNDS = 5


def _fill(store: StoreBackend) -> None:
    members = [("t", seed, {}, {}) for seed in range(EPISODES)]
    episodes = store.add_batch("bench", {"bench": True}, members)
    for episode_id in list(episodes.values())[:RUNNING]:
        assert store.claim_writer(episode_id)


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _measure(store: StoreBackend, label: str) -> None:
    cursor = store.listing_changes(None).cursor
    whole, changes = [], []
    for seed in range(ROUNDS):
        whole.append(_timed(store.list_episodes))
        store.create_episode(task_id="new", seed=seed, env={}, model={})
        start = time.perf_counter()
        look = store.listing_changes(cursor)
        changes.append(time.perf_counter() - start)
        assert not look.whole and len(look.episodes) == RUNNING + 1
        cursor = look.cursor
    w, c = statistics.median(whole), statistics.median(changes)
    print(
        f"\n{label}: {EPISODES:,} episodes ({RUNNING} running): whole listing {w * 1000:.0f} ms,"
        f" what changed {c * 1000:.1f} ms ({RUNNING + 1} read): {w / c:.0f}x less"
    )


def test_bench_listing_sqlite(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        _fill(store)
        _measure(store, "SQLite")


def test_bench_listing_postgres(pg_url: str) -> None:
    with TraceStore(pg_url) as store:
        _fill(store)
        _measure(store, "Postgres")
