"""TUI budgets (design §7) on a generated 1,000,000-event episode, and its first screen
against a minimal Textual app showing the same number of rows.

The episode (500 model turns of 2,000 events: a request, 1,995 streamed chunks, a response,
usage, a tool call and its result) is written into a real store file with bulk INSERTs in
one transaction (the append-only triggers allow inserts). The TUI then runs headless in a
fresh subprocess: time from starting the app to the first screen of rows, time from ``G`` to
the last event drawn, peak memory (``VmHWM``, read inside that process: see
:mod:`peak_memory`). Then ``agentrunner tui --db DB EP`` and the minimal app
(:mod:`minimal_textual_rows`) are launched in turn in a 120×40 pseudo-terminal, timed from
launch until their rows are drawn, with their peak memory up to then: medians of ``RUNS``
alternated launches and the ratios. Times are printed, never asserted (the machine may be
shared); the memory budget is asserted.

Run on demand: ``pytest tests/benchmarks/test_bench_tui.py -m benchmark -s``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from peak_memory import peak_rss_mb
from terminal_launch import FirstScreen, first_screen

from agentrunner.store.eventlog import INSERT, KIND_CODE, row_id

pytestmark = pytest.mark.benchmark

FIRST_SCREEN_BUDGET_S = 1.0
JUMP_BUDGET_S = 0.2
MEMORY_BUDGET_MB = 300
TURNS = 500
PER_TURN = 2000  # request + chunks + response + usage + tool.call + tool.result
EPISODE = "01BENCHTU1000000000000000M"
SIZE = (120, 40)
RUNS = 5  # alternated launches of each app
BASELINE = Path(__file__).with_name("minimal_textual_rows.py")
# drawn last on the TUI's first screen: the header's totals, turn 5's tool result and the
# folded stream of turn 6 (a folded row is summarised from its first chunks: a second read)
TUI_MARKERS = ("500 turns", f"file {5 * PER_TURN - 1}", f" token {5 * PER_TURN + 1}")
BASELINE_MARKERS = (" token 37",)  # the baseline's 40th row (seq 40)

_GENERATE = f"""
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {TURNS * PER_TURN - 1})
INSERT INTO event_log (id, attempt, turn, kind, ts, payload)
SELECT (:key << 32) + i + 3, 1, i / {PER_TURN} + 1,
  CASE i % {PER_TURN}
    WHEN 0 THEN {KIND_CODE["model.request"]}
    WHEN {PER_TURN - 4} THEN {KIND_CODE["model.response"]}
    WHEN {PER_TURN - 3} THEN {KIND_CODE["usage"]}
    WHEN {PER_TURN - 2} THEN {KIND_CODE["tool.call"]}
    WHEN {PER_TURN - 1} THEN {KIND_CODE["tool.result"]}
    ELSE {KIND_CODE["model.chunk"]} END,
  1735689600000000 + (i + 3) * 10000,
  CASE i % {PER_TURN}
    WHEN 0 THEN json_object('call_id', 'c' || (i / {PER_TURN}), 'tip_hash', 'h0',
      'tools_hash', 't0', 'params', json_object(), 'provider', 'bench', 'model', 'bench')
    WHEN {PER_TURN - 4} THEN json_object('call_id', 'c' || (i / {PER_TURN}), 'message_hash',
      'h0', 'stop_reason', 'tool_use', 'latency_s', 1.5)
    WHEN {PER_TURN - 3} THEN json_object('call_id', 'c' || (i / {PER_TURN}), 'input_tokens',
      1000, 'output_tokens', 2000, 'reasoning_tokens', 1500, 'cost_usd', 0.01)
    WHEN {PER_TURN - 2} THEN json_object('call_id', 'k' || (i / {PER_TURN}), 'name', 'bash',
      'arguments', '{{"command": "ls"}}', 'parsed', json_object('command', 'ls'))
    WHEN {PER_TURN - 1} THEN json_object('call_id', 'k' || (i / {PER_TURN}), 'name', 'bash',
      'observation', 'file ' || i || char(10) || 'other', 'reward', NULL, 'done', json('false'),
      'message_hash', 'h0', 'duration_s', 0.1)
    ELSE json_object('call_id', 'c' || (i / {PER_TURN}), 'channel',
      CASE WHEN i % {PER_TURN} < {PER_TURN - 200} THEN 'reasoning' ELSE 'text' END,
      'index', i % {PER_TURN}, 'text', ' token ' || i)
  END
