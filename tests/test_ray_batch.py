"""Batches and fan-outs on a real local Ray cluster (one per module, several workers)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_process import AGENTRUNNER, last_json, run_cli
from ray_episodes import (
    assert_each_pair_completed_once,
    batch_hurt_midway,
    batch_kwargs,
    mid_episode,
    open_store,
    pairs,
    wait_for,
)

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from agentrunner.lifecycle.fanout import score_actions
from agentrunner.runtime.distributed import plan
from agentrunner.store.groups import fork_groups
from providers import get_model

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentrunner[ray]')")

FIX = {
    "name": "str_replace",
    "arguments": {
        "path": "stats.py",
        "old_str": "return total / (len(values) - 1)",
        "new_str": "return total / len(values)",
    },
}
SUBMIT = {"name": "submit", "arguments": {}}


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[str]:
    """A local cluster of 4 CPUs for the module (starting one costs seconds and ~0.7 GB);
    its workers inherit an unpaced scripted model. Yields its address."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TraceStore]:
    yield from open_store(request, tmp_path)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[TraceStore]:
    with TraceStore(tmp_path / "traces.db") as store:
        yield store


def test_a_batch_of_16_runs_each_pair_once_to_completion_on_ray(
    store: TraceStore, tmp_path: Path
) -> None:
    result = run_batch(store, task_seed_pairs=pairs(8), concurrency=8, **batch_kwargs(tmp_path))
    assert [e.action for e in result.episodes] == ["ran"] * 16
    assert_each_pair_completed_once(store, pairs(8))
    assert store.batch_members(result.batch_id) == {
        (e.task_id, e.seed): e.episode_id for e in result.episodes
    }


def test_a_batch_runs_in_several_worker_processes_that_closures_reach(
    sqlite_store: TraceStore, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    def env_factory() -> WorkspaceEnv:  # a closure: Ray pickles it by value
        (pids / str(os.getpid())).touch()
        return WorkspaceEnv(snapshot_dir=tmp_path / "snapshots")

    kwargs = {**batch_kwargs(tmp_path), "env_factory": env_factory}
    run_batch(sqlite_store, task_seed_pairs=pairs(4), concurrency=8, **kwargs)
    workers = {int(p.name) for p in pids.iterdir()} - {os.getpid()}
    assert len(workers) == plan(ray, concurrency=8, units=8)[0] == 2


def test_rerunning_a_ray_batch_skips_its_completed_episodes(
    sqlite_store: TraceStore, tmp_path: Path
) -> None:
    run_batch(sqlite_store, task_seed_pairs=pairs(2), **batch_kwargs(tmp_path))
    again = run_batch(sqlite_store, task_seed_pairs=pairs(2), **batch_kwargs(tmp_path))
    assert [e.action for e in again.episodes] == ["skipped"] * 4
    assert len(sqlite_store.list_episodes()) == 4


def test_a_stopped_ray_batch_cancels_its_episodes_and_the_next_run_resumes_them(
    sqlite_store: TraceStore, tmp_path: Path
) -> None:
    location = sqlite_store.location
    stopped = False

    def stop() -> bool:
        nonlocal stopped
        stopped = stopped or mid_episode(location, 4) is not None
        return stopped

    first = run_batch(
        sqlite_store,
        task_seed_pairs=pairs(2),
        cancel_check=stop,
        **batch_kwargs(tmp_path, pace=0.02),
    )
    assert "cancelled" in {e.status for e in first.episodes}
    second = run_batch(sqlite_store, task_seed_pairs=pairs(2), **batch_kwargs(tmp_path))
    assert "resumed" in {e.action for e in second.episodes}
    assert all(e.status == "completed" for e in second.episodes)


@pytest.mark.slow
def test_episodes_of_a_killed_ray_worker_resume_on_its_replacement_and_complete_once(
    store: TraceStore, tmp_path: Path
) -> None:
    batch_hurt_midway(
        store, tmp_path, lambda victim: os.kill(victim.writer_pid or 0, signal.SIGKILL)
    )


@pytest.fixture
def parent(store: TraceStore, tmp_path: Path) -> str:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=store
        )
    return rollout.episode_id


