"""An episode's change is what ``git status`` would show in its workspace: ``diff`` and ``apply``
leave out what the repository's ``.gitignore`` files, its ``.git/info/exclude`` and the user's
global excludes file ignore (tool caches among them), keep tracked files whatever pattern
matches them, and take ``--exclude PATTERN``; ``apply`` refusals exit 3; an empty ``diff``
says so.

One recorded episode on a small repository made at test time: a scripted agent runs pytest,
writes files each ignore source ignores, a new file, an edit to a tracked file that matches an
ignore pattern, and the fix. Every CLI call runs with ``GIT_CONFIG_GLOBAL`` and ``HOME`` in the
test's temp folder, never the user's own configuration.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import TraceStore
from agentrunner.envs.ignores import left_out
from agentrunner.envs.jail import bwrap_problem
from agentrunner.envs.manifest import Entry, FileEntry
from agentrunner.readers.changes import episode_change, step_change

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

SANDBOX = "bwrap" if bwrap_problem() is None else "process"
PROMPT = "add() in calc.py subtracts; fix it"
BUGGY, FIXED = "return a - b", "return a + b"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
PYTEST = "python -m pytest -q -p no:randomly test_calc.py"
WRITES = (
    "echo log > debug.log && mkdir -p build notes && echo o > build/out.o"
    " && echo t > pkg/scratch.tmp && echo n > notes/todo.txt && echo s > .calc.py.swp"
    " && echo news > NEWS.md && echo more >> keep.log"
)
CHANGE = ["NEWS.md", "calc.py", "keep.log"]
"""What ``git status`` shows: the fix, the new file, the tracked file matching ``*.log``."""
IGNORED = {
    "debug.log": ".gitignore (*.log)",
    "build/out.o": ".gitignore (build/)",
    "pkg/scratch.tmp": "pkg/.gitignore (*.tmp)",
    "notes/todo.txt": ".git/info/exclude (notes/)",
    ".calc.py.swp": "the global excludes file (*.swp)",
    ".pytest_cache/v/cache/nodeids": ".pytest_cache/.gitignore (*), written by pytest",
}


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    full.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, **(env or {})})
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    done = subprocess.run(
        ["git", *identity, *args], cwd=cwd, env=full, capture_output=True, text=True, check=True
    )
    return done.stdout


@dataclass(frozen=True)
class Recorded:
    repo: Path
    db: Path
    episode: str
    env: dict[str, str]
    """``GIT_CONFIG_GLOBAL`` (naming the global excludes file), ``HOME``, ``XDG_CONFIG_HOME``."""

    def cli(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, "--db", str(self.db), env={**self.env, **(env or {})})

    def clone(self, dest: Path) -> Path:
        git(dest.parent, "clone", "-q", str(self.repo), str(dest))
        return dest


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "calc.py").write_text(f"def add(a, b):\n    {BUGGY}\n")
    (repo / "test_calc.py").write_text(TEST)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "pkg" / ".gitignore").write_text("*.tmp\n")
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "keep.log").write_text("tracked although *.log is ignored\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "add", "-f", "keep.log")
    git(repo, "commit", "-q", "-m", "calc with a bug")
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("notes/\n")
    return repo


def user_config(root: Path, excludes: str) -> dict[str, str]:
    home = root / "home"
    (home / ".config").mkdir(parents=True)
    (home / "global-ignore").write_text(excludes)
    config = home / "gitconfig"
    config.write_text(f"[core]\n\texcludesFile = {home / 'global-ignore'}\n")
    return {
        "GIT_CONFIG_GLOBAL": str(config),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }


def turn(name: str, **arguments: str) -> dict[str, Any]:
    """A scripted model turn that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


FIX = turn("str_replace", path="calc.py", old_str=BUGGY, new_str=FIXED)


