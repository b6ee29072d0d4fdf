"""A fork at turn K of any episode sees exactly what the model saw at turn K of that
episode's own history, whatever the depth of its lineage: forks before, at and after each
ancestor's fork point, three levels deep."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from providers.scripted import ScriptedModel


def _run_fork(store: TraceStore, parent: str, turn: int) -> str:
    (fork,) = fork_episode(store, parent, turn=turn)
    rollout = resume_episode(store, fork, model_fn=ScriptedModel("demo", pace=0))
    assert rollout.status == "completed"
    return fork


@pytest.fixture(scope="module")
def lineage(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TraceStore, list[str]]]:
    """root; a fork of it at turn 5; a fork of that at turn 3 (before its fork point); a fork
    of that at turn 4 (after its own fork point, before both ancestors' points)."""
    store = TraceStore(tmp_path_factory.mktemp("lineage") / "t.db")
    with WorkspaceEnv() as env:
        root = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=ScriptedModel("demo", pace=0), store=store
        ).episode_id
    child = _run_fork(store, root, 5)
    grandchild = _run_fork(store, child, 3)
    great = _run_fork(store, grandchild, 4)
    yield store, [root, child, grandchild, great]
    store.close()


def _turns(store: TraceStore, episode: str) -> int:
    return store.episode(episode).turns


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_every_episode_of_the_lineage_reads_as_one_dense_history(
    lineage: tuple[TraceStore, list[str]], depth: int
) -> None:
    store, episodes = lineage
    seqs = [row.seq for row in store.iter_events(episodes[depth])]
    assert seqs == list(range(1, len(seqs) + 1))


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_an_inherited_turn_has_the_same_input_as_in_the_episode_it_came_from(
    lineage: tuple[TraceStore, list[str]], depth: int
) -> None:
    store, episodes = lineage
    fork_turns = {1: 5, 2: 3, 3: 4}
    for turn in range(1, fork_turns[depth]):
        parent = store.reconstruct_request(episodes[depth - 1], turn)
        own = store.reconstruct_request(episodes[depth], turn)
        assert own.tip_hash == parent.tip_hash, (depth, turn)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("turn", [2, 3, 4, 5, 6])
def test_a_fork_at_any_turn_starts_from_that_episodes_own_input_at_that_turn(
    lineage: tuple[TraceStore, list[str]], depth: int, turn: int
) -> None:
    store, episodes = lineage
    parent = episodes[depth]
    if turn > _turns(store, parent):
        pytest.skip(f"episode at depth {depth} has {_turns(store, parent)} turns")
    fork = _run_fork(store, parent, turn)
    expected = store.reconstruct_request(parent, turn)
    first = next(r for r in store.events(fork, kinds=["model.request"]) if r.episode_id == fork)
    assert first.turn == turn
    assert first.payload["tip_hash"] == expected.tip_hash
    assert len(store.message_chain(first.payload["tip_hash"])) == len(expected.messages)
    seqs = [row.seq for row in store.iter_events(fork)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_fork_before_its_parents_fork_point_restores_the_workspace_of_its_own_line(
    lineage: tuple[TraceStore, list[str]],
) -> None:
    store, episodes = lineage
    root, child = episodes[0], episodes[1]
    fork = _run_fork(store, child, 2)
    resume = next(r for r in store.events(fork, kinds=["resume"]) if r.episode_id == fork)
    same_in_root = _run_fork(store, root, 2)
    resume_root = next(r for r in store.events(same_in_root, kinds=["resume"]))
    assert resume.payload["env_restore"] == resume_root.payload["env_restore"]
