"""Counterfactual fan-out: candidates with known rewards come out ranked correctly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.tasks import get_task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fanout import read_group, score_actions
from agentrunner.store.groups import fork_groups
from agentrunner.values.errors import UsageError
from providers import get_model

FIX = {
    "name": "str_replace",
    "arguments": {
        "path": "stats.py",
        "old_str": "return total / (len(values) - 1)",
        "new_str": "return total / len(values)",
    },
}
BREAK_EMPTY = {
    "name": "str_replace",
    "arguments": {
        "path": "stats.py",
        "old_str": 'raise ValueError("mean() of an empty sequence")',
        "new_str": "return 0",
    },
}
SUBMIT = {"name": "submit", "arguments": {}}
# Hidden tests of demo-mean, scored with partial credit: the buggy code passes 3 of 5.
CANDIDATES = [[BREAK_EMPTY, SUBMIT], [SUBMIT], [FIX, SUBMIT]]
EXPECTED = {0: 0.4, 1: 0.6, 2: 1.0}


@pytest.fixture
def partial_tasks(tmp_path: Path) -> Path:
    task = get_task("demo-mean").model_dump()
    task["reward_mode"] = "partial_credit"
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]))
    return path


@pytest.fixture
def parent(store: TraceStore, partial_tasks: Path, tmp_path: Path) -> str:
    with WorkspaceEnv(tasks_path=partial_tasks, snapshot_dir=tmp_path / "snaps") as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
        )
    return rollout.episode_id


def test_candidates_with_known_rewards_are_ranked_by_mean_reward(
    store: TraceStore, parent: str
) -> None:
    result = score_actions(store, parent, turn=4, actions=CANDIDATES, n=2, concurrency=3)
    assert [c.candidate for c in result.ranked] == [2, 1, 0]
    assert {c.candidate: c.mean for c in result.ranked} == pytest.approx(EXPECTED)
    assert all(len(c.rewards) == 2 and c.spread == 0.0 for c in result.ranked)


def test_fanout_is_recorded_as_a_fork_group_that_reads_back_the_same(
    store: TraceStore, parent: str
) -> None:
    result = score_actions(store, parent, turn=4, actions=CANDIDATES, n=1)
    (group,) = fork_groups(store, parent)
    again = read_group(store, result.group_id)
    assert len(group.members) == 3 and group.turn == 4
    assert [c.to_dict() for c in again.ranked] == [c.to_dict() for c in result.ranked]


def test_sampled_candidates_come_from_proposal_forks(store: TraceStore, parent: str) -> None:
    result = score_actions(store, parent, turn=4, k=2, n=1, horizon=1)
    (group,) = fork_groups(store, parent)
    proposals = [m for m in group.members if m.sample == -1]
    assert len(proposals) == 2 and len(result.ranked) == 2
    assert result.ranked[0].action["tool_calls"][0]["name"] == "str_replace"


def test_horizon_limits_the_continuations(store: TraceStore, parent: str) -> None:
    result = score_actions(store, parent, turn=4, actions=[[FIX]], n=1, horizon=1)
    (episode,) = result.ranked[0].episodes
    assert store.episode(episode).turns == 5 and store.episode(episode).stop_reason == "max_turns"


def test_malformed_candidate_is_refused_before_anything_is_recorded(
    store: TraceStore, parent: str
) -> None:
    with pytest.raises(UsageError, match="needs a string 'name'"):
        score_actions(store, parent, turn=4, actions=[[{"arguments": {}}]], n=1)
    assert fork_groups(store) == []


def test_horizon_past_the_turn_limit_is_refused_before_anything_is_recorded(
    store: TraceStore, parent: str
) -> None:
    with pytest.raises(UsageError, match="--horizon"):
        score_actions(store, parent, turn=4, k=1, horizon=600)
    assert fork_groups(store) == [] and len(store.list_episodes()) == 1
