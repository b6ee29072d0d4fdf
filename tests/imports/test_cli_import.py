"""`agentrunner import` from the command line: summaries, JSON, clear errors, nothing half-done."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cli_process import run_cli

from agentrunner import TraceStore
from tests.imports.conftest import FIXTURES, needs


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


@needs("claude-code")
def test_a_folder_imports_every_session_and_says_what_it_did(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    first = cli("import", "--db", str(db), str(FIXTURES))
    assert first.returncode == 0, first.stderr
    assert "imported " in first.stderr and "skipped" in first.stderr  # the ATIF schema file
    again = cli("import", "--db", str(db), "--json", str(FIXTURES / "claude-code"))
    assert again.returncode == 0, again.stderr
    files = json.loads(again.stdout)
    sessions = [s for f in files for s in f["sessions"]]
    assert sessions and all(s["events_added"] == 0 and not s["created"] for s in sessions)
    listed = cli("ls", "--db", str(db), "--json")
    assert "claude-code:" in listed.stdout


def test_a_named_file_no_importer_knows_is_a_usage_error(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    other = tmp_path / "notes.jsonl"
    other.write_text('{"hello": "world"}\n', encoding="utf-8")
    done = cli("import", "--db", str(db), str(other))
    assert done.returncode == 2
    assert "not a trace any importer knows" in done.stderr and "Traceback" not in done.stderr


@needs("atif")
def test_a_half_written_trajectory_is_refused_and_nothing_is_imported(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    whole = (FIXTURES / "atif" / "harbor-atif2otel__trajectory_pass.json").read_bytes()
    half = tmp_path / "trajectory.json"
    half.write_bytes(whole[: len(whole) // 2])
    done = cli("import", "--db", str(db), "--format", "atif", str(half))
    assert done.returncode == 2
    assert "not complete JSON" in done.stderr and "Traceback" not in done.stderr
    with TraceStore(db) as store:
        assert store.episode_ids() == []


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    done = cli("import", "--db", str(tmp_path / "t.db"), str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "no such file or folder" in done.stderr


@needs("claude-code")
def test_resume_and_replay_of_an_imported_session_say_why_they_cannot_run(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    cli("import", "--db", str(db), str(FIXTURES / "claude-code" / "short.jsonl"))
    with TraceStore(db) as store:
        (episode,) = store.episode_ids()
    for command in ("resume", "replay"):
        done = cli(command, "--db", str(db), episode)
        assert done.returncode == 2, done.stderr
        assert "no environment to run its tools in" in done.stderr
        assert "Traceback" not in done.stderr
