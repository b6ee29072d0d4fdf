"""Gemini CLI (``gemini``): it calls the Gemini API at ``GOOGLE_GEMINI_BASE_URL`` (its API-key
auth). A value set in its environment wins over the ``.env`` file it loads (the first of
``.gemini/.env`` or ``.env`` from its working folder up, else ``~/.gemini/.env`` or
``~/.env``), so the upstream is read from the environment, then from that file, and the proxy
is handed to it in the environment, as for the SDKs: no file of the user's changes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrunner.record.clients import Redirect, env_file_value, sdk

name = "gemini-cli"
programs = frozenset({"gemini"})
summary = "Gemini CLI: GOOGLE_GEMINI_BASE_URL in the environment (wins over its .env files)"
volatile = ((r"Process Group PGID: \d+", "Process Group PGID: N"),)
"""Its shell tool's results name the command's process group, new on every run."""
VARIABLE = "GOOGLE_GEMINI_BASE_URL"


def env_file(environ: Mapping[str, str], cwd: Path) -> Path | None:
    """The ``.env`` file Gemini CLI would load, if any."""
    for folder in (cwd, *cwd.parents):
        for candidate in (folder / ".gemini" / ".env", folder / ".env"):
            if candidate.is_file():
                return candidate
    home = Path(environ.get("HOME") or Path.home())
    for candidate in (home / ".gemini" / ".env", home / ".env"):
        if candidate.is_file():
            return candidate
    return None


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    upstreams = dict(base.upstreams)
    notes = list(base.notes)
    if "gemini" not in upstreams:
        path = env_file(environ, cwd)
        found = env_file_value(path, VARIABLE) if path is not None else None
        if found:
            upstreams["gemini"] = found
            notes.append(f"{path} names the upstream {found}")
    return Redirect(
        client=name,
        command=list(command),
        environ=base.environ,
        upstreams=upstreams,
        notes=notes,
    )
