"""The coding-workspace environment: a task's files or a private copy of a git repository,
six tools run in a sandbox, incremental snapshots, and a verifier or test command.

``WorkspaceEnv`` implements :class:`agentrunner.values.environment.Environment`. ``reset`` prepares
a fresh private workspace: a bundled or tasks.json task's files, or a copy of a repository
at a revision (``WorkspaceEnv.for_repo`` or a task with ``repo``), then the task's
``setup`` command; that state is the episode's *base* snapshot. The model works through
``bash``, ``read_file``, ``write_file``, ``str_replace``, ``list_files`` and ``submit``
(names and parameters are a contract: recorded traces name them). Commands run inside the
:class:`agentrunner.envs.jail.Jail` (bubblewrap when it works). ``submit`` runs the task's
hidden verifier or its test command in a sandbox of its own, then puts the workspace back
as the agent left it (:mod:`agentrunner.envs.workspace_verify`).

Bound to a trace store (the runner does it), every step's workspace is snapshotted into the
store, costing what the step changed; ``restore`` returns to any recorded snapshot.

Observations are deterministic: the workspace shows as ``/workspace``, listings are sorted,
and no temp path or timestamp appears. Tool misuse is a ``StepResult`` with ``error`` set,
never an exception; a broken environment raises
:class:`agentrunner.values.errors.EnvironmentFailure`.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from agentrunner.envs import sandbox
from agentrunner.envs.cgroups import StepCgroup
from agentrunner.envs.jail import Jail, SandboxConfig, resolve_mode
from agentrunner.envs.layout import prepare_files
from agentrunner.envs.repo import enclosing_work_tree
from agentrunner.envs.sandbox import ToolError
from agentrunner.envs.snapshot_limits import WorkspaceOverLimit
from agentrunner.envs.snapshots import SnapshotStore
from agentrunner.envs.snapshotter import MemorySnapshots, Snapshotter
from agentrunner.envs.tasks import Task, get_task, load_tasks
from agentrunner.envs.tools import SYSTEM_PROMPT, TOOL_SPECS, validate
from agentrunner.envs.trees import remove_tree
from agentrunner.envs.workspace_verify import VERIFY_SCRIPT as VERIFY_SCRIPT
from agentrunner.envs.workspace_verify import WORKSPACE_PREFIX, WorkspaceVerification
from agentrunner.values.environment import ResetResult, SnapshotBackend, StepResult, ToolAction
from agentrunner.values.errors import EnvironmentFailure, StoreCorruptError, StoreError, UsageError

REPO_MAX_STEPS = 100
SETUP_TIMEOUT = 1800.0
_MARKERS = 1024
"""Room past the output cap for the omission marker and the status line it already has."""


class WorkspaceEnv(WorkspaceVerification):
    """A task's repository in a private temp directory, driven through six tools."""

    def __init__(
        self,
        tasks_path: str | Path | None = None,
        snapshot_dir: str | Path | None = None,
        bash_timeout: float = 60,
        output_cap: int = 100_000,
        verify_timeout: float = 300,
        *,
        task: Task | None = None,
        sandbox: SandboxConfig | None = None,
        base: dict[str, Any] | None = None,
        setup_timeout: float = SETUP_TIMEOUT,
        snapshots: bool = True,
    ) -> None:
        if bash_timeout <= 0 or verify_timeout <= 0 or setup_timeout <= 0:
            raise UsageError("timeouts must be positive")
        if output_cap < 64:
            raise UsageError("output_cap must be at least 64 bytes")
        self.tasks_path = Path(tasks_path).resolve() if tasks_path else None
        if task is None:
            load_tasks(self.tasks_path)  # a missing or broken tasks file fails here, not at reset
        self.task = task
        self.snapshot_dir = Path(snapshot_dir).resolve() if snapshot_dir else None
        self.bash_timeout = float(bash_timeout)
        self.output_cap = int(output_cap)
        self.verify_timeout = float(verify_timeout)
        self.setup_timeout = float(setup_timeout)
        self.sandbox = sandbox or SandboxConfig()
        self.mode, self.sandbox_warning = resolve_mode(self.sandbox.mode)
        self._recorded_base = base
        self.keep_snapshots = snapshots
        self._backend: SnapshotBackend | None = None
        self._store_path: Path | None = None
        self._snap: Snapshotter | None = None
        self._base: dict[str, Any] | None = None
        self._root: Path | None = None
        self._task: Task | None = None
        self._jail: Jail | None = None
        self._mask: Callable[[str], str] = str
        self._steps = 0
        self._done = False

    @classmethod
    def for_repo(
        cls,
        repo: str | Path,
        *,
        prompt: str,
        rev: str | None = None,
        test: str | None = None,
        test_report: str | None = None,
        setup: str | None = None,
        with_git: bool = False,
        task_id: str | None = None,
        max_steps: int = REPO_MAX_STEPS,
        **options: Any,
    ) -> WorkspaceEnv:
        """An environment whose one task is ``prompt`` on a private copy of ``repo`` (a
        subfolder of a repository: of that repository, the subfolder the working directory)."""
        source = str(repo)
        if not source.startswith("file://"):
            source = str(Path(source).expanduser().resolve())
        source, workdir = enclosing_work_tree(source)
        name = task_id or "repo:" + Path(source.removeprefix("file://").rstrip("/")).name
        task = Task(
            task_id=name,
            prompt=prompt,
            max_steps=max_steps,
            repo=source,
            rev=rev,
            test=test,
            test_report=test_report,
            setup=setup,
            with_git=with_git,
            split="user",
            workdir=workdir or None,
        )
        return cls(task=task, **options)

    # -- the Environment protocol -----------------------------------------------------------

    def bind_store(self, store: SnapshotBackend) -> None:
        """Keep snapshots in ``store`` (the trace store the episode is recorded in), unless
        the environment was made with ``snapshots=False``."""
        if not self.keep_snapshots:
            return
        self._backend = store
        path = getattr(store, "path", None)
        self._store_path = Path(path).resolve() if path is not None else None

    def spec(self) -> dict[str, Any]:
        jail = self._jail or Jail(self.sandbox, self.mode, hidden=())
        tasks = str(self.tasks_path) if self.tasks_path else "bundled"
        out: dict[str, Any] = {
            "kind": "workspace",
            "tasks": "task" if self.task else tasks,
            "bash_timeout": self.bash_timeout,
            "output_cap": self.output_cap,
            "verify_timeout": self.verify_timeout,
            "snapshot_dir": str(self.snapshot_dir) if self.snapshot_dir else None,
            "snapshots": "store" if self._backend is not None else None,
            "sandbox": jail.describe(),
        }
        if self.task is not None:
            out["task"] = self.task.model_dump(mode="json", exclude_defaults=True)
        if self._base is not None:
            out["base"] = self._base
        return out

    def reset(self, task_id: str, seed: int) -> ResetResult:
        task = self._task_for(task_id)
        self._discard()
        _remove_stale_workspaces()
        raw = tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-")
        self._root = Path(raw).resolve()
        self._mask = sandbox.PathMasker(Path(raw))
        self._ensure_dirs()
        self._task = task
        self._jail = Jail(self.sandbox, self.mode, hidden=self._hidden_paths(task))
        limit = self.sandbox.limits.workspace_mb << 20
        self._snap = Snapshotter(self.workspace, self._backend or MemorySnapshots(), limit=limit)
        self._steps = 0
        self._done = False
        self._base = self._prepare(task)
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
            result = self.tool(action.name)(**arguments)
        except ToolError as exc:
            msg = sandbox.cap_text(self._mask(str(exc)), self.output_cap)
            result = StepResult(observation=f"error: {msg}", error=msg)
        except WorkspaceOverLimit as exc:  # a submit's snapshot, when steps are not recorded
            msg = sandbox.cap_text(f"{exc}; remove files, then go on", self.output_cap)
            result = StepResult(observation=f"error: {msg}", error=msg)
        if len(result.observation) > self.output_cap // 4:  # what is recorded is capped too
            capped = sandbox.cap_text(result.observation, self.output_cap + _MARKERS)
            result = result.model_copy(update={"observation": capped})
        if result.done:
            self._done = True
        elif self._steps >= task.max_steps:
            self._done = True
            note = f"[step limit reached: {self._steps}/{task.max_steps} steps; the episode ends]"
            observation = result.observation + ("\n" if result.observation else "") + note
            update = {"observation": observation, "done": True, "truncated": True}
            result = result.model_copy(update=update)
        if self._backend is not None:
            result = self._snapshot_step(result)
        return result

    def _snapshot_step(self, result: StepResult) -> StepResult:
        """Record the step's snapshot; a step that left the workspace over its limits is
        undone (the workspace goes back to the snapshot before it) and says so."""
        snap = self._snapshotter()
        before = snap.current
        try:
            return result.model_copy(update={"snapshot": self.snapshot()})
        except WorkspaceOverLimit as exc:
            if before is None:
                raise
            snap.restore(before)
            msg = sandbox.cap_text(
                f"{exc}; nothing of this step was kept: the workspace is back as it was before "
                f"this step (limit: --workspace-size {self.sandbox.limits.workspace_mb} MB)",
                self.output_cap // 4,
            )
            text = result.observation + ("\n" if result.observation else "") + f"error: {msg}"
            return result.model_copy(update={"observation": text, "error": msg, "snapshot": before})

    def close(self) -> None:
        self._discard()

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

    @property
    def current_task(self) -> Task:
        """The task of the last reset."""
        return self._require()

    @property
    def base(self) -> dict[str, Any] | None:
        """What the last reset started from: its snapshot id, and the repository's commit."""
        return self._base

    def snapshot(self) -> str:
        """Snapshot the workspace (into the bound store, else memory) and return its id.

        A store that cannot take it (its disk is full) is an EnvironmentFailure: the episode
        stops resumable, nothing half-stored under the snapshot's id. A workspace over its
        limits raises :class:`WorkspaceOverLimit` before anything is stored."""
        try:
            return self._snapshotter().save()
        except StoreCorruptError:
            raise
        except StoreError as exc:
            raise EnvironmentFailure(f"cannot store the workspace snapshot: {exc}") from exc

    def restore(self, snapshot_id: str, *, steps: int | None = None) -> None:
        """Make the workspace equal to a snapshot (unknown id: EnvironmentFailure).

        ``steps``, when given, sets the step counter, so a resumed episode keeps counting
        toward ``max_steps``. Snapshots of earlier versions (tar archives in
        ``snapshot_dir``) are restored too.
        """
        snap = self._snapshotter()
        if snap.holds(snapshot_id):
            snap.restore(snapshot_id)
        elif self.snapshot_dir is not None:
            SnapshotStore(self.snapshot_dir).restore(snapshot_id, self.workspace)
            snap.current = None  # the next snapshot is a full one
        else:
            raise EnvironmentFailure(f"unknown snapshot {snapshot_id!r}")
        if steps is not None:
            self._steps = steps
            self._done = False

    def _snapshotter(self) -> Snapshotter:
        if self._snap is None:
            raise EnvironmentFailure("the workspace environment has no episode; call reset() first")
        return self._snap

    def _task_for(self, task_id: str) -> Task:
        if self.task is None:
            return get_task(task_id, self.tasks_path)
        if task_id != self.task.task_id:
            raise UsageError(f"this environment runs task {self.task.task_id!r}, not {task_id!r}")
        return self.task

    def _prepare(self, task: Task) -> dict[str, Any]:
        """Lay out the task (or restore the recorded base) and snapshot it as the base."""
        snap = self._snapshotter()
        recorded = self._recorded_base or {}
        if recorded.get("task_id") == task.task_id and snap.holds(str(recorded.get("snapshot"))):
            snap.restore(str(recorded["snapshot"]))
            return dict(recorded)
        info = prepare_files(task, self.workspace)
        if task.setup:
            info["setup"] = self._setup(task.setup)
        try:
            base = self.snapshot()
        except WorkspaceOverLimit as exc:
            raise UsageError(
                f"task {task.task_id}: the starting {exc.args[0].removeprefix('the ')}; "
                "raise --workspace-size"
            ) from None
        return {"task_id": task.task_id, "snapshot": base, **info}

    def _setup(self, command: str) -> dict[str, Any]:
        result = self._run(self.shell(command), timeout=self.setup_timeout)
        output = sandbox.cap_text(result.text(self._mask), 4000)
        if result.exit_code != 0 or result.timed_out:
            why = "timed out" if result.timed_out else f"exited with code {result.exit_code}"
            raise EnvironmentFailure(f"the setup command {command!r} {why}:\n{output}")
        return {"command": command, "exit_code": result.exit_code, "output": output}

    def _hidden_paths(self, task: Task) -> list[Path]:
        """What the sandbox must never show: the store, tasks, the user's repo, $HOME."""
        paths = [Path.home()]
        if self._store_path is not None:
            paths.append(self._store_path.parent)
        if self.tasks_path is not None:
            paths.append(self.tasks_path.parent)
        if self.snapshot_dir is not None:
            paths.append(self.snapshot_dir)
        if task.repo:
            paths.append(Path(task.repo.removeprefix("file://")))
        return paths

    @property
    def workdir(self) -> str | None:
        """The task's working folder in the workspace (a subfolder ``--repo`` named)."""
        return self._task.workdir if self._task is not None else None

    def _require(self) -> Task:
        if self._task is None:
            raise EnvironmentFailure("the workspace environment has no episode; call reset() first")
        return self._task

    def _ensure_dirs(self) -> None:
        assert self._root is not None
        for name in ("workspace", "tmp"):
            (self._root / name).mkdir(parents=True, exist_ok=True)

    def _discard(self) -> None:
        root, self._root, self._task, self._snap = self._root, None, None, None
        if root is not None:
            try:
                remove_tree(root)  # iterative: any depth the agent built
            except OSError as exc:
                raise EnvironmentFailure(f"cannot remove the workspace {root}: {exc}") from exc

    # -- running commands ----------------------------------------------------------------------

    def _run(
        self,
        argv: list[str],
        *,
        timeout: float,
        extra_ro: tuple[tuple[Path, str], ...] = (),
        network: bool | None = None,
        root: Path | None = None,
        pass_fds: tuple[int, ...] = (),
    ) -> sandbox.CommandResult:
        """Run a command in the sandbox, with the limits; every process of it ends with it.

        ``root`` (a verification's clean copy) runs it on ``root/workspace`` instead of the
        agent's workspace. Bytecode is never written (``PYTHONDONTWRITEBYTECODE``), and a
        clean copy holds none (snapshots skip ``__pycache__``); no ``PYTHONPYCACHEPREFIX``:
        it would make every Python start compile its standard library again (+0.45 s)."""
        jail = self._jail
        assert jail is not None and self._root is not None
        cgroup = StepCgroup.create(jail.config.limits.processes) if jail.mode == "bwrap" else None
        inside = jail.mode == "bwrap"
        workspace = self.workspace if root is None else root / "workspace"
        tmp = Path("/tmp") if inside else (root or self._root) / "tmp"
        env = sandbox.scrubbed_env(home=tmp, tmpdir=tmp, path=jail.path_env())
        try:
            result = sandbox.run_command(
                jail.command(
                    argv, workspace=workspace, tmp=tmp, extra_ro=extra_ro, network=network
                ),
                cwd=workspace,
                env=env,
                timeout=timeout,
                output_cap=self.output_cap,
                preexec=jail.preexec(cgroup),
                pass_fds=pass_fds,
            )
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.EACCES, errno.ENOEXEC):  # as configured
                raise EnvironmentFailure(
                    f"cannot start {argv[0]!r} in the workspace: {exc.strerror}",
                    retryable=False,
                ) from exc
            raise EnvironmentFailure(f"cannot run a command in the workspace: {exc}") from exc
        except subprocess.SubprocessError as exc:
            raise EnvironmentFailure(f"cannot run a command in the workspace: {exc}") from exc
        finally:
            if cgroup is not None:
                cgroup.close()
        text = result.head[:200].decode("utf-8", "replace")
        if inside and argv[0] != "bash" and _could_not_start(result.exit_code, text):
            # the sandbox could not start a verifier program (bash itself is always there,
            # and a command's own output must not be mistaken for the sandbox's)
            raise EnvironmentFailure(
                f"the sandbox could not start {argv[0]!r}: {text.strip()}", retryable=False
            )
        return result


def _could_not_start(exit_code: int | None, head: str) -> bool:
    """Whether a command's result is the sandbox failing to start it: bubblewrap's own exec
    failure (exit 1), or ``setpriv``'s when a root runner drops to the sandbox user (127)."""
    return (exit_code == 1 and head.startswith("bwrap: ")) or (
        exit_code == 127 and head.startswith("setpriv: failed to execute")
    )


@functools.cache
def _remove_stale_workspaces() -> None:
    """Once per process: remove the workspaces of runners that died (SIGKILL leaves them)."""
    folder = Path(tempfile.gettempdir())
    for path in folder.glob(f"{WORKSPACE_PREFIX}*-*"):
        owner = path.name.removeprefix(WORKSPACE_PREFIX).split("-", 1)[0]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            with contextlib.suppress(OSError):
                remove_tree(path)
