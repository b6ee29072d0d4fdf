"""Batch runs: task x seed pairs, bounded concurrency, one store, resumable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, TraceStore
from agentrunner.cli.seeds import parse_seeds
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import PolicyModel, run_batch
from agentrunner.lifecycle.resume import can_resume
from agentrunner.values.errors import UsageError
from providers import get_model

TASKS = ["demo-mean", "paginate-off-by-one", "slugify-accents"]


def _batch(store: TraceStore, tmp_path: Path, seeds: range, **kw: Any):  # type: ignore[no-untyped-def]
    return run_batch(
        store,
        task_seed_pairs=[(t, s) for t in TASKS for s in seeds],
        env_factory=lambda: WorkspaceEnv(snapshot_dir=tmp_path / "snapshots"),
        model_factory=lambda: get_model("scripted:demo"),
        **kw,
    )


def test_batch_runs_one_episode_per_task_and_seed(store: TraceStore, tmp_path: Path) -> None:
    result = _batch(store, tmp_path, range(2), concurrency=3)
    pairs = sorted((e.task_id, e.seed) for e in store.list_episodes())
    assert pairs == sorted((t, s) for t in TASKS for s in range(2))
    assert result.summary()["mean_reward"] == 1.0


def test_rerunning_a_finished_batch_skips_every_episode(store: TraceStore, tmp_path: Path) -> None:
    _batch(store, tmp_path, range(1))
    again = _batch(store, tmp_path, range(1))
    assert [e.action for e in again.episodes] == ["skipped"] * 3
    assert len(store.list_episodes()) == 3


def test_cancelled_batch_is_resumed_by_running_it_again(store: TraceStore, tmp_path: Path) -> None:
    polls = [0]

    def cancel() -> bool:
        polls[0] += 1
        return polls[0] > 60

    first = _batch(store, tmp_path, range(2), concurrency=2, cancel_check=cancel)
    assert any(e.status != "completed" for e in first.episodes)
    second = _batch(store, tmp_path, range(2), concurrency=2)
    assert all(e.status == "completed" for e in second.episodes)
    assert "resumed" in {e.action for e in second.episodes}
    assert len(store.list_episodes()) == 6


def test_policy_fn_drives_a_batch(store: TraceStore, tmp_path: Path) -> None:
    def submit_at_once(observation: str | None, info: dict[str, Any]) -> dict[str, Any]:
        return {"name": "submit", "arguments": {}}

    result = run_batch(
        store,
        task_seed_pairs=[{"task_id": "demo-mean", "seed": 1}],
        env_factory=lambda: WorkspaceEnv(),
        policy_fn=submit_at_once,
    )
    (episode,) = result.episodes
    assert (episode.status, episode.total_reward, episode.turns) == ("completed", 0.0, 1)
    assert store.episode(episode.episode_id or "").model["spec"] == "policy:submit_at_once"


def test_policy_model_sees_the_last_observation_and_returns_tool_calls() -> None:
    seen: list[Any] = []

    def policy(observation: str | None, info: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append((observation, info["turn"]))
        return [{"name": "list_files"}, {"name": "submit"}]

    context = AgentContext(messages=[], tools=[], turn=3, task_id="t", seed=0, observation="out")
    turn = PolicyModel(policy)(context)
    assert seen == [("out", 3)]
    assert [(c.call_id, c.name) for c in turn.tool_calls] == [
        ("policy_003_0", "list_files"),
        ("policy_003_1", "submit"),
    ]


def test_parse_seeds_accepts_ranges_and_lists() -> None:
    assert parse_seeds("0-3,7, 9") == [0, 1, 2, 3, 7, 9]


def test_parse_seeds_rejects_garbage() -> None:
    with pytest.raises(UsageError, match="--seeds"):
        parse_seeds("a-b")


@pytest.mark.slow
def test_batch_of_28_killed_half_way_resumes_with_no_episode_run_twice(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    cmd = [
        sys.executable,
        "-m",
        "agentrunner.cli.main",
        "batch",
        "--seeds",
        "0-1",
        "--concurrency",
        "8",
        "--db",
        str(db),
        "--json",
    ]
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.01"}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    ended = 0
    while time.monotonic() < deadline and ended < 12:
        time.sleep(0.1)
        if db.exists():
            with TraceStore(db) as store:
                ended = (
                    store.raw_connection()
                    .execute("SELECT count(*) FROM events WHERE kind = 'episode.end'")
                    .fetchone()[0]
                )
    first.send_signal(signal.SIGKILL)
    first.wait()
    with TraceStore(db) as store:
        before = {e.episode_id: e.status for e in store.list_episodes()}
    second = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    result = json.loads(second.stdout.splitlines()[-1])
    with TraceStore(db) as store:
        episodes = store.list_episodes()
        dense = all(
            [r.seq for r in store.iter_events(e.episode_id)] == list(range(1, e.last_seq + 1))
            for e in episodes
        )
    actions = {e["episode_id"]: e["action"] for e in result["episodes"]}
    assert second.returncode == 0 and result["summary"]["completed"] == 28
    assert len(episodes) == 28 and len({(e.task_id, e.seed) for e in episodes}) == 28
    assert all(actions[ep] == "skipped" for ep, status in before.items() if status == "completed")
    assert "interrupted" in before.values() and "resumed" in actions.values()
    assert dense


def test_parse_seeds_refuses_a_range_too_large_to_run() -> None:
    with pytest.raises(UsageError, match="more than 100,000 seeds"):
        parse_seeds("0-100000000")


def test_a_batch_episode_not_started_yet_is_left_to_its_batch(store: TraceStore) -> None:
    (queued,) = store.add_batch(
        "batch-queued", {"name": None}, [("demo-mean", 0, {"kind": "workspace"}, {})]
    ).values()
    why = can_resume(store, store.episode(queued))
    assert why is not None and "waits for its batch" in why


def test_a_member_whose_environment_cannot_be_built_is_reported_as_the_store_has_it(
    tmp_path: Path,
) -> None:
    """The driver's summary agrees with the store: a unit that failed before its episode
    started leaves it pending (resumable), and the summary says pending, not failed."""
    built: list[WorkspaceEnv] = []

    def env_factory() -> WorkspaceEnv:
        if built:  # the driver's probe got one; the unit's worker cannot (a moved tasks file)
            raise UsageError("the tasks file went away")
        built.append(WorkspaceEnv())
        return built[0]

    with TraceStore(tmp_path / "t.db") as store:
        result = run_batch(
            store,
            task_seed_pairs=[("demo-mean", 0)],
            env_factory=env_factory,
            model_factory=lambda: get_model("scripted:demo"),
        )
        (member,) = result.episodes
        (stored,) = store.list_episodes()
    assert (member.action, member.error) == ("error", "the tasks file went away")
    assert member.status == stored.status == "pending"
