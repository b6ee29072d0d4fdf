"""How many agents one recording proxy process carries: concurrent streams paced like a real
model (100 events a second), ramped 1, 2, 4, ... through the recording proxy, through a bare
aiohttp pass-through and straight to the upstream, in one run (only ratios carry over).

Run on demand: ``pytest tests/benchmarks/test_bench_proxy_load.py -m benchmark -s``. The upstream
(``paced_upstream.py``) is a process of its own, as is each proxy, so each one's CPU time is
its own. At each level every agent makes calls back to back in one conversation (each call sends
the answers before it back), the agents' first calls spread over one stream's length; the calls
after each agent's first are the samples. A sample's time in
the path is the client's first byte minus the moment it sent the request, less the upstream's
own wait (its first event sent minus the request's arrival, which it reports); the added first
byte is a proxy's median (and 90th percentile) time in the path minus direct's at the same
level. Printed per level and path: those figures and the proxy process's CPU seconds per 1,000
chunks passed (the recording proxy's counted until its journal has recorded every call), then
the most streams each proxy carries before the added first byte passes 10 ms. Asserts nothing
about time: only that every stream delivered the upstream's bytes whole and that the recording
proxy recorded every call once, each agent's conversation one episode.
"""

from __future__ import annotations

import asyncio
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
import pytest
from proxy_bench import (
    API_KEY,
    answer_text,
    bare_proxy,
    cpu_seconds,
    free_port,
    recording_proxy,
    request_body,
    serve,
    stream_events,
)

from agentrunner import TraceStore

pytestmark = pytest.mark.benchmark

CHUNKS = 250
"""Text deltas per answer: 2.5 s at the pace below."""
RATE = 100.0
"""Events a second in every stream."""
LEVELS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
LIMIT_MS = 10.0
"""A proxy carries a level while its median added first byte stays under this."""
MIN_SAMPLES = 8
"""Calls measured at each level at least (an agent's first call is never one)."""
UPSTREAM = Path(__file__).with_name("paced_upstream.py")
ANSWER = answer_text(CHUNKS)


@dataclass
class Sample:
    call: str
    sent: float
    first: float
    data: bytes
    measured: bool


@dataclass
class Row:
    """One path at one level."""

    path: str
    streams: int
    in_path_ms: list[float]
    cpu_s: float | None
    chunks: int
    wall_s: float

    def median(self) -> float:
        return statistics.median(self.in_path_ms)

    def p90(self) -> float:
        return statistics.quantiles(self.in_path_ms, n=10, method="inclusive")[-1]


async def _call(
    session: aiohttp.ClientSession, url: str, call: str, body: bytes, measured: bool
) -> Sample:
    headers = {"content-type": "application/json", "x-api-key": API_KEY, "x-bench-call": call}
    sent = time.monotonic()
    first = 0.0
    pieces = []
    async with session.post(url, data=body, headers=headers) as answer:
        async for data in answer.content.iter_any():
            first = first or time.monotonic()
            pieces.append(data)
    return Sample(call, sent, first, b"".join(pieces), measured)


async def _load(url: str, path: str, streams: int) -> list[Sample]:
    """``streams`` agents making calls back to back, their first calls spread over one
    answer's length; each makes enough calls that the level has MIN_SAMPLES measured."""
    length = (CHUNKS + 5) / RATE
    calls = 1 + -(-MIN_SAMPLES // streams)

    async def agent(session: aiohttp.ClientSession, k: int) -> list[Sample]:
        """One conversation: each call sends the answers before it back, as agents do."""
        await asyncio.sleep(k * length / streams)
        history: list[dict[str, str]] = []
        samples = []
        for i in range(calls):
            text = f"agent {k} of {streams} through the {path}, turn {i}: go on"
            body = request_body(text, history)
            samples.append(await _call(session, url, f"{path}-{streams}-{k}-{i}", body, i > 0))
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": ANSWER}]
        return samples

    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False
    ) as session:
        done = await asyncio.gather(*(agent(session, k) for k in range(streams)))
    return [sample for samples in done for sample in samples]


async def _warm_up(url: str) -> Sample:
    async with aiohttp.ClientSession() as session:
        return await _call(session, url, "warm-up", request_body("warm up"), False)


def _level(
    path: str,
    url: str,
    proc: subprocess.Popen[bytes] | None,
    streams: int,
    upstream: str,
    recorded: tuple[Path, int] | None,
) -> tuple[Row, list[Sample]]:
    """One path at one level; ``recorded``: the store the proxy records into and how many
    calls it held before (the CPU time is read once it holds this level's calls too)."""
    cpu_before = cpu_seconds(proc.pid) if proc else 0.0
    started = time.monotonic()
    samples = asyncio.run(_load(url, path, streams))
    wall = time.monotonic() - started
    if recorded is not None:
        _wait_recorded(recorded[0], recorded[1] + len(samples))
    cpu = cpu_seconds(proc.pid) - cpu_before if proc else None
    times = httpx.get(f"{upstream}/times", timeout=60).json()
    in_path = []
    for s in samples:
        arrived, first_sent = times[s.call]
        if s.measured:
            in_path.append(((s.first - s.sent) - (first_sent - arrived)) * 1000)
    chunks = len(samples) * (CHUNKS + 5)
    return Row(path, streams, in_path, cpu, chunks, wall), samples


