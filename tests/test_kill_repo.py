"""Crash safety on a real repository: ``agentrunner run --repo`` SIGKILLed at random instants,
each resumed with ``agentrunner resume``, ends with exactly the change (``agentrunner diff``)
of an uninterrupted run.

The kill points are drawn (stratified, fixed seed) over the events of an uninterrupted run: each
run is killed as soon as it has committed its drawn number of events, so where the kills land does
not depend on how fast the machine is, and nothing is asserted about time.
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
from typing import Any

import pytest
from thirdparty_repo import PROMPT, TEST_CMD, fixing_script, make_repo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # 24 runs; only bounds a hang

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
        timeout=900,  # only bounds a hang
    )


_QUIET_RUN: dict[str, Any] = {"capture_output": True, "text": True, "env": _env(), "timeout": 900}


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


def _killed_run(repo: Path, script: Path, db: Path, after_events: int) -> tuple[bool, str]:
    """Start a run, SIGKILL it once it has committed ``after_events`` events (if it is still
    running then); resume what it left; return whether it was killed, and its diff."""
    proc = subprocess.Popen(
        _run_args(repo, script, db),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(),
    )
    while proc.poll() is None and _event_count(db) < after_events:
        time.sleep(0.002)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    (episode,) = _episodes(db)
    resumed = _cli("resume", episode, "--db", str(db), "--json")
    status = _cli("show", episode, "--db", str(db), "--json")
    assert '"completed"' in status.stdout, (resumed.stdout, resumed.stderr)
    diff = _cli("diff", episode, "--db", str(db))
    assert diff.returncode == 0, diff.stderr
    check = _cli("verify", episode, "--db", str(db), "--json")  # the reward follows from it
    (result,) = json.loads(check.stdout.strip().splitlines()[-1])["results"]
    assert (result["passed"], result["score"]) == (True, 1.0), result
    return killed, diff.stdout


def _event_count(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])
    except sqlite3.Error:
        return 0  # not created yet


def test_runs_on_a_repository_killed_at_random_instants_resume_to_the_same_diff(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo")
    script = fixing_script(tmp_path / "script.json")
    reference_db = tmp_path / "reference.db"
    reference = subprocess.run(_run_args(repo, script, reference_db), **_QUIET_RUN)
    assert reference.returncode == 0, reference.stderr
    episode = json.loads(reference.stdout.strip().splitlines()[-1])["episode_id"]
    expected = _cli("diff", episode, "--db", str(reference_db)).stdout
    assert "+    elif string.lower() in" in expected
    total = _event_count(reference_db)
    rng = random.Random(RANDOM_SEED)
    # Kill points over the episode's events but its last few, so a poll that lags a little
    # behind the writer still finds it running.
    span = total - 4
    instants = [1 + int((i + rng.random()) / KILLS * span) for i in range(KILLS)]
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
