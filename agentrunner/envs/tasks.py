"""Tasks in the tasks.json format: loading, validation and the bundled task set.

A tasks.json file is a JSON list of task objects::

    {"task_id": "...", "prompt": "...", "difficulty": "easy|medium|hard",
     "split": "train|test", "max_steps": 30, "reward_mode": "binary",
     "files": {"path": "content"} | "files_dir": "dir",
     "hidden_files": {...} | "hidden_dir": "dir",
     "solution_dir": "dir", "verifier": null | ["cmd", "arg"]}

or, for a task on a git repository (a SWE-bench-style benchmark is a tasks file of these)::

    {"task_id": "...", "prompt": "...", "repo": "path or file:// URL", "rev": "commit",
     "test": "shell command (exit 0 passes)", "test_report": "junit.xml",
     "setup": "shell command run once before the agent starts",
     "hidden_dir": "tests the agent must not see, laid over the copy for the test run"}

``*_dir`` and relative ``repo`` paths are relative to the tasks.json file. Visible files are
laid into the workspace; hidden files (the verifier's tests) are never shown to the agent.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrunner.values.errors import UsageError

BUNDLED_TASKS = Path(__file__).parent / "data" / "tasks.json"
DEFAULT_TASK = "demo-mean"


class Task(BaseModel):
    """One task: a small repository, a prompt and a hidden verifier."""

    model_config = ConfigDict(frozen=True, extra="allow")

    task_id: str
    prompt: str
    difficulty: Literal["easy", "medium", "hard"] = "easy"
    split: str = "train"
    max_steps: int = Field(default=30, ge=1)
    reward_mode: Literal["binary", "partial_credit", "continuous"] = "binary"
    files: dict[str, str] = Field(default_factory=dict)
    hidden_files: dict[str, str] = Field(default_factory=dict)
    solution: dict[str, str] = Field(default_factory=dict)
    verifier: list[str] | None = None
    repo: str | None = None
    rev: str | None = None
    with_git: bool = False
    test: str | None = None
    test_report: str | None = None
    setup: str | None = None
    workdir: str | None = None
    """The folder (relative to the workspace) the agent's commands and relative paths, and
    the test command, start in: the subfolder of a repository ``--repo`` named."""

    @model_validator(mode="after")
    def _one_source(self) -> Task:
        if self.repo is not None and self.files:
            raise ValueError("a task takes its files from 'repo' or from 'files', not both")
        if self.test_report is not None and self.test is None:
            raise ValueError("'test_report' needs a 'test' command that writes it")
        return self

    def summary(self) -> dict[str, Any]:
        """The public description used by ``agentrunner tasks``."""
        return {
            "task_id": self.task_id,
            "prompt": self.prompt,
            "difficulty": self.difficulty,
            "split": self.split,
            "max_steps": self.max_steps,
            "reward_mode": self.reward_mode,
            "files": sorted(self.files),
            "repo": self.repo,
            "rev": self.rev,
            "test": self.test,
        }


_SKIP_PARTS = frozenset({"__pycache__", ".git"})


def _read_dir(root: Path) -> dict[str, str]:
    """A task folder's text files (``.git`` and ``__pycache__`` left out)."""
    if not root.is_dir():
        raise UsageError(f"task folder not found: {root}")
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if _SKIP_PARTS.intersection(rel.parts) or not path.is_file():
            continue
        try:
            files[rel.as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise UsageError(
                f"{path} is not UTF-8 text: a task folder holds text files; for binary files "
                "make the task a git repository ('repo' in tasks.json)"
            ) from None
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    return files


def _expand(entry: dict[str, Any], base: Path) -> dict[str, Any]:
    out = dict(entry)
    repo = out.get("repo")
    if isinstance(repo, str) and not repo.startswith("file://") and not Path(repo).is_absolute():
        out["repo"] = str((base / repo).resolve())
    for key, target in (
        ("files_dir", "files"),
        ("hidden_dir", "hidden_files"),
        ("solution_dir", "solution"),
    ):
        if key in out:
            out[target] = {**_read_dir(base / out.pop(key)), **out.get(target, {})}
    return out


def _json_lines(path: Path, text: str) -> list[Any]:
    """A JSON Lines tasks file: one task object per line (blank lines skipped)."""
    entries = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise UsageError(f"cannot read tasks file {path}: line {number}: {exc}") from None
    return entries


def _read(path: Path) -> list[Any]:
    """A tasks file's entries: a JSON list of task objects, or JSON Lines of them."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"tasks file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read tasks file {path}: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith("{"):  # more than one object: JSON Lines
            return _json_lines(path, text)
        raise UsageError(f"cannot read tasks file {path}: {exc}") from None
    if isinstance(raw, dict):  # JSON Lines of one task
        return [raw]
    if not isinstance(raw, list):
        raise UsageError(
            f"{path}: a tasks file is a JSON list of task objects, or one object per line"
        )
    return raw


@cache
def _load(path: Path) -> tuple[Task, ...]:
    raw = _read(path)
    tasks: list[Task] = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise UsageError(f"{path}: task #{i} is not an object")
        try:
            tasks.append(Task.model_validate(_expand(entry, path.parent)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise UsageError(f"{path}: task #{i} field {where!r}: {first['msg']}") from None
    ids = [t.task_id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise UsageError(f"{path}: duplicate task ids: {', '.join(dupes)}")
    return tuple(tasks)


def load_tasks(path: str | Path | None = None) -> tuple[Task, ...]:
    """Load a tasks file, a JSON list or JSON Lines (the bundled tasks when ``path`` is None)."""
    return _load(Path(path).resolve() if path else BUNDLED_TASKS)


def get_task(task_id: str, path: str | Path | None = None) -> Task:
    """One task by id, with a clear error listing the known ids when it is missing."""
    tasks = load_tasks(path)
    for task in tasks:
        if task.task_id == task_id:
            return task
    known = ", ".join(t.task_id for t in tasks)
    raise UsageError(f"unknown task {task_id!r}; known tasks: {known}")
