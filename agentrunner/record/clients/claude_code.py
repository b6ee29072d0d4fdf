"""Claude Code (and the Claude Agent SDK, which runs it): settings files win over the
environment, so a gateway named in them is the upstream, and ``--settings`` on the command
line (which wins over every settings file) points it at the proxy; the environment too."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrunner.record.clients import Redirect, sdk

name = "claude-code"
programs = frozenset({"claude"})
summary = 'Claude Code: --settings \'{"env": {"ANTHROPIC_BASE_URL": ...}}\' and the environment'
volatile: tuple[tuple[str, str], ...] = ()


def settings_files(environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """The settings files Claude Code reads, lowest precedence first."""
    home = Path(environ.get("HOME") or Path.home())
    config = (
        Path(environ["CLAUDE_CONFIG_DIR"]) if environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    )
    return [
        config / "settings.json",
        cwd / ".claude" / "settings.json",
        cwd / ".claude" / "settings.local.json",
    ]


def _gateway(path: Path) -> str | None:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    env = data.get("env") if isinstance(data, dict) else None
    url = env.get("ANTHROPIC_BASE_URL") if isinstance(env, dict) else None
    return url if isinstance(url, str) and url else None


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    upstreams = dict(base.upstreams)
    notes = list(base.notes)
    for path in settings_files(environ, cwd):
        url = _gateway(path)
        if url is not None:
            upstreams["anthropic"] = url  # a later file wins, as in Claude Code
            notes.append(f"{path} names the gateway {url}")
    settings = json.dumps({"env": {"ANTHROPIC_BASE_URL": f"{proxy}/anthropic"}})
    notes.append(f"--settings {settings}")
    return Redirect(
        client=name,
        command=[command[0], "--settings", settings, *command[1:]],
        environ=base.environ,
        upstreams=upstreams,
        notes=notes,
    )
