"""``agentrunner --help``, ``ls`` and ``show EP`` start-up beside ``python -c pass``.

A small store holds the demo episode (``agentrunner run`` with the scripted model). Then,
alternated, each repetition runs ``python -c pass`` (the same interpreter) and the three
commands as subprocesses, output to a file. Each command's median time, the baseline's and
the median of the per-repetition ratios are printed (issue 25's goal 1: at most 5x); only
that every command succeeded is asserted: a benchmark is not a timed test.

Run on demand: ``pytest tests/benchmarks/test_bench_startup.py -m benchmark -s``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.benchmark

RATIO_GOAL = 5.0
"""Printed beside the ratios (issue 25 goal 1); not asserted."""
REPS = 7
AGENTRUNNER = str(Path(sys.executable).with_name("agentrunner"))


def _timed(command: list[str], out: Path) -> float:
    with out.open("w") as sink:
        start = time.perf_counter()
        subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=True)
        return time.perf_counter() - start


def _demo_store(db: Path) -> str:
    """The demo episode recorded into ``db``; its id."""
    run = subprocess.run(
        [AGENTRUNNER, "run", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0"},
    )
    episode_id: str = json.loads(run.stdout.strip().splitlines()[-1])["episode_id"]
    return episode_id


def test_start_up_of_help_ls_and_show_beside_python_doing_nothing(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    episode_id = _demo_store(db)
    baseline = [sys.executable, "-c", "pass"]
    commands = {
        "--help": [AGENTRUNNER, "--help"],
        "ls": [AGENTRUNNER, "ls", "--db", str(db)],
        "show EP": [AGENTRUNNER, "show", "--db", str(db), episode_id],
    }
    out = tmp_path / "out.txt"
    for command in (baseline, *commands.values()):  # warm the page cache and .pyc files
        _timed(command, out)
    base_s: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in commands}
    ratios: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(REPS):
        base_s.append(_timed(baseline, out))
        for name, command in commands.items():
            times[name].append(_timed(command, out))
            ratios[name].append(times[name][-1] / base_s[-1])
    print(f"\npython -c pass: {statistics.median(base_s) * 1000:.0f} ms (median of {REPS})")
    for name in commands:
        print(
            f"agentrunner {name}: {statistics.median(times[name]) * 1000:.0f} ms, ratio "
            f"{statistics.median(ratios[name]):.1f}x (goal {RATIO_GOAL:g}x; ratios "
            f"{', '.join(f'{r:.1f}' for r in ratios[name])})"
        )
    assert out.stat().st_size > 0  # the last command printed its episode
