"""Agents on real repositories, end to end through the CLI: a scripted model fixes a bug
planted in a repository built at test time from installed third-party source (Pygments);
its change comes out with ``diff``, applies to a fresh clone, and the tests then pass."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_process import run_cli
from thirdparty_repo import (
    BUGGY,
    FIXED,
    PROMPT,
    TEST_CMD,
    fixing_script,
    git,
    make_repo,
)

from agentrunner import TraceStore
from agentrunner.envs.jail import bwrap_problem
from agentrunner.values.events import EpisodeStart

SANDBOX = "bwrap" if bwrap_problem() is None else "process"


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, cwd=cwd)


def last_json(proc: subprocess.CompletedProcess[str]) -> dict:  # type: ignore[type-arg]
    assert proc.stdout.strip(), proc.stderr
    value = json.loads(proc.stdout.strip().splitlines()[-1])
    assert isinstance(value, dict)
    return value


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("pristine") / "repo")


@pytest.fixture
def repo(pristine: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(pristine, dest, symlinks=True)
    return dest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "traces" / "t.db"


def run_fix(repo: Path, db: Path, tmp_path: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    script = fixing_script(tmp_path / "script.json")
    proc = cli(
        "run",
        "--repo",
        str(repo),
        "--prompt",
        PROMPT,
        "--test",
        TEST_CMD,
        "--model",
        f"scripted:{script}",
        "--sandbox",
        SANDBOX,
        "--db",
        str(db),
        "--json",
        *extra,
    )
    assert proc.returncode == 0, proc.stderr
    return last_json(proc)


def test_scripted_agent_fixes_the_planted_bug_and_the_test_command_rewards_it(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    result = run_fix(repo, db, tmp_path)
    assert (result["status"], result["stop_reason"], result["total_reward"]) == (
        "completed",
        "done",
        1.0,
    )
    checked = last_json(cli("verify", result["episode_id"], "--db", str(db), "--json"))
    (check,) = checked["results"]  # the store reproduces the reward from the change alone
    assert (check["verifier"], check["passed"], check["score"]) == ("reward", True, 1.0)


def test_the_diff_applies_to_a_fresh_clone_and_its_tests_then_pass(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    patch = cli("diff", episode, "--db", str(db))
    assert patch.returncode == 0, patch.stderr
    assert f"-    {BUGGY}" in patch.stdout and f"+    {FIXED}" in patch.stdout
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    before = subprocess.run(["bash", "-c", TEST_CMD], cwd=clone, check=False)
    subprocess.run(["git", "apply"], cwd=clone, input=patch.stdout.encode(), check=True)
    after = subprocess.run(["bash", "-c", TEST_CMD], cwd=clone, check=False)
    assert (before.returncode, after.returncode) == (1, 0)


def test_the_users_repository_is_never_written(repo: Path, db: Path, tmp_path: Path) -> None:
    def listing() -> list[tuple[str, int, int]]:
        return sorted(
            (str(p.relative_to(repo)), p.lstat().st_size, p.lstat().st_mtime_ns)
            for p in repo.rglob("*")
        )

    before = listing()
    run_fix(repo, db, tmp_path)
    assert listing() == before
    assert git(repo, "status", "--porcelain") == ""


def test_diff_stat_and_turn_show_the_change_as_of_a_turn(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    stat = cli("diff", episode, "--stat", "--db", str(db))
    assert "pygments/util.py | 2 +-" in stat.stdout
    assert "1 file changed, 1 insertion(+), 1 deletion(-)" in stat.stdout
    early = cli("diff", episode, "--turn", "2", "--db", str(db))
    assert early.returncode == 0 and early.stdout == ""


def test_apply_writes_the_change_into_the_repository(repo: Path, db: Path, tmp_path: Path) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    applied = last_json(cli("apply", episode, "--db", str(db), "--json"))
    assert (applied["files"], applied["modified"]) == (1, 1)
    assert FIXED in (repo / "pygments" / "util.py").read_text()
    assert git(repo, "status", "--porcelain").split() == ["M", "pygments/util.py"]


def test_apply_refuses_a_repository_that_has_moved(repo: Path, db: Path, tmp_path: Path) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    (repo / "NEWS").write_text("later work\n")
    git(repo, "add", "NEWS")
    git(repo, "commit", "-q", "-m", "later")
    proc = cli("apply", episode, "--db", str(db))
    assert proc.returncode == 3 and "the target has moved" in proc.stderr
    assert BUGGY in (repo / "pygments" / "util.py").read_text()


def test_apply_refuses_conflicting_local_changes(repo: Path, db: Path, tmp_path: Path) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    util = repo / "pygments" / "util.py"
    util.write_text(util.read_text() + "# mine\n")
    proc = cli("apply", episode, "--db", str(db))
    assert proc.returncode == 3 and "conflicting local changes" in proc.stderr
    assert "pygments/util.py" in proc.stderr
    assert util.read_text().endswith("# mine\n")


def test_uncommitted_changes_are_part_of_the_base_and_recorded(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    (repo / "tests" / "test_opts.py").write_text(
        (repo / "tests" / "test_opts.py").read_text() + "# local edit\n"
    )
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    with TraceStore(db) as store:
        start = store.events(episode, kinds=["episode.start"])[0].payload
    base = start["env"]["base"]
    assert base["dirty"] is True and len(base["dirty_sha256"]) == 64
    assert base["commit"] == git(repo, "rev-parse", "HEAD").strip()
    stat = cli("diff", episode, "--stat", "--db", str(db)).stdout
    assert "tests/test_opts.py" not in stat


def test_verify_test_scores_the_final_workspace_from_the_store_alone(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    shutil.rmtree(repo)  # the store is self-contained
    proc = cli("verify", episode, "--test", TEST_CMD, "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    (result,) = last_json(proc)["results"]
    assert (result["verifier"], result["score"], result["passed"]) == ("test", 1.0, True)


def test_submit_records_the_test_run_as_a_verification(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    with TraceStore(db) as store:
        rows = (
            store.raw_connection()
            .execute(
                "SELECT verifier, score, passed, details FROM verifications WHERE episode_id = ?",
                (episode,),
            )
            .fetchall()
        )
    ((verifier, score, passed, details),) = rows
    assert (verifier, score, passed) == ("test", 1.0, 1)
    assert json.loads(details)["command"] == TEST_CMD


def test_replay_of_a_repository_episode_needs_only_the_store(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    shutil.rmtree(repo)
    replay = last_json(cli("replay", episode, "--db", str(db), "--json"))
    assert replay["ok"] is True and replay["steps"] == 5


def test_a_fork_of_a_repository_episode_runs_from_the_store(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path)["episode_id"]
    shutil.rmtree(repo)
    fork = last_json(cli("fork", episode, "--turn", "4", "--run", "--db", str(db), "--json"))
    ((fork_id,), (rollout,)) = fork["forks"], fork["rollouts"]
    assert (rollout["status"], rollout["total_reward"]) == ("completed", 1.0)
    assert (
        cli("diff", fork_id, "--db", str(db)).stdout == cli("diff", episode, "--db", str(db)).stdout
    )


def test_setup_runs_once_before_the_agent_and_is_part_of_the_base(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    episode = run_fix(repo, db, tmp_path, "--setup", "echo generated > SETUP_DONE")["episode_id"]
    with TraceStore(db) as store:
        start = store.events(episode, kinds=["episode.start"])[0].payload
    assert start["env"]["base"]["setup"]["exit_code"] == 0
    assert "SETUP_DONE" not in cli("diff", episode, "--stat", "--db", str(db)).stdout


def test_a_failing_setup_command_is_a_clear_error(repo: Path, db: Path, tmp_path: Path) -> None:
    script = fixing_script(tmp_path / "script.json")
    proc = cli(
        "run", "--repo", str(repo), "--prompt", PROMPT, "--setup", "echo nope; exit 3",
        "--model", f"scripted:{script}", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 1
    assert "setup command 'echo nope; exit 3' exited with code 3" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_with_git_the_agent_sees_history_and_the_diff_leaves_git_out(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    log = {"tool_calls": [{"name": "bash", "arguments": {"command": "git log --oneline | wc -l"}}]}
    script = fixing_script(tmp_path / "script.json", extra_turns=[log])
    proc = cli(
        "run", "--repo", str(repo), "--prompt", PROMPT, "--test", TEST_CMD, "--with-git",
        "--model", f"scripted:{script}", "--sandbox", SANDBOX, "--db", str(db), "--json",
    )  # fmt: skip
    episode = last_json(proc)["episode_id"]
    with TraceStore(db) as store:
        results = [r.payload for r in store.events(episode, kinds=["tool.result"])]
    assert results[3]["observation"].startswith("1\n")
    assert ".git" not in cli("diff", episode, "--stat", "--db", str(db)).stdout


def test_read_file_on_a_binary_file_says_so(repo: Path, db: Path, tmp_path: Path) -> None:
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "logo.bin"}}]}
    script = fixing_script(tmp_path / "script.json", extra_turns=[read])
    proc = cli(
        "run", "--repo", str(repo), "--prompt", PROMPT, "--model", f"scripted:{script}",
        "--sandbox", SANDBOX, "--db", str(db), "--json",
    )  # fmt: skip
    episode = last_json(proc)["episode_id"]
    with TraceStore(db) as store:
        results = [r.payload for r in store.events(episode, kinds=["tool.result"])]
    assert results[3]["observation"].startswith("error: logo.bin is a binary file (16384 bytes)")


def test_a_binary_change_comes_out_as_a_git_binary_patch_that_applies(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    flip = {
        "tool_calls": [
            {"name": "bash", "arguments": {"command": "printf '\\377\\000' >> logo.bin"}}
        ]
    }
    script = fixing_script(tmp_path / "script.json", extra_turns=[flip])
    proc = cli(
        "run", "--repo", str(repo), "--prompt", PROMPT, "--model", f"scripted:{script}",
        "--sandbox", SANDBOX, "--db", str(db), "--json",
    )  # fmt: skip
    episode = last_json(proc)["episode_id"]
    patch = cli("diff", episode, "--db", str(db)).stdout
    assert "GIT binary patch" in patch
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    subprocess.run(["git", "apply"], cwd=clone, input=patch.encode(), check=True)
    assert (clone / "logo.bin").read_bytes() == bytes(range(256)) * 64 + b"\xff\x00"


def test_run_repo_without_a_prompt_is_a_usage_error(repo: Path, db: Path) -> None:
    proc = cli("run", "--repo", str(repo), "--db", str(db))
    assert proc.returncode == 2 and "--repo needs --prompt" in proc.stderr


def test_run_repo_on_a_folder_that_is_not_a_repository_is_a_usage_error(
    tmp_path: Path, db: Path
) -> None:
    proc = cli("run", "--repo", str(tmp_path), "--prompt", "x", "--db", str(db))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "not a git repository" in proc.stderr


def test_diff_of_an_episode_without_workspace_snapshots_is_a_usage_error(
    db: Path, tmp_path: Path
) -> None:
    with TraceStore(db) as store:
        episode = store.create_episode(task_id="t", seed=0, env={"kind": "openenv"}, model={})
        store.writer(episode).append(
            0,
            EpisodeStart(
                task_id="t", seed=0, env={"kind": "openenv"}, model={}, config={}, version="0"
            ),
        )
    proc = cli("diff", episode, "--db", str(db))
    assert proc.returncode == 2 and "has no workspace snapshots" in proc.stderr


HIDDEN_TEST = """import unittest

