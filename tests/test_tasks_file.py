"""A user's tasks.json: folders that hold a git checkout or binary files give clear errors,
never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentrunner.envs.tasks import load_tasks
from agentrunner.values.errors import UsageError


def _tasks_with_folder(tmp_path: Path) -> Path:
    repo = tmp_path / "task" / "repo"
    repo.mkdir(parents=True)
    (repo / "mod.py").write_text("x = 1\n")
    tasks = tmp_path / "tasks.json"
    tasks.write_text(json.dumps([{"task_id": "t", "prompt": "p", "files_dir": "task/repo"}]))
    return tasks


def test_a_git_folder_inside_files_dir_is_left_out(tmp_path: Path) -> None:
    tasks = _tasks_with_folder(tmp_path)
    git = tmp_path / "task" / "repo" / ".git"
    git.mkdir()
    (git / "index").write_bytes(b"DIRC\x00\x00\x00\x02\xff")
    (task,) = load_tasks(tasks)
    assert sorted(task.files) == ["mod.py"]


def test_a_binary_file_in_files_dir_is_a_clear_usage_error(tmp_path: Path) -> None:
    tasks = _tasks_with_folder(tmp_path)
    (tmp_path / "task" / "repo" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(UsageError, match=r"logo\.png is not UTF-8 text"):
        load_tasks(tasks)


def test_the_cli_reports_a_binary_task_file_in_one_line(tmp_path: Path) -> None:
    tasks = _tasks_with_folder(tmp_path)
    (tmp_path / "task" / "repo" / "logo.png").write_bytes(b"\xff\xfe\x00")
    proc = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "tasks", "--tasks", str(tasks)],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "make the task a git repository" in proc.stderr


def _task(task_id: str) -> dict[str, object]:
    return {"task_id": task_id, "prompt": "p", "files": {"a.py": "x = 1\n"}}


def test_a_tasks_file_may_be_json_lines(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(f"{json.dumps(_task('one'))}\n\n{json.dumps(_task('two'))}\n")
    assert [t.task_id for t in load_tasks(tasks)] == ["one", "two"]
    single = tmp_path / "one.jsonl"
    single.write_text(json.dumps(_task("only")) + "\n")
    assert [t.task_id for t in load_tasks(single)] == ["only"]


def test_a_bad_line_of_json_lines_is_named(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(f"{json.dumps(_task('one'))}\n{{not json\n")
    with pytest.raises(UsageError, match=r"tasks\.jsonl: line 2: "):
        load_tasks(tasks)


def test_a_tasks_file_of_neither_shape_says_both(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.json"
    tasks.write_text('"a string"')
    with pytest.raises(UsageError, match="a JSON list of task objects, or one object per line"):
        load_tasks(tasks)


def test_a_tasks_file_is_read_once_per_process(tmp_path: Path) -> None:
    """Every environment of a batch reads the same tasks (and task folders), however often
    it asks: an edit made while it runs does not mix two versions into one batch."""
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(_task("one")) + "\n")
    first = load_tasks(tasks)
    tasks.write_text(json.dumps(_task("two")) + "\n")
    assert load_tasks(tasks) is first
