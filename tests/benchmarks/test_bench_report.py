"""`agentrunner report` over 10,000 episodes (over 2,000,000 events) in one store: time and peak
memory, printed beside a plain reader of the same rows (budget: under 5 s on a 2-core machine,
a figure, not a timed test).

The store is filled directly (valid events of every kind, 202 per episode: 10 turns of a
request, 15 streamed chunks, a response, usage, a tool call and its result); the report runs
in a fresh process, as a user runs it, and must read the chunks never. The baseline
(:mod:`plain_report`) groups the same rows by model with ``sqlite3`` and ``json`` alone, in
a fresh process too. Each process reads its own peak memory (``VmHWM``, see
:mod:`peak_memory`); medians of ``RUNS`` alternated runs and the ratios are printed.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.store import eventlog
from agentrunner.values.events import (
    EpisodeEnd,
    EpisodeStart,
    ModelChunk,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolResult,
    Usage,
)

pytestmark = pytest.mark.benchmark

EPISODES = 10_000
TURNS = 10
CHUNKS = 15
BUDGET_S = 5.0
RUNS = 5  # alternated runs of the report and of the baseline
BENCHMARKS = Path(__file__).parent
MODELS = ("scripted:alpha", "scripted:beta")
TASKS = [f"task-{i:02d}" for i in range(50)]


def _body(payload: object) -> str:
    return payload.model_dump_json(exclude={"kind"})  # type: ignore[attr-defined]


def _fill(path: Path) -> int:
    """The store: EPISODES episodes of 200 events each; returns the events written."""
    code = eventlog.KIND_CODE
    with TraceStore(path) as store:
        conn = store.raw_connection()
        events = 0
        for i in range(EPISODES):
            model = MODELS[i % 2]
            task, seed = TASKS[(i // 2) % len(TASKS)], i // (2 * len(TASKS))
            episode_id = store.create_episode(
                task_id=task, seed=seed, env={"kind": "workspace"}, model={"spec": model}
            )
            key = store.episode_key(episode_id)
            reward = float((i * 7) % 3 == 0)
            rows = [
                (
                    code["episode.start"],
                    0,
                    _body(
                        EpisodeStart(
                            task_id=task,
                            seed=seed,
                            env={},
                            model={"spec": model},
                            config={},
                            version="b",
                        )
                    ),
                )
            ]
            for turn in range(1, TURNS + 1):
                call = f"call-{turn}-1"
                rows.append(
                    (
                        code["model.request"],
                        turn,
                        _body(
                            ModelRequest(
                                call_id=call,
                                tip_hash="t",
                                tools_hash="h",
                                provider="scripted",
                                model=model,
                            )
                        ),
                    )
                )
                for c in range(CHUNKS):
                    rows.append(
                        (
                            code["model.chunk"],
                            turn,
                            _body(
                                ModelChunk(
                                    call_id=call,
                                    channel="text",
                                    index=c,
                                    text="some streamed text ",
                                )
                            ),
                        )
                    )
                rows.append(
                    (
                        code["model.response"],
                        turn,
                        _body(
                            ModelResponse(
                                call_id=call, message_hash="m", latency_s=0.5 + (i + turn) % 7 / 10
                            )
                        ),
                    )
                )
                rows.append(
                    (
                        code["usage"],
                        turn,
                        _body(
                            Usage(call_id=call, input_tokens=1000, output_tokens=80, cost_usd=0.001)
                        ),
                    )
                )
                rows.append(
                    (
                        code["tool.call"],
                        turn,
                        _body(ToolCall(call_id=f"tc{turn}", name="bash", arguments="{}")),
                    )
                )
                rows.append(
                    (
                        code["tool.result"],
                        turn,
                        _body(
                            ToolResult(
                                call_id=f"tc{turn}",
                                name="bash",
                                observation="ok",
                                message_hash="m",
                                reward=reward if turn == TURNS else 0.0,
                            )
                        ),
                    )
                )
            rows.append(
                (
                    code["episode.end"],
                    TURNS,
                    _body(
                        EpisodeEnd(
                            stop_reason="done",
                            turns=TURNS,
                            total_reward=reward,
                            totals={"tokens": {"input": 10_000, "output": 800}, "cost_usd": 0.01},
                        )
                    ),
                )
            )
            conn.execute("BEGIN")
            conn.executemany(
                eventlog.INSERT,
                [
                    (eventlog.row_id(key, seq), 1, turn, kind, 1_780_000_000_000_000 + seq, body)
                    for seq, (kind, turn, body) in enumerate(rows, start=1)
                ],
            )
            conn.execute("COMMIT")
            events += len(rows)
    return events


_REPORT = (
    "import json, sys, time\n"
    "from agentrunner.cli.main import main\n"
    "t = time.perf_counter()\n"
    "code = main(['report', '--db', sys.argv[1], '--json'])\n"
    "took = time.perf_counter() - t\n"
    "sys.path.insert(0, sys.argv[2])\n"
    "from peak_memory import peak_rss_mb\n"
    "print(json.dumps({'code': code, 'seconds': took, 'peak_rss_mb': peak_rss_mb()}),"
    " file=sys.stderr)\n"
)


def _run(argv: list[str]) -> tuple[dict[str, float], str]:
    """Run one measured process: its own figures (stderr's last line: ``seconds`` of work
    after its imports, ``peak_rss_mb``) with ``process_s``, launch to exit; and its stdout."""
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=BENCHMARKS)
    took = time.perf_counter() - started
    assert done.returncode == 0, done.stderr[-2000:]
    figures: dict[str, float] = json.loads(done.stderr.strip().splitlines()[-1])
    return figures | {"process_s": took}, done.stdout


def test_report_over_10000_episodes_and_2_million_events(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    started = time.perf_counter()
    events = _fill(path)
    took = time.perf_counter() - started
    print(f"\nfilled {EPISODES:,} episodes, {events:,} events in {took:.0f} s")
    report = [sys.executable, "-c", _REPORT, str(path), str(BENCHMARKS)]
    plain = [sys.executable, "plain_report.py", str(path), json.dumps(eventlog.KIND_CODE)]
    runs: dict[str, list[dict[str, float]]] = {"agentrunner report": [], "plain reader": []}
    for _ in range(RUNS):
        figures, out = _run(report)
        made = json.loads(out.strip().splitlines()[-1])
        assert made["overall"]["episodes"] == EPISODES
        runs["agentrunner report"].append(figures)
        figures, out = _run(plain)
        assert sum(g["episodes"] for g in json.loads(out).values()) == EPISODES
        runs["plain reader"].append(figures)
    print(
        f"report over {EPISODES:,} episodes / {events:,} events, median of {RUNS} alternated"
        " runs, each in a fresh process (peak: VmHWM read inside it):"
    )
    median = {
        name: {what: statistics.median(r[what] for r in got) for what in got[0]}
        for name, got in runs.items()
    }
    for name, m in median.items():
        print(
            f"  {name:<18} {m['seconds']:.2f} s after imports, {m['process_s']:.2f} s as a"
            f" process, peak {m['peak_rss_mb']:.0f} MB"
        )
    ours, bare = median["agentrunner report"], median["plain reader"]
    print(
        f"  ratio: {ours['seconds'] / bare['seconds']:.2f}x after imports (budget"
        f" {BUDGET_S:.0f} s), {ours['process_s'] / bare['process_s']:.2f}x as a process,"
        f" memory {ours['peak_rss_mb'] / bare['peak_rss_mb']:.2f}x"
    )
