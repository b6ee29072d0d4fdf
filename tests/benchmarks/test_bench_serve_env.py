"""16 OpenEnv sessions against one ``serve-env`` for a minute, and the same steps in-process.

Run on demand: ``pytest tests/benchmarks/test_bench_serve_env.py -m benchmark -s``
(``AGENTRUNNER_BENCH_SERVE_S`` sets the seconds per phase, default 60;
``AGENTRUNNER_BENCH_SERVE_SESSIONS`` the sessions, default 16). Each of 16 clients
(agentrunner's OpenEnv client, one thread each) runs episodes back to back for the duration:
reset, list the files, read one, write the fix, run the tests, submit. The same steps then run
in-process on 16 workspace environments (their snapshots kept in a store, as the runner does)
for as long. Prints p50/p95 step latency of both and their ratio; asserts only that every
served episode was recorded complete, its events dense, with the reward its submit got.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from serve_support import SUBMIT, TASK, WRITE_FIX, serve_env

from agentrunner import TraceStore
from agentrunner.envs.openenv_client import OpenEnvEnv
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.environment import ToolAction

pytestmark = pytest.mark.benchmark

SESSIONS = int(os.environ.get("AGENTRUNNER_BENCH_SERVE_SESSIONS", "16"))
SECONDS = float(os.environ.get("AGENTRUNNER_BENCH_SERVE_S", "60"))
STEPS: list[dict[str, Any]] = [
    {"tool": "list_files"},
    {"tool": "read_file", "path": "stats.py"},
    WRITE_FIX,
    {"tool": "bash", "command": "python -m unittest 2>&1 | tail -n 1"},
    SUBMIT,
]

Stepper = Callable[[dict[str, Any]], float | None]


def _for_a_while(open_episode: Callable[[], tuple[Stepper, Callable[[], None]]]) -> list[float]:
    """Run episodes of STEPS on SESSIONS threads for SECONDS; every step's latency."""
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + SECONDS

    def client() -> None:
        while time.monotonic() < deadline:
            step, close = open_episode()
            try:
                for action in STEPS:
                    started = time.perf_counter()
                    reward = step(action)
                    with lock:
                        latencies.append(time.perf_counter() - started)
                assert reward == 1.0
            finally:
                close()

    with ThreadPoolExecutor(SESSIONS) as pool:
        for future in [pool.submit(client) for _ in range(SESSIONS)]:
            future.result()
    return latencies


def _served(url: str) -> tuple[Stepper, Callable[[], None]]:
    env = OpenEnvEnv(url, timeout=600)
    env.reset(TASK, 0)

    def step(action: dict[str, Any]) -> float | None:
        return env.step(ToolAction(name="workspace", arguments=action)).reward

    return step, env.close


def _in_process(store: TraceStore) -> tuple[Stepper, Callable[[], None]]:
    env = WorkspaceEnv()
    env.bind_store(store)
    env.reset(TASK, 0)

    def step(action: dict[str, Any]) -> float | None:
        arguments = {k: v for k, v in action.items() if k != "tool"}
        return env.step(ToolAction(name=action["tool"], arguments=arguments)).reward

    return step, env.close


def _percentiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100)
    return cuts[49] * 1000, cuts[94] * 1000


def test_sixteen_sessions_for_a_minute(tmp_path: Path) -> None:
    with serve_env(tmp_path, "--max-sessions", str(SESSIONS)) as server:
        served = _for_a_while(lambda: _served(server.url))
    with TraceStore(tmp_path / "in-process.db") as store:
        local = _for_a_while(lambda: _in_process(store))
    with TraceStore(server.db) as store:
        episodes = store.episode_ids()
        summaries = [store.episode(e) for e in episodes]
        dense = all(
            [e.seq for e in store.iter_events(ep)] == list(range(1, summary.last_seq + 1))
            for ep, summary in zip(episodes, summaries, strict=True)
        )
    served_p50, served_p95 = _percentiles(served)
    local_p50, local_p95 = _percentiles(local)
    print(
        f"\n{SESSIONS} sessions, {SECONDS:g} s each way: {len(episodes)} served episodes,"
        f" {len(served)} served steps, {len(local)} in-process steps"
        f"\nserved      p50 {served_p50:8.1f} ms  p95 {served_p95:8.1f} ms"
        f"\nin-process  p50 {local_p50:8.1f} ms  p95 {local_p95:8.1f} ms"
        f"\nratio       p50 {served_p50 / local_p50:8.2f}x    p95 {served_p95 / local_p95:8.2f}x"
    )
    assert len(served) == len(episodes) * len(STEPS)
    assert all(s.status == "completed" and s.total_reward == 1.0 for s in summaries)
    assert dense
