"""Postgres connections per worker process, and what sharing them costs an append, measured in
one run (printed figures, not a timed test).

The store's threads share a few connections (:mod:`agentrunner.store.postgres_pool`); before,
each thread held its own (two per running episode: its run and its heartbeat). The baseline
here is that: the same leased writer and heartbeat SQL on a connection of the thread's own.

- one episode and its heartbeat thread (what a Ray worker runs): the connections it holds;
- one thread: a streamed chunk (``synchronous_commit`` off) through the pool vs a dedicated
  connection, alternated in blocks, the ratio the median of the rounds' ratios;
- 32 episodes at once (a thread each, a heartbeat every 10 chunks): the connections the
  process holds and the events per second, pooled vs one connection per thread.

Run on demand: ``pytest tests/benchmarks/test_bench_postgres_conns.py -m benchmark -s``.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

from agentrunner.runtime.liveness import Heartbeat
from agentrunner.store import TraceStore, control
from agentrunner.store.dialect import POSTGRES, Conn
from agentrunner.store.postgres import _pg_sql, _translated
from agentrunner.store.writer import EpisodeWriter
from agentrunner.values.types import Chunk

pytestmark = pytest.mark.benchmark
psycopg = pytest.importorskip("psycopg")

CHUNKS = 200
ROUNDS = 7
BLOCKS = 6
EPISODES = 32
EVENTS_EACH = 150
WORKER_EVENTS = 2000
DEDICATED = "bench-dedicated"
BODY = Chunk(channel="text", text=("lorem ipsum dolor sit amet, " * 5)[:140])


class Dedicated:
    """A psycopg connection of one thread's own, as the store's connection was before."""

    def __init__(self, url: str) -> None:
        given = psycopg.conninfo.conninfo_to_dict(url).get("options") or ""
        self._conn = psycopg.connect(
            url,
            autocommit=True,
            application_name=DEDICATED,
            options=f"{given} -c synchronous_commit=off".strip(),
        )

    def execute(self, sql: str, parameters: Any = (), /) -> Any:
        try:
            return self._conn.execute(_pg_sql(sql), tuple(parameters))
        except psycopg.Error as exc:
            raise _translated(exc) from None

    def executemany(self, sql: str, seq_of_parameters: Iterable[Sequence[Any]], /) -> Any:
        with self._conn.cursor() as cur:
            cur.executemany(_pg_sql(sql), [tuple(p) for p in seq_of_parameters])
            return cur

    @property
    def in_transaction(self) -> bool:
        return bool(self._conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE)

    def close(self) -> None:
        self._conn.close()


def _writer(store: TraceStore, conn: Conn | None = None) -> EpisodeWriter:
    """A leased writer of a new episode, on the store's connection or on ``conn``."""
    episode_id = store.create_episode(task_id="bench", seed=0, env={}, model={}, claim=True)
    pooled = store.writer(episode_id)
    if conn is None:
        return pooled
    return EpisodeWriter(
        conn,
        episode_id,
        store.episode_key(episode_id),
        pooled.next_seq,
        pooled.attempt,
        leases=store._leases,
        sql=POSTGRES,
    )


def _chunks(writer: EpisodeWriter) -> Callable[[int], None]:
    body = BODY.model_dump_json(exclude={"kind"})

    def run(n: int) -> None:
        for _ in range(n):
            writer.append_json(1, "model.chunk", body)

    return run


def _timed_us(run: Callable[[int], None], n: int) -> float:
    start = time.perf_counter_ns()
    run(n)
    return (time.perf_counter_ns() - start) / n / 1000


def _one_thread(store: TraceStore, url: str) -> None:
    own = Dedicated(url)
    runs = {"pooled": _chunks(_writer(store)), "dedicated": _chunks(_writer(store, own))}
    for run in runs.values():
        run(50)  # warm-up: Postgres prepares the statement after a few runs
    figures: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        blocks: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(BLOCKS):
            for name, run in runs.items():
                blocks[name].append(_timed_us(run, CHUNKS // BLOCKS))
        for name, values in blocks.items():
            figures[name].append(statistics.fmean(values))
    ratios = [p / d for p, d in zip(figures["pooled"], figures["dedicated"], strict=True)]
    print(f"one thread, a leased chunk (sync off), medians of {ROUNDS} alternated rounds:")
    for name, values in figures.items():
        print(f"  {name:10} {statistics.median(values):8.1f} us/event")
    print(
        f"  pooled / dedicated: {statistics.median(ratios):.2f}x"
        f" (rounds {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    own.close()


def _episodes_at_once(store: TraceStore, url: str, dedicated: bool) -> tuple[float, int]:
    """Events per second of EPISODES threads appending at once, and the most server
    connections the process held meanwhile (pg_stat_activity, looked at by each thread)."""
    own = [Dedicated(url) if dedicated else None for _ in range(EPISODES)]
    writers = [_writer(store, conn) for conn in own]
    start = threading.Barrier(EPISODES + 1)
    held: list[int] = []
    watch = psycopg.connect(url, autocommit=True)

    def episode(writer: EpisodeWriter, conn: Conn | None) -> None:
        beat = conn if conn is not None else store.raw_connection()
        token = store._leases[writer.episode_id]
        start.wait()
        for i in range(EVENTS_EACH):
            writer.append_json(1, "model.chunk", BODY.model_dump_json(exclude={"kind"}))
            if i % 10 == 0:
                control.heartbeat(beat, writer.episode_id, token)

    threads = [
        threading.Thread(target=episode, args=pair) for pair in zip(writers, own, strict=True)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    while any(t.is_alive() for t in threads):
        (count,) = watch.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (DEDICATED if dedicated else "agentrunner",),
        ).fetchone()
        held.append(int(count))
        time.sleep(0.01)
    for thread in threads:
        thread.join()
    rate = EPISODES * EVENTS_EACH / (time.perf_counter() - began)
    for conn in own:
        if conn is not None:
            conn.close()
    watch.close()
    return rate, max(held)


def _one_worker(url: str) -> int:
    """The connections a process running one episode (a Ray worker) holds: its run appends
    while its heartbeat beats every 10 ms (a hundred times as often as a real one)."""
    with TraceStore(url) as store:
        writer = _writer(store)
        with Heartbeat(store, writer.episode_id, None, interrupt_main=False, interval_s=0.01):
            _chunks(writer)(WORKER_EVENTS)
        return store.open_connections()


def test_connections_per_process_and_append_cost_pooled_vs_one_per_thread(pg_url: str) -> None:
    held = _one_worker(pg_url)
    print(
        f"\none episode and its heartbeat (a Ray worker), {WORKER_EVENTS} chunks, a beat every"
        f" 10 ms: {held} server connection(s) (before: 2)"
    )
    with TraceStore(pg_url) as store:
        _one_thread(store, pg_url)
        pooled = _episodes_at_once(store, pg_url, dedicated=False)
        dedicated = _episodes_at_once(store, pg_url, dedicated=True)
    print(f"{EPISODES} episodes at once, {EVENTS_EACH} chunks each, a heartbeat every 10:")
    print(f"  pooled:    {pooled[0]:8.0f} events/s, at most {pooled[1]} server connections")
    print(
        f"  dedicated: {dedicated[0]:8.0f} events/s, at most {dedicated[1]} server connections"
        " (before: another per episode for its heartbeat thread)"
    )
    print(f"  pooled / dedicated throughput: {pooled[0] / dedicated[0]:.2f}x")
