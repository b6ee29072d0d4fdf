"""The store's named lookups for readers (``store/lookups.py``, ``store/search.py``): they
read a fork's whole history (its ancestors' prefixes, then its own rows) like ``events``
does, on real scripted episodes in a real store file."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.events import MessageEvent, ModelRequest, ModelResponse
from providers import get_model


def _run(store: TraceStore, tmp_path: Path) -> str:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snapshots") as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
        )
    return str(rollout.episode_id)


@pytest.fixture
def parent(store: TraceStore, tmp_path: Path) -> str:
    return _run(store, tmp_path)


@pytest.fixture
def fork(store: TraceStore, parent: str) -> str:
    """A fork of ``parent`` at turn 3 with an injected message, run to its end."""
    (fork_id,) = fork_episode(store, parent, turn=3, message="Check the edge cases too.")
    resume_episode(store, fork_id)
    return fork_id


def test_events_before_reads_a_forks_history_backwards_through_its_parent(
    store: TraceStore, fork: str
) -> None:
    history = list(store.iter_events(fork))
    backwards = store.events_before(fork, limit=len(history) + 10)
    assert [(r.episode_id, r.seq) for r in backwards] == [
        (r.episode_id, r.seq) for r in reversed(history)
    ]


def test_events_before_keeps_to_the_kinds_below_the_seq_and_the_limit(
    store: TraceStore, fork: str
) -> None:
    before = store.episode(fork).fork_seq or 0
    wanted = [
        r.seq for r in store.iter_events(fork, kinds=("tool.call", "message")) if r.seq < before
    ]
    rows = store.events_before(fork, before, limit=3, kinds=("tool.call", "message"))
    assert [r.seq for r in rows] == wanted[::-1][:3]


def test_nonchunk_seqs_are_the_seqs_of_every_event_but_chunks(store: TraceStore, fork: str) -> None:
    expected = [r.seq for r in store.iter_events(fork) if r.kind != "model.chunk"]
    assert list(store.nonchunk_seqs(store.segments(fork))) == expected


def test_last_seq_of_a_fork_not_run_yet_is_its_fork_point(store: TraceStore, parent: str) -> None:
    (idle,) = fork_episode(store, parent, turn=2)
    assert store.last_seq(store.segments(idle)) == store.episode(idle).fork_seq


def test_last_seq_of_an_episode_is_its_last_events(store: TraceStore, fork: str) -> None:
    assert store.last_seq(store.segments(fork)) == store.episode(fork).last_seq


def test_messages_by_hash_leave_out_the_ones_missing(store: TraceStore, parent: str) -> None:
    hashes = [
        e.message_hash
        for e in (r.typed() for r in store.iter_events(parent, kinds=("message",)))
        if isinstance(e, MessageEvent)
    ]
    found = store.messages([*hashes, "0" * 64])
    assert found == {h: store.message(h) for h in hashes}


def test_a_responses_message_has_its_requests_tip_as_parent(store: TraceStore, parent: str) -> None:
    request, response = (
        r.typed() for r in store.events(parent, kinds=("model.request", "model.response"), limit=2)
    )
    assert isinstance(request, ModelRequest) and isinstance(response, ModelResponse)
    assert store.message_parent(response.message_hash) == request.tip_hash


def test_forks_lists_each_fork_with_its_parent_and_fork_point(
    store: TraceStore, parent: str, fork: str
) -> None:
    assert store.forks() == [(fork, parent, store.episode(fork).fork_seq)]


def test_find_backwards_reaches_into_the_inherited_part_of_a_forks_history(
    store: TraceStore, fork: str
) -> None:
    segments = store.segments(fork)
    assert store.find(segments, "episode.start", store.last_seq(segments), forward=False) == 1


def test_find_matches_a_message_event_by_its_messages_text(store: TraceStore, fork: str) -> None:
    injected = (store.episode(fork).fork_seq or 0) + 1
    assert store.find(store.segments(fork), "edge cases", 0, forward=True) == injected
