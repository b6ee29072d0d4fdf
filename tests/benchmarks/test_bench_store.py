"""Store budgets (design §7), measured in one run: append cost, linear growth, rebuild time.

Run on demand: ``pytest tests/benchmarks -m benchmark -s``. Each benchmark prints its figures
and asserts only its budget (a ratio, or the design's absolute budget for the rebuild).
"""

from __future__ import annotations

import gc
import json
import sqlite3
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from recorded_turns import record_turn

from agentrunner import __version__, interrupts
from agentrunner.envs.workspace import TOOL_SPECS
from agentrunner.events import ModelChunk
from agentrunner.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.store.connection import BUSY_TIMEOUT_S
from agentrunner.store.eventlog import now_us
from agentrunner.types import Chunk, Message

pytestmark = pytest.mark.benchmark

APPEND_BUDGET = 1.5
BYTES_BUDGET = 1.3
GROWTH_BUDGET = 2.1
REBUILD_BUDGET_S = 0.2

APPEND_EVENTS = 4000  # per repetition
APPEND_REPS = 7
APPEND_BLOCK = 500  # bare and store alternate every block
APPEND_WARMUP = 1000
PAYLOAD_BYTES = 200
TURNS = 500


def _new_episode(store: TraceStore) -> str:
    return store.create_episode(task_id="bench", seed=0, env={"kind": "bench"}, model={})


# -- (a) one append vs a bare sqlite3 insert-and-commit (design section 7) ---------------

MINIMAL_DDL = "CREATE TABLE events (id INTEGER PRIMARY KEY, session_id TEXT, kind TEXT, data TEXT)"
MINIMAL_INSERT = "INSERT INTO events (session_id, kind, data) VALUES (?, ?, ?)"
CHUNK_TEXT = ("lorem ipsum dolor sit amet, consectetur adipiscing elit " * 3)[:140]


def _minimal(path: Path) -> sqlite3.Connection:
    """The design's baseline: a minimal table, WAL, synchronous=NORMAL, autocommit."""
    conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(MINIMAL_DDL)
    return conn


def _file_bytes(conn: sqlite3.Connection, path: Path) -> int:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def _elapsed_ns(fn: Callable[[], None]) -> int:
    gc.collect()
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def _micro_us(fn: Callable[[], object], n: int = 20000) -> float:
    """Median per-call cost of ``fn`` over a few loops, in microseconds."""
    samples = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter_ns() - start) / n / 1000)
    return statistics.median(samples)


