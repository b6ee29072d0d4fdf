"""The Postgres store's append cost next to bare psycopg and SQLite, measured in one run
(printed ratios, not a timed test).

Through the runner's append path (recorder, leased writer, fenced insert, one commit each):
a streamed chunk, which commits with ``synchronous_commit=off`` (the default: survives a
killed client), and an event the runner acts on (a ``tool.call``), which commits with it on
(each commit waits for the server's WAL flush, so a crash of the server cannot lose it);
with ``synchronous="FULL"`` every event does. Beside them: a bare psycopg INSERT + commit of a
~200-byte row into a minimal table, with the same two settings, and a chunk into SQLite.

Run on demand: ``pytest tests/benchmarks/test_bench_postgres.py -m benchmark -s``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentrunner.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.types import AgentToolCall, Chunk

pytestmark = pytest.mark.benchmark
psycopg = pytest.importorskip("psycopg")

EVENTS = 2000
FLUSHED_EVENTS = 300
"""Fewer of the events whose every commit waits for a WAL flush (they take milliseconds)."""
ROUNDS = 5
CHUNK = Chunk(channel="text", text=("lorem ipsum dolor sit amet, " * 5)[:140])
CALL = AgentToolCall(call_id="call_1", name="bash", arguments='{"command": "ls -la src"}')


def _recorder(store: TraceStore) -> Recorder:
    episode_id = store.create_episode(
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=True
    )
    rec = Recorder(store, store.writer(episode_id), secrets={})
    rec.turn = 1
    return rec


def _chunk(rec: Recorder) -> None:
    rec.chunk("call-1", CHUNK)


def _tool_call(rec: Recorder) -> None:
    rec.tool_call(CALL, {"command": "ls -la src"}, None)


def _per_event_us(store: TraceStore, append: Callable[[Recorder], None], n: int) -> float:
    rec = _recorder(store)
    for _ in range(50):  # warm-up (Postgres prepares the statement after a few runs)
        append(rec)
    start = time.perf_counter_ns()
    for _ in range(n):
        append(rec)
    return (time.perf_counter_ns() - start) / n / 1000


def _bare_us(conn: Any, n: int) -> float:
    """A bare psycopg INSERT + commit of a ~200-byte row into a minimal table."""
    row = "x" * 200
    start = time.perf_counter_ns()
    for _ in range(n):
        conn.execute("INSERT INTO bare (kind, data) VALUES (%s, %s)", ("model.chunk", row))
    return (time.perf_counter_ns() - start) / n / 1000


def test_append_on_postgres_next_to_bare_psycopg_and_sqlite(tmp_path: Path, pg_url: str) -> None:
    sqlite, pg, full = (
        TraceStore(tmp_path / "bench.db"),
        TraceStore(pg_url),
        TraceStore(pg_url, synchronous="FULL"),
    )
    bare = {
        sync: psycopg.connect(pg_url, autocommit=True, options=f"-c synchronous_commit={sync}")
        for sync in ("off", "on")
    }
    bare["off"].execute("CREATE TABLE bare (id BIGSERIAL PRIMARY KEY, kind TEXT, data TEXT)")
    runs: dict[str, Callable[[], float]] = {
        "bare psycopg, synchronous_commit=off": lambda: _bare_us(bare["off"], EVENTS),
        "bare psycopg, synchronous_commit=on": lambda: _bare_us(bare["on"], FLUSHED_EVENTS),
        "chunk (commit: sync off)": lambda: _per_event_us(pg, _chunk, EVENTS),
        "tool.call (commit: sync on)": lambda: _per_event_us(pg, _tool_call, FLUSHED_EVENTS),
        "FULL: chunk (sync on)": lambda: _per_event_us(full, _chunk, FLUSHED_EVENTS),
        "FULL: tool.call (sync on)": lambda: _per_event_us(full, _tool_call, FLUSHED_EVENTS),
        "sqlite chunk (synchronous=NORMAL)": lambda: _per_event_us(sqlite, _chunk, EVENTS),
    }
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):  # interleaved, so all see the same machine
        for name, run in runs.items():
            figures[name].append(run())
    median = {name: statistics.median(samples) for name, samples in figures.items()}
    off, on = (
        median["bare psycopg, synchronous_commit=off"],
        median["bare psycopg, synchronous_commit=on"],
    )
    print(f"\nappend of one event into Postgres ({ROUNDS} rounds, medians, us/event):")
    for name, value in median.items():
        if name.startswith("sqlite"):
            print(f"  {name:38} {value:9.1f}  (for reference)")
            continue
        base = on if "sync on" in name or name.endswith("=on") else off
        print(f"  {name:38} {value:9.1f}  {value / base:5.2f}x bare psycopg with the same setting")
    for conn in bare.values():
        conn.close()
    for store in (sqlite, pg, full):
        store.close()
    assert all(value > 0 for value in median.values())
