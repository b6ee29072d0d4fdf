"""Codex CLI: the active model provider comes from ``$CODEX_HOME/config.toml`` (profiles
included) and ``-c`` overrides; ``-c`` overrides added after the program point that provider
at the proxy. A custom provider keeps its ``base_url`` as the upstream and is kept on HTTP
(``supports_websockets=false``: its answers then come as SSE the proxy records); the built-in
``openai`` provider is redirected through ``openai_base_url``, and its WebSocket attempts are
forwarded unrecorded until it falls back to HTTP."""

from __future__ import annotations

import itertools
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrunner.record.clients import Redirect, sdk

name = "codex"
programs = frozenset({"codex"})
summary = "Codex CLI: -c model_providers.NAME.base_url=... (or -c openai_base_url=...)"
BUILT_IN = "openai"
volatile: tuple[tuple[str, str], ...] = ()


def _config(environ: Mapping[str, str]) -> dict[str, Any]:
    home = Path(environ.get("CODEX_HOME") or Path(environ.get("HOME") or Path.home()) / ".codex")
    try:
        return tomllib.loads((home / "config.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _overrides(command: list[str]) -> tuple[dict[str, Any], str | None]:
    """The ``-c key=value`` overrides (TOML values) and the ``--profile`` of a command line."""
    found: dict[str, Any] = {}
    profile = None
    for flag, value in itertools.pairwise(command):
        if flag in ("-c", "--config") and "=" in value:
            key, text = value.split("=", 1)
            try:
                found[key.strip()] = tomllib.loads(f"v = {text}")["v"]
            except tomllib.TOMLDecodeError:
                found[key.strip()] = text
        elif flag in ("-p", "--profile"):
            profile = value
    return found, profile


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    config = _config(environ)
    overrides, profile = _overrides(command)
    profile = profile or config.get("profile")
    chosen = dict(config.get("profiles", {}).get(profile, {})) if profile else {}
    provider = (
        overrides.get("model_provider")
        or chosen.get("model_provider")
        or config.get("model_provider")
        or BUILT_IN
    )
    target = f"{proxy}/openai"
    if provider == BUILT_IN:
        upstream = overrides.get("openai_base_url") or config.get("openai_base_url")
        added = ["-c", f'openai_base_url="{target}"']
    else:
        table = dict(config.get("model_providers", {}).get(provider, {}))
        upstream = overrides.get(f"model_providers.{provider}.base_url") or table.get("base_url")
        added = [
            "-c", f'model_providers.{provider}.base_url="{target}"',
            "-c", f"model_providers.{provider}.supports_websockets=false",
        ]  # fmt: skip
    upstreams = dict(base.upstreams)
    if isinstance(upstream, str) and upstream:
        upstreams["openai"] = upstream
    return Redirect(
        client=name,
        command=[command[0], *added, *command[1:]],
        environ=base.environ,
        upstreams=upstreams,
        notes=[*base.notes, f"provider {provider!r}", *added[1::2]],
    )