def script(path: Path, turns: list[dict[str, Any]]) -> Path:
    body = {"name": "fix-add", "episodes": [{"match": "calc.py", "turns": turns}]}
    path.write_text(json.dumps(body))
    return path


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("ignores")
    repo, env = make_repo(root), user_config(root, "*.swp\n")
    db = root / "traces.db"
    turns = [
        turn("bash", command=f"{PYTEST} || true"),
        turn("bash", command=WRITES),
        FIX,
        turn("bash", command=PYTEST),
        turn("submit"),
    ]
    model = f"scripted:{script(root / 'script.json', turns)}"
    args = ["run", "--repo", str(repo), "--prompt", PROMPT, "--test", PYTEST, "--model", model]
    run = run_cli(*args, "--sandbox", SANDBOX, "--db", str(db), "--json", env=env)
    assert run.returncode == 0, run.stderr
    episode = json.loads(run.stdout.strip().splitlines()[-1])["episode_id"]
    with TraceStore(db) as store:
        written = episode_change(store, episode).new
    if ".pytest_cache/v/cache/nodeids" not in written:
        pytest.skip("the sandbox's python cannot run pytest (no .pytest_cache was written)")
    return Recorded(repo=repo, db=db, episode=episode, env=env)


def patched_paths(patch: str, cwd: Path) -> list[str]:
    """The paths a patch touches, as ``git apply --numstat`` reads them."""
    done = subprocess.run(
        ["git", "apply", "--numstat", "-z", "-"],
        cwd=cwd,
        input=patch.encode("utf-8", "surrogateescape"),
        capture_output=True,
        check=True,
    )
    return sorted(p.split(b"\t")[-1].decode() for p in done.stdout.split(b"\0") if p)


def words(text: str) -> str:
    """``text`` with every run of whitespace as one space (``--stat`` aligns its columns)."""
    return " ".join(text.split())


def user_ran_pytest(checkout: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "test_calc.py"],
        cwd=checkout,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        check=False,
    )
    assert (checkout / ".pytest_cache" / "v" / "cache" / "nodeids").exists()
    return checkout


# -- diff: what git status shows -------------------------------------------------------------


