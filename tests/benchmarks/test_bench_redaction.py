"""Redaction's cost (design §7): the per-chunk search of a streamed chunk next to the insert that
records it, and the deep search tool results and snapshot blobs get. (A chunk through the whole
append path with a provider key in the environment: ``test_bench_store.py``.)

Run on demand: ``pytest tests/benchmarks -m benchmark -s -k redaction``.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_bench_store import CHUNK_TEXT, KEY, MINIMAL_INSERT, _bare_row, _minimal

from agentrunner.values.redaction import Redactor

pytestmark = pytest.mark.benchmark


def _per_call_us(fn: Callable[[], object], n: int) -> float:
    start = time.process_time_ns()
    for _ in range(n):
        fn()
    return (time.process_time_ns() - start) / n / 1000


def test_a_streamed_chunk_s_search_next_to_a_bare_insert(tmp_path: Path) -> None:
    """The redactor's share of a chunk's append: its search (CPU time) against the bare
    insert+commit the append budget is measured against, alternated, medians of 7."""
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    bare = _minimal(tmp_path / "bare.db")
    row = _bare_row()
    search, insert = [], []
    for _ in range(7):
        search.append(_per_call_us(lambda: redactor.stream("call-1-1/text/None", CHUNK_TEXT), 5000))
        insert.append(
            _per_call_us(lambda: bare.execute(MINIMAL_INSERT, ("ep", "model.chunk", row)), 5000)
        )
    ratios = [s / i for s, i in zip(search, insert, strict=True)]
    print(
        f"\nredaction of a {len(CHUNK_TEXT)}-character chunk: {statistics.median(search):.2f} us;"
        f" bare insert+commit {statistics.median(insert):.2f} us: the search adds"
        f" {statistics.median(ratios):.3f}x of it"
    )
    bare.close()


def test_the_deep_search_of_a_tool_result_and_a_blob_is_printed() -> None:
    """Figures only (no budget of its own): what a tool result and a source file cost."""
    redactor = Redactor({"OPENAI_API_KEY": KEY})
    source = Path(json.__file__).read_text() * 4  # ordinary Python source, ~50 kB
    observation = source[:16000]  # about the output cap
    blob = source.encode()

    result_us = statistics.median(
        _per_call_us(lambda: redactor.deep(observation), 20) for _ in range(5)
    )
    blob_us = statistics.median(_per_call_us(lambda: redactor.data(blob), 20) for _ in range(5))
    print(
        f"\ndeep redaction: a 16 kB tool result {result_us:.0f} us; a {len(blob) >> 10} kB"
        f" blob {blob_us:.0f} us ({len(blob) / blob_us:.0f} MB/s)"
    )
    assert redactor.data(blob) is blob