FROM n
"""


def generate(path: Path) -> int:
    """Write the 1,000,000-event episode (plus start, prompt and end); return its size."""
    import sqlite3

    from agentrunner.store import TraceStore

    TraceStore(path).close()  # schema
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO episodes (id, parent_episode_id, fork_seq, task_id, seed, created_at, env,"
        " model) VALUES (?, NULL, NULL, 'bench', 0, '2025-01-01T00:00:00+00:00',"
        ' \'{"kind": "bench"}\', \'{"spec": "bench:bench"}\')',
        (EPISODE,),
    )
    conn.execute("INSERT INTO messages VALUES ('h0', NULL, ?)", ('{"role":"user","content":"go"}',))
    start = json.dumps(
        {"task_id": "bench", "seed": 0, "env": {}, "model": {}, "config": {}, "version": "0"}
    )
    (key,) = conn.execute("SELECT key FROM episodes WHERE id = ?", (EPISODE,)).fetchone()
    conn.execute(INSERT, (row_id(key, 1), 1, 0, KIND_CODE["episode.start"], 0, start))
    prompt = json.dumps({"role": "user", "message_hash": "h0", "reason": "prompt"})
    conn.execute(INSERT, (row_id(key, 2), 1, 0, KIND_CODE["message"], 0, prompt))
    conn.execute(_GENERATE, {"key": key})
    last = 3 + TURNS * PER_TURN
    end = json.dumps({"stop_reason": "max_turns", "turns": TURNS, "total_reward": 0.0})
    conn.execute(INSERT, (row_id(key, last), 1, TURNS, KIND_CODE["episode.end"], 0, end))
    conn.execute("COMMIT")
    (count,) = conn.execute(
        "SELECT count(*) FROM events WHERE episode_id = ?", (EPISODE,)
    ).fetchone()
    conn.close()
    return int(count)


async def _until(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.perf_counter() + timeout
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError
        await asyncio.sleep(0.001)


async def _measure(db: str, folded: bool) -> dict[str, float]:
    from agentrunner.tui.app import AgentRunnerApp
    from agentrunner.tui.screens.trace import TraceScreen

    started = time.perf_counter()
    app = AgentRunnerApp(db, EPISODE, poll_s=3600)
    async with app.run_test(size=SIZE):
        await _until(lambda: isinstance(app.screen, TraceScreen) and app.screen.episode_id)
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        lst = screen.event_list
        await _until(lambda: lst.row_count > 0 and lst.visible_loaded())
        first = time.perf_counter() - started
        if not folded:
            screen.action_fold()
            await _until(lambda: lst.row_count == lst.index.last_seq and lst.visible_loaded())
        jumped = time.perf_counter()
        screen.action_last()

        def at_end() -> bool:
            info, _ = lst.info(lst.cursor)
            return info is not None and info.kind == "episode.end" and lst.visible_loaded()

        await _until(at_end)
        jump = time.perf_counter() - jumped
        rows = lst.row_count
    return {
        "first_screen_s": first,
        "jump_to_end_s": jump,
        "peak_rss_mb": peak_rss_mb(),
        "rows": rows,
    }


def _run_tui(db: Path, folded: bool) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, __file__, str(db), "folded" if folded else "unfolded"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def million(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench-tui") / "million.db"
    started = time.perf_counter()
    count = generate(path)
    print(
        f"\ngenerated {count:,} events ({path.stat().st_size / 2**20:.0f} MB) in "
        f"{time.perf_counter() - started:.1f} s"
    )
    assert count >= 1_000_000
    return path


@pytest.mark.parametrize("folded", [True, False], ids=["chunks-folded", "one-row-per-event"])
def test_tui_first_screen_jump_and_memory_on_a_million_events(million: Path, folded: bool) -> None:
    r = _run_tui(million, folded)
    first, jump = r["first_screen_s"], r["jump_to_end_s"]
    print(
        f"\nTUI on 1M events ({'chunks folded' if folded else 'one row per event'}, "
        f"{int(r['rows']):,} rows): first screen {first:.3f} s "
        f"(budget {FIRST_SCREEN_BUDGET_S} s, ratio {first / FIRST_SCREEN_BUDGET_S:.2f})"
        f" · jump to end {jump * 1000:.1f} ms "
        f"(budget {JUMP_BUDGET_S * 1000:.0f} ms, ratio {jump / JUMP_BUDGET_S:.2f})"
        f" · peak RSS {r['peak_rss_mb']:.0f} MB "
        f"(budget {MEMORY_BUDGET_MB} MB, ratio {r['peak_rss_mb'] / MEMORY_BUDGET_MB:.2f})"
    )
    assert r["peak_rss_mb"] < MEMORY_BUDGET_MB  # times are printed against their budgets only


def test_tui_first_screen_against_a_minimal_textual_app_as_whole_processes(
    million: Path,
) -> None:
    tui = [sys.executable, "-m", "agentrunner.cli.entry", "tui", "--db", str(million), EPISODE]
    bare = [sys.executable, str(BASELINE), str(million), EPISODE]
    runs: dict[str, list[FirstScreen]] = {"agentrunner tui": [], "minimal Textual app": []}
    for _ in range(RUNS):
        runs["agentrunner tui"].append(first_screen(tui, TUI_MARKERS, size=SIZE))
        runs["minimal Textual app"].append(first_screen(bare, BASELINE_MARKERS, size=SIZE))
    seconds = {name: statistics.median(r.seconds for r in got) for name, got in runs.items()}
    memory = {name: statistics.median(r.peak_rss_mb for r in got) for name, got in runs.items()}
    print(
        f"\nfirst screen as a whole process, launch to rows drawn, {SIZE[0]}x{SIZE[1]}, "
        f"median of {RUNS} alternated launches:"
    )
    for name in runs:
        print(f"  {name:<20} {seconds[name]:.3f} s  peak {memory[name]:.0f} MB")
    time_ratios = [a.seconds / b.seconds for a, b in zip(*runs.values(), strict=True)]
    print(
        f"  ratio: time {seconds['agentrunner tui'] / seconds['minimal Textual app']:.2f}x "
        f"(per pair {min(time_ratios):.2f}-{max(time_ratios):.2f}), memory "
        f"{memory['agentrunner tui'] / memory['minimal Textual app']:.2f}x (goal: both <= 1.5x)"
    )


if __name__ == "__main__":  # the measured process: python test_bench_tui.py DB folded|unfolded
    print(json.dumps(asyncio.run(_measure(sys.argv[1], sys.argv[2] == "folded"))))
