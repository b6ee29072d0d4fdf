"""The local coding-workspace environment: a task's files in a temp dir, six tools, a verifier.

``WorkspaceEnv`` implements :class:`agentrunner.environment.Environment`. ``reset`` lays a
task's visible files into a fresh private directory; the model works through ``bash``,
``read_file``, ``write_file``, ``str_replace``, ``list_files`` and ``submit`` (names and
parameters are a contract: recorded traces name them). ``submit`` runs the task's hidden
tests from outside the workspace and ends the episode with a reward.

Observations are deterministic: the workspace shows as ``/workspace``, listings are sorted,
and no temp path or timestamp appears. Tool misuse (bad arguments, a path outside the
workspace, a missing match) is a ``StepResult`` with ``error`` set, never an exception; a
broken environment raises :class:`agentrunner.errors.EnvironmentFailure`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from agentrunner.environment import ResetResult, StepResult, ToolAction
from agentrunner.envs import sandbox
from agentrunner.envs.sandbox import (
    ToolError,
    cap_text,
    list_entries,
    numbered,
    read_text,
    shown_path,
    split_lines,
    write_bytes,
)
from agentrunner.envs.snapshots import SnapshotStore
from agentrunner.envs.tasks import Task, get_task, load_tasks
from agentrunner.envs.tools import SYSTEM_PROMPT, TOOL_SPECS, validate
from agentrunner.errors import EnvironmentFailure, UsageError

VERIFY_SCRIPT = Path(__file__).resolve().parent / "verify.py"
"""The default verifier, run as a plain script: it needs only the standard library."""
MAX_BASH_TIMEOUT = 3600.0
MAX_LISTED = 1000
SKIP_LISTING = frozenset({"__pycache__", ".git"})


class WorkspaceEnv:
    """A task's repository in a private temp directory, driven through six tools."""

    def __init__(
        self,
        tasks_path: str | Path | None = None,
        snapshot_dir: str | Path | None = None,
        bash_timeout: float = 60,
        output_cap: int = 100_000,
        verify_timeout: float = 300,
    ) -> None:
        if bash_timeout <= 0 or verify_timeout <= 0:
            raise UsageError("timeouts must be positive")
        if output_cap < 64:
            raise UsageError("output_cap must be at least 64 bytes")
        self.tasks_path = Path(tasks_path).resolve() if tasks_path else None
        load_tasks(self.tasks_path)  # a missing or broken tasks file fails here, not at reset
        self.snapshot_dir = Path(snapshot_dir).resolve() if snapshot_dir else None
        self.bash_timeout = float(bash_timeout)
        self.output_cap = int(output_cap)
        self.verify_timeout = float(verify_timeout)
        self._store = SnapshotStore(self.snapshot_dir) if self.snapshot_dir else None
        self._private_snapshots: Path | None = None
        self._root: Path | None = None
        self._task: Task | None = None
        self._mask: Callable[[str], str] = str
        self._steps = 0
        self._done = False
        self._tools: dict[str, Callable[..., StepResult]] = {
            "bash": self._bash,
            "read_file": self._read_file,
            "write_file": self._write_file,
            "str_replace": self._str_replace,
            "list_files": self._list_files,
            "submit": self._submit,
        }

    # -- the Environment protocol -----------------------------------------------------------

    def spec(self) -> dict[str, Any]:
        return {
            "kind": "workspace",
            "tasks": str(self.tasks_path) if self.tasks_path else "bundled",
            "bash_timeout": self.bash_timeout,
            "output_cap": self.output_cap,
            "verify_timeout": self.verify_timeout,
            "snapshot_dir": str(self.snapshot_dir) if self.snapshot_dir else None,
        }

    def reset(self, task_id: str, seed: int) -> ResetResult:
        task = get_task(task_id, self.tasks_path)
        self._discard()
        raw = tempfile.mkdtemp(prefix="agentrunner-ws-")
        self._root = Path(raw).resolve()
        self._mask = sandbox.PathMasker(Path(raw))
        self._ensure_dirs()
        _lay_out(task, task.files, self.workspace)
        self._task = task
        self._steps = 0
        self._done = False
        return ResetResult(
            prompt=task.prompt,
            system=SYSTEM_PROMPT.format(timeout=self.bash_timeout, max_steps=task.max_steps),
            tools=TOOL_SPECS,
            max_steps=task.max_steps,
        )

    def step(self, action: ToolAction) -> StepResult:
        task = self._require()
        if self._done:
            msg = "the episode is over (submitted or out of steps); call reset() to start again"
            return StepResult(observation=f"error: {msg}", done=True, error=msg)
        self._ensure_dirs()
        self._steps += 1
        try:
            arguments = validate(action.name, action.arguments)
            result = self._tools[action.name](**arguments)
        except ToolError as exc:
            msg = self._mask(str(exc))
            result = StepResult(observation=f"error: {msg}", error=msg)
        if result.done:
            self._done = True
        elif self._steps >= task.max_steps:
            self._done = True
            note = f"[step limit reached: {self._steps}/{task.max_steps} steps; the episode ends]"
            observation = result.observation + ("\n" if result.observation else "") + note
            update = {"observation": observation, "done": True, "truncated": True}
            result = result.model_copy(update=update)
        if self._store is not None:
            result = result.model_copy(update={"snapshot": self._store.save(self.workspace)})
        return result

    def close(self) -> None:
        self._discard()
        if self._private_snapshots is not None:
            sandbox.force_rmtree(self._private_snapshots)
            self._private_snapshots = None

    def __enter__(self) -> WorkspaceEnv:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- workspace state and snapshots --------------------------------------------------------

    @property
    def workspace(self) -> Path:
        """The real workspace directory (for tests and tooling; never shown to the model)."""
        if self._root is None:
            raise EnvironmentFailure("the workspace environment has no episode; call reset() first")
        return self._root / "workspace"

    @property
    def steps(self) -> int:
        """Tool steps taken since the last reset."""
        return self._steps

    def snapshot(self) -> str:
        """Store the workspace (in ``snapshot_dir``, else a private store) and return its id."""
        return self._snapshots().save(self.workspace)

    def restore(self, snapshot_id: str, *, steps: int | None = None) -> None:
        """Replace the workspace contents with a snapshot (unknown id: EnvironmentFailure).

        ``steps``, when given, sets the step counter, so a resumed episode keeps counting
        toward ``max_steps``.
        """
        self._snapshots().restore(snapshot_id, self.workspace)
        if steps is not None:
            self._steps = steps
            self._done = False

    def _snapshots(self) -> SnapshotStore:
        if self._store is not None:
            return self._store
        if self._private_snapshots is None:
            self._private_snapshots = Path(tempfile.mkdtemp(prefix="agentrunner-snap-"))
        return SnapshotStore(self._private_snapshots)

    def _require(self) -> Task:
        if self._task is None:
            raise EnvironmentFailure("the workspace environment has no episode; call reset() first")
        return self._task

    def _ensure_dirs(self) -> None:
        assert self._root is not None
        for name in ("workspace", "tmp"):
            (self._root / name).mkdir(parents=True, exist_ok=True)

    def _discard(self) -> None:
        root, self._root, self._task = self._root, None, None
        if root is not None:
            try:
                sandbox.force_rmtree(root)
            except OSError as exc:
                raise EnvironmentFailure(f"cannot remove the workspace {root}: {exc}") from exc

    def _env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        assert self._root is not None
        return sandbox.scrubbed_env(self.workspace, self._root / "tmp", extra)

    # -- the tools ------------------------------------------------------------------------------

    def _bash(self, command: str, timeout: float | None = None) -> StepResult:
        limit = self.bash_timeout if timeout is None else float(timeout)
        if not 0 < limit <= MAX_BASH_TIMEOUT:
            raise ToolError(f"bash: timeout must be between 0 and {MAX_BASH_TIMEOUT:g} seconds")
        try:
            result = sandbox.run_command(
                ["bash", "-c", command],
                cwd=self.workspace,
                env=self._env(),
                timeout=limit,
                output_cap=self.output_cap,
            )
        except OSError as exc:
            raise EnvironmentFailure(f"cannot run bash in the workspace: {exc}") from exc
        text = result.text(self._mask)
        error = None
        if result.flooded:
            error = f"output exceeded {sandbox.FLOOD_LIMIT} bytes; the process group was killed"
        elif result.timed_out:
            error = f"timed out after {limit:g} s; the process group was killed"
        status = f"[{error}]" if error else f"[exit code {result.exit_code}]"
        observation = text + ("\n" if text and not text.endswith("\n") else "") + status
        return StepResult(
            observation=observation, error=error, info={"exit_code": result.exit_code}
        )

    def _read_file(
        self, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> StepResult:
        lines = split_lines(read_text(self.workspace, path, strict=False))
        start = 1 if start_line is None else start_line
        end = len(lines) if end_line is None else end_line
        if start < 1:
            raise ToolError(f"start_line must be 1 or more, got {start}")
        if end_line is not None and end < start:
            raise ToolError(f"end_line ({end}) is before start_line ({start})")
        if not lines:
            return StepResult(observation=f"({shown_path(path)} is empty)")
        if start > len(lines):
            msg = f"start_line {start} is past the end of {shown_path(path)} ({len(lines)} lines)"
            raise ToolError(msg)
        body = numbered(lines, start, min(end, len(lines)))
        return StepResult(observation=cap_text(self._mask(body), self.output_cap))

    def _write_file(self, path: str, content: str) -> StepResult:
        data = content.encode("utf-8")
        write_bytes(self.workspace, path, data)
        return StepResult(observation=f"wrote {len(data)} bytes to {shown_path(path)}")

    def _str_replace(self, path: str, old_str: str, new_str: str) -> StepResult:
        text = read_text(self.workspace, path, strict=True)
        shown = shown_path(path)
        if not old_str:
            raise ToolError("old_str must not be empty")
        count = text.count(old_str)
        if count == 0:
            raise ToolError(f"old_str not found in {shown}; it must match exactly, whitespace too")
        if count > 1:
            raise ToolError(
                f"old_str occurs {count} times in {shown}; include more context to make it unique"
            )
        at = text.index(old_str)
        new_text = text[:at] + new_str + text[at + len(old_str) :]
        write_bytes(self.workspace, path, new_text.encode("utf-8"))
        lines = split_lines(new_text)
        first = text.count("\n", 0, at) + 1
        start, end = max(1, first - 3), min(len(lines), first + new_str.count("\n") + 3)
        head = f"edited {shown}: replaced 1 occurrence; lines {start}-{end} now read:\n"
        body = numbered(lines, start, end) if lines else ""
        return StepResult(observation=cap_text(self._mask(head + body), self.output_cap))

    def _list_files(self, path: str | None = None) -> StepResult:
        entries = list_entries(self.workspace, path or ".", SKIP_LISTING)
        if not entries:
            return StepResult(observation="(no files)")
        shown = entries[:MAX_LISTED]
        if len(entries) > MAX_LISTED:
            shown.append(f"[... {len(entries) - MAX_LISTED} more entries not shown ...]")
        return StepResult(observation=cap_text(self._mask("\n".join(shown)), self.output_cap))

    def _submit(self) -> StepResult:
        task = self._require()
        assert self._root is not None
        hidden = self._root / "hidden"  # outside the workspace, removed right after
        try:
            sandbox.force_rmtree(hidden)
            _lay_out(task, task.hidden_files, hidden)
            if task.verifier:
                argv = [arg.replace("{hidden}", str(hidden)) for arg in task.verifier]
            else:
                # -P: the script's folder is not put on sys.path (it would shadow task modules)
                argv = [sys.executable, "-P", "-s", str(VERIFY_SCRIPT), str(hidden)]
            result = sandbox.run_command(
                argv,
                cwd=self.workspace,
                env=self._env(),
                timeout=self.verify_timeout,
                output_cap=self.output_cap,
            )
        except OSError as exc:
            raise EnvironmentFailure(f"cannot run the verifier of {task.task_id}: {exc}") from exc
        finally:
            sandbox.force_rmtree(hidden)
        return _score(task, result, self.verify_timeout)


def _lay_out(task: Task, files: dict[str, str], base: Path) -> None:
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


def _last_json(output: str) -> dict[str, Any] | None:
    for line in reversed(output.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict):
                return value
    return None


def _count(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if ok else None


def _clamped_score(value: Any) -> float | None:
    """A continuous verifier's ``score`` clamped to [0, 1] (None when absent or not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return min(1.0, max(0.0, float(value)))


def _score(task: Task, result: sandbox.CommandResult, timeout: float) -> StepResult:
    """The final step from the verifier's output: reward by the task's mode, and a summary."""
    if result.timed_out or result.flooded:
        msg = f"the verifier timed out after {timeout:g} s"
        if result.flooded:
            msg = "the verifier flooded its output and was killed"
        return StepResult(
            observation=f"submitted: {msg}; reward 0", reward=0.0, done=True, error=msg
        )
    outcome = _last_json(result.text()) or {}
    passed, total = _count(outcome.get("passed")), _count(outcome.get("total"))
    info: dict[str, Any] = {"exit_code": result.exit_code}
    if passed is None or total is None:
        reward = 1.0 if result.exit_code == 0 else 0.0
        observation = (
            f"submitted: the verifier exited with code {result.exit_code} "
            f"(no test counts reported); reward {reward:g}"
        )
        return StepResult(observation=observation, reward=reward, done=True, info=info)
    score = _clamped_score(outcome.get("score"))
    if task.reward_mode == "binary":
        reward = 1.0 if total > 0 and passed == total else 0.0
    elif task.reward_mode == "continuous" and score is not None:
        reward = score
    else:
        reward = min(1.0, passed / total) if total > 0 else 0.0
    failures = outcome.get("failures")
    failing = sorted(str(f) for f in failures) if isinstance(failures, list) else []
    lines = [f"submitted: {passed}/{total} hidden tests passed; reward {reward:g}"]
    if failing:
        lines.append("failing: " + ", ".join(failing))
    info.update(passed=passed, total=total, failures=failing)
    return StepResult(observation="\n".join(lines), reward=reward, done=True, info=info)
