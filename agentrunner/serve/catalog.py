"""What a server serves: the bundled tasks, a tasks file's, or one task per repository, and
the workspace environment (the runner's own, with its limits, hidden tests and rewards) that
runs a task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.tasks import load_tasks
from agentrunner.envs.workspace import REPO_MAX_STEPS, WorkspaceEnv
from agentrunner.values.errors import UsageError


@dataclass(frozen=True)
class RepoTask:
    """``--repo PATH`` served as a task: the prompt and the test command that scores it."""

    path: str
    prompt: str
    test: str | None = None
    setup: str | None = None
    max_steps: int | None = None


@dataclass(frozen=True)
class Catalog:
    """The task ids a server offers, the first one the default, and how to make the
    environment that runs one of them."""

    task_ids: tuple[str, ...]
    source: str
    """``bundled``, the tasks file's path, or ``repos``: what ``GET /metadata`` names."""
    _make: Callable[[str], WorkspaceEnv]

    @property
    def default_task(self) -> str:
        return self.task_ids[0]

    def environment(self, task_id: str) -> WorkspaceEnv:
        """A new environment for ``task_id`` (an unknown id is a ``UsageError``)."""
        if task_id not in self.task_ids:
            shown = ", ".join(self.task_ids[:20]) + (", ..." if len(self.task_ids) > 20 else "")
            raise UsageError(f"unknown task {task_id!r}; this server serves: {shown}")
        return self._make(task_id)


def tasks_catalog(tasks_path: Path | None, sandbox: SandboxConfig | None = None) -> Catalog:
    """The bundled tasks (``tasks_path`` None) or a tasks file's."""
    ids = tuple(task.task_id for task in load_tasks(tasks_path))
    if not ids:
        raise UsageError(f"the tasks file {tasks_path} holds no task")
    source = str(tasks_path.resolve()) if tasks_path is not None else "bundled"
    return Catalog(ids, source, lambda _: WorkspaceEnv(tasks_path=tasks_path, sandbox=sandbox))


def repos_catalog(repos: list[RepoTask], sandbox: SandboxConfig | None = None) -> Catalog:
    """One task per repository (``repo:NAME``; a name taken twice gets ``-2``, ``-3``...)."""
    makers: dict[str, Callable[[], WorkspaceEnv]] = {}
    for repo in repos:
        name = "repo:" + Path(repo.path.removeprefix("file://").rstrip("/")).name
        task_id, n = name, 1
        while task_id in makers:
            n += 1
            task_id = f"{name}-{n}"
        makers[task_id] = _repo_maker(repo, task_id, sandbox)
    for make in makers.values():
        make().close()  # a path that is not a repository fails here, at start
    return Catalog(tuple(makers), "repos", lambda task_id: makers[task_id]())


def _repo_maker(
    repo: RepoTask, task_id: str, sandbox: SandboxConfig | None
) -> Callable[[], WorkspaceEnv]:
    max_steps = repo.max_steps if repo.max_steps is not None else REPO_MAX_STEPS

    def make() -> WorkspaceEnv:
        return WorkspaceEnv.for_repo(
            repo.path,
            prompt=repo.prompt,
            test=repo.test,
            setup=repo.setup,
            task_id=task_id,
            sandbox=sandbox,
            max_steps=max_steps,
        )

    return make
