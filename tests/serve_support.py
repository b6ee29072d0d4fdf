"""``agentrunner serve-env`` in a subprocess for tests, and the real ``openenv`` client
library driving it (a script run with the OpenEnv venv's own Python).

The server starts through ``serve_env_cmd.register`` on a parser of its own (that
command, with the common options), on a free loopback port, and is ready once ``/health``
answers; ``kill()`` ends it like a crash (SIGKILL).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv_server import free_port, openenv_venv

from agentrunner import TraceStore
from agentrunner.envs.tasks import get_task

START = """
import argparse, sys
from agentrunner.cli import serve_env_cmd
from agentrunner.cli.common import add_common
from agentrunner.values.errors import UsageError
parser = argparse.ArgumentParser(prog="agentrunner")
add_common(parser)
serve_env_cmd.register(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
try:
    sys.exit(args.handler(args))
except UsageError as exc:
    print(f"agentrunner: {exc}", file=sys.stderr)
    sys.exit(2)
"""
TASK = "demo-mean"
FIX = get_task(TASK).solution["stats.py"]
RUN_TESTS = {"tool": "bash", "command": "python -m unittest 2>&1 | tail -n 1"}
WRITE_FIX = {"tool": "write_file", "path": "stats.py", "content": FIX}
SUBMIT = {"tool": "submit"}


def serve_env_command(*args: str) -> list[str]:
    """The command line that runs ``agentrunner serve-env ARGS``."""
    return [sys.executable, "-c", START, "serve-env", *args]


class ServeEnv:
    """One ``serve-env`` process on a free loopback port, recording into ``db``."""

    def __init__(self, db: Path, log: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = db
        self.log = log
        command = serve_env_command("--db", str(db), "--port", str(self.port), *args)
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 120.0) -> None:  # only bounds a failing start
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"serve-env exited early: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"serve-env was not healthy within {timeout:g}s")

    def stop(self) -> int:
        """SIGTERM: the server ends every open episode, then exits."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


@contextmanager
def serve_env(tmp_path: Path, *args: str, db: Path | None = None) -> Iterator[ServeEnv]:
    """A running ``serve-env`` (stopped, or killed, afterwards)."""
    server = ServeEnv(db or tmp_path / "served.db", tmp_path / f"serve-{time.time_ns()}.log", *args)
    try:
        server.wait_healthy()
        yield server
    finally:
        if server.process.poll() is None:
            try:
                server.stop()
            except subprocess.TimeoutExpired:
                server.kill()


def run_openenv_script(script: str, *args: str, timeout: float = 300) -> Any:
    """Run ``script`` with the OpenEnv venv's Python (the real ``openenv`` library); the JSON
    it prints last."""
    python = openenv_venv() / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [str(python), "-c", script, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def tool_steps(db: Path, episode_id: str) -> list[dict[str, Any]]:
    """An episode's steps as content: each call's tool and arguments, each result's
    observation, reward, done and error, in order."""
    with TraceStore(db) as store:
        calls = {
            e.payload["call_id"]: e.payload for e in store.events(episode_id, kinds=["tool.call"])
        }
        results = store.events(episode_id, kinds=["tool.result"])
        return [
            {
                "tool": calls[r.payload["call_id"]]["name"],
                "arguments": calls[r.payload["call_id"]]["parsed"],
                "observation": r.payload["observation"],
                "reward": r.payload["reward"],
                "done": r.payload["done"],
                "error": r.payload["error"],
            }
            for r in results
        ]


def served_episodes(db: Path) -> list[str]:
    """The ids of the store's episodes, oldest first."""
    with TraceStore(db) as store:
        return sorted(store.episode_ids())
