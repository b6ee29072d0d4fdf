"""Crash safety on a real repository: ``agentrunner run --repo`` SIGKILLed at random instants,
each resumed with ``agentrunner resume``, ends with exactly the change (``agentrunner diff``)
of an uninterrupted run.

The kill instants are drawn (stratified, fixed seed) over the measured duration of an
uninterrupted run; they only choose where to kill, nothing is asserted about time.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from thirdparty_repo import PROMPT, TEST_CMD, fixing_script, make_repo

pytestmark = pytest.mark.slow

KILLS = 24
MIN_KILLED = 20
PARALLEL = 4
PACE_S = "0.02"
RANDOM_SEED = 1207


def _env() -> dict[str, str]:
    return {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": PACE_S}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )


def _run_args(repo: Path, script: Path, db: Path) -> list[str]:
    return [
        sys.executable, "-m", "agentrunner.cli.main", "run", "--repo", str(repo),
        "--prompt", PROMPT, "--test", TEST_CMD, "--model", f"scripted:{script}",
        "--db", str(db), "--json",
    ]  # fmt: skip


def _episodes(db: Path) -> list[str]:
    if not db.exists():
        return []
    out = _cli("ls", "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    return [e["episode_id"] for e in json.loads(out.stdout.strip().splitlines()[-1])]


def _killed_run(repo: Path, script: Path, db: Path, after_s: float) -> tuple[bool, str]:
    """Start a run, SIGKILL it ``after_s`` into its episode (after its first event);
    resume what it left; return its diff."""
    proc = subprocess.Popen(
        _run_args(repo, script, db),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    while proc.poll() is None and not _has_events(db):
        time.sleep(0.002)
    killed = False
    try:
        proc.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed = True
    (episode,) = _episodes(db)
    resumed = _cli("resume", episode, "--db", str(db), "--json")
    status = _cli("show", episode, "--db", str(db), "--json")
    assert '"completed"' in status.stdout, (resumed.stdout, resumed.stderr)
    diff = _cli("diff", episode, "--db", str(db))
    assert diff.returncode == 0, diff.stderr
    return killed, diff.stdout


def _timed_reference(
    repo: Path, script: Path, db: Path
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """An uninterrupted run: when its first event was committed, when it ended, its output."""
    started = time.monotonic()
    proc = subprocess.Popen(
        _run_args(repo, script, db),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    first_event = None
    while proc.poll() is None and first_event is None:
        if _has_events(db):
            first_event = time.monotonic() - started
        time.sleep(0.005)
    out, err = proc.communicate(timeout=300)
    duration = time.monotonic() - started
    return (
        first_event or 0.0,
        duration,
        subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
    )


def _has_events(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT 1 FROM events LIMIT 1").fetchone() is not None
    except sqlite3.Error:
        return False


def test_runs_on_a_repository_killed_at_random_instants_resume_to_the_same_diff(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    script = fixing_script(tmp_path / "script.json")
    first_event, duration, reference = _timed_reference(repo, script, tmp_path / "reference.db")
    assert reference.returncode == 0, reference.stderr
    episode = json.loads(reference.stdout.strip().splitlines()[-1])["episode_id"]
    expected = _cli("diff", episode, "--db", str(tmp_path / "reference.db")).stdout
    assert "+    elif string.lower() in" in expected
    rng = random.Random(RANDOM_SEED)
    span = duration - first_event  # the episode itself; before it, the process starts up
    instants = [(i + rng.random()) / KILLS * span for i in range(KILLS)]
    with ThreadPoolExecutor(PARALLEL) as pool:
        diffs = list(
            pool.map(
                lambda job: _killed_run(repo, script, tmp_path / f"k{job[0]}.db", job[1]),
                enumerate(instants),
            )
        )
    killed = sum(k for k, _ in diffs)
    assert killed >= MIN_KILLED, f"only {killed} runs were killed before they ended"
    assert [d for _, d in diffs] == [expected] * KILLS
    shutil.rmtree(repo)
