"""The default trace store is one per user, in the XDG data folder: never in the working
directory, so a run on the user's own repository leaves it untouched, and every folder finds
the same episodes. ``--db`` and ``$AGENTRUNNER_DB`` still choose another."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_process import last_json, run_cli
from thirdparty_repo import git

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PROMPT = "write a greeting into greeting.txt"


def _script(path: Path) -> Path:
    turns = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "greeting.txt", "content": "hi\n"}}
            ]
        },
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    path.write_text(json.dumps({"name": "greet", "episodes": [{"match": "", "turns": turns}]}))
    return path


def _repo(dest: Path) -> Path:
    dest.mkdir(parents=True)
    (dest / "README").write_text("a repository\n")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "first")
    return dest


def _run_in(repo: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    script = _script(tmp_path / "greet.json")
    return run_cli(
        "run",
        "--repo",
        ".",
        "--prompt",
        PROMPT,
        "--model",
        f"scripted:{script}",
        "--sandbox",
        "process",
        "--json",
        *extra,
        cwd=repo,
    )


def test_run_on_a_repository_stores_under_the_xdg_data_folder_and_leaves_git_status_empty(
    tmp_path: Path, _own_data_home: Path
) -> None:
    repo = _repo(tmp_path / "repo")
    proc = _run_in(repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "status", "--porcelain", "--ignored") == ""
    store = _own_data_home / "agentrunner" / "traces.db"
    assert store.is_file() and not (repo / "traces").exists()


def test_the_first_run_names_the_new_default_store_on_stderr_and_the_next_does_not(
    tmp_path: Path, _own_data_home: Path
) -> None:
    repo = _repo(tmp_path / "repo")
    first, second = _run_in(repo, tmp_path), _run_in(repo, tmp_path)
    store = str(_own_data_home / "agentrunner" / "traces.db")
    assert first.returncode == 0 and second.returncode == 0
    assert [line for line in first.stderr.splitlines() if store in line] != []
    assert store not in second.stderr


def test_ls_from_another_folder_lists_the_episode_a_run_in_the_repository_made(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path / "repo")
    episode = last_json(_run_in(repo, tmp_path).stdout)["episode_id"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    listed = last_json(run_cli("ls", "--json", cwd=elsewhere).stdout)
    assert [e["episode_id"] for e in listed] == [episode]


def test_without_xdg_data_home_the_store_is_under_the_home_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = run_cli("run", "--json", cwd=tmp_path, env={"XDG_DATA_HOME": None, "HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert (home / ".local" / "share" / "agentrunner" / "traces.db").is_file()


def test_agentrunner_db_still_overrides_the_default(tmp_path: Path, _own_data_home: Path) -> None:
    chosen = tmp_path / "chosen.db"
    proc = run_cli("run", "--json", cwd=tmp_path, env={"AGENTRUNNER_DB": str(chosen)})
    assert proc.returncode == 0, proc.stderr
    assert chosen.is_file() and not (_own_data_home / "agentrunner").exists()


def test_help_of_every_command_says_where_the_default_store_is(_own_data_home: Path) -> None:
    store = str(_own_data_home / "agentrunner" / "traces.db")
    for command in ("run", "ls", "show", "export"):
        proc = run_cli(command, "--help")
        assert store in "".join(proc.stdout.split()), command


def test_ls_without_a_default_store_names_where_it_looked_and_makes_nothing(
    tmp_path: Path, _own_data_home: Path
) -> None:
    proc = run_cli("ls", cwd=tmp_path)
    assert proc.returncode == 1 and str(_own_data_home / "agentrunner" / "traces.db") in proc.stderr
    assert list(_own_data_home.iterdir()) == [] and list(tmp_path.iterdir()) == []
