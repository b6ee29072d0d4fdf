"""A real OpenEnv server for integration tests: ``openenv`` 0.10's scaffolded echo env.

The ``openenv`` package lives in its own virtual environment outside the repo (its
dependencies must not leak into agentrunner's): ``$AGENTRUNNER_OPENENV_VENV``, by default
``~/.cache/agentrunner-openenv/venv``. When missing it is built with
``python -m venv`` + ``pip install 'openenv==0.10.*' uvicorn``, once per run during
collection (``prepare``, called by ``conftest.py`` when an ``openenv`` test is collected), so
the build is bounded by its own time limit, never by a test's; when the build or the
scaffolding fails the tests are skipped with the reason. The env is scaffolded once with
``openenv init echo_env`` beside the venv and served with ``python -m uvicorn server.app:app``
on an ephemeral loopback port.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import httpx
import pytest

VENV_VAR = "AGENTRUNNER_OPENENV_VENV"
DEFAULT_VENV = Path.home() / ".cache" / "agentrunner-openenv" / "venv"
OPENENV_REQUIREMENT = "openenv==0.10.*"
ENV_NAME = "echo_env"
_PROBE = """
import importlib.metadata as m
import uvicorn
version = m.version("openenv")
assert version.startswith("0.10."), f"openenv {version} is installed, 0.10.* is needed"
try:
    m.version("openenv-core")
except m.PackageNotFoundError:
    pass
else:
    raise AssertionError("the legacy openenv-core is installed beside openenv")
"""


PIP_INSTALL = ["-m", "pip", "install", "-q", OPENENV_REQUIREMENT, "uvicorn"]


def prepare() -> str | None:
    """Builds the venv and scaffolds the env when missing; why they cannot be had, or None."""
    venv, problem = _prepared_venv(os.environ.get(VENV_VAR) or str(DEFAULT_VENV))
    if problem is not None:
        return problem
    return _scaffolded(venv)[1]


def openenv_venv() -> Path:
    """The venv holding ``openenv`` 0.10 and uvicorn, built when missing (else skip)."""
    venv, problem = _prepared_venv(os.environ.get(VENV_VAR) or str(DEFAULT_VENV))
    if problem is not None:
        pytest.skip(problem)
    return venv


@cache  # one build attempt per run: a failed pip install is not retried for every test
def _prepared_venv(path: str) -> tuple[Path, str | None]:
    venv = Path(path)
    python = venv / "bin" / "python"
    if not python.exists():
        problem = _build_venv(venv)
        if problem is not None:
            return venv, problem
    probe = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True)
    if probe.returncode != 0:
        return venv, f"the OpenEnv venv at {venv} is not usable: {_tail(probe.stderr)}"
    return venv, None


def _build_venv(venv: Path) -> str | None:
    commands = [
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), *PIP_INSTALL],
    ]
    try:
        for command in commands:
            subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(venv, ignore_errors=True)
        return f"cannot build the OpenEnv venv at {venv}: {_tail(exc.stderr)}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        shutil.rmtree(venv, ignore_errors=True)
        return f"cannot build the OpenEnv venv at {venv}: {exc}"
    return None


def scaffold_echo_env(venv: Path) -> Path:
    """``openenv init echo_env`` into a cache dir beside the venv, reused (else skip)."""
    env_dir, problem = _scaffolded(venv)
    if problem is not None:
        pytest.skip(problem)
    return env_dir


@cache
def _scaffolded(venv: Path) -> tuple[Path, str | None]:
    env_dir = venv.parent / "scaffold" / ENV_NAME
    if (env_dir / "server" / "app.py").exists():
        return env_dir, None
    env_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=env_dir.parent) as tmp:
        try:
            init = subprocess.run(
                [str(venv / "bin" / "openenv"), "init", ENV_NAME, "--output-dir", tmp],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return env_dir, f"openenv init {ENV_NAME} failed: {exc}"
        if init.returncode != 0:
            return env_dir, f"openenv init {ENV_NAME} failed: {_tail(init.stdout + init.stderr)}"
        shutil.rmtree(env_dir, ignore_errors=True)
        (Path(tmp) / ENV_NAME).rename(env_dir)
    return env_dir, None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class OpenEnvServer:
    """One uvicorn process serving the scaffolded env; ``kill()`` ends it like a crash."""

    def __init__(self, venv: Path, env_dir: Path, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        command = [
            str(venv / "bin" / "python"),
            "-m",
            "uvicorn",
            "server.app:app",
            "--app-dir",
            str(env_dir),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
        ]
        env = {**os.environ, "ENABLE_WEB_INTERFACE": "false"}
        env.pop("PYTHONPATH", None)
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, cwd=env_dir, env=env, stdout=log, stderr=subprocess.STDOUT
            )

    def wait_healthy(self, timeout: float = 240.0) -> None:  # only bounds a failing start
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the OpenEnv server exited early: {_tail(self.log_path.read_text())}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        pytest.fail(f"the OpenEnv server was not healthy within {timeout:g}s")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@contextmanager
def running_openenv_server(log_dir: Path) -> Iterator[OpenEnvServer]:
    """Start the scaffolded echo env, wait for ``/health``, and kill it afterwards."""
    venv = openenv_venv()
    env_dir = scaffold_echo_env(venv)
    server = OpenEnvServer(venv, env_dir, log_dir / f"openenv-{os.getpid()}-{time.time_ns()}.log")
    try:
        server.wait_healthy()
        yield server
    finally:
        server.kill()


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
