"""A run on the user's repository without ``--test`` has nothing to judge the change by: its
reward is unknown (null), never 0, and ``run``, ``ls`` and ``show`` say it is not judged."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_process import last_json, run_cli
from thirdparty_repo import git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _repo(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / "README").write_text("a repository\n")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "first")
    return dest


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    turns = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "s", "episodes": [{"match": "", "turns": turns}]}))
    repo = _repo(tmp_path / "repo")
    return run_cli(
        "run",
        "--repo",
        str(repo),
        "--prompt",
        "add a.txt",
        "--model",
        f"scripted:{script}",
        "--sandbox",
        "process",
        "--db",
        str(tmp_path / "t.db"),
        *extra,
    )


def test_a_run_without_a_test_command_has_a_null_reward(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    result = last_json(proc.stdout)
    assert (result["status"], result["total_reward"]) == ("completed", None)
    listed = last_json(run_cli("ls", "--db", str(tmp_path / "t.db"), "--json").stdout)
    assert [e["total_reward"] for e in listed] == [None]


def test_the_outcome_says_the_change_was_not_judged(tmp_path: Path) -> None:
    proc = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "not judged" in proc.stderr and "0/0" not in proc.stderr
    assert "reward 0" not in proc.stdout + proc.stderr and "not judged" in proc.stdout


def test_ls_and_show_print_an_unjudged_reward_as_a_dash(tmp_path: Path) -> None:
    episode = last_json(_run(tmp_path, "--json").stdout)["episode_id"]
    db = str(tmp_path / "t.db")
    (row,) = [line for line in run_cli("ls", "--db", db).stdout.splitlines() if "repo:" in line]
    shown = run_cli("show", episode, "--db", db)
    assert " - " in row and " 0 " not in row
    assert shown.returncode == 0 and "reward    not judged" in shown.stdout
