"""The real agent CLIs for tests, installed from npm by ``.ci/run`` outside the repository.

``$AGENTRUNNER_CLIENTS`` (default ``~/.cache/agentrunner-clients``) holds ``node_modules``;
a test that needs a client it lacks is skipped with the reason. Each client runs offline
against a loopback upstream, with a home folder of its own (see the notes on real clients).
"""

from __future__ import annotations

import os
import shutil
import subprocess
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
