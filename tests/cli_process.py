"""Run ``agentrunner`` as a user does: in a subprocess of this interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

AGENTRUNNER = [sys.executable, "-m", "agentrunner.cli.main"]


def run_cli(
    *args: str,
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    pace: str = "0",
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """``agentrunner ARGS``: the scripted model at ``pace`` seconds a chunk (none by default),
    no ``$AGENTRUNNER_DB`` (commands name their store), then ``env`` on top (None removes a
    variable)."""
    full = {**os.environ, "AGENTRUNNER_SCRIPTED_PACE": pace}
    full.pop("AGENTRUNNER_DB", None)
    for name, value in (env or {}).items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    return subprocess.run(
        [*AGENTRUNNER, *args],
        capture_output=True,
        text=True,
        env=full,
        cwd=cwd,
        timeout=timeout,
    )


def last_json(stdout: str) -> Any:
    """The last line of a command's output, as JSON (``--json`` prints it last)."""
    return json.loads(stdout.strip().splitlines()[-1])
