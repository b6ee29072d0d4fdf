"""The command line under a newcomer's hands: read commands never make stores, errors are one
line (and a JSON object with --json), and signals and closed pipes end runs on the record."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore

AGENTRUNNER = Path(sys.executable).parent / "agentrunner"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def last_json(text: str) -> Any:
    return json.loads(text.strip().splitlines()[-1])


def first_events(db: Path, proc: subprocess.Popen[str], count: int = 3) -> None:
    """Wait until the run has committed ``count`` events."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                if conn.execute("SELECT count(*) FROM events").fetchone()[0] >= count:
                    return
        except sqlite3.Error:
            pass
        time.sleep(0.01)
    raise AssertionError("the run did not start")


def only_episode(db: Path) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    with TraceStore(db, create=False) as store:
        (episode,) = store.list_episodes()
        rows = [(r.kind, r.payload) for r in store.iter_events(episode.episode_id)]
    return episode.status, rows


# -- read commands never create (or convert) a store --------------------------------------


def test_ls_of_a_store_that_does_not_exist_says_where_it_looked_and_creates_nothing(
    tmp_path: Path,
) -> None:
    proc = cli("ls", "--db", str(tmp_path / "nonexist" / "dir" / "x.db"))
    assert proc.returncode == 1 and "no trace store at" in proc.stderr
    assert not (tmp_path / "nonexist").exists()


def test_ls_outside_a_project_creates_no_traces_folder(tmp_path: Path) -> None:
    proc = cli("ls", cwd=tmp_path)
    assert proc.returncode == 1 and "agentrunner/traces.db" in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("content", [b"", b"just some notes\n"])
def test_read_commands_leave_an_empty_or_foreign_file_as_it_was(
    tmp_path: Path, content: bytes
) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(content)
    for command in (["ls"], ["show", "01"], ["export", "--format", "sft"], ["tui"]):
        proc = cli(*command, "--db", str(path))
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, command
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]


def test_run_still_creates_its_store_and_folder(tmp_path: Path) -> None:
    proc = cli("run", "--db", str(tmp_path / "new" / "t.db"))
    assert proc.returncode == 0 and (tmp_path / "new" / "t.db").exists()


# -- errors with --json -----------------------------------------------------------------------


def test_json_errors_are_an_object_on_the_last_stdout_line(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    cli("run", "--db", str(db))
    proc = cli("show", "ZZZZZZZZ", "--db", str(db), "--json")
    assert proc.returncode == 2
    error = last_json(proc.stdout)
    assert error["type"] == "EpisodeNotFoundError" and error["exit_code"] == 2
    assert "ZZZZZZZZ" in error["error"]


def test_json_usage_errors_are_an_object_too(tmp_path: Path) -> None:
    proc = cli("run", "--max-turns", "many", "--json")
    assert proc.returncode == 2
    assert last_json(proc.stdout) == {
        "error": "argument --max-turns: invalid int value: 'many'",
        "type": "UsageError",
        "exit_code": 2,
    }


# -- signals and closed pipes end runs on the record -------------------------------------------


def _paced_run(db: Path, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.02"}
    return subprocess.Popen(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        **kw,
    )


def test_sigterm_cancels_a_run_with_its_cancel_and_end_recorded(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    proc = _paced_run(db)
    first_events(db, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130
    status, rows = only_episode(db)
    assert status == "cancelled"
    cancels = [p for k, p in rows if k == "cancel"]
    assert cancels and cancels[0]["reason"] == "SIGTERM" and rows[-1][0] == "episode.end"
    assert last_json(out)["status"] == "cancelled"


def test_a_run_started_with_sigint_ignored_still_honours_kill_int(tmp_path: Path) -> None:
    db = tmp_path / "t.db"

    def ignore_sigint() -> None:  # as a shell does for a job started with `&`
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = _paced_run(db, preexec_fn=ignore_sigint)
    first_events(db, proc)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert only_episode(db)[0] == "cancelled"


def test_a_closed_live_view_cancels_the_run_with_the_reason_recorded(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    env = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.02"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    proc.stderr.readline()  # like `2>&1 | head -1`
    proc.stderr.close()
    proc.wait(timeout=120)
    status, rows = only_episode(db)
    assert status == "cancelled"
    (cancel,) = [p for k, p in rows if k == "cancel"]
    assert "output was closed" in cancel["reason"]


def test_ctrl_c_while_the_program_loads_is_a_quiet_cancel(tmp_path: Path) -> None:
    if not AGENTRUNNER.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    proc = subprocess.Popen(
        [str(AGENTRUNNER), "run", "--db", str(tmp_path / "t.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # while the command line loads; the assertion does not depend on it
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert "Traceback" not in err
    assert proc.returncode in (130, -signal.SIGINT)