from pygments.util import get_bool_opt


class Hidden(unittest.TestCase):
    def test_mixed_case(self):
        self.assertIs(get_bool_opt({"a": "True"}, "a"), True)
"""


def test_a_tasks_file_of_repository_tasks_runs_as_a_batch_with_hidden_tests(
    repo: Path, db: Path, tmp_path: Path
) -> None:
    (tmp_path / "hidden" / "tests").mkdir(parents=True)
    (tmp_path / "hidden" / "tests" / "test_hidden_opts.py").write_text(HIDDEN_TEST)
    commit = git(repo, "rev-parse", "HEAD").strip()
    task = {
        "prompt": PROMPT,
        "repo": "repo",  # relative to the tasks file
        "rev": commit,
        "test": "python -m unittest tests.test_hidden_opts 2>/dev/null",
        "hidden_dir": "hidden",
        "max_steps": 20,
    }
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"task_id": "bool-opt", **task}, {"task_id": "again", **task}]))
    peek = {"tool_calls": [{"name": "bash", "arguments": {"command": "ls tests"}}]}
    script = fixing_script(tmp_path / "script.json", extra_turns=[peek])
    proc = cli(
        "batch", "--tasks", str(tasks), "--seeds", "0", "--model", f"scripted:{script}",
        "--sandbox", SANDBOX, "--db", str(db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    episodes = last_json(proc)["episodes"]
    assert sorted((e["task_id"], e["total_reward"]) for e in episodes) == [
        ("again", 1.0),
        ("bool-opt", 1.0),
    ]
    with TraceStore(db) as store:
        observations = [
            r.payload["observation"]
            for r in store.events(episodes[0]["episode_id"], kinds=["tool.result"])
        ]
    assert observations[3] == "test_opts.py\n[exit code 0]"  # the hidden test is not there
    assert not (repo / "tests" / "test_hidden_opts.py").exists()
