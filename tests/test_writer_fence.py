"""The writer's fence on SQLite: a leased writer finds its lease's control row by rowid, and
neither a row that moved (a ``VACUUM`` may renumber rowids) nor anything else lets a writer whose
lease was taken over write again (agentrunner/store/writer.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentrunner.store import TraceStore
from agentrunner.store.control import HEARTBEAT_STALE_S, LeaseLostError
from agentrunner.values.errors import StoreError
from agentrunner.values.events import ModelChunk


def _chunk(i: int) -> ModelChunk:
    return ModelChunk(call_id="c", channel="text", index=i, text=f"piece {i}")


def _move_control_row(path: Path, episode_id: str) -> None:
    """Give the episode's control row another rowid, its content unchanged (another
    connection, as a VACUUM in another process would)."""
    with TraceStore(path) as other:
        other.raw_connection().execute(
            "UPDATE control SET rowid = rowid + 1000 WHERE episode_id = ?", (episode_id,)
        )


def _take_over(path: Path, episode_id: str) -> TraceStore:
    """Another store claims the lease after the writer's machine went silent."""
    other = TraceStore(path)
    other.raw_connection().execute(
        "UPDATE control SET writer_host = 'a-host-gone-silent', heartbeat_at = ?"
        " WHERE episode_id = ?",
        (time.time() - HEARTBEAT_STALE_S - 1, episode_id),
    )
    assert other.claim_writer(episode_id)
    return other


def test_a_writer_whose_control_row_moved_goes_on_writing_under_its_lease(db_path: Path) -> None:
    with TraceStore(db_path) as store:
        episode_id = store.create_episode(task_id="t", seed=0, env={}, model={}, claim=True)
        writer = store.writer(episode_id)
        writer.append(0, _chunk(0))
        _move_control_row(db_path, episode_id)
        writer.append(0, _chunk(1))
        writer.append(0, _chunk(2))
        assert [e.seq for e in store.events(episode_id)] == [1, 2, 3]


def test_a_writer_whose_lease_was_taken_over_after_its_row_moved_writes_nothing_more(
    db_path: Path,
) -> None:
    with TraceStore(db_path) as store:
        episode_id = store.create_episode(task_id="t", seed=0, env={}, model={}, claim=True)
        writer = store.writer(episode_id)
        writer.append(0, _chunk(0))
        _move_control_row(db_path, episode_id)
        with _take_over(db_path, episode_id) as other:
            with pytest.raises(LeaseLostError, match="taken over"):
                writer.append(0, _chunk(1))
            with pytest.raises(StoreError, match="taken over"):
                writer.append(0, _chunk(2))
            assert [e.seq for e in other.events(episode_id)] == [1]
