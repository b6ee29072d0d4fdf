"""Helpers for the sandbox attack tests: mode parameters, one-command workspaces, a runner in a
child process, a model that runs a list of commands, a loopback listener, and the trace store's
rows read from outside."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from procs import all_gone, processes_with

from agentrunner.envs.jail import Limits, SandboxConfig, bwrap_problem
from agentrunner.envs.tasks import Task
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.environment import StepResult, ToolAction
from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentToolCall, AgentTurn

DEMO = "demo-mean"
TIMEOUT = 120.0
"""A generous bash timeout: no test depends on how fast a command runs."""


def case(
    mode: str,
    *values: Any,
    process: str | None = None,
    hole: str | None = None,
    known: str | None = None,
) -> Any:
    """One test case in ``mode`` (with ``values`` after it).

    bwrap is skipped where it cannot run. ``process`` says what process mode does not protect
    (the process case is then a strict xfail); ``hole`` marks a hole found here and ``known``
    a documented limitation (strict xfails too). Only an AssertionError counts as the
    expected failure: a crash still fails the test.
    """
    marks: list[Any] = []
    problem = bwrap_problem()
    if mode == "bwrap" and problem is not None:
        marks.append(pytest.mark.skip(reason=f"bwrap: {problem}"))
    reason = f"HOLE: {hole}" if hole else known
    if reason is None and process is not None and mode == "process":
        reason = f"process mode: {process}"
    if reason is not None:
        marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))
    ident = "-".join([mode, *(str(v) for v in values)])
    return pytest.param(mode, *values, marks=marks, id=ident)


def modes(process: str | None = None, *, hole: str | None = None) -> list[Any]:
    """Both modes as cases: ``process`` and ``hole`` as in :func:`case`."""
    return [case("bwrap", hole=hole), case("process", process=process, hole=hole)]


@contextlib.contextmanager
def workspace(
    mode: str,
    *,
    limits: Limits | None = None,
    network: bool = False,
    task: Task | None = None,
) -> Iterator[WorkspaceEnv]:
    """A workspace in ``mode``: the demo task's, or ``task``'s."""
    config = SandboxConfig(mode=mode, network=network, limits=limits or Limits())  # type: ignore[arg-type]
    with WorkspaceEnv(sandbox=config, task=task) as env:
        env.reset(task.task_id if task else DEMO, seed=0)
        yield env


def act(env: WorkspaceEnv, name: str, **arguments: Any) -> StepResult:
    return env.step(ToolAction(name=name, arguments=arguments))


def bash(env: WorkspaceEnv, command: str) -> StepResult:
    return act(env, "bash", command=command, timeout=TIMEOUT)


class CommandModel:
    """A model that runs one bash command per turn, then stops; ``before`` is called with a
    command's index just before the turn that runs it."""

    def __init__(self, commands: list[str], before: Callable[[int], None] = lambda i: None):
        self.commands = commands
        self.before = before
        self.turn = 0

    def __call__(self, context: AgentContext) -> AgentTurn:
        i, self.turn = self.turn, self.turn + 1
        if i >= len(self.commands):
            return AgentTurn(message="done")
        self.before(i)
        arguments = json.dumps({"command": self.commands[i], "timeout": TIMEOUT})
        call = AgentToolCall(call_id=f"c{i}", name="bash", arguments=arguments)
        return AgentTurn(tool_calls=(call,))


def kill_marked(word: str) -> None:
    """SIGKILL the processes a test started with ``word`` in their command line, and wait."""
    for pid in processes_with(word):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert all_gone(word)


def wait_until(predicate: Callable[[], bool], timeout: float = 120.0) -> bool:
    """Whether ``predicate`` became true within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def event_rows(db: Path) -> list[tuple[Any, ...]]:
    """Every row of the store's ``events`` table, read through a read-only connection."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as con:
        return con.execute("SELECT * FROM events ORDER BY episode_id, seq").fetchall()


def triggers(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)) as con:
        rows = con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall()
    return sorted(r[0] for r in rows)


# -- a runner in a child process -------------------------------------------------------------

_CHILD = """
import json, sys
from agentrunner.values.environment import ToolAction
from agentrunner.envs.jail import SandboxConfig
from agentrunner.envs.workspace import WorkspaceEnv

mode, command, network = sys.argv[1], sys.argv[2], sys.argv[3] == "network"
with WorkspaceEnv(sandbox=SandboxConfig(mode=mode, network=network)) as env:
    env.reset("demo-mean", seed=0)
    print(env.workspace, flush=True)
    args = {"command": command, "timeout": 120}
    result = env.step(ToolAction(name="bash", arguments=args))
    print(json.dumps(result.observation), flush=True)
"""


def child_runner(
    mode: str, command: str, env: dict[str, str], *, network: bool = False
) -> subprocess.Popen[str]:
    """A runner process (started with ``env``) whose one bash step runs ``command``.

    Its first output line is the workspace's host path, its second the observation (JSON).
    """
    root = Path(__file__).resolve().parent.parent
    online = "network" if network else "offline"
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode, command, online],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )


# -- a listener on the host's loopback -------------------------------------------------------


@contextlib.contextmanager
def loopback_listener() -> Iterator[tuple[int, str]]:
    """A TCP server on 127.0.0.1 that sends each client a unique token: (port, token)."""
    token = f"hello-{uuid.uuid4().hex}"
    with serving_token(socket.create_server(("127.0.0.1", 0)), token) as server:
        yield server.getsockname()[1], token


@contextlib.contextmanager
def serving_token(server: socket.socket, token: str) -> Iterator[socket.socket]:
    """``server`` (listening) sends ``token`` to each client until the block ends."""
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.sendall(token.encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def secret_file(folder: Path, name: str | None = None) -> tuple[Path, str]:
    """A new file in ``folder`` holding a unique secret: (path, secret)."""
    secret = f"secret-{uuid.uuid4().hex}"
    path = folder / (name or f"agentrunner-secret-{uuid.uuid4().hex[:8]}")
    path.write_text(secret + "\n")
    return path, secret


def remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
