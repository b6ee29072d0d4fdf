"""Preparing a workspace's starting files: a task's text files, or a copy of a repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrunner.envs.repo import copy_repository
from agentrunner.envs.tasks import Task
from agentrunner.values.errors import EnvironmentFailure, UsageError


def lay_out(task: Task, files: dict[str, str], base: Path) -> None:
    """Write a task's files (visible or hidden) under ``base``."""
    try:
        base.mkdir(parents=True, exist_ok=True)
        for rel, content in sorted(files.items()):
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or ".." in parts:
                raise UsageError(f"task {task.task_id}: file path {rel!r} leaves its folder")
            dest = base.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(content, encoding="utf-8")
    except OSError as exc:
        raise EnvironmentFailure(f"cannot lay out the files of {task.task_id}: {exc}") from exc


def prepare_files(task: Task, workspace: Path) -> dict[str, Any]:
    """Fill the empty ``workspace`` with the task's starting files; say what they came from."""
    if task.repo is None:
        lay_out(task, task.files, workspace)
        return {"source": "task files"}
    base = copy_repository(task.repo, workspace, rev=task.rev, with_git=task.with_git)
    return {"source": "repo", **base.to_dict()}
