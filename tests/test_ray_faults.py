"""The Ray executor through faults: a unit whose worker dies is submitted again (and given
up, with a clear error, when it kills its worker every time), a unit's own error is shown
as its cause, and a dead cluster address fails at once instead of hanging."""

from __future__ import annotations

import functools
import os
import random
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_process import AGENTRUNNER, last_json, run_cli
from ray_episodes import (
    TASKS,
    assert_each_pair_completed_once,
    assert_summary_is_the_stores,
    kinds,
    mid_episode,
    total_events,
    wait_for,
)

from agentrunner import EpisodeSummary, TraceStore
from agentrunner.runtime.distributed import UNIT_LOSSES, Lost, RayExecutor

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentrunner[ray]')")


PACE = "0.01"  # seconds a chunk of the scripted model: episodes are in flight for seconds


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[str]:
    """A local cluster of 2 CPUs whose workers run a paced scripted model; its address."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AGENTRUNNER_SCRIPTED_PACE", PACE)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def test_a_unit_whose_worker_died_runs_again_and_one_that_always_kills_it_is_given_up() -> None:
    def work(unit: str, stopped: object) -> str:  # a closure: Ray pickles it by value
        if unit == "poison":
            os.kill(os.getpid(), signal.SIGKILL)
        return unit

    with RayExecutor(work, concurrency=1) as executor:
        first, poison, last = executor.map(["first", "poison", "last"])
    assert (first, last) == ("first", "last")
    assert isinstance(poison, Lost) and not poison.cancelled
    assert f"its Ray worker died {UNIT_LOSSES} times while running it" in poison.reason


def test_a_unit_whose_worker_dies_one_time_less_than_the_limit_completes(
    tmp_path: Path,
) -> None:
    kills = tmp_path / "kills"
    kills.mkdir()

    def work(unit: str, stopped: object) -> str:
        if unit == "killer" and len(list(kills.iterdir())) < UNIT_LOSSES - 1:
            (kills / str(os.getpid())).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return unit

    with RayExecutor(work, concurrency=2) as executor:
        assert executor.map(["a", "killer", "b"]) == ["a", "killer", "b"]
    assert len(list(kills.iterdir())) == UNIT_LOSSES - 1


def test_a_unit_whose_actor_is_gone_for_good_runs_on_a_new_actor(tmp_path: Path) -> None:
    marker = tmp_path / "gone"

    def work(unit: str, stopped: object) -> str:
        if unit == "b" and not marker.exists():
            marker.touch()
            ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
        return unit

    with RayExecutor(work, concurrency=1) as executor:
        assert executor.map(["a", "b", "c"]) == ["a", "b", "c"]
    assert marker.exists()


def test_a_unit_that_raises_on_its_worker_is_lost_with_the_cause_in_one_plain_line() -> None:
    def work(unit: str, stopped: object) -> str:
        raise ValueError(f"no workspace for {unit}\nsecond line")

    with RayExecutor(work, concurrency=1) as executor:
        (lost,) = executor.map(["u1"])
    assert lost == Lost("it failed on its Ray worker: ValueError: no workspace for u1")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_batch_on_a_dead_ray_address_exits_2_with_one_line_instead_of_hanging(
    tmp_path: Path,
) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    done = run_cli(
        "batch", "--seeds", "0", "--task", "demo-mean", "--db", str(tmp_path / "t.db"),
        "--ray", address, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    (message,) = [line for line in done.stderr.splitlines() if "error" in line]
    assert message.startswith(f"error: cannot connect to the Ray cluster at {address}: ")
    assert "nothing answers" in message and "Traceback" not in done.stderr


def test_batch_on_a_dead_ray_address_records_nothing(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    done = run_cli(
        "batch", "--seeds", "0", "--task", "demo-mean", "--db", str(db),
        "--ray", f"127.0.0.1:{_closed_port()}", timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    with TraceStore(db) as store:
        assert store.list_episodes() == []


@pytest.mark.slow
def test_a_cli_batch_completes_each_pair_once_through_worker_kills_at_random_instants(
    cluster: str, tmp_path: Path
) -> None:
    """Seven SIGKILLs, fewer than UNIT_LOSSES (so no unit can be given up): the writer of
    one episode five times (its first worker, then each it resumed on: more than Ray's own
    retries of a task would take), then writers of running episodes once the store holds
    a random number of events."""
    db = str(tmp_path / "kills.db")
    seeds = 6
    driver = subprocess.Popen(
        [*AGENTRUNNER, "batch", "--seeds", f"0-{seeds - 1}", "--task", TASKS[0],
         "--task", TASKS[1], "--concurrency", "8", "--db", db, "--json", "--ray", cluster],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": PACE},
    )  # fmt: skip
    killed: list[int] = []

    def kill(victim: EpisodeSummary) -> EpisodeSummary:
        assert victim.writer_pid is not None and victim.writer_pid != driver.pid
        os.kill(victim.writer_pid, signal.SIGKILL)
        killed.append(victim.writer_pid)
        return victim

    def running(min_events: int) -> EpisodeSummary | None:
        e = mid_episode(db, min_events) if Path(db).exists() else None
        return e if e is not None and e.writer_pid not in killed else None

    def resumed(last: EpisodeSummary) -> EpisodeSummary | None:
        with TraceStore(db) as store:
            e = store.episode(last.episode_id)
        moved = e.status == "running" and e.writer_pid not in killed
        return e if moved and e.last_seq > last.last_seq + 2 else None

    def ended_or_running_past(events: int) -> EpisodeSummary | bool:
        if driver.poll() is not None:
            return True  # the batch ended first
        return total_events(db) >= events and (running(1) or False)

    again = kill(wait_for(lambda: running(10), "an episode under way"))
    for _ in range(4):
        again = kill(wait_for(functools.partial(resumed, again), "it running on a new worker"))
    for at in sorted(random.Random(26).sample(range(300, 1200), 2)):
        victim = wait_for(functools.partial(ended_or_running_past, at), f"{at} events")
        if isinstance(victim, EpisodeSummary):
            kill(victim)
    out, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    report = last_json(out)
    expected = [(t, s) for t in TASKS for s in range(seeds)]
    with TraceStore(db) as store:
        assert_each_pair_completed_once(store, expected)
        assert_summary_is_the_stores(report["summary"], store)
        assert kinds(store, again.episode_id).count("resume") >= 5
    statuses = {e["episode_id"]: e["status"] for e in report["episodes"]}
    assert statuses[again.episode_id] == "completed"


def test_batch_ray_without_an_address_runs_past_a_head_stopped_by_its_pid(tmp_path: Path) -> None:
    """A head stopped by its PID (as the README advises) leaves Ray's note of the host's
    current cluster behind; ``--ray`` with no address starts a cluster of its own anyway
    (Ray's default would join the dead one and hang)."""
    from ray._common.utils import get_default_ray_temp_dir

    note = Path(get_default_ray_temp_dir()) / "ray_current_cluster"
    before = note.read_text() if note.exists() else None
    note.parent.mkdir(parents=True, exist_ok=True)
    note.write_text(f"127.0.0.1:{_closed_port()}")
    try:
        done = run_cli(
            "batch", "--seeds", "0-1", "--task", TASKS[0], "--db", str(tmp_path / "t.db"),
            "--json", "--ray", timeout=600,
        )  # fmt: skip
    finally:
        if before is None:
            note.unlink(missing_ok=True)
        else:
            note.write_text(before)
    assert done.returncode == 0, done.stderr[-3000:]
    assert last_json(done.stdout)["summary"]["completed"] == 2
