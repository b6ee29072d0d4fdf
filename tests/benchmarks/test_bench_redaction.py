"""Redaction's cost (design §7): a streamed chunk with a provider key in the environment, against
a bare ``sqlite3`` insert-and-commit; and the deep search tool results and snapshot blobs get.

Run on demand: ``pytest tests/benchmarks -m benchmark -s -k redaction``.
"""

from __future__ import annotations

import json
import secrets
import statistics
import string
import time
from pathlib import Path

import pytest
from test_bench_store import (
    APPEND_BLOCK,
    APPEND_BUDGET,
    APPEND_EVENTS,
    APPEND_REPS,
    APPEND_WARMUP,
    CHUNK_TEXT,
    MINIMAL_INSERT,
    PAYLOAD_BYTES,
    _elapsed_ns,
    _minimal,
)

from agentrunner.recorder import Recorder
from agentrunner.redaction import Redactor, known_secrets
from agentrunner.store import TraceStore
from agentrunner.types import Chunk

pytestmark = pytest.mark.benchmark

KEY = "sk-test-" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))


def test_a_chunk_with_a_provider_key_in_the_environment_costs_at_most_the_append_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = TraceStore(tmp_path / "store.db")
    episode_id = store.create_episode(
        task_id="bench", seed=0, env={"kind": "bench"}, model={}, claim=True
    )
    rec = Recorder(store, store.writer(episode_id), secrets=known_secrets())
    assert rec.redactor  # the key is known: every chunk is searched for it
    rec.turn = 1
    bare = _minimal(tmp_path / "bare.db")
    row = json.dumps({"call_id": "call-1-1", "channel": "text", "index": 1, "text": CHUNK_TEXT})
    row = (row + " " * PAYLOAD_BYTES)[:PAYLOAD_BYTES]
    chunk = Chunk(channel="text", text=CHUNK_TEXT)

    def run_store(n: int) -> None:
        for _ in range(n):
            rec.chunk("call-1-1", chunk)

    def run_bare(n: int) -> None:
        for _ in range(n):
            bare.execute(MINIMAL_INSERT, (episode_id, "model.chunk", row))

    run_store(APPEND_WARMUP)
    run_bare(APPEND_WARMUP)
    ratios = []
    for _ in range(APPEND_REPS):
        bare_ns = store_ns = 0
        for _ in range(APPEND_EVENTS // APPEND_BLOCK):
            bare_ns += _elapsed_ns(lambda: run_bare(APPEND_BLOCK))
            store_ns += _elapsed_ns(lambda: run_store(APPEND_BLOCK))
        ratios.append(store_ns / bare_ns)
    ratio = statistics.median(ratios)
    print(
        f"\nappend with a provider key: ratio {ratio:.2f}x a bare insert (budget "
        f"{APPEND_BUDGET}x; design 1.2x; ratios {', '.join(f'{r:.2f}' for r in ratios)})"
    )
    bare.close()
    store.close()
    assert ratio <= APPEND_BUDGET


def test_the_deep_search_of_a_tool_result_and_a_blob_is_printed() -> None:
    """Figures only (no budget of its own): what a tool result and a source file cost."""
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    source = Path(json.__file__).read_text() * 4  # ordinary Python source, ~50 kB
    observation = source[:16000]  # about the output cap
    blob = source.encode()

    def per_call_us(fn: object, n: int = 20) -> float:
        samples = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for _ in range(n):
                fn()  # type: ignore[operator]
            samples.append((time.perf_counter_ns() - start) / n / 1000)
        return statistics.median(samples)

    result_us = per_call_us(lambda: redactor.deep(observation))
    blob_us = per_call_us(lambda: redactor.data(blob))
    print(
        f"\ndeep redaction: a 16 kB tool result {result_us:.0f} us; a {len(blob) >> 10} kB"
        f" blob {blob_us:.0f} us ({len(blob) / blob_us:.0f} MB/s)"
    )
    assert redactor.data(blob) is blob
