"""64 concurrent scripted episodes over Ray into Postgres: events per second, none lost
(printed figures, not a timed test).

A local Ray cluster (started here, as ``ray start`` would on one machine) runs a batch of 64
(task, seed) pairs with ``--concurrency 64`` (two actors of 32 episode threads on a 2-core
machine) into a real Postgres store; then every episode is checked: completed, dense seqs,
one episode per pair. Run on demand:
``pytest tests/benchmarks/test_bench_ray.py -m benchmark -s``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from providers.scripted import ScriptedModel

pytestmark = pytest.mark.benchmark
ray = pytest.importorskip("ray")

EPISODES = 64
PACE_S = 0.005  # the scripted model's seconds per streamed chunk (a real model is slower)


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    started = time.perf_counter()
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    print(f"\nlocal Ray cluster up in {time.perf_counter() - started:.1f} s")
    yield
    ray.shutdown()


def test_64_concurrent_episodes_over_ray_into_postgres(
    cluster: None, pg_url: str, tmp_path: Path
) -> None:
    pairs = [("demo-mean", seed) for seed in range(EPISODES)]
    with TraceStore(pg_url) as store:
        started = time.perf_counter()
        result = run_batch(
            store,
            task_seed_pairs=pairs,
            env_factory=WorkspaceEnv,
            model_fn=ScriptedModel("demo", pace=PACE_S),
            concurrency=EPISODES,
            executor="ray",
        )
        elapsed = time.perf_counter() - started
        episodes = store.list_episodes()
        events = 0
        for episode in episodes:
            seqs = [e.seq for e in store.iter_events(episode.episode_id)]
            assert seqs == list(range(1, len(seqs) + 1)), "seqs not dense"
            events += len(seqs)
    assert len(episodes) == EPISODES and {e.status for e in episodes} == {"completed"}
    assert sorted((e.task_id, e.seed) for e in episodes) == sorted(pairs)
    assert {e.action for e in result.episodes} == {"ran"}
    print(
        f"{EPISODES} episodes, {EPISODES} at once on Ray into Postgres: {events} events in"
        f" {elapsed:.1f} s = {events / elapsed:,.0f} events/s committed; all completed, dense"
        f" seqs, none lost (scripted model at {PACE_S * 1000:.0f} ms a chunk)"
    )