def test_the_diff_holds_exactly_what_git_status_shows_in_the_agents_workspace(
    recorded: Recorded, tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace"  # the agent's steps again, in a copy with the same .git
    shutil.copytree(recorded.repo, workspace, symlinks=True)
    quiet = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    steps = ["bash", "-c", f"{PYTEST}; {WRITES}"]
    subprocess.run(steps, cwd=workspace, env=quiet, capture_output=True, check=False)
    (workspace / "calc.py").write_text(f"def add(a, b):\n    {FIXED}\n")
    status = git(workspace, "status", "--porcelain", "-z", "-uall", env=recorded.env)
    shown = sorted(entry[3:] for entry in status.split("\0") if entry)
    patch = recorded.cli("diff", recorded.episode)
    assert patch.returncode == 0, patch.stderr
    assert patched_paths(patch.stdout, tmp_path) == shown == CHANGE


@pytest.mark.parametrize("path", sorted(IGNORED), ids=lambda p: IGNORED[p])
def test_diff_stat_leaves_out_a_file_an_ignore_rule_covers(recorded: Recorded, path: str) -> None:
    stat = recorded.cli("diff", recorded.episode, "--stat")
    assert stat.returncode == 0, stat.stderr
    assert "calc.py | 2 +-" in words(stat.stdout)
    assert path not in stat.stdout


def test_a_tracked_file_matching_an_ignore_pattern_stays_part_of_the_change(
    recorded: Recorded,
) -> None:
    stat = recorded.cli("diff", recorded.episode, "--stat")
    assert "keep.log | 1 +" in words(stat.stdout)


def test_the_global_excludes_are_read_from_the_users_own_git_config(
    recorded: Recorded, tmp_path: Path
) -> None:
    other = user_config(tmp_path, "")  # a user whose excludes file does not ignore *.swp
    stat = recorded.cli("diff", recorded.episode, "--stat", env=other)
    assert ".calc.py.swp | 1 +" in words(stat.stdout)


def test_ignored_files_the_agent_wrote_stay_in_its_snapshots(recorded: Recorded) -> None:
    with TraceStore(recorded.db) as store:
        final = episode_change(store, recorded.episode).new
    assert set(IGNORED) <= set(final)


def test_diff_json_counts_the_paths_it_left_out(recorded: Recorded) -> None:
    shown = recorded.cli("diff", recorded.episode, "--json")
    body = json.loads(shown.stdout.strip().splitlines()[-1])
    assert (body["changed"], body["files"], body["left_out"] >= len(IGNORED)) == (True, 3, True)


# -- a checkout where the user ran pytest ------------------------------------------------------


def test_diff_piped_into_git_apply_works_in_a_checkout_where_the_user_ran_pytest(
    recorded: Recorded, tmp_path: Path
) -> None:
    checkout = user_ran_pytest(recorded.clone(tmp_path / "checkout"))
    patch = recorded.cli("diff", recorded.episode)
    applied = subprocess.run(
        ["git", "apply"], cwd=checkout, input=patch.stdout, capture_output=True, text=True
    )
    assert applied.returncode == 0, applied.stderr
    assert FIXED in (checkout / "calc.py").read_text()


def test_apply_check_succeeds_in_a_checkout_with_its_own_pytest_cache(
    recorded: Recorded, tmp_path: Path
) -> None:
    checkout = user_ran_pytest(recorded.clone(tmp_path / "checkout"))
    checked = recorded.cli("apply", recorded.episode, "--to", str(checkout), "--check", "--json")
    assert checked.returncode == 0, checked.stderr
    body = json.loads(checked.stdout.strip().splitlines()[-1])
    assert (body["files"], body["added"], body["modified"]) == (3, 1, 2)


def test_apply_writes_the_change_and_none_of_the_ignored_files(
    recorded: Recorded, tmp_path: Path
) -> None:
    checkout = recorded.clone(tmp_path / "checkout")
    applied = recorded.cli("apply", recorded.episode, "--to", str(checkout))
    assert applied.returncode == 0, applied.stderr
    status = git(checkout, "status", "--porcelain", "-uall", "--ignored", env=recorded.env)
    assert sorted(status.splitlines()) == sorted(["?? NEWS.md", " M calc.py", " M keep.log"])


# -- --exclude -------------------------------------------------------------------------------


def test_diff_exclude_leaves_out_what_a_gitignore_style_pattern_matches(
    recorded: Recorded, tmp_path: Path
) -> None:
    patch = recorded.cli("diff", recorded.episode, "--exclude", "*.md", "--exclude", "/keep.*")
    assert patch.returncode == 0, patch.stderr
    assert patched_paths(patch.stdout, tmp_path) == ["calc.py"]


def test_apply_exclude_leaves_a_tracked_file_it_matches_untouched(
    recorded: Recorded, tmp_path: Path
) -> None:
    checkout = recorded.clone(tmp_path / "checkout")
    applied = recorded.cli(
        "apply", recorded.episode, "--to", str(checkout), "--exclude", "keep.log"
    )
    assert applied.returncode == 0, applied.stderr
    assert git(checkout, "status", "--porcelain").splitlines() == [" M calc.py", "?? NEWS.md"]


# -- apply refusals exit 3 -------------------------------------------------------------------


def test_apply_refusing_conflicting_local_changes_exits_3(
    recorded: Recorded, tmp_path: Path
) -> None:
    checkout = recorded.clone(tmp_path / "checkout")
    (checkout / "keep.log").write_text("a local edit\n")
    refused = recorded.cli("apply", recorded.episode, "--to", str(checkout))
    assert refused.returncode == 3, refused.stderr
    assert "conflicting local changes in 1 path(s) the change touches: keep.log" in refused.stderr


def test_apply_to_a_folder_that_is_not_a_git_checkout_exits_3(
    recorded: Recorded, tmp_path: Path
) -> None:
    refused = recorded.cli("apply", recorded.episode, "--to", str(tmp_path), "--json")
    assert refused.returncode == 3, refused.stderr
    body = json.loads(refused.stdout.strip().splitlines()[-1])
    assert (body["exit_code"], "not the top folder of a git checkout" in body["error"]) == (3, True)


def test_apply_help_documents_exit_code_3() -> None:
    shown = run_cli("apply", "--help")
    assert "3 refused" in " ".join(shown.stdout.split())


# -- diff --turn K with no change --------------------------------------------------------------


def test_diff_of_a_turn_with_no_change_says_so_on_stderr_and_prints_nothing(
    recorded: Recorded,
) -> None:
    early = recorded.cli("diff", recorded.episode, "--turn", "1")  # pytest ran: caches only
    assert (early.returncode, early.stdout) == (0, "")
    (said,) = early.stderr.strip().splitlines()
    assert said.startswith("no change as of turn 1")


def test_diff_json_of_a_turn_with_no_change_says_so(recorded: Recorded) -> None:
    early = recorded.cli("diff", recorded.episode, "--turn", "1", "--json")
    body = json.loads(early.stdout.strip().splitlines()[-1])
    assert (early.returncode, body["changed"], body["files"], body["patch"]) == (0, False, 0, "")


# -- bundled tasks: the workspace's own .gitignore and the cache defaults -----------------------


@pytest.fixture(scope="module")
def task_episode(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    root = tmp_path_factory.mktemp("task")
    files = {"calc.py": f"def add(a, b):\n    {BUGGY}\n", ".gitignore": "*.log\n"}
    tasks = root / "tasks.json"
    tasks.write_text(json.dumps([{"task_id": "calc", "prompt": PROMPT, "files": files}]))
    cache = "mkdir -p .pytest_cache/v/cache && echo '{}' > .pytest_cache/v/cache/lastfailed"
    writes = f"{cache} && echo log > debug.log && echo s > .calc.py.swp && echo news > NEWS.md"
    model = script(root / "script.json", [turn("bash", command=writes), FIX, turn("submit")])
    db, env = root / "traces.db", user_config(root, "*.swp\n")
    args = ["run", "--tasks", str(tasks), "--task", "calc", "--model", f"scripted:{model}"]
    run = run_cli(*args, "--sandbox", SANDBOX, "--db", str(db), "--json", env=env)
    assert run.returncode == 0, run.stderr
    episode = json.loads(run.stdout.strip().splitlines()[-1])["episode_id"]
    return Recorded(repo=root, db=db, episode=episode, env=env)


def test_a_task_episodes_change_leaves_out_its_gitignored_files_and_pytest_cache(
    task_episode: Recorded, tmp_path: Path
) -> None:
    patch = task_episode.cli("diff", task_episode.episode)
    assert patch.returncode == 0, patch.stderr
    assert patched_paths(patch.stdout, tmp_path) == [".calc.py.swp", "NEWS.md", "calc.py"]


# -- the rules themselves, on manifests -------------------------------------------------------


def manifest(files: dict[str, bytes], blobs: dict[str, bytes]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for path, data in files.items():
        sha = hashlib.sha256(data).hexdigest()
        blobs[sha] = data
        out[path] = FileEntry(0o644, sha, len(data))
    return out


def test_a_new_file_named_like_pathspec_magic_is_judged_by_its_name() -> None:
    blobs: dict[str, bytes] = {}
    new = manifest({".gitignore": b"b.x\n", ":(top)b.x": b"", ":!c": b"", "b.x": b""}, blobs)
    out = left_out(new, tracked={".gitignore"}, new=new, read_blob=blobs.__getitem__, repo=None)
    assert out == {"b.x"}


def test_a_repository_no_longer_on_this_machine_still_has_its_snapshots_gitignore(
    tmp_path: Path,
) -> None:
    blobs: dict[str, bytes] = {}
    new = manifest({".gitignore": b"*.log\n", "a.log": b"", "a.py": b""}, blobs)
    gone = str(tmp_path / "moved-away")
    out = left_out(new, tracked={".gitignore"}, new=new, read_blob=blobs.__getitem__, repo=gone)
    assert out == {"a.log"}


def test_the_step_that_only_ran_pytest_changed_nothing(recorded: Recorded) -> None:
    with TraceStore(recorded.db) as store:
        (first, *_) = store.events(recorded.episode, kinds=["tool.result"])
        step = step_change(store, recorded.episode, first.seq)
        assert step is not None and step.paths() != []  # the snapshot holds the cache
        assert step.patch(store) == ""
