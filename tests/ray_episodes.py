"""What the Ray tests share: a store on SQLite or Postgres, waiting on the store, and the
checks that every episode of a batch ran once and completed."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest

from agentrunner import EpisodeSummary, TraceStore
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from providers import get_model

T = TypeVar("T")
TASKS = ["demo-mean", "paginate-off-by-one"]


def pairs(seeds: int) -> list[tuple[str, int]]:
    return [(t, s) for t in TASKS for s in range(seeds)]


def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    """The store a Ray test writes: a SQLite file, or a Postgres schema (``request.param``)."""
    if request.param == "postgres":
        location = request.getfixturevalue("pg_url")
    else:
        location = str(tmp_path / "traces.db")
    with TraceStore(location) as store:
        yield store


def batch_kwargs(tmp_path: Path, pace: float = 0.0) -> dict[str, Any]:
    """Factories a Ray worker can unpickle (partials of importable functions)."""
    return {
        "env_factory": functools.partial(WorkspaceEnv, snapshot_dir=tmp_path / "snapshots"),
        "model_factory": functools.partial(get_model, "scripted:demo", pace=pace),
        "executor": "ray",
    }


def wait_for(condition: Callable[[], T | None], what: str, timeout_s: float = 240) -> T:
    """Poll the store until ``condition`` holds (its value); the timeout only catches a
    hang, it is never what the test checks."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def mid_episode(location: str, min_events: int) -> EpisodeSummary | None:
    """An episode a live worker is writing that has at least ``min_events`` events."""
    with TraceStore(location) as store:
        for e in store.list_episodes():
            if e.status == "running" and e.writer_pid and e.last_seq >= min_events:
                return e
    return None


def kinds(store: TraceStore, episode_id: str) -> list[str]:
    return [r.kind for r in store.iter_events(episode_id)]


def total_events(location: str) -> int:
    with TraceStore(location) as store:
        return sum(e.last_seq for e in store.list_episodes())


def assert_summary_is_the_stores(summary: dict[str, Any], store: TraceStore) -> None:
    """The driver's summary (``BatchResult.summary()``, ``batch --json``) counts what the
    store holds: every episode, the completed ones, no error."""
    statuses = [str(e.status) for e in store.list_episodes()]
    assert summary["episodes"] == len(statuses)
    assert summary["completed"] == statuses.count("completed")
    assert summary["errors"] == statuses.count("failed") == 0


def assert_each_pair_completed_once(store: TraceStore, expected: list[tuple[str, int]]) -> None:
    """One episode per pair, each with dense seqs, one start, and one end: completed."""
    episodes = store.list_episodes()
    assert sorted((e.task_id, e.seed) for e in episodes) == sorted(expected)
    for e in episodes:
        rows = list(store.iter_events(e.episode_id))
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1)), e.episode_id
        ends = [r.kind for r in rows].count("episode.end")
        starts = [r.kind for r in rows].count("episode.start")
        assert (e.status, starts, ends) == ("completed", 1, 1), e.episode_id


def batch_hurt_midway(
    store: TraceStore, tmp_path: Path, hurt: Callable[[EpisodeSummary], None]
) -> EpisodeSummary:
    """Run a batch of 4 seeds x 2 tasks on Ray, ``hurt`` the writer of an episode half-way
    (kill its process, remove its node), and check the batch still ran every pair once to
    completion, the hurt episode resumed (a ``resume`` event, action ``resumed``)."""
    with ThreadPoolExecutor(1) as driver:
        running = driver.submit(
            run_batch,
            store,
            task_seed_pairs=pairs(4),
            concurrency=8,
            **batch_kwargs(tmp_path, pace=0.02),
        )
        victim = wait_for(lambda: mid_episode(store.location, 6), "an episode half-way")
        hurt(victim)
        result = running.result(timeout=600)
    assert_each_pair_completed_once(store, pairs(4))
    assert_summary_is_the_stores(result.summary(), store)
    assert "resume" in kinds(store, victim.episode_id)
    actions = {e.episode_id: e.action for e in result.episodes}
    assert actions[victim.episode_id] == "resumed"
    return victim
