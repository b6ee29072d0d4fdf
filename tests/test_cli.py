"""The ``agentrunner`` command line, run as a real subprocess where exit codes matter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import procs
import pytest
from cli_process import run_cli

from agentrunner import TraceStore
from agentrunner.cli.main import command_names, main

COMMANDS = command_names()


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env, timeout=timeout)


def _last_json(stdout: str) -> object:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_text(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "--db" in out and "--json" in out and len(out) > 300


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in COMMANDS)


def test_run_json_prints_one_result_object_last(db_path: Path) -> None:
    proc = _cli("run", "--db", str(db_path), "--json")
    result = _last_json(proc.stdout)
    assert proc.returncode == 0
    assert (
        isinstance(result, dict)
        and result["status"] == "completed"
        and result["total_reward"] == 1.0
    )
    assert set(result) >= {
        "episode_id",
        "status",
        "stop_reason",
        "turns",
        "total_reward",
        "tokens",
        "cost_usd",
    }


def test_run_shows_the_live_view_on_stderr(db_path: Path) -> None:
    proc = _cli("run", "--db", str(db_path), "--json")
    assert (
        "turn 1" in proc.stderr and "submit" in proc.stderr and len(proc.stdout.splitlines()) == 1
    )


def test_run_without_arguments_writes_the_per_user_store_not_the_working_dir(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "AGENTRUNNER_DB"}
    proc = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "run"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "AGENTRUNNER_SCRIPTED_PACE": "0"},
    )
    assert proc.returncode == 0 and list(tmp_path.iterdir()) == []
    assert (Path(os.environ["XDG_DATA_HOME"]) / "agentrunner" / "traces.db").exists()


def test_ls_and_show_display_a_recorded_episode(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    listed = _last_json(_cli("ls", "--db", str(db_path), "--json").stdout)
    shown = _cli("show", episode["episode_id"][:10], "--db", str(db_path))
    assert isinstance(listed, list) and listed[0]["episode_id"] == episode["episode_id"]
    assert shown.returncode == 0 and "completed" in shown.stdout and "submit" in shown.stdout


def test_ls_json_has_the_documented_keys(db_path: Path) -> None:
    _cli("run", "--db", str(db_path))
    listed = _last_json(_cli("ls", "--db", str(db_path), "--json").stdout)
    assert isinstance(listed, list)
    assert set(listed[0]) >= {
        "episode_id",
        "status",
        "parent_episode_id",
        "task_id",
        "total_reward",
    }


def test_show_events_json_lists_every_event(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    shown = _last_json(
        _cli("show", episode["episode_id"], "--events", "--json", "--db", str(db_path)).stdout
    )
    assert isinstance(shown, dict)
    assert [e["seq"] for e in shown["events"]] == list(range(1, shown["last_seq"] + 1))


def test_show_follow_tails_a_running_episode_to_its_end(db_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db_path)],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.01"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if db_path.exists() and TraceStore(db_path).list_episodes():
                break
            time.sleep(0.05)
        ep = TraceStore(db_path).list_episodes()[0].episode_id
        follow = _cli("show", ep, "--follow", "--json", "--db", str(db_path))
    finally:
        runner.wait(timeout=60)
    summary = _last_json(follow.stdout)
    assert isinstance(summary, dict) and summary["status"] == "completed"
    assert "end: done" in follow.stderr


def test_unknown_episode_exits_2_with_one_clear_line(db_path: Path) -> None:
    TraceStore(db_path).close()
    proc = _cli("show", "NOSUCHEPISODE", "--db", str(db_path))
    assert proc.returncode == 2 and "no episode 'NOSUCHEPISODE'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_task_exits_2_listing_known_tasks(db_path: Path) -> None:
    proc = _cli("run", "--task", "nope", "--db", str(db_path))
    assert (
        proc.returncode == 2 and "unknown task 'nope'" in proc.stderr and "demo-mean" in proc.stderr
    )


def test_unknown_provider_exits_2(db_path: Path) -> None:
    proc = _cli("run", "--model", "nosuch:model", "--db", str(db_path))
    assert proc.returncode == 2 and "unknown model provider 'nosuch'" in proc.stderr


def test_bad_flag_exits_2(db_path: Path) -> None:
    assert _cli("run", "--max-turns", "many", "--db", str(db_path)).returncode == 2


def test_corrupt_store_exits_1_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"garbage" * 100)
    proc = _cli("ls", "--db", str(bad))
    assert (
        proc.returncode == 1
        and "not a SQLite database" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_ctrl_c_mid_episode_exits_130_and_records_the_cancel(db_path: Path) -> None:
    runner = subprocess.Popen(
        [sys.executable, "-m", "agentrunner.cli.main", "run", "--db", str(db_path), "--json"],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": "0.02"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for_event(db_path, "model.chunk")
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=120)
    result = _last_json(out)
    assert runner.returncode == 130 and isinstance(result, dict) and result["status"] == "cancelled"
    with TraceStore(db_path) as store:
        cancels = store.events(result["episode_id"], kinds=["cancel"])
    assert cancels[0].payload["reason"] == "SIGINT" and "Traceback" not in err


def test_tasks_json_lists_the_bundled_demo_task(db_path: Path) -> None:
    tasks = _last_json(_cli("tasks", "--json", "--db", str(db_path)).stdout)
    assert isinstance(tasks, list)
    demo = next(t for t in tasks if t["task_id"] == "demo-mean")
    assert set(demo) >= {"task_id", "prompt", "difficulty", "split", "max_steps"}


def _start_run(db_path: Path, *extra: str, pace: str = "0.02") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentrunner.cli.main",
            "run",
            "--db",
            str(db_path),
            "--json",
            *extra,
        ],
        env={**os.environ, "AGENTRUNNER_SCRIPTED_PACE": pace},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_event(
    db_path: Path, kind: str, timeout: float = 120, skip: tuple[str, ...] = ()
) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db_path.exists():
            with TraceStore(db_path) as store:
                for episode in store.list_episodes():
                    if episode.episode_id in skip:
                        continue
                    if store.events(episode.episode_id, kinds=[kind]):
                        return episode.episode_id
        time.sleep(0.05)
    raise AssertionError(f"no {kind} event within {timeout}s")


def _wait_until(ready: Callable[[], bool], *, what: str, patience: float = 120) -> None:
    """Polls until ``ready()``; ``patience`` only bounds a failing test."""
    deadline = time.monotonic() + patience
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {patience:g} s")
        time.sleep(0.02)


def test_cancel_request_from_another_process_stops_a_run_mid_episode(db_path: Path) -> None:
    runner = _start_run(db_path)
    ep = _wait_for_event(db_path, "model.chunk")
    with TraceStore(db_path) as store:
        store.request_cancel(ep, "stop from test")
    out, _ = runner.communicate(timeout=120)
    result = _last_json(out)
    assert runner.returncode == 130 and isinstance(result, dict) and result["status"] == "cancelled"
    with TraceStore(db_path) as store:
        assert "stop from test" in store.events(ep, kinds=["cancel"])[0].payload["reason"]


def test_ctrl_c_during_a_long_tool_step_kills_it_and_records_where(
    db_path: Path, tmp_path: Path
) -> None:
    script = tmp_path / "sleepy.json"
    word = procs.marker()
    command = f"exec -a {word} sleep 3600"  # far longer than any machine takes to cancel it
    turns = [{"tool_calls": [{"name": "bash", "arguments": {"command": command}}]}]
    script.write_text(json.dumps({"episodes": [{"match": "", "turns": turns}]}))
    runner = _start_run(db_path, "--model", f"scripted:{script}", pace="0")
    ep = _wait_for_event(db_path, "tool.call")
    _wait_until(lambda: bool(procs.processes_with(word)), what="the tool's process")
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=120)
    assert runner.returncode == 130 and procs.all_gone(word)
    with TraceStore(db_path) as store:
        assert store.events(ep, kinds=["cancel"])[0].payload["where"] == "tool"


@pytest.mark.parametrize("task", ["demo-mean", "paginate-off-by-one", "slugify-accents"])
def test_scripted_demo_solves_bundled_task_through_run(task: str, db_path: Path) -> None:
    proc = _cli("run", "--task", task, "--db", str(db_path), "--json")
    result = _last_json(proc.stdout)
    assert isinstance(result, dict) and (result["status"], result["total_reward"]) == (
        "completed",
        1.0,
    )
    with TraceStore(db_path) as store:
        assert store.episode(result["episode_id"]).task_id == task


def test_tasks_lists_a_user_tasks_file(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.json"
    tasks_file.write_text(
        json.dumps(
            [
                {
                    "task_id": "mine",
                    "prompt": "Fix it.",
                    "difficulty": "hard",
                    "split": "test",
                    "max_steps": 5,
                    "files": {"a.py": "x = 1\n"},
                    "hidden_files": {"test_hidden_a.py": ""},
                }
            ]
        )
    )
    tasks = _last_json(_cli("tasks", "--tasks", str(tasks_file), "--json").stdout)
    assert tasks == [
        {
            "task_id": "mine",
            "prompt": "Fix it.",
            "difficulty": "hard",
            "split": "test",
            "max_steps": 5,
            "reward_mode": "binary",
            "files": ["a.py"],
            "repo": None,
            "rev": None,
            "test": None,
        }
    ]


def test_tasks_with_a_broken_tasks_file_exits_2(tmp_path: Path) -> None:
    tasks_file = tmp_path / "tasks.json"
    tasks_file.write_text('[{"task_id": "x"}]')
    proc = _cli("tasks", "--tasks", str(tasks_file))
    assert proc.returncode == 2 and "field 'prompt'" in proc.stderr


def test_resume_continues_a_ctrl_c_cancelled_run_to_completion(db_path: Path) -> None:
    runner = _start_run(db_path)
    ep = _wait_for_event(db_path, "tool.result")
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=120)
    listed = _last_json(_cli("ls", "--db", str(db_path), "--json").stdout)
    resumed = _cli("resume", ep[:12], "--db", str(db_path), "--json")
    result = _last_json(resumed.stdout)
    assert isinstance(listed, list) and listed[0]["status"] == "cancelled"
    assert resumed.returncode == 0 and isinstance(result, dict)
    assert (result["status"], result["total_reward"]) == ("completed", 1.0)


def test_resume_all_resumes_every_resumable_episode(db_path: Path) -> None:
    seen: tuple[str, ...] = ()
    for _ in range(2):
        runner = _start_run(db_path)
        seen += (_wait_for_event(db_path, "model.chunk", skip=seen),)
        runner.send_signal(signal.SIGINT)
        runner.communicate(timeout=120)
    proc = _cli("resume", "--all", "--db", str(db_path), "--json")
    result = _last_json(proc.stdout)
    assert proc.returncode == 0 and isinstance(result, dict)
    assert [r["status"] for r in result["resumed"]] == ["completed", "completed"]


def test_resume_of_a_completed_episode_exits_2_with_a_reason(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    proc = _cli("resume", episode["episode_id"], "--db", str(db_path))
    assert proc.returncode == 2 and "is completed" in proc.stderr


def test_replay_of_a_deterministic_episode_matches_and_exits_0(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    proc = _cli("replay", episode["episode_id"], "--db", str(db_path), "--json")
    result = _last_json(proc.stdout)
    assert proc.returncode == 0 and isinstance(result, dict)
    assert (result["ok"], result["matched"], result["steps"]) == (True, 6, 6)


def test_fork_run_json_lists_forks_and_their_outcomes(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    proc = _cli(
        "fork",
        episode["episode_id"],
        "--turn",
        "3",
        "-n",
        "2",
        "--run",
        "--db",
        str(db_path),
        "--json",
    )
    result = _last_json(proc.stdout)
    assert proc.returncode == 0 and isinstance(result, dict) and len(result["forks"]) == 2
    assert [r["status"] for r in result["rollouts"]] == ["completed", "completed"]


def test_rm_of_a_parent_with_forks_exits_2(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    _cli("fork", episode["episode_id"], "--turn", "2", "--db", str(db_path))
    proc = _cli("rm", episode["episode_id"], "--db", str(db_path))
    assert proc.returncode == 2 and "depend on it" in proc.stderr


def test_fanout_ranks_candidates_and_prints_json(db_path: Path) -> None:
    episode = _last_json(_cli("run", "--db", str(db_path), "--json").stdout)
    assert isinstance(episode, dict)
    fix = {
        "name": "str_replace",
        "arguments": {"path": "stats.py", "old_str": "(len(values) - 1)", "new_str": "len(values)"},
    }
    proc = _cli(
        "fanout",
        episode["episode_id"],
        "--turn",
        "4",
        "--action",
        '{"name": "submit"}',
        "--action",
        json.dumps([fix, {"name": "submit"}]),
        "-n",
        "2",
        "--db",
        str(db_path),
        "--json",
    )
    result = _last_json(proc.stdout)
    assert proc.returncode == 0 and isinstance(result, dict)
    assert [(c["candidate"], c["rewards"]) for c in result["ranked"]] == [
        (1, [1.0, 1.0]),
        (0, [0.0, 0.0]),
    ]


@pytest.mark.parametrize("gap_s", [0.0005, 0.005, 0.03])
def test_a_second_ctrl_c_does_not_cut_the_recorded_ending(db_path: Path, gap_s: float) -> None:
    runner = _start_run(db_path)
    ep = _wait_for_event(db_path, "model.chunk")
    runner.send_signal(signal.SIGINT)
    time.sleep(gap_s)
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=120)
    result = _last_json(out)
    assert runner.returncode == 130 and isinstance(result, dict) and "Traceback" not in err
    with TraceStore(db_path) as store:
        assert store.episode(ep).status == "cancelled"
