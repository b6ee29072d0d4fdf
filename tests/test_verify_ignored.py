"""The reward follows from the change as ``diff`` shows it: a file git ignores that the agent
wrote (left out of ``diff`` and ``apply``) never reaches the copy the test command is scored
on, so an ignored file cannot earn a reward the applied change would not."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_process import run_cli
from test_patch_ignores import SANDBOX, git, script, turn, user_config

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
CHECK = "import pathlib, sys\nsys.exit(0 if pathlib.Path('flag.local').exists() else 1)\n"


def episode(tmp_path: Path, writes: str) -> tuple[dict[str, object], Path, dict[str, str]]:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "check.py").write_text(CHECK)
    (repo / ".gitignore").write_text("*.local\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a check that reads an ignored file")
    env = user_config(tmp_path, "")
    turns = [turn("bash", command=writes), turn("submit")]
    model = f"scripted:{script(tmp_path / 'script.json', turns)}"
    db = tmp_path / "traces.db"
    run = run_cli(
        "run", "--repo", str(repo), "--prompt", "make calc.py pass", "--test", "python check.py",
        "--model", model, "--sandbox", SANDBOX, "--db", str(db), "--json", env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1]), db, env


def test_an_ignored_file_the_agent_wrote_earns_no_reward(tmp_path: Path) -> None:
    result, db, env = episode(tmp_path, "echo yes > flag.local")
    diff = run_cli("diff", str(result["episode_id"]), "--db", str(db), env=env)
    assert "flag.local" not in diff.stdout
    assert result["total_reward"] == 0


def test_the_same_file_in_the_change_earns_the_reward(tmp_path: Path) -> None:
    result, db, env = episode(tmp_path, "echo '' > .gitignore && echo yes > flag.local")
    diff = run_cli("diff", str(result["episode_id"]), "--db", str(db), env=env)
    assert "flag.local" in diff.stdout  # no longer ignored: part of the change
    assert result["total_reward"] == 1
