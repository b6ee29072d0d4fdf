"""The recording proxy in the stream, measured against the same loopback upstream read
directly and against a bare aiohttp pass-through proxy, in one run (only ratios carry over).

Run on demand: ``pytest tests/benchmarks/test_bench_proxy.py -m benchmark -s``. Prints, for a
2,000-chunk Messages stream (and with a 200 kB request): the median first-byte time and total
time of 20 calls per path (alternating), the added first byte and the total ratio; the CPU
seconds per 1,000 chunks of the recording proxy's process and of the bare one; and the
recording proxy's peak memory after a 2,000- and a 20,000-chunk stream. Asserts nothing about
time: the design's targets (+2 ms first byte, +10% total) are printed beside the figures.
"""

from __future__ import annotations

import signal
import sqlite3
import statistics
import time
from pathlib import Path

import httpx
import pytest
from proxy_bench import API_KEY, bare_proxy, cpu_seconds, free_port, recording_proxy
from proxy_bench import request_body as _request
from proxy_bench import stream_events as _stream
from sse_replay import Reply, SSEReplayServer

pytestmark = pytest.mark.benchmark

CHUNKS = 2000
CALLS = 20


def _rss_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _call(client: httpx.Client, url: str, body: bytes) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    headers = {"content-type": "application/json", "x-api-key": API_KEY}
    with client.stream("POST", url, content=body, headers=headers) as answer:
        for _ in answer.iter_raw():
            first = first or time.perf_counter()
    return (first or started) - started, time.perf_counter() - started


def test_the_recording_proxy_against_direct_and_a_bare_pass_through(tmp_path: Path) -> None:
    small, big = (_request(text) for text in ("go", "y" * 200_000))
    events = _stream(CHUNKS)
    replies = [Reply(events=events) for _ in range(400)]
    with SSEReplayServer(*replies) as upstream:
        rec_port, bare_port = free_port(), free_port()
        recording = recording_proxy(rec_port, tmp_path / "t.db", upstream.url, tmp_path / "p.log")
        bare = bare_proxy(bare_port, upstream.url, tmp_path / "bare.log")
        paths = {
            "direct": f"{upstream.url}/v1/messages",
            "bare proxy": f"http://127.0.0.1:{bare_port}/anthropic/v1/messages",
            "recording proxy": f"http://127.0.0.1:{rec_port}/anthropic/v1/messages",
        }
        try:
            with httpx.Client(timeout=120) as client:
                for url in paths.values():  # warm-up: connections, imports, the store
                    _call(client, url, small)
                for label, body in (("2,000 chunks", small), ("2,000 chunks, 200 kB request", big)):
                    times: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
                    cpu_before = {
                        "recording proxy": cpu_seconds(recording.pid),
                        "bare proxy": cpu_seconds(bare.pid),
                    }
                    for _ in range(CALLS):
                        for name, url in paths.items():
                            times[name].append(_call(client, url, body))
                    cpu = {
                        n: cpu_seconds(p.pid) - cpu_before[n]
                        for n, p in (("recording proxy", recording), ("bare proxy", bare))
                    }
                    _report(label, times, cpu)
                _idle_first_byte(client, paths, small, tmp_path / "t.db")
                peak_2k = _rss_peak_mb(recording.pid)
                upstream.add(Reply(events=_stream(20 * CHUNKS)))
                _call(client, paths["recording proxy"], small)
                print(f"recording proxy peak RSS: {peak_2k:.1f} MB after 2,000-chunk streams, "
                      f"{_rss_peak_mb(recording.pid):.1f} MB after a 20,000-chunk one")  # fmt: skip
        finally:
            for proc in (recording, bare):
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=120)


def _idle_first_byte(client: httpx.Client, paths: dict[str, str], body: bytes, db: Path) -> None:
    """First byte through the recording proxy once it has recorded every earlier answer (an
    agent thinks between calls); back to back, a request's append waits for the chunks of the
    answer before it."""
    direct, recorded = [], []
    for _ in range(CALLS):
        _wait_recorded(db)
        recorded.append(_call(client, paths["recording proxy"], body)[0])
        direct.append(_call(client, paths["direct"], body)[0])
    added = (statistics.median(recorded) - statistics.median(direct)) * 1000
    print(
        f"\nrecording proxy, its journal idle at each call: first byte +{added:.2f} ms over direct"
    )


def _wait_recorded(db: Path) -> None:
    """Until every request in the store has its answer recorded."""
    while True:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            counts = dict(
                conn.execute(
                    "SELECT kind, count(*) FROM events WHERE kind IN"
                    " ('model.request', 'model.response') GROUP BY kind"
                ).fetchall()
            )
        if counts.get("model.request") == counts.get("model.response"):
            return
        time.sleep(0.005)


def _report(label: str, times: dict[str, list[tuple[float, float]]], cpu: dict[str, float]) -> None:
    direct_first = statistics.median(t[0] for t in times["direct"])
    direct_total = statistics.median(t[1] for t in times["direct"])
    print(f"\n{label}: median of {CALLS} calls per path, alternating")
    for name, samples in times.items():
        first = statistics.median(t[0] for t in samples)
        total = statistics.median(t[1] for t in samples)
        added = (first - direct_first) * 1000
        extra = f"  (+{added:.2f} ms first byte, total {total / direct_total:.2f}x)"
        print(
            f"  {name:16} first byte {first * 1000:7.2f} ms  total {total * 1000:8.2f} ms"
            + ("" if name == "direct" else extra)
        )
    for name, seconds in cpu.items():
        print(f"  {name:16} CPU {seconds / (CALLS * CHUNKS / 1000):.4f} s per 1,000 chunks")
    print("  targets: recording adds at most 2 ms to the first byte and 10% to the total")