def test_fanout_on_ray_records_the_same_fork_group_as_in_threads(
    store: TraceStore, parent: str
) -> None:
    candidates = [[SUBMIT], [FIX, SUBMIT], [FIX]]
    on_ray = score_actions(store, parent, turn=4, actions=candidates, n=2, executor="ray")
    in_threads = score_actions(store, parent, turn=4, actions=candidates, n=2)
    groups = {g.group_id: g for g in fork_groups(store, parent)}

    def shape(group_id: str) -> list[tuple[int, int, object]]:
        return sorted((m.candidate, m.sample, m.action) for m in groups[group_id].members)

    assert shape(on_ray.group_id) == shape(in_threads.group_id)
    assert len(shape(on_ray.group_id)) == 3 * 2
    assert [(c.candidate, c.rewards) for c in on_ray.ranked] == [
        (c.candidate, c.rewards) for c in in_threads.ranked
    ]
    forks = [e for c in on_ray.ranked for e in c.episodes]
    assert {store.episode(f).status for f in forks} == {"completed"}


def test_sampled_fanout_on_ray_has_k_proposals_and_k_x_n_continuations_as_in_threads(
    sqlite_store: TraceStore, tmp_path: Path
) -> None:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        parent = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=sqlite_store
        ).episode_id
    on_ray = score_actions(sqlite_store, parent, turn=4, k=2, n=2, horizon=1, executor="ray")
    in_threads = score_actions(sqlite_store, parent, turn=4, k=2, n=2, horizon=1)
    groups = {g.group_id: g.members for g in fork_groups(sqlite_store, parent)}

    def shape(group_id: str) -> list[tuple[int, int]]:
        return sorted((m.candidate, m.sample) for m in groups[group_id])

    assert shape(on_ray.group_id) == shape(in_threads.group_id)
    assert shape(on_ray.group_id) == [(c, s) for c in range(2) for s in (-1, 0, 1)]


def test_cli_batch_runs_on_the_ray_cluster_at_an_address(cluster: str, tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    done = run_cli(
        "batch", "--seeds", "0-1", "--task", "demo-mean", "--db", str(db), "--json",
        "--ray", cluster,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert last_json(done.stdout)["summary"]["completed"] == 2


def test_cli_fanout_runs_its_forks_on_the_ray_cluster(
    cluster: str, sqlite_store: TraceStore, tmp_path: Path
) -> None:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        parent = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=get_model("scripted:demo"), store=sqlite_store
        ).episode_id
    done = run_cli(
        "fanout", parent, "--turn", "4", "--action", f"[{FIX}, {SUBMIT}]".replace("'", '"'),
        "-n", "2", "--db", sqlite_store.location, "--json", f"--ray={cluster}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (candidate,) = last_json(done.stdout)["ranked"]
    assert candidate["rewards"] == [1.0, 1.0]


@pytest.mark.slow
def test_ctrl_c_on_a_ray_batch_cancels_its_episodes_exits_130_and_a_rerun_resumes(
    cluster: str, tmp_path: Path
) -> None:
    db = tmp_path / "cli.db"
    tasks = ["--task", "demo-mean", "--task", "paginate-off-by-one"]
    args = [*AGENTRUNNER, "batch", "--seeds", "0-3", *tasks, "--concurrency", "2"]
    args += ["--db", str(db), "--ray", cluster]
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"}
    driver = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: db.exists() and mid_episode(str(db), 4), "an episode half-way")
    driver.send_signal(signal.SIGINT)
    _, err = driver.communicate(timeout=300)
    assert driver.returncode == 130 and b"Traceback" not in err
    # Every episode running at the Ctrl-C recorded its cancel (none is left interrupted or
    # running); one that finished between the check above and the signal is completed.
    with TraceStore(db) as store:
        stopped = {e.status for e in store.list_episodes()}
    assert stopped <= {"completed", "cancelled", "pending"}, stopped
    again = run_cli(*args[3:], "--json")
    assert again.returncode == 0, again.stderr
    report = last_json(again.stdout)
    assert report["summary"]["completed"] == 8 and report["summary"]["errors"] == 0
    if "cancelled" in stopped:
        assert "resumed" in {e["action"] for e in report["episodes"]}
