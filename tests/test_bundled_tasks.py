"""The bundled tasks: every bug is real, every reference solution fixes it, metadata is sane.

Each check lays a task into its own temporary workspace and runs the default verifier in a
subprocess, exactly as an environment would. Those subprocesses dominate the run time, so
the module fixture starts the ones of all selected tests up front on a thread pool (each
test then waits for its own result); under pytest-xdist every check just runs on demand.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import agentrunner.envs.tasks as tasks_module
from agentrunner.envs.tasks import Task, load_tasks
from agentrunner.envs.workspace import VERIFY_SCRIPT

TASKS = load_tasks()
PROJECT_ROOT = Path(tasks_module.__file__).resolve().parents[2]
KEBAB_CASE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+|[a-z0-9]+")

by_task = pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _workspace(task: Task, root: Path, *, solved: bool) -> Path:
    workspace = root / "workspace"
    _write(workspace, task.files)
    if solved:
        _write(workspace, task.solution)
    return workspace


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _verify(task: Task, root: Path, *, solved: bool) -> dict[str, Any]:
    """Run the default verifier on the task's workspace; its last stdout line is JSON."""
    workspace = _workspace(task, root, solved=solved)
    hidden = root / "hidden"
    _write(hidden, task.hidden_files)
    proc = _run(["-P", "-s", str(VERIFY_SCRIPT), str(hidden)], workspace)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, f"verifier crashed:\n{proc.stdout}\n{proc.stderr}"
    outcome: dict[str, Any] = json.loads(lines[-1])
    return outcome


def _visible(task: Task, root: Path) -> subprocess.CompletedProcess[str]:
    """Run the task's visible tests (``python -m unittest``) on the solved workspace."""
    return _run(["-m", "unittest", "-q"], _workspace(task, root, solved=True))


# The subprocess check each test needs: (task, root) -> result.
CHECKS = {
    "test_buggy_version_fails_hidden_tests": lambda task, root: _verify(task, root, solved=False),
    "test_solution_passes_hidden_tests": lambda task, root: _verify(task, root, solved=True),
    "test_solution_passes_visible_tests": _visible,
}


class Checks:
    """Runs the subprocess checks on a thread pool, each at most once."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, workers: int) -> None:
        self._tmp = tmp_path_factory
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[tuple[str, str], Future[Any]] = {}

    def start(self, test_name: str, task: Task) -> Future[Any]:
        key = (test_name, task.task_id)
        if key not in self._futures:
            root = self._tmp.mktemp(f"{task.task_id}-{test_name}")  # made in the main thread
            self._futures[key] = self._pool.submit(CHECKS[test_name], task, root)
        return self._futures[key]

    def result(self, request: pytest.FixtureRequest, task: Task) -> Any:
        return self.start(request.node.originalname, task).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def checks(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Checks]:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        runner = Checks(tmp_path_factory, workers=1)
    else:
        runner = Checks(tmp_path_factory, workers=max(2, os.cpu_count() or 1))
        this_file = Path(__file__).resolve()
        for item in request.session.items:  # the selected tests, after -k/-m filtering
            name = getattr(item, "originalname", None)
            callspec = getattr(item, "callspec", None)
            if name in CHECKS and callspec is not None and item.path.resolve() == this_file:
                runner.start(name, callspec.params["task"])
    yield runner
    runner.close()


def _imported_modules(source: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.add(node.module.split(".")[0])
    return modules


@by_task
def test_buggy_version_fails_hidden_tests(
    task: Task, checks: Checks, request: pytest.FixtureRequest
) -> None:
    outcome = checks.result(request, task)
    assert outcome["total"] > 0
    assert outcome["passed"] < outcome["total"], "the unfixed repo already passes"
    if task.reward_mode == "partial_credit":
        assert outcome["total"] >= 5, "partial credit needs several independent cases"


@by_task
def test_solution_passes_hidden_tests(
    task: Task, checks: Checks, request: pytest.FixtureRequest
) -> None:
    outcome = checks.result(request, task)
    assert outcome["total"] > 0
    assert outcome["passed"] == outcome["total"], outcome["failures"]


@by_task
def test_solution_passes_visible_tests(
    task: Task, checks: Checks, request: pytest.FixtureRequest
) -> None:
    proc = checks.result(request, task)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"Ran [1-9]\d* tests?", proc.stderr), proc.stderr


@by_task
def test_task_metadata(task: Task) -> None:
    assert KEBAB_CASE.fullmatch(task.task_id)
    assert task.difficulty in {"easy", "medium", "hard"}
    assert task.split in {"train", "test"}
    assert task.reward_mode in {"binary", "partial_credit"}
    assert 20 <= task.max_steps <= 40
    assert task.prompt.strip()
    assert "python -m unittest" in task.prompt
    assert "submit()" in task.prompt
    assert task.verifier is None

    visible = set(task.files)
    assert "tests/__init__.py" in visible
    assert any(re.fullmatch(r"tests/test_\w+\.py", path) for path in visible)
    assert task.hidden_files
    for path in task.hidden_files:
        # Hidden tests are imported as top-level modules next to the workspace's own code.
        assert re.fullmatch(r"test_hidden_\w+\.py", path), path
        assert path not in visible
        assert Path(path).name not in {Path(p).name for p in visible}
    assert task.solution
    for path, text in task.solution.items():
        assert path in visible, f"solution file {path} does not overlay a repo file"
        assert text != task.files[path], f"solution file {path} is unchanged"


@by_task
def test_task_code_is_plain_stdlib_python(task: Task) -> None:
    local = {Path(p).stem for p in task.files if p.endswith(".py")} | {"tests"}
    allowed = set(sys.stdlib_module_names) | local
    for group in (task.files, task.hidden_files, task.solution):
        for path, text in group.items():
            assert path.endswith(".py"), path
            assert _imported_modules(text) <= allowed, path
    for path, text in task.hidden_files.items():
        # The verifier counts every failing subTest as a failure of its own, which would
        # skew partial credit; hidden cases are separate test methods instead.
        assert "subTest" not in text, path


def test_bundle_is_varied() -> None:
    ids = [t.task_id for t in TASKS]
    assert ids[0] == "demo-mean"
    assert len(ids) == len(set(ids)) >= 12
    assert {t.difficulty for t in TASKS} == {"easy", "medium", "hard"}
    assert {t.split for t in TASKS} == {"train", "test"}
    assert sum(t.reward_mode == "partial_credit" for t in TASKS) >= 2
