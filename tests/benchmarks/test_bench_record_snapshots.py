"""What ``record --snapshots`` adds to the first byte of a recorded call, on a working folder
of 2,000 files: the proxy snapshots the folder (incrementally) before it forwards a request.

Run on demand: ``pytest tests/benchmarks/test_bench_record_snapshots.py -m benchmark -s``.
It prints the figures (no budget is asserted: the machine may be loaded): the median and 90th
percentile first-byte time of a request through the proxy without and with snapshots (one
file of the folder changed before each request, as an agent's step would), the first
snapshot (taken before the agent starts) and the first request that brings a key the proxy
did not know (every file is read again to redact it).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import httpx
import pytest
from record_support import anthropic_text
from sse_replay import Reply, SSEReplayServer

from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

pytestmark = pytest.mark.benchmark

FILES = 2_000
FILE_BYTES = 2_000
REQUESTS = 40


def _folder(path: Path) -> Path:
    for i in range(FILES):
        sub = path / f"pkg{i % 40}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"mod{i}.py").write_text(f"# module {i}\n" + "x = 1\n" * (FILE_BYTES // 6))
    return path


def _first_bytes(db: Path, folder: Path, snapshots: bool) -> tuple[list[float], float, float]:
    """First-byte times of REQUESTS calls (after one that teaches the proxy the key), the
    first snapshot's time and the key-teaching call's first-byte time."""
    replies = [Reply(events=anthropic_text(f"answer {i}")) for i in range(REQUESTS + 1)]
    with SSEReplayServer(*replies) as upstream:
        journal = Journal(str(db), Origin(cwd=str(folder)), folder=folder if snapshots else None)
        journal.start()
        started = time.perf_counter()
        journal.submit(journal.prime).result()
        primed = time.perf_counter() - started
        proxy = ProxyThread(Proxy(journal, ProxySettings(upstreams={"anthropic": upstream.url})))
        port = proxy.start()
        times: list[float] = []
        try:
            with httpx.Client(timeout=60) as client:
                for i in range(REQUESTS + 1):
                    (folder / "pkg0" / "mod0.py").write_text(f"x = {i}\n")  # a step's change
                    body = {
                        "model": "m",
                        "max_tokens": 5,
                        "stream": True,
                        "messages": [{"role": "user", "content": f"request {i}"}],
                    }
                    headers = {"x-api-key": "sk-bench-0123456789abcdef"}
                    url = f"http://127.0.0.1:{port}/anthropic/v1/messages"
                    sent = time.perf_counter()
                    with client.stream("POST", url, json=body, headers=headers) as answer:
                        for n, _ in enumerate(answer.iter_raw()):
                            if n == 0:
                                times.append(time.perf_counter() - sent)
        finally:
            proxy.stop()
            journal.close()
    return times[1:], primed, times[0]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def test_first_byte_time_with_and_without_snapshots_of_a_2000_file_folder(
    tmp_path: Path,
) -> None:
    folder = _folder(tmp_path / "work")
    plain, _, _ = _first_bytes(tmp_path / "plain.db", folder, snapshots=False)
    snapped, primed, first = _first_bytes(tmp_path / "snap.db", folder, snapshots=True)
    for name, times in (("without --snapshots", plain), ("with --snapshots", snapped)):
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"\nfirst byte {name}: median {_ms(statistics.median(times))}, p90 {_ms(p90)}")
    added = statistics.median(snapped) - statistics.median(plain)
    print(f"added by a snapshot of {FILES} files (median): {_ms(added)}")
    print(f"first snapshot, before the agent starts: {_ms(primed)}")
    print(f"first byte of the request that teaches the proxy a new key: {_ms(first)}")
    assert len(snapped) == len(plain) == REQUESTS
