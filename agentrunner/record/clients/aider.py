"""aider: it reads its OpenAI-compatible base URL from ``--openai-api-base`` on the command
line, the environment (``AIDER_OPENAI_API_BASE``, ``OPENAI_API_BASE``) or an
``.aider.conf.yml`` (in the home folder, the repository's top, the working folder; the later
wins), in that order of strength. The upstream is read the same way; the proxy is handed over
in the environment (``AIDER_OPENAI_API_BASE`` beats every config file, and the SDK variables
litellm reads), or in place of the command line's ``--openai-api-base`` value: no file
changes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from agentrunner.record.clients import Redirect, sdk

name = "aider"
programs = frozenset({"aider"})
summary = "aider: --openai-api-base, AIDER_OPENAI_API_BASE / OPENAI_API_BASE, .aider.conf.yml"
volatile: tuple[tuple[str, str], ...] = ()
OPTION = "--openai-api-base"


def config_files(environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """The ``.aider.conf.yml`` files aider reads, weakest first."""
    home = Path(environ.get("HOME") or Path.home())
    top = next((f for f in (cwd, *cwd.parents) if (f / ".git").exists()), None)
    found = [home / ".aider.conf.yml"]
    if top is not None:
        found.append(top / ".aider.conf.yml")
    found.append(cwd / ".aider.conf.yml")
    return list(dict.fromkeys(found))


def _from_config(path: Path) -> str | None:
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    value = data.get("openai-api-base") if isinstance(data, dict) else None
    return value if isinstance(value, str) and value else None


def _from_command(command: list[str]) -> tuple[str | None, int | None]:
    """The ``--openai-api-base`` value on the command line and the index of the word that
    holds it (the last one given wins)."""
    found: tuple[str | None, int | None] = (None, None)
    for i, word in enumerate(command):
        if word == OPTION and i + 1 < len(command):
            found = (command[i + 1], i + 1)
        elif word.startswith(f"{OPTION}="):
            found = (word.split("=", 1)[1], i)
    return found


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    upstreams, notes = dict(base.upstreams), list(base.notes)
    target = f"{proxy}/openai"
    given, at = _from_command(command)
    found = given or environ.get("AIDER_OPENAI_API_BASE") or base.upstreams.get("openai")
    where = "the command line" if given else "the environment"
    if not found:
        for path in config_files(environ, cwd):
            value = _from_config(path)
            if value:
                found, where = value, str(path)
    if found:
        upstreams["openai"] = found
        notes.append(f"{where} names the upstream {found}")
    out = list(command)
    if at is not None:
        out[at] = target if out[at] == given else f"{OPTION}={target}"
        notes.append(f"{OPTION} {target}")
    notes.append(f"AIDER_OPENAI_API_BASE={target}")
    return Redirect(
        client=name,
        command=out,
        environ={**base.environ, "AIDER_OPENAI_API_BASE": target},
        upstreams=upstreams,
        notes=notes,
    )
