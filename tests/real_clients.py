"""The real agent CLIs for tests, installed from npm by ``.ci/run`` outside the repository.

``$AGENTRUNNER_CLIENTS`` (default ``~/.cache/agentrunner-clients``) holds ``node_modules``;
a test that needs a client it lacks is skipped with the reason. The Python agents (aider,
mini-swe-agent, the OpenAI Agents SDK) live in a venv of their own, ``$AGENTRUNNER_AGENTS_VENV``
(default ``~/.cache/agentrunner-agents/venv``), built when missing. Each client runs offline
against a loopback upstream, with a home folder of its own (see the notes on real clients).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLIENTS = Path(
    os.environ.get("AGENTRUNNER_CLIENTS") or Path.home() / ".cache" / "agentrunner-clients"
)
BIN = CLIENTS / "node_modules" / ".bin"


def client(name: str) -> Path:
    """The installed CLI ``name`` (``claude``, ``codex``), or skip."""
    path = BIN / name
    if not path.exists() or shutil.which("node") is None:
        pytest.skip(f"{name} is not installed in {CLIENTS} (.ci/run installs it from npm)")
    return path


def scratch_repo(path: Path, files: dict[str, str]) -> Path:
    """A git repository with ``files`` committed."""
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text, encoding="utf-8")
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run([*git, "add", "."], cwd=path, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=path, check=True)
    return path


def claude_env(home: Path) -> dict[str, str]:
    """What Claude Code needs to run in print mode offline, as root, in a test."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "HOME": str(home),
        "ANTHROPIC_API_KEY": "sk-ant-test-claude-code-0123456789",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "IS_SANDBOX": "1",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }


AGENTS_VENV = Path(
    os.environ.get("AGENTRUNNER_AGENTS_VENV")
    or Path.home() / ".cache" / "agentrunner-agents" / "venv"
)
AGENTS = ("mini-swe-agent==2.4.6", "aider-chat==0.86.2", "openai-agents==0.10.5")
"""The Python agent clients, pinned, in one venv of their own outside the repository (their
dependencies conflict with the project's): aider pins ``openai==2.20.0``, which caps the
OpenAI Agents SDK at 0.10.5 (0.11 and later need ``openai>=2.26``)."""
_AGENTS_PROBE = (
    "import importlib.metadata as m, sys\n"
    "wanted = dict(p.split('==') for p in sys.argv[1:])\n"
    "found = {n: m.version(n) for n in wanted}\n"
    "assert found == wanted, f'installed {found}, pinned {wanted}'\n"
)


def prepare_agents() -> str | None:
    """Builds the agents' venv when it is missing; why it cannot be had, or None."""
    return _agents_venv(str(AGENTS_VENV))


def agent_program(name: str) -> Path:
    """``name`` (``mini``, ``aider``, ``python``) in the agents' venv, built when missing (else
    skip with the reason)."""
    problem = _agents_venv(str(AGENTS_VENV))
    if problem is not None:
        pytest.skip(problem)
    return AGENTS_VENV / "bin" / name


@functools.cache  # one build attempt per run: a failed install is not retried for every test
def _agents_venv(path: str) -> str | None:
    python = Path(path) / "bin" / "python"
    if not python.exists():
        try:
            for command in (
                [sys.executable, "-m", "venv", path],
                [str(python), "-m", "pip", "install", "-q", *AGENTS],
            ):
                subprocess.run(command, capture_output=True, text=True, check=True, timeout=900)
        except subprocess.CalledProcessError as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build the agents' venv at {path}: {exc.stderr.strip()[-300:]}"
        except (OSError, subprocess.TimeoutExpired) as exc:
            shutil.rmtree(path, ignore_errors=True)
            return f"cannot build the agents' venv at {path}: {exc}"
    probe = subprocess.run(
        [str(python), "-c", _AGENTS_PROBE, *AGENTS], capture_output=True, text=True, timeout=120
    )
    if probe.returncode != 0:
        return f"the agents' venv at {path} is not usable: {probe.stderr.strip()[-300:]}"
    return None
