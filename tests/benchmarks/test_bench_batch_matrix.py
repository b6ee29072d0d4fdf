"""One batch four ways, in one run: threads or a local Ray cluster, into SQLite or Postgres
(issue 26's benchmark; printed figures, not a timed test).

The same 210 (task, seed) pairs run with the same concurrency under each of the four set-ups;
each is checked (every pair exactly once, completed, dense seqs) and its wall time printed as a
ratio against threads into SQLite measured in the same run. On Postgres, a sampler counts the
connections agentrunner holds (``application_name``) while the batch runs: the peak, and the
peak per worker process (the driver's for threads, each actor's for Ray). Run on demand:
``pytest tests/benchmarks/test_bench_batch_matrix.py -m benchmark -s``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest

from agentrunner import TraceStore
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from agentrunner.runtime.distributed import plan
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.benchmark
ray = pytest.importorskip("ray")

EPISODES = 210
CONCURRENCY = 16
PACE_S = 0.002  # the scripted model's seconds per streamed chunk


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


class _Connections:
    """Samples the server's sessions named ``agentrunner`` every 50 ms and keeps the peak."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            row = self._conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'agentrunner'"
            ).fetchone()
            self.peak = max(self.peak, int(row[0]) if row else 0)

    def __enter__(self) -> _Connections:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def _run(location: str, executor: Literal["threads", "ray"]) -> tuple[float, int]:
    pairs = [("demo-mean", seed) for seed in range(EPISODES)]
    with TraceStore(location) as store:
        started = time.perf_counter()
        result = run_batch(
            store,
            task_seed_pairs=pairs,
            env_factory=WorkspaceEnv,
            model_fn=ScriptedModel("demo", pace=PACE_S),
            concurrency=CONCURRENCY,
            executor=executor,
        )
        elapsed = time.perf_counter() - started
        episodes = store.list_episodes()
        events = 0
        for episode in episodes:
            seqs = [e.seq for e in store.iter_events(episode.episode_id)]
            assert seqs == list(range(1, len(seqs) + 1)), "seqs not dense"
            events += len(seqs)
    assert {e.action for e in result.episodes} == {"ran"}
    assert len(episodes) == EPISODES and {e.status for e in episodes} == {"completed"}
    assert sorted((e.task_id, e.seed) for e in episodes) == sorted(pairs)
    return elapsed, events


def test_a_210_episode_batch_threads_and_ray_into_sqlite_and_postgres(
    cluster: None, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    figures: dict[str, tuple[float, int, int | None]] = {}
    for executor in ("threads", "ray"):
        elapsed, events = _run(str(tmp_path / f"{executor}.db"), executor)
        figures[f"{executor}, SQLite"] = (elapsed, events, None)
        url = request.getfixturevalue("pg_server").schema_url()
        with _Connections(url) as connections:
            elapsed, events = _run(url, executor)
        figures[f"{executor}, Postgres"] = (elapsed, events, connections.peak)
    base = figures["threads, SQLite"][0]
    processes = {"threads": 1, "ray": plan(ray, CONCURRENCY, EPISODES)[0]}
    print(
        f"\n{EPISODES} episodes, {CONCURRENCY} at once,"
        f" the scripted model at {PACE_S * 1e3:.0f} ms a chunk"
    )
    for name, (elapsed, events, peak) in figures.items():
        workers = processes[name.split(",")[0]]
        held = (
            f", peak {peak} connections ({peak / workers:.1f} per worker process, {workers})"
            if peak is not None
            else ""
        )
        print(
            f"  {name:18} {elapsed:6.1f} s  {elapsed / base:4.2f}x threads+SQLite"
            f"  {events / elapsed:7,.0f} events/s{held}"
        )
