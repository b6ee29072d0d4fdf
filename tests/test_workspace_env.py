"""Tests for the local coding-workspace environment (``agentrunner.envs.workspace``)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from procs import all_gone, marker

from agentrunner.envs.jail import SandboxConfig, bwrap_problem
from agentrunner.envs.tasks import get_task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.store import TraceStore
from agentrunner.values.environment import Environment, StepResult, ToolAction
from agentrunner.values.errors import EnvironmentFailure, UsageError

DEMO = "demo-mean"
TOOL_NAMES = ["bash", "read_file", "write_file", "str_replace", "list_files", "submit"]


def act(env: WorkspaceEnv, name: str, **arguments: object) -> StepResult:
    return env.step(ToolAction(name=name, arguments=arguments))


@pytest.fixture
def env() -> Iterator[WorkspaceEnv]:
    with WorkspaceEnv() as environment:
        environment.reset(DEMO, seed=0)
        yield environment


@pytest.fixture(params=["bwrap", "process"])
def sandboxed(request: pytest.FixtureRequest) -> Iterator[WorkspaceEnv]:
    """The demo task's workspace in each sandbox mode (bwrap skipped where it cannot run)."""
    if request.param == "bwrap" and bwrap_problem() is not None:
        pytest.skip(f"bwrap: {bwrap_problem()}")
    with WorkspaceEnv(sandbox=SandboxConfig(mode=request.param)) as environment:
        environment.reset(DEMO, seed=0)
        yield environment


def write_tasks(tmp_path: Path, **overrides: object) -> Path:
    """A tasks.json with one small task ``t``: two hidden tests, one of which the repo passes."""
    task = {
        "task_id": "t",
        "prompt": "Make f() return 2.",
        "max_steps": 10,
        "files": {"mod.py": "def f():\n    return 1\n\n\ndef g():\n    return 1\n"},
        "hidden_files": {
            "test_hidden.py": (
                "import unittest\n\nfrom mod import f, g\n\n\n"
                "class T(unittest.TestCase):\n"
                "    def test_f(self):\n        self.assertEqual(f(), 2)\n\n"
                "    def test_g(self):\n        self.assertEqual(g(), 1)\n"
            )
        },
        **overrides,
    }
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]), encoding="utf-8")
    return path


# -- reset ------------------------------------------------------------------------------------


def test_workspace_env_satisfies_the_environment_protocol() -> None:
    with WorkspaceEnv() as environment:
        assert isinstance(environment, Environment)


def test_spec_is_json_and_names_kind_and_bundled_tasks() -> None:
    with WorkspaceEnv() as environment:
        spec = json.loads(json.dumps(environment.spec()))
    assert spec["kind"] == "workspace"
    assert spec["tasks"] == "bundled"


def test_reset_returns_prompt_system_tools_and_max_steps() -> None:
    with WorkspaceEnv() as environment:
        result = environment.reset(DEMO, seed=0)
    task = get_task(DEMO)
    assert result.prompt == task.prompt
    assert result.system is not None and "relative to the workspace root" in result.system
    assert [tool.name for tool in result.tools] == TOOL_NAMES
    assert result.max_steps == task.max_steps


def test_tool_specs_are_json_schemas_with_the_contract_parameters() -> None:
    with WorkspaceEnv() as environment:
        tools = {tool.name: tool.parameters for tool in environment.reset(DEMO, seed=0).tools}
    assert set(tools["bash"]["properties"]) == {"command", "timeout"}
    assert tools["bash"]["required"] == ["command"]
    assert set(tools["read_file"]["properties"]) == {"path", "start_line", "end_line"}
    assert tools["str_replace"]["required"] == ["path", "old_str", "new_str"]
    assert tools["submit"] == {
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": False,
    }


def test_reset_lays_out_visible_files_but_not_hidden_ones(env: WorkspaceEnv) -> None:
    files = sorted(p.relative_to(env.workspace).as_posix() for p in env.workspace.rglob("*.py"))
    assert files == ["stats.py", "tests/__init__.py", "tests/test_stats.py"]


