"""``run --repo`` given a subfolder of a repository works on that repository, with the
subfolder as the agent's working directory: its commands and relative paths start there,
and ``diff`` gives paths relative to the repository, as ``git apply`` in it takes them."""

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
    (dest / "pkg").mkdir(parents=True)
    (dest / "README").write_text("top\n")
    (dest / "pkg" / "mod.txt").write_text("old\n")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "first")
    return dest


def _run_in_subfolder(tmp_path: Path) -> tuple[Path, dict[str, str], str]:
    turns = [
        {"tool_calls": [{"name": "bash", "arguments": {"command": "pwd; ls"}}]},
        {"tool_calls": [{"name": "list_files", "arguments": {}}]},
        {
            "tool_calls": [
                {
                    "name": "str_replace",
                    "arguments": {"path": "mod.txt", "old_str": "old", "new_str": "new"},
                }
            ]
        },
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"name": "s", "episodes": [{"match": "", "turns": turns}]}))
    repo = _repo(tmp_path / "repo")
    db = str(tmp_path / "t.db")
    proc = run_cli(
        "run",
        "--repo",
        ".",
        "--prompt",
        "change mod.txt",
        "--test",
        "grep -q new mod.txt",
        "--model",
        f"scripted:{script}",
        "--sandbox",
        "process",
        "--db",
        db,
        "--json",
        cwd=repo / "pkg",
    )
    assert proc.returncode == 0, proc.stderr
    return repo, last_json(proc.stdout), db


def test_a_subfolder_of_a_repository_is_the_agents_working_directory(tmp_path: Path) -> None:
    _, result, db = _run_in_subfolder(tmp_path)
    shown = run_cli("show", result["episode_id"], "--events", "--json", "--db", db)
    events = last_json(shown.stdout)["events"]
    shell, listing = [e["payload"]["observation"] for e in events if e["kind"] == "tool.result"][:2]
    assert shell.splitlines()[:2] == ["/workspace/pkg", "mod.txt"] and listing == "mod.txt"
    assert (result["status"], result["total_reward"]) == ("completed", 1.0)


def test_the_diff_of_a_run_in_a_subfolder_applies_at_the_repositorys_top(tmp_path: Path) -> None:
    repo, result, db = _run_in_subfolder(tmp_path)
    patch = run_cli("diff", result["episode_id"], "--db", db)
    assert patch.returncode == 0 and "+++ b/pkg/mod.txt" in patch.stdout
    subprocess.run(["git", "apply"], cwd=repo, input=patch.stdout, text=True, check=True)
    assert (repo / "pkg" / "mod.txt").read_text() == "new\n"
