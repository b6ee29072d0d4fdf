"""The Postgres store's append cost next to bare psycopg and SQLite, measured in one run
(printed ratios, not a timed test).

Through the runner's append path (recorder, leased writer, fenced insert, one commit each):
a streamed chunk, which commits with ``synchronous_commit=off`` (the default: survives a
killed client), and an event the runner acts on (a ``tool.call``), which commits with it on
(each commit waits for the server's WAL flush, so a crash of the server cannot lose it);
with ``synchronous="FULL"`` every event does. Beside them: a bare psycopg INSERT + commit of a
~200-byte row into a minimal table, with the same two settings, and a chunk into SQLite.

A chunk of an episode nobody leased (no fence) shows what the lease fence costs.

Run on demand: ``pytest tests/benchmarks/test_bench_postgres.py -m benchmark -s``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentrunner.runtime.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.values.types import AgentToolCall, Chunk

pytestmark = pytest.mark.benchmark
psycopg = pytest.importorskip("psycopg")

EVENTS = 2000
FLUSHED_EVENTS = 300
"""Fewer of the events whose every commit waits for a WAL flush (they take milliseconds)."""
ROUNDS = 7
BLOCKS = 10
CHUNK = Chunk(channel="text", text=("lorem ipsum dolor sit amet, " * 5)[:140])
CALL = AgentToolCall(call_id="call_1", name="bash", arguments='{"command": "ls -la src"}')


def _recorder(store: TraceStore, *, leased: bool = True) -> Recorder:
    episode_id = store.create_episode(
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=leased
    )
    rec = Recorder(store, store.writer(episode_id), secrets={})
    rec.turn = 1
    return rec


def _chunk(rec: Recorder) -> None:
    rec.chunk("call-1", CHUNK)


def _tool_call(rec: Recorder) -> None:
    rec.tool_call(CALL, {"command": "ls -la src"}, None)


def _appends(rec: Recorder, append: Callable[[Recorder], None]) -> Callable[[int], None]:
    def run(n: int) -> None:
        for _ in range(n):
            append(rec)

    return run


def _bare(conn: Any) -> Callable[[int], None]:
    """A bare psycopg INSERT + commit of a ~200-byte row into a minimal table."""
    row = "x" * 200

    def run(n: int) -> None:
        for _ in range(n):
            conn.execute("INSERT INTO bare (kind, data) VALUES (%s, %s)", ("model.chunk", row))

    return run


def _timed_us(run: Callable[[int], None], n: int) -> float:
    start = time.perf_counter_ns()
    run(n)
    return (time.perf_counter_ns() - start) / n / 1000


OFF, ON = "bare psycopg, synchronous_commit=off", "bare psycopg, synchronous_commit=on"


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
    chunks, flushed = EVENTS // BLOCKS, FLUSHED_EVENTS // BLOCKS
    runs: dict[str, tuple[str | None, int, Callable[[int], None]]] = {
        OFF: (None, chunks, _bare(bare["off"])),
        ON: (None, flushed, _bare(bare["on"])),
        "chunk (commit: sync off)": (OFF, chunks, _appends(_recorder(pg), _chunk)),
        "chunk, no lease: unfenced (sync off)": (
            OFF,
            chunks,
            _appends(_recorder(pg, leased=False), _chunk),
        ),
        "tool.call (commit: sync on)": (ON, flushed, _appends(_recorder(pg), _tool_call)),
        "FULL: chunk (sync on)": (ON, flushed, _appends(_recorder(full), _chunk)),
        "FULL: tool.call (sync on)": (ON, flushed, _appends(_recorder(full), _tool_call)),
        "sqlite chunk (synchronous=NORMAL)": (None, chunks, _appends(_recorder(sqlite), _chunk)),
    }
    for _, _, run in runs.values():
        run(50)  # warm-up (Postgres prepares the statement after a few runs)
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):  # alternated in blocks, so all see the same machine
        blocks: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(BLOCKS):
            for name, (_, n, run) in runs.items():
                blocks[name].append(_timed_us(run, n))
        for name, values in blocks.items():
            figures[name].append(statistics.fmean(values))
    print(
        f"\nappend of one event into Postgres, through the runner's append path (leased writer:"
        f" fenced), next to bare psycopg with the same commit setting; medians of {ROUNDS}"
        " alternated runs, the ratio the median of the runs' ratios:"
    )
    for name, (baseline, _, _) in runs.items():
        value = statistics.median(figures[name])
        if baseline is None:
            print(f"  {name:38} {value:9.1f} us/event")
            continue
        ratios = [v / b for v, b in zip(figures[name], figures[baseline], strict=True)]
        print(
            f"  {name:38} {value:9.1f} us/event  {statistics.median(ratios):5.2f}x bare psycopg"
            f" with the same setting (runs {', '.join(f'{r:.2f}' for r in ratios)})"
        )
    for conn in bare.values():
        conn.close()
    for store in (sqlite, pg, full):
        store.close()