def test_reset_with_unknown_task_raises_usage_error() -> None:
    with WorkspaceEnv() as environment, pytest.raises(UsageError, match="unknown task"):
        environment.reset("no-such-task", seed=0)


def test_reset_again_discards_the_previous_workspace(env: WorkspaceEnv) -> None:
    first = env.workspace
    act(env, "write_file", path="scratch.txt", content="x")
    env.reset(DEMO, seed=0)
    assert not first.exists()
    assert not (env.workspace / "scratch.txt").exists()


def test_step_before_reset_raises_environment_failure() -> None:
    with WorkspaceEnv() as environment, pytest.raises(EnvironmentFailure, match="reset"):
        act(environment, "list_files")


# -- tools: happy paths ---------------------------------------------------------------------


def test_bash_runs_in_the_workspace_and_reports_the_exit_code(env: WorkspaceEnv) -> None:
    result = act(env, "bash", command="pwd; ls")
    assert result.observation == "/workspace\nstats.py\ntests\n[exit code 0]"
    assert result.error is None


def test_bash_reports_a_nonzero_exit_code_with_merged_stderr(env: WorkspaceEnv) -> None:
    result = act(env, "bash", command="echo out; echo err >&2; exit 3")
    assert result.observation == "out\nerr\n[exit code 3]"


def test_bash_runs_the_visible_tests_with_python(env: WorkspaceEnv) -> None:
    result = act(env, "bash", command="python -m unittest -q")
    assert "FAILED (failures=1)" in result.observation
    assert result.observation.endswith("[exit code 1]")


