"""The Postgres store's append cost next to SQLite's, measured in one run (printed ratios, not
a timed test): a streamed chunk through the runner's append path (recorder, leased writer,
fenced insert, one commit each) into a SQLite file, into Postgres with
``synchronous_commit=off`` (the default: survives a killed client) and with it on
(``synchronous="FULL"``: each commit waits for the server's WAL flush).

Run on demand: ``pytest tests/benchmarks/test_bench_postgres.py -m benchmark -s``.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import pytest

from agentrunner.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.types import Chunk

pytestmark = pytest.mark.benchmark
psycopg = pytest.importorskip("psycopg")

EVENTS = 2000
ROUNDS = 5
CHUNK = Chunk(channel="text", text=("lorem ipsum dolor sit amet, " * 5)[:140])


def _per_event_us(store: TraceStore, n: int) -> float:
    episode_id = store.create_episode(
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=True
    )
    rec = Recorder(store, store.writer(episode_id), secrets={})
    rec.turn = 1
    for _ in range(200):  # warm-up (Postgres prepares the statement after a few runs)
        rec.chunk("call-1", CHUNK)
    start = time.perf_counter_ns()
    for _ in range(n):
        rec.chunk("call-1", CHUNK)
    return (time.perf_counter_ns() - start) / n / 1000


def _bare_us(conn: Any, n: int) -> float:
    """A bare psycopg INSERT + commit of a ~200-byte row into a minimal table."""
    row = "x" * 200
    start = time.perf_counter_ns()
    for _ in range(n):
        conn.execute("INSERT INTO bare (kind, data) VALUES (%s, %s)", ("model.chunk", row))
    return (time.perf_counter_ns() - start) / n / 1000


def test_append_on_postgres_next_to_sqlite(tmp_path: Path, pg_url: str) -> None:
    stores = {
        "sqlite (synchronous=NORMAL)": TraceStore(tmp_path / "bench.db"),
        "postgres synchronous_commit=off": TraceStore(pg_url),
        "postgres synchronous_commit=on": TraceStore(pg_url, synchronous="FULL"),
    }
    bare = psycopg.connect(pg_url, autocommit=True, options="-c synchronous_commit=off")
    bare.execute("CREATE TABLE bare (id BIGSERIAL PRIMARY KEY, kind TEXT, data TEXT)")
    _bare_us(bare, 200)
    figures: dict[str, list[float]] = {name: [] for name in stores}
    baseline: list[float] = []
    for _ in range(ROUNDS):  # interleaved, so all see the same machine
        baseline.append(_bare_us(bare, EVENTS))
        for name, store in stores.items():
            figures[name].append(_per_event_us(store, EVENTS))
    base = statistics.median(figures["sqlite (synchronous=NORMAL)"])
    print(f"\nappend of one streamed chunk ({ROUNDS} rounds x {EVENTS} events, medians):")
    for name, samples in figures.items():
        median = statistics.median(samples)
        print(f"  {name:34} {median:8.1f} us/event  {median / base:6.2f}x sqlite")
    off = statistics.median(figures["postgres synchronous_commit=off"])
    bare_median = statistics.median(baseline)
    print(
        f"  bare psycopg INSERT + commit (sync off) {bare_median:.1f} us/event: the store's"
        f" append (fenced by the lease) costs {off / bare_median:.2f}x that"
    )
    bare.close()
    for store in stores.values():
        store.close()
    assert all(statistics.median(s) > 0 for s in figures.values())