def test_a_chunk_through_the_append_path_costs_at_most_1_5x_a_bare_insert(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "store.db")
    episode_id = store.create_episode(  # leased, as the runner's: every append is fenced
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=True
    )
    rec = Recorder(store, store.writer(episode_id), secrets={})
    rec.turn = 1
    bare_path = tmp_path / "bare.db"
    bare = _minimal(bare_path)
    row = json.dumps(
        {"call_id": "call-1-1", "channel": "text", "index": 12345, "text": CHUNK_TEXT[:100]}
    )
    row = (row + " " * PAYLOAD_BYTES)[:PAYLOAD_BYTES]  # a ~200-byte JSON row
    chunk = Chunk(channel="text", text=CHUNK_TEXT)

    def run_store(n: int) -> None:
        for _ in range(n):
            rec.chunk("call-1-1", chunk)

    def run_bare(n: int) -> None:
        for _ in range(n):
            bare.execute(MINIMAL_INSERT, (episode_id, "model.chunk", row))

    run_store(APPEND_WARMUP)
    run_bare(APPEND_WARMUP)
    store_before, bare_before = (
        _file_bytes(store.raw_connection(), store.path),
        _file_bytes(bare, bare_path),
    )
    store_us, bare_us, ratios = [], [], []
    for _ in range(APPEND_REPS):  # interleaved in blocks, so both see the same machine
        bare_ns = store_ns = 0
        for _ in range(APPEND_EVENTS // APPEND_BLOCK):
            bare_ns += _elapsed_ns(lambda: run_bare(APPEND_BLOCK))
            store_ns += _elapsed_ns(lambda: run_store(APPEND_BLOCK))
        store_us.append(store_ns / APPEND_EVENTS / 1000)
        bare_us.append(bare_ns / APPEND_EVENTS / 1000)
        ratios.append(store_ns / bare_ns)
    ratio = statistics.median(ratios)
    appended = APPEND_REPS * APPEND_EVENTS
    store_bytes = (_file_bytes(store.raw_connection(), store.path) - store_before) / appended
    bare_bytes = (_file_bytes(bare, bare_path) - bare_before) / appended

    def critical_section() -> None:
        with interrupts.critical:
            pass

    sample = ModelChunk(call_id="call-1-1", channel="text", index=1, text=CHUNK_TEXT)
    parts = {
        "model_dump_json": _micro_us(lambda: sample.model_dump_json(exclude={"kind"})),
        "ModelChunk(...)": _micro_us(
            lambda: ModelChunk(call_id="call-1-1", channel="text", index=1, text=CHUNK_TEXT)
        ),
        "now_us": _micro_us(now_us),
        "interrupts.critical": _micro_us(critical_section),
    }
    print(
        f"\nappend: store {statistics.median(store_us):.1f} us/event, minimal table "
        f"{statistics.median(bare_us):.1f} us/event: ratio {ratio:.2f}x (budget "
        f"{APPEND_BUDGET}x; {APPEND_REPS} x {APPEND_EVENTS} events; ratios "
        f"{', '.join(f'{r:.2f}' for r in ratios)})"
    )
    print(
        f"bytes: store {store_bytes:.0f} B/event, minimal table {bare_bytes:.0f} B/event: "
        f"ratio {store_bytes / bare_bytes:.2f}x (budget {BYTES_BUDGET}x)"
    )
    print("  parts of the append path: " + ", ".join(f"{k} {v:.2f} us" for k, v in parts.items()))
    bare.close()
    store.close()
    assert ratio <= APPEND_BUDGET
    assert store_bytes / bare_bytes <= BYTES_BUDGET


# -- (b) linear growth and (c) rebuild, on a 500-turn episode of equal turns -------------


def _store_bytes(store: TraceStore) -> int:
    store.raw_connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = store.path.with_name(store.path.name + "-wal")
    return store.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@pytest.fixture(scope="module")
def long_episode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """A 500-turn episode recorded through Recorder; store sizes after 0, 250 and 500 turns."""
    path = tmp_path_factory.mktemp("bench") / "traces.db"
    store = TraceStore(path)
    episode_id = _new_episode(store)
    rec = Recorder(store, store.writer(episode_id), secrets={})
    tools_hash = store.put_tools(TOOL_SPECS)
    rec.start(
        task_id="bench",
        seed=0,
        env={"kind": "bench"},
        model={},
        config={},
        version=__version__,
        max_steps=TURNS,
    )
    rec.message(Message(role="system", content="You are a careful agent. " * 40), "system")
    rec.message(Message(role="user", content="Fix the bug in stats.py. " * 10), "prompt")
    sizes = {0: _store_bytes(store)}
    started = time.perf_counter()
    for turn in range(1, TURNS + 1):
        record_turn(rec, turn, tools_hash)
        if turn in (TURNS // 2, TURNS):
            sizes[turn] = _store_bytes(store)
    elapsed = time.perf_counter() - started
    events = store.raw_connection().execute("SELECT count(*) FROM events").fetchone()[0]
    store.close()
    yield {
        "path": path,
        "episode_id": episode_id,
        "sizes": sizes,
        "messages": list(rec.messages),
        "tip": rec.tip,
        "events": events,
        "record_s": elapsed,
    }


def test_storage_grows_linearly_with_equal_turns(long_episode: dict[str, object]) -> None:
    sizes: dict[int, int] = long_episode["sizes"]  # type: ignore[assignment]
    half, full = sizes[TURNS // 2], sizes[TURNS]
    ratio = full / half
    increment = (full - sizes[0]) / (half - sizes[0])
    print(
        f"\ngrowth ratio {ratio:.3f}x (budget {GROWTH_BUDGET}x): {TURNS} turns {full / 1e6:.2f} MB,"
        f" {TURNS // 2} turns {half / 1e6:.2f} MB, empty episode {sizes[0] / 1e3:.0f} kB;"
        f" net of the empty store {increment:.3f}x; {full / TURNS / 1e3:.1f} kB/turn"
    )
    with TraceStore(long_episode["path"]) as store:  # type: ignore[arg-type]
        by_table = (
            store.raw_connection()
            .execute(
                "SELECT name, sum(pgsize), total(CASE WHEN pagetype = 'overflow' THEN pgsize END),"
                " total(CASE WHEN pagetype = 'overflow' THEN unused END) FROM dbstat"
                " GROUP BY name HAVING sum(pgsize) > 16384 ORDER BY 2 DESC"
            )
            .fetchall()
        )
        by_kind = (
            store.raw_connection()
            .execute(
                "SELECT kind, count(*), sum(length(payload)) FROM events GROUP BY kind"
                " ORDER BY 3 DESC"
            )
            .fetchall()
        )
        observations = (
            store.raw_connection()
            .execute(
                "SELECT sum(length(json_extract(payload, '$.observation'))) FROM events"
                " WHERE kind = 'tool.result'"
            )
            .fetchone()[0]
        )
        tool_messages = (
            store.raw_connection()
            .execute(
                "SELECT sum(length(json_extract(message, '$.content'))) FROM messages"
                " WHERE json_extract(message, '$.role') = 'tool'"
            )
            .fetchone()[0]
        )
    for name, size, overflow, unused in by_table:
        print(
            f"  {name}: {size / 1e3:.0f} kB, of which overflow pages {overflow / 1e3:.0f} kB"
            f" ({unused / 1e3:.0f} kB of them unused)"
        )
    print(
        "  payload bytes by kind: " + ", ".join(f"{k} {c}x {b / 1e3:.0f} kB" for k, c, b in by_kind)
    )
    print(
        f"  tool observations stored twice: {observations / 1e3:.0f} kB inline in tool.result"
        f" payloads and {tool_messages / 1e3:.0f} kB in tool messages"
    )
    assert ratio <= GROWTH_BUDGET


def test_rebuilding_a_500_turn_history_takes_under_0_2_s(long_episode: dict[str, object]) -> None:
    messages: list[Message] = long_episode["messages"]  # type: ignore[assignment]
    episode_id: str = long_episode["episode_id"]  # type: ignore[assignment]
    timings: dict[str, list[float]] = {"reconstruct_request": [], "message_chain": [], "events": []}
    for _ in range(5):
        with TraceStore(long_episode["path"]) as store:  # type: ignore[arg-type]
            start = time.perf_counter()
            request = store.reconstruct_request(episode_id, TURNS)
            timings["reconstruct_request"].append(time.perf_counter() - start)
            start = time.perf_counter()
            chain = store.message_chain(long_episode["tip"])  # type: ignore[arg-type]
            timings["message_chain"].append(time.perf_counter() - start)
            start = time.perf_counter()
            count = sum(1 for _ in store.iter_events(episode_id))
            timings["events"].append(time.perf_counter() - start)
        assert request.messages == messages[:-2]  # the input of the last turn, exactly
        assert chain == messages
        assert count == long_episode["events"]
    first = timings["reconstruct_request"][0]
    print(
        f"\nrebuild {first * 1e3:.1f} ms on a fresh store (budget {REBUILD_BUDGET_S * 1e3:.0f} ms):"
        f" reconstruct_request(ep, {TURNS}) -> {len(request.messages)} messages; medians of 5:"
        + ", ".join(f" {k} {statistics.median(v) * 1e3:.1f} ms" for k, v in timings.items())
        + f" ({count} events; recording the {TURNS} turns took {long_episode['record_s']:.2f} s)"
    )
    assert first < REBUILD_BUDGET_S