def test_read_file_shows_numbered_lines(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats.py")
    assert result.observation.startswith('     1\t"""Small statistics helpers')
    assert "    11\t    return total / (len(values) - 1)\n" in result.observation


def test_read_file_shows_an_inclusive_line_range(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats.py", start_line=10, end_line=11)
    assert result.observation == (
        "    10\t        total += value\n    11\t    return total / (len(values) - 1)\n"
    )


def test_write_file_creates_parent_dirs_and_reports_bytes(env: WorkspaceEnv) -> None:
    result = act(env, "write_file", path="pkg/sub/new.py", content="x = 'é'\n")
    assert result.observation == "wrote 9 bytes to pkg/sub/new.py"
    assert (env.workspace / "pkg/sub/new.py").read_text(encoding="utf-8") == "x = 'é'\n"


def test_write_file_overwrites_an_existing_file(env: WorkspaceEnv) -> None:
    act(env, "write_file", path="stats.py", content="replaced\n")
    assert (env.workspace / "stats.py").read_text() == "replaced\n"


def test_str_replace_replaces_a_unique_match(env: WorkspaceEnv) -> None:
    result = act(
        env, "str_replace", path="stats.py", old_str="(len(values) - 1)", new_str="len(values)"
    )
    assert result.error is None
    assert "    11\t    return total / len(values)" in result.observation
    assert "return total / len(values)\n" in (env.workspace / "stats.py").read_text()


def test_list_files_is_sorted_relative_and_skips_pycache_and_git(env: WorkspaceEnv) -> None:
    for junk in ("__pycache__/stats.cpython-311.pyc", ".git/HEAD", "a/z.txt"):
        (env.workspace / junk).parent.mkdir(parents=True, exist_ok=True)
        (env.workspace / junk).write_text("x")
    result = act(env, "list_files")
    assert result.observation == "a/z.txt\nstats.py\ntests/__init__.py\ntests/test_stats.py"


def test_list_files_of_a_folder_lists_paths_from_the_workspace_root(env: WorkspaceEnv) -> None:
    result = act(env, "list_files", path="tests")
    assert result.observation == "tests/__init__.py\ntests/test_stats.py"


# -- tools: errors ---------------------------------------------------------------------------


def test_str_replace_without_a_match_is_an_error(env: WorkspaceEnv) -> None:
    result = act(env, "str_replace", path="stats.py", old_str="median(", new_str="x")
    assert result.error is not None
    assert result.observation.startswith("error: old_str not found in stats.py")


def test_str_replace_with_several_matches_says_how_many(env: WorkspaceEnv) -> None:
    result = act(env, "str_replace", path="stats.py", old_str="values", new_str="xs")
    count = (env.workspace / "stats.py").read_text().count("values")
    assert result.observation == (
        f"error: old_str occurs {count} times in stats.py; include more context to make it unique"
    )


def test_read_file_of_a_missing_file_is_an_error(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="nope.py")
    assert result.observation == "error: file not found: nope.py"
    assert result.error == "file not found: nope.py"


def test_read_file_of_a_directory_is_an_error(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="tests")
    assert result.observation.startswith("error: tests is a directory")


def test_read_file_with_start_past_the_end_is_an_error(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats.py", start_line=500)
    assert result.observation == "error: start_line 500 is past the end of stats.py (18 lines)"


def test_read_file_with_end_before_start_is_an_error(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats.py", start_line=5, end_line=2)
    assert result.observation == "error: end_line (2) is before start_line (5)"


def test_unknown_tool_is_an_error_result(env: WorkspaceEnv) -> None:
    result = act(env, "rm_rf")
    assert result.observation.startswith("error: unknown tool 'rm_rf'; available tools: bash")


def test_missing_required_parameter_is_an_error_result(env: WorkspaceEnv) -> None:
    result = act(env, "write_file", path="a.txt")
    assert result.observation == "error: write_file: missing required parameter 'content'"


def test_wrong_parameter_type_is_an_error_result(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats.py", start_line="3")
    assert (
        result.observation == "error: read_file: parameter 'start_line' must be integer, got string"
    )


def test_nul_byte_in_a_path_is_an_error_result(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="stats\0.py")
    assert result.observation == (
        "error: read_file: parameter 'path' holds a NUL byte or a lone surrogate"
    )


def test_read_file_of_a_fifo_is_an_error_instead_of_blocking(env: WorkspaceEnv) -> None:
    act(env, "bash", command="mkfifo pipe")
    assert act(env, "read_file", path="pipe").observation == "error: pipe is not a regular file"


def test_unknown_parameter_is_an_error_result(env: WorkspaceEnv) -> None:
    result = act(env, "list_files", folder="tests")
    assert result.observation.startswith("error: list_files: unknown parameter 'folder'")


# -- sandboxing ------------------------------------------------------------------------------


def test_read_file_refuses_a_parent_directory_escape(env: WorkspaceEnv) -> None:
    result = act(env, "read_file", path="../x")
    assert result.observation == "error: path escapes the workspace: ../x"
    assert result.error is not None


def test_write_file_refuses_an_absolute_path(env: WorkspaceEnv, tmp_path: Path) -> None:
    target = tmp_path / "pwned.txt"
    result = act(env, "write_file", path=str(target), content="x")
    assert result.observation.startswith("error: absolute paths are refused")
    assert not target.exists()


def test_read_file_refuses_a_symlink_pointing_outside(env: WorkspaceEnv) -> None:
    act(env, "bash", command="ln -s /etc outside")
    result = act(env, "read_file", path="outside/passwd")
    assert result.observation == (
        "error: path resolves outside the workspace through a symlink: outside/passwd"
    )


def test_list_files_shows_a_symlink_without_following_it(env: WorkspaceEnv) -> None:
    act(env, "bash", command="ln -s /etc outside")
    assert "outside -> /etc" in act(env, "list_files").observation.splitlines()


def test_bash_timeout_kills_every_process_of_the_command(sandboxed: WorkspaceEnv) -> None:
    word = marker()
    result = act(sandboxed, "bash", command=f"(exec -a {word} sleep 300) & sleep 300", timeout=1)
    assert result.observation.endswith("[timed out after 1 s; the process group was killed]")
    assert result.error == "timed out after 1 s; the process group was killed"
    assert all_gone(word)


def test_bash_kills_background_children_when_the_command_returns(sandboxed: WorkspaceEnv) -> None:
    word = marker()
    result = act(sandboxed, "bash", command=f"(exec -a {word} sleep 300) &")
    assert result.observation == "[exit code 0]"
    assert all_gone(word)


def test_interrupt_while_waiting_kills_the_command_and_is_reraised(
    sandboxed: WorkspaceEnv,
) -> None:
    word = marker()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            act(sandboxed, "bash", command=f"(exec -a {word} sleep 300) & wait")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert all_gone(word)


def test_bash_output_is_capped_with_an_omission_marker(env: WorkspaceEnv) -> None:
    result = act(env, "bash", command="yes | head -c 300000")
    assert "[... 200000 bytes of output omitted ...]" in result.observation
    assert len(result.observation.encode()) <= 100_000 + 200


def test_bash_endless_output_is_killed_instead_of_hanging() -> None:
    with WorkspaceEnv(output_cap=1000) as environment:
        environment.reset(DEMO, seed=0)
        result = act(environment, "bash", command="yes", timeout=300)
    assert result.error is not None and "process group was killed" in result.error
    assert len(result.observation) < 1200


def test_bash_does_not_see_the_parent_environment(
    env: WorkspaceEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret")
    result = act(env, "bash", command="env")
    assert "sk-test-secret" not in result.observation
    assert "OPENAI_API_KEY" not in result.observation
    assert "HOME=/tmp" in result.observation.splitlines()


# -- submit and rewards ------------------------------------------------------------------------


def test_submit_on_the_unmodified_demo_task_gives_zero(env: WorkspaceEnv) -> None:
    result = act(env, "submit")
    assert result.done and result.reward == 0.0
    assert result.observation.startswith("submitted: 3/5 hidden tests passed; reward 0")
    assert "test_hidden_stats.HiddenMeanTest.test_floats" in result.observation


def test_submit_after_the_demo_solution_gives_one(env: WorkspaceEnv) -> None:
    for path, content in get_task(DEMO).solution.items():
        act(env, "write_file", path=path, content=content)
    result = act(env, "submit")
    assert result.done and result.reward == 1.0
    assert result.observation == "submitted: 5/5 hidden tests passed; reward 1"


def test_submit_leaves_no_hidden_files_behind(env: WorkspaceEnv) -> None:
    act(env, "submit")
    sandbox_root = env.workspace.parent
    assert sorted(p.name for p in sandbox_root.iterdir()) == ["tmp", "workspace"]
    assert not list(env.workspace.rglob("test_hidden*"))


def test_partial_credit_reward_is_the_fraction_passed(tmp_path: Path) -> None:
    with WorkspaceEnv(tasks_path=write_tasks(tmp_path, reward_mode="partial_credit")) as e:
        e.reset("t", seed=0)
        result = act(e, "submit")
    assert result.reward == 0.5
    assert result.observation == (
        "submitted: 1/2 hidden tests passed; reward 0.5\nfailing: test_hidden.T.test_f"
    )


def test_continuous_reward_is_the_verifier_score_clamped(tmp_path: Path) -> None:
    verifier = ["python", "-c", 'print(\'{"passed": 1, "total": 2, "score": 1.7}\')']
    tasks = write_tasks(tmp_path, reward_mode="continuous", verifier=verifier)
    with WorkspaceEnv(tasks_path=tasks) as e:
        e.reset("t", seed=0)
        assert act(e, "submit").reward == 1.0


def test_custom_verifier_without_json_is_scored_by_exit_code(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path, verifier=["bash", "-c", "test -f {hidden}/test_hidden.py"])
    with WorkspaceEnv(tasks_path=tasks) as e:
        e.reset("t", seed=0)
        result = act(e, "submit")
    assert result.reward == 1.0
    assert "exited with code 0" in result.observation


# -- horizon, determinism, snapshots ---------------------------------------------------------


def test_the_max_steps_th_step_truncates_the_episode(tmp_path: Path) -> None:
    with WorkspaceEnv(tasks_path=write_tasks(tmp_path, max_steps=2)) as e:
        e.reset("t", seed=0)
        first = act(e, "list_files")
        last = act(e, "list_files")
    assert not first.done
    assert last.done and last.truncated
    assert last.observation.endswith("[step limit reached: 2/2 steps; the episode ends]")


def test_submit_on_the_last_step_is_done_but_not_truncated(tmp_path: Path) -> None:
    with WorkspaceEnv(tasks_path=write_tasks(tmp_path, max_steps=1)) as e:
        e.reset("t", seed=0)
        result = act(e, "submit")
    assert result.done and not result.truncated


def test_same_task_seed_and_actions_give_identical_observations() -> None:
    actions = [
        ("bash", {"command": "pwd; echo $HOME $TMPDIR; mktemp -d | sed 's/tmp\\..*/tmp.X/'"}),
        ("bash", {"command": "cd .. && pwd && ls"}),
        ("write_file", {"path": "notes/a.txt", "content": "hello\n"}),
        ("list_files", {}),
        ("read_file", {"path": "../x"}),
        ("str_replace", {"path": "stats.py", "old_str": "- 1", "new_str": ""}),
        ("submit", {}),
    ]
    runs: list[list[str]] = []
    roots: list[str] = []
    for _ in range(2):
        with WorkspaceEnv() as e:
            e.reset(DEMO, seed=7)
            roots.append(str(e.workspace.parent))
            runs.append([e.step(ToolAction(name=n, arguments=a)).observation for n, a in actions])
    assert runs[0] == runs[1]
    for observation in runs[0]:
        assert not any(root in observation for root in roots)
    assert runs[0][0] == "/workspace\n/tmp /tmp\n/tmp/tmp.X\n[exit code 0]"


def test_snapshot_and_restore_round_trip_the_workspace(env: WorkspaceEnv) -> None:
    act(env, "write_file", path="notes.txt", content="original\n")
    snapshot_id = env.snapshot()
    act(env, "write_file", path="notes.txt", content="changed\n")
    act(env, "write_file", path="extra.txt", content="new\n")
    env.restore(snapshot_id)
    assert (env.workspace / "notes.txt").read_text() == "original\n"
    assert not (env.workspace / "extra.txt").exists()
    assert env.snapshot() == snapshot_id


def test_restore_brings_back_file_modes(env: WorkspaceEnv) -> None:
    act(env, "bash", command="chmod 755 stats.py")
    snapshot_id = env.snapshot()
    act(env, "bash", command="chmod 600 stats.py")
    env.restore(snapshot_id)
    assert (env.workspace / "stats.py").stat().st_mode & 0o777 == 0o755


def test_identical_workspaces_give_identical_snapshot_ids(tmp_path: Path) -> None:
    ids = []
    with TraceStore(tmp_path / "t.db") as store:
        for _ in range(2):
            with WorkspaceEnv() as e:
                e.bind_store(store)
                e.reset(DEMO, seed=0)
                ids.append(act(e, "write_file", path="a.txt", content="same\n").snapshot)
    assert ids[0] is not None and len(ids[0]) == 64
    assert ids[0] == ids[1]


def test_a_step_that_changes_nothing_keeps_the_same_snapshot(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store, WorkspaceEnv() as e:
        e.bind_store(store)
        e.reset(DEMO, seed=0)
        first = act(e, "list_files").snapshot
        second = act(e, "list_files").snapshot
        assert first is not None and first == second
        assert first == (e.base or {}).get("snapshot")


def test_without_a_store_steps_record_no_snapshot(env: WorkspaceEnv) -> None:
    assert act(env, "list_files").snapshot is None


def test_snapshot_ignores_pycache(env: WorkspaceEnv) -> None:
    before = env.snapshot()
    (env.workspace / "__pycache__").mkdir()
    (env.workspace / "__pycache__" / "stats.cpython-311.pyc").write_bytes(b"\0")
    assert env.snapshot() == before


def test_restore_of_an_unknown_snapshot_raises_environment_failure(env: WorkspaceEnv) -> None:
    with pytest.raises(EnvironmentFailure, match="unknown snapshot"):
        env.restore("0" * 64)


def test_close_removes_the_workspace_and_is_safe_twice() -> None:
    environment = WorkspaceEnv()
    environment.reset(DEMO, seed=0)
    root = environment.workspace.parent
    environment.close()
    environment.close()
    assert not root.exists()


def test_close_removes_a_workspace_the_agent_made_unreadable() -> None:
    environment = WorkspaceEnv()
    environment.reset(DEMO, seed=0)
    root = environment.workspace.parent
    act(environment, "bash", command="mkdir -p locked/inner && chmod 000 locked")
    environment.close()
    assert not root.exists()
