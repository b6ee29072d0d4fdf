"""The files-changed screen (``F`` on a trace): the episode's whole change file by file, as
``agentrunner diff`` prints it, and ``a`` to apply it to the repository it ran on (checked,
confirmed, refusals shown). Real runs of the scripted model on a git repository made here."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_process import last_json, run_cli
from textual.widgets import Static
from thirdparty_repo import git

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.confirm import ConfirmScreen
from agentrunner.tui.screens.diff import DiffBody
from agentrunner.tui.screens.files import FilesScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]
EDIT = "echo 'print(2)' > a.py && rm b.txt && echo new > c.txt"


def _make_repo(dest: Path) -> Path:
    dest.mkdir()
    (dest / "a.py").write_text("print(1)\n", encoding="utf-8")
    (dest / "b.txt").write_text("gone soon\n", encoding="utf-8")
    git(dest, "init", "-q", "-b", "main")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "base")
    return dest


@pytest.fixture
def repo_run(tmp_path: Path) -> tuple[Path, Path, str]:
    """(repository, store, episode): one scripted run that edits, deletes and adds a file."""
    repo = _make_repo(tmp_path / "repo")
    turns = [
        {"text": "editing", "tool_calls": [{"name": "bash", "arguments": {"command": EDIT}}]},
        {"tool_calls": [{"name": "submit", "arguments": {}}]},
    ]
    model = tmp_path / "edit.json"
    model.write_text(json.dumps({"name": "t", "episodes": [{"match": "fix", "turns": turns}]}))
    db = tmp_path / "repo.db"
    args = ["run", "--repo", str(repo), "--prompt", "fix a.py", "--model", f"scripted:{model}"]
    proc = run_cli(*args, "--sandbox", "process", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    return repo, db, str(last_json(proc.stdout)["episode_id"])


async def _files(app: AgentRunnerApp, pilot) -> FilesScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    trace = app.screen
    assert isinstance(trace, TraceScreen)
    await wait_for(pilot, lambda: trace.episode_id is not None)
    await pilot.press("F")
    await wait_for(pilot, lambda: isinstance(app.screen, FilesScreen))
    screen = app.screen
    assert isinstance(screen, FilesScreen)
    await wait_for(pilot, lambda: screen.changed is not None)
    return screen


def _listed(screen: FilesScreen) -> list[tuple[str, str]]:
    assert screen.changed is not None
    return [(f.mark, f.path) for f in screen.changed.files]


def _diff_text(screen: FilesScreen) -> str:
    return str(screen.query_one("#files-diff", DiffBody).content)


async def test_F_lists_each_changed_file_of_the_episode_as_diff_prints_the_change(
    repo_run: tuple[Path, Path, str],
) -> None:
    _, db, episode = repo_run
    printed = run_cli("diff", episode, "--db", str(db))
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _files(app, pilot)
        assert screen.changed is not None
        lines = [line for f in screen.changed.files for line in f.lines]
    assert _listed(screen) == [("M", "a.py"), ("D", "b.txt"), ("A", "c.txt")]
    assert lines == printed.stdout.splitlines()


async def test_moving_down_the_list_shows_that_files_diff(
    repo_run: tuple[Path, Path, str],
) -> None:
    _, db, episode = repo_run
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _files(app, pilot)
        await wait_for(pilot, lambda: "+print(2)" in _diff_text(screen))
        await pilot.press("j")
        await wait_for(pilot, lambda: "-gone soon" in _diff_text(screen))
        assert "print(2)" not in _diff_text(screen)


async def test_a_applies_the_change_to_the_repository_after_confirmation(
    repo_run: tuple[Path, Path, str],
) -> None:
    repo, db, episode = repo_run
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _files(app, pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert (repo / "a.py").read_text() == "print(1)\n"  # asking wrote nothing
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.status.startswith("applied"))
    assert screen.status == "applied 3 file(s) (1 added, 1 modified, 1 deleted)"
    assert (repo / "a.py").read_text() == "print(2)\n" and (repo / "c.txt").exists()
    assert not (repo / "b.txt").exists()


async def test_declining_the_confirmation_leaves_the_repository_unchanged(
    repo_run: tuple[Path, Path, str],
) -> None:
    repo, db, episode = repo_run
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _files(app, pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
    assert git(repo, "status", "--porcelain") == ""


async def test_apply_is_refused_with_its_reason_when_the_repository_has_local_changes(
    repo_run: tuple[Path, Path, str],
) -> None:
    repo, db, episode = repo_run
    (repo / "a.py").write_text("print('mine')\n", encoding="utf-8")
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _files(app, pilot)
        await pilot.press("a")
        await wait_for(pilot, lambda: screen.status.startswith("apply refused"))
        assert not isinstance(app.screen, ConfirmScreen)
    assert "a.py" in screen.status and "nothing written" in screen.status
    assert (repo / "a.py").read_text() == "print('mine')\n" and (repo / "b.txt").exists()


async def test_a_task_workspace_episode_lists_its_files_and_says_how_to_apply_them(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(160, 30)) as pilot:
        screen = await _files(app, pilot)
        await pilot.press("a")
        await pilot.pause()
        header = str(screen.query_one("#files-header", Static).content)
    assert ("M", "stats.py") in _listed(screen)
    assert "--to PATH" in header and not screen.status
