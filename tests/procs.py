"""Finding processes on the host by a marker in their command line (sandbox pids are private)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path


def marker() -> str:
    """A unique word to put in a test process's argv[0] (``exec -a MARKER ...``)."""
    return f"agentrunner-test-{uuid.uuid4().hex[:12]}"


def processes_with(word: str) -> list[int]:
    """Live (not zombie) host processes whose command line holds ``word``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(entry.path, "cmdline").read_bytes()
            state = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if word.encode() in cmdline and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def all_gone(word: str, *, patience: float = 30.0) -> bool:
    """Whether every process holding ``word`` is gone (SIGKILL is delivered asynchronously;
    ``patience`` only bounds a failing test, a passing one returns at once)."""
    deadline = time.monotonic() + patience
    while processes_with(word):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
