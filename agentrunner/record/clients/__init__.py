"""Client adapters: how each agent CLI is pointed at the proxy as its user configured it.

One small module per client, found by the command's program name (the registry is a mapping
and one function, loaded on first use). Each tells the upstream the client would have used
(from its own configuration files first, then its environment) and the command line and
environment that send it to the proxy instead, without changing any file of the user's.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

CLIENTS = {
    "claude-code": "agentrunner.record.clients.claude_code",
    "codex": "agentrunner.record.clients.codex",
    "gemini-cli": "agentrunner.record.clients.gemini_cli",
    "opencode": "agentrunner.record.clients.opencode",
    "aider": "agentrunner.record.clients.aider",
    "mini-swe-agent": "agentrunner.record.clients.mini_swe_agent",
    "sdk": "agentrunner.record.clients.sdk",
}
"""Adapter name -> module; ``sdk`` (the OpenAI and Anthropic SDKs' and litellm's variables)
takes any command the others do not claim."""


@dataclass(frozen=True)
class Redirect:
    """What running a client through the proxy changes, and where its calls would have gone."""

    client: str
    command: list[str]
    environ: dict[str, str]
    upstreams: dict[str, str] = field(default_factory=dict)
    """API family -> the upstream the client's own configuration names (absent: not set)."""
    notes: list[str] = field(default_factory=list)
    """What the adapter read and changed, for ``--dry-run``."""


class Client(Protocol):
    name: str
    programs: frozenset[str]
    summary: str
    volatile: tuple[tuple[str, str], ...]
    """(regex, replacement) pairs for text the client writes differently on every run (a
    replay compares requests without them)."""

    def redirect(
        self, command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path
    ) -> Redirect:
        """``command`` pointed at the proxy at ``proxy`` (``http://127.0.0.1:PORT``)."""
        ...


def env_file_value(path: Path, key: str) -> str | None:
    """``key``'s value in a dotenv file (``KEY=value``, optionally ``export`` and quoted)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        stripped = line.strip().removeprefix("export ").strip()
        if stripped.startswith(f"{key}="):
            value = stripped.split("=", 1)[1].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            return value or None
    return None


def client(name: str) -> Client:
    try:
        return cast(Client, importlib.import_module(CLIENTS[name]))
    except KeyError:
        raise ValueError(f"no client adapter {name!r}; known: {', '.join(CLIENTS)}") from None


def client_for(command: list[str]) -> Client:
    """The adapter of the program ``command`` runs (``sdk`` for any other)."""
    program = Path(command[0]).name if command else ""
    for name in CLIENTS:
        found = client(name)
        if program in found.programs:
            return found
    return client("sdk")
