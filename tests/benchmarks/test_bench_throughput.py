"""Throughput: 64 concurrent scripted episodes streaming chunks into one store.

Reports events recorded per second and checks that no chunk was lost: for every model call
the recorded chunks add up to the recorded message, and every episode's seqs are dense.
Run: pytest tests/benchmarks -m benchmark -s
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.batch import run_batch
from providers import get_model

pytestmark = pytest.mark.benchmark

EPISODES = 64
TASKS = ["demo-mean", "paginate-off-by-one", "slugify-accents"]


def test_64_concurrent_episodes_stream_into_one_store_without_losing_a_chunk(
    tmp_path: Path,
) -> None:
    store = TraceStore(tmp_path / "traces.db")
    pairs = [(TASKS[i % len(TASKS)], i) for i in range(EPISODES)]
    started = time.perf_counter()
    result = run_batch(
        store,
        task_seed_pairs=pairs,
        env_factory=lambda: WorkspaceEnv(snapshot_dir=tmp_path / "snapshots"),
        model_factory=lambda: get_model("scripted:demo", pace=0.002),
        concurrency=EPISODES,
    )
    elapsed = time.perf_counter() - started
    events = store.raw_connection().execute("SELECT count(*) FROM events").fetchone()[0]
    chunks = (
        store.raw_connection()
        .execute("SELECT count(*) FROM events WHERE kind = 'model.chunk'")
        .fetchone()[0]
    )
    print(
        f"\n{EPISODES} concurrent episodes: {events} events ({chunks} chunks) in {elapsed:.2f} s"
        f" = {events / elapsed:,.0f} events/s recorded (wall clock, incl. tool steps)"
    )
    assert all(e.status == "completed" for e in result.episodes)
    for episode in store.list_episodes():
        rows = list(store.iter_events(episode.episode_id))
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
        streamed: dict[tuple[str, str], str] = defaultdict(str)
        for r in rows:
            if r.kind == "model.chunk":
                streamed[(r.payload["call_id"], r.payload["channel"])] += r.payload["text"]
        for r in rows:
            if r.kind == "model.response":
                message = store.message(r.payload["message_hash"])
                call = r.payload["call_id"]
                assert streamed.get((call, "text"), "") == message.content
                assert streamed.get((call, "reasoning"), "") == (message.reasoning or "")
                args = "".join(c.arguments for c in message.tool_calls)
                assert streamed.get((call, "tool_args"), "") == args


def test_64_concurrent_writers_append_chunks_without_loss(tmp_path: Path) -> None:
    """The store alone: 64 threads, one episode each, appending 500 chunks as fast as they can."""
    import threading

    from agentrunner.values.events import ModelChunk

    store = TraceStore(tmp_path / "traces.db")
    per_episode = 500
    episodes = [
        store.create_episode(task_id="t", seed=i, env={}, model={}) for i in range(EPISODES)
    ]
    barrier = threading.Barrier(EPISODES)

    def write(episode_id: str) -> None:
        writer = store.writer(episode_id)
        barrier.wait()
        for i in range(per_episode):
            writer.append(1, ModelChunk(call_id="c", channel="text", index=i, text="x" * 40))

    threads = [threading.Thread(target=write, args=(e,)) for e in episodes]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    total = EPISODES * per_episode
    print(
        f"\n{EPISODES} writer threads: {total} chunk events in {elapsed:.2f} s = "
        f"{total / elapsed:,.0f} events/s, one commit each"
    )
    counts = dict(
        store.raw_connection().execute("SELECT episode_id, count(*) FROM events GROUP BY 1")
    )
    assert counts == {e: per_episode for e in episodes}
