"""Store figures (design §7), measured in one run: append cost, linear growth, rebuild time.

Run on demand: ``pytest tests/benchmarks/test_bench_store.py -m benchmark -s``. Each benchmark
prints agentrunner's figure, its baseline built in the same run and their ratio (the design's
budget beside it); none asserts a time: the machine is shared, so only the ratios count.
"""

from __future__ import annotations

import gc
import json
import secrets
import sqlite3
import statistics
import string
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from recorded_turns import record_turn

from agentrunner import __version__
from agentrunner.envs.workspace import TOOL_SPECS
from agentrunner.runtime import interrupts
from agentrunner.runtime.recorder import Recorder
from agentrunner.store import TraceStore
from agentrunner.store.connection import BUSY_TIMEOUT_S
from agentrunner.store.eventlog import now_us
from agentrunner.values.events import ModelChunk
from agentrunner.values.redaction import known_secrets
from agentrunner.values.types import Chunk, Message

pytestmark = pytest.mark.benchmark

APPEND_BUDGET = 1.2
BYTES_BUDGET = 1.3
GROWTH_BUDGET = 2.05
REBUILD_BUDGET_S = 0.1

APPEND_EVENTS = 4000  # per repetition
APPEND_REPS = 7
APPEND_BLOCK = 500  # the bare table and each store alternate every block
APPEND_WARMUP = 1000
PAYLOAD_BYTES = 200
TURNS = 500
KEY = "sk-test-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


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


def _elapsed(fn: Callable[[], None]) -> tuple[int, int]:
    """Wall-clock and CPU time of ``fn`` (ns): the CPU time is what a shared, loaded machine
    blurs least (a commit with synchronous=NORMAL in WAL mode does not wait for the disk)."""
    gc.collect()
    wall, cpu = time.perf_counter_ns(), time.process_time_ns()
    fn()
    return time.perf_counter_ns() - wall, time.process_time_ns() - cpu


def _micro_us(fn: Callable[[], object], n: int = 20000) -> float:
    """Median per-call cost of ``fn`` over a few loops, in microseconds."""
    samples = []
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter_ns() - start) / n / 1000)
    return statistics.median(samples)


def _chunk_appender(
    tmp_path: Path, name: str, secrets_: dict[str, str]
) -> tuple[TraceStore, Recorder]:
    """A store whose episode is leased, as the runner's (every append is fenced), and a
    recorder that knows ``secrets_`` (every chunk is searched for them)."""
    store = TraceStore(tmp_path / f"{name}.db")
    episode_id = store.create_episode(
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=True
    )
    rec = Recorder(store, store.writer(episode_id), secrets=secrets_)
    rec.turn = 1
    return store, rec


def _bare_row() -> str:
    row = json.dumps(
        {"call_id": "call-1-1", "channel": "text", "index": 12345, "text": CHUNK_TEXT[:100]}
    )
    return (row + " " * PAYLOAD_BYTES)[:PAYLOAD_BYTES]  # a ~200-byte JSON row


def _ratios(times: dict[str, list[tuple[int, int]]], name: str, clock: int) -> list[float]:
    return [t[clock] / b[clock] for t, b in zip(times[name], times["bare"], strict=True)]


def test_a_chunk_through_the_append_path_next_to_a_bare_insert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with_key = known_secrets()
    assert with_key  # the usual case: a provider key in the environment
    stores = {
        "no key": _chunk_appender(tmp_path, "plain", {}),
        "provider key": _chunk_appender(tmp_path, "keyed", with_key),
    }
    bare_path = tmp_path / "bare.db"
    bare = _minimal(bare_path)
    row = _bare_row()
    chunk = Chunk(channel="text", text=CHUNK_TEXT)
    episode_id = stores["no key"][1].episode_id

    def run_bare(n: int) -> None:
        for _ in range(n):
            bare.execute(MINIMAL_INSERT, (episode_id, "model.chunk", row))

    def store_run(rec: Recorder) -> Callable[[int], None]:
        def run(n: int) -> None:
            for _ in range(n):
                rec.chunk("call-1-1", chunk)

        return run

    runs = {"bare": run_bare} | {name: store_run(rec) for name, (_, rec) in stores.items()}
    for run in runs.values():
        run(APPEND_WARMUP)
    plain_store = stores["no key"][0]
    store_before = _file_bytes(plain_store.raw_connection(), plain_store.path)
    bare_before = _file_bytes(bare, bare_path)
    times: dict[str, list[tuple[int, int]]] = {name: [] for name in runs}
    for _ in range(APPEND_REPS):  # alternated in blocks, so all see the same machine
        totals = dict.fromkeys(runs, (0, 0))
        for _ in range(APPEND_EVENTS // APPEND_BLOCK):
            for name, run in runs.items():
                wall, cpu = _elapsed(lambda run=run: run(APPEND_BLOCK))  # type: ignore[misc]
                totals[name] = (totals[name][0] + wall, totals[name][1] + cpu)
        for name, total in totals.items():
            times[name].append(total)
    appended = APPEND_REPS * APPEND_EVENTS
    store_bytes = (
        _file_bytes(plain_store.raw_connection(), plain_store.path) - store_before
    ) / appended
    bare_bytes = (_file_bytes(bare, bare_path) - bare_before) / appended

    def per_event(name: str, clock: int) -> float:
        return statistics.median(t[clock] for t in times[name]) / APPEND_EVENTS / 1000

    print(
        f"\nappend of one chunk through Recorder.chunk (leased writer: fenced), next to a bare"
        f" sqlite3 insert+commit (WAL, NORMAL) of a {PAYLOAD_BYTES}-byte row into a minimal"
        f" table; medians of {APPEND_REPS} alternated runs of {APPEND_EVENTS} events"
        f" (budget {APPEND_BUDGET}x):"
    )
    for clock, label in ((1, "CPU"), (0, "wall")):
        print(f"  {label} time: bare {per_event('bare', clock):.1f} us/event")
        for name in stores:
            ratios = _ratios(times, name, clock)
            print(
                f"    agentrunner, {name}: {per_event(name, clock):.1f} us/event, ratio"
                f" {statistics.median(ratios):.2f}x (runs {', '.join(f'{r:.2f}' for r in ratios)})"
            )
    print(
        f"bytes: agentrunner {store_bytes:.0f} B/event, bare {bare_bytes:.0f} B/event: ratio"
        f" {store_bytes / bare_bytes:.2f}x (budget {BYTES_BUDGET}x)"
    )
    _print_parts()
    bare.close()
    for store, _ in stores.values():
        store.close()


def _print_parts() -> None:
    """What the pieces of the append path cost on their own, in microseconds."""

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
    print("  parts of the append path: " + ", ".join(f"{k} {v:.2f} us" for k, v in parts.items()))


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
        f"\ngrowth: {TURNS} turns {full / 1e6:.2f} MB, baseline {TURNS // 2} turns"
        f" {half / 1e6:.2f} MB: ratio {ratio:.3f}x (budget {GROWTH_BUDGET}x); empty episode"
        f" {sizes[0] / 1e3:.0f} kB;"
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


def test_rebuilding_a_500_turn_history_is_printed(long_episode: dict[str, object]) -> None:
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
