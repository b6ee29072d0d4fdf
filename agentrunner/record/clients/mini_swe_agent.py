"""mini-swe-agent (``mini``): litellm reads ``OPENAI_BASE_URL`` / ``OPENAI_API_BASE`` (and
``ANTHROPIC_BASE_URL``) from the environment, which mini fills from its global config file
(``$MSWEA_GLOBAL_CONFIG_DIR/.env``, by default ``~/.config/mini-swe-agent/.env``) without
overriding what the environment already holds. So the upstream is the environment's, else
that file's; the proxy is handed over in the environment, which wins over the file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrunner.record.clients import Redirect, env_file_value, sdk

name = "mini-swe-agent"
programs = frozenset({"mini", "mini-swe-agent", "mini-extra"})
summary = "mini-swe-agent: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, also from its global .env"
volatile: tuple[tuple[str, str], ...] = ()
VARIABLES = {"openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"), "anthropic": ("ANTHROPIC_BASE_URL",)}


def env_file(environ: Mapping[str, str]) -> Path:
    if environ.get("MSWEA_GLOBAL_CONFIG_DIR"):
        return Path(environ["MSWEA_GLOBAL_CONFIG_DIR"]) / ".env"
    home = Path(environ.get("HOME") or Path.home())
    config = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    return config / "mini-swe-agent" / ".env"


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    upstreams, notes = dict(base.upstreams), list(base.notes)
    path = env_file(environ)
    for family, names in VARIABLES.items():
        if family in upstreams:
            continue
        found = next((v for v in (env_file_value(path, n) for n in names) if v), None)
        if found:
            upstreams[family] = found
            notes.append(f"{path} names the {family} upstream {found}")
    return Redirect(
        client=name,
        command=list(command),
        environ=base.environ,
        upstreams=upstreams,
        notes=notes,
    )
