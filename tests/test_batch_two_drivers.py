"""The same batch command started twice at once, on SQLite and on Postgres: the two drivers
share the pairs nobody has started, each waits for the ones the other runs, and both report
every pair as the store has it. Every (task, seed) runs exactly once, no error, no false
damage report."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from cli_process import last_json, run_cli

from agentrunner import TraceStore

SEEDS = "0-7"
PAIRS = 8


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_batch_started_twice_runs_each_pair_once_and_both_report_it(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    db = str(tmp_path / "shared.db") if backend == "sqlite" else request.getfixturevalue("pg_url")
    command = ("batch", "--db", db, "--task", "demo-mean", "--seeds", SEEDS, "--json")

    def drive(_: int) -> Any:
        # paced chunks: each episode takes long enough that the two drivers overlap
        return run_cli(*command, "--concurrency", "2", pace="0.002", timeout=600)

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(drive, range(2))
    for done in (first, second):
        assert done.returncode == 0, done.stderr[-2000:]
        assert "damaged" not in done.stderr
    reports = [last_json(done.stdout) for done in (first, second)]
    assert reports[0]["batch_id"] == reports[1]["batch_id"]
    for report in reports:
        assert report["summary"]["completed"] == PAIRS and report["summary"]["errors"] == 0
    ran = [
        e["episode_id"] for report in reports for e in report["episodes"] if e["action"] == "ran"
    ]
    assert sorted(ran) == sorted(set(ran)) and len(ran) == PAIRS  # each run by one driver
    with TraceStore(db) as store:
        episodes = store.list_episodes()
    assert len(episodes) == PAIRS
    assert {(e.task_id, e.seed) for e in episodes} == {("demo-mean", s) for s in range(PAIRS)}
    assert all(e.status == "completed" and e.attempt == 1 for e in episodes)
    shown = {e["episode_id"]: e["total_reward"] for e in reports[1]["episodes"]}
    assert shown == {e.episode_id: e.total_reward for e in episodes}  # the driver = the store