def _wait_recorded(db: Path, calls: int) -> None:
    """Until the store holds an answer for ``calls`` calls."""
    deadline = time.monotonic() + 600
    with TraceStore(db) as store:
        while (done := len(_answers(store))) < calls:
            assert time.monotonic() < deadline, f"{done} of {calls} calls recorded"
            time.sleep(0.1)


def _answers(store: TraceStore) -> list[str]:
    return [
        e.payload["call_id"]
        for episode in store.list_episodes()
        for e in store.events(episode.episode_id, kinds=["model.response"], limit=10**6)
    ]


def test_paced_streams_one_proxy_process_carries_recording_and_bare(tmp_path: Path) -> None:
    events = stream_events(CHUNKS)
    (tmp_path / "events.sse").write_text("\n\n".join(events) + "\n\n", encoding="utf-8")
    whole = "".join(event + "\n\n" for event in events).encode()
    up_port, rec_port, bare_port = free_port(), free_port(), free_port()
    db = tmp_path / "t.db"
    upstream = f"http://127.0.0.1:{up_port}"
    procs = [
        serve(
            [sys.executable, str(UPSTREAM), str(up_port), str(tmp_path / "events.sse"), str(RATE)],
            up_port,
            tmp_path / "upstream.log",
        )
    ]
    try:
        procs.append(recording_proxy(rec_port, db, upstream, tmp_path / "proxy.log"))
        procs.append(bare_proxy(bare_port, upstream, tmp_path / "bare.log"))
        paths = {
            "direct": (f"{upstream}/v1/messages", None),
            "bare proxy": (f"http://127.0.0.1:{bare_port}/anthropic/v1/messages", procs[2]),
            "recording proxy": (f"http://127.0.0.1:{rec_port}/anthropic/v1/messages", procs[1]),
        }
        for url, _ in paths.values():  # warm-up: imports, price tables, the store
            assert asyncio.run(_warm_up(url)).data == whole
        rows: list[Row] = []
        running = list(paths)
        recorded = agents = 1
        for n, streams in enumerate(LEVELS):
            for path in running if n % 2 == 0 else running[::-1]:  # alternate the order
                url, proc = paths[path]
                records = path == "recording proxy"
                row, samples = _level(
                    path, url, proc, streams, upstream, (db, recorded) if records else None
                )
                assert all(s.data == whole for s in samples), f"{path}: a stream arrived altered"
                recorded += len(samples) if records else 0
                agents += streams if records else 0
                rows.append(row)
            level = {r.path: r.median() for r in rows if r.streams == streams}
            running = [p for p in running if level[p] - level["direct"] <= LIMIT_MS]
            if running == ["direct"]:
                break
        _print(rows)
        _every_call_recorded_once(db, agents, recorded)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=120)


def _every_call_recorded_once(db: Path, conversations: int, calls: int) -> None:
    """Each agent's conversation one episode, each of its calls one request and one answer."""
    with TraceStore(db) as store:
        episodes = store.list_episodes()
        assert len(episodes) == conversations, f"{len(episodes)} episodes, {conversations} agents"
        requests = [
            e.payload["call_id"]
            for episode in episodes
            for e in store.events(episode.episode_id, kinds=["model.request"], limit=10**6)
        ]
        answers = _answers(store)
    assert len(requests) == len(set(requests)) == calls, f"{len(requests)} requests, {calls} calls"
    assert sorted(answers) == sorted(requests), "a call's answer is missing or recorded twice"


def _print(rows: list[Row]) -> None:
    direct = {r.streams: r for r in rows if r.path == "direct"}
    print(
        f"\n{CHUNKS + 5}-event answers at {RATE:.0f} events a second, streams at once through one"
        " process; in path: first byte after sending less the upstream's own wait (ms);"
        " added: over direct at the same level"
    )
    print(
        f"{'path':16} {'streams':>7} {'samples':>7} {'in path med':>11} {'p90':>7}"
        f" {'added med':>9} {'p90':>7} {'CPU s/1k chunks':>15} {'CPU use':>7}"
    )
    for r in rows:
        base = direct[r.streams]
        added = (
            f"{r.median() - base.median():+9.2f} {r.p90() - base.p90():+7.2f}"
            if r.path != "direct"
            else f"{'':9} {'':7}"
        )
        cpu = (
            f"{r.cpu_s / (r.chunks / 1000):15.4f} {r.cpu_s / r.wall_s:6.0%}"
            if r.cpu_s is not None
            else f"{'':15} {'':7}"
        )
        print(
            f"{r.path:16} {r.streams:7} {len(r.in_path_ms):7} {r.median():11.2f} {r.p90():7.2f}"
            f" {added} {cpu}"
        )
    for path in ("bare proxy", "recording proxy"):
        mine = [r for r in rows if r.path == path]
        carried: dict[str, int] = {}
        for label, stat in (("median", Row.median), ("p90", Row.p90)):
            carried[label] = 0
            for r in mine:
                if stat(r) - stat(direct[r.streams]) > LIMIT_MS:
                    break
                carried[label] = r.streams
        per_1k = statistics.median(r.cpu_s / (r.chunks / 1000) for r in mine if r.cpu_s is not None)
        print(
            f"{path}: carries {carried['median']} paced streams before its median added first"
            f" byte passes {LIMIT_MS:.0f} ms ({carried['p90']} by the 90th percentile);"
            f" CPU {per_1k:.4f} s per 1,000 chunks (median over levels)"
        )
