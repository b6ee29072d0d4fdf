"""OpenCode (``opencode``): its model provider is named in its configuration, merged from the
global file (``~/.config/opencode/opencode.json[c]``), ``$OPENCODE_CONFIG``, the project's
``opencode.json[c]`` (from the working folder up to the repository's top) and, last and
strongest, ``$OPENCODE_CONFIG_CONTENT``. The upstream is the active provider's ``baseURL``
(the provider of ``--model``/``-m PROVIDER/MODEL``, else of the configuration's ``model``);
the proxy is handed over by adding that provider's ``baseURL`` to ``OPENCODE_CONFIG_CONTENT``
in the child's environment, which OpenCode merges over every file: no file changes.
A provider on ``@ai-sdk/anthropic`` is recorded as Anthropic Messages, any other (the
OpenAI-compatible ones) as OpenAI Chat Completions or Responses."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentrunner.record.clients import Redirect, sdk

name = "opencode"
programs = frozenset({"opencode"})
summary = "OpenCode: the active provider's baseURL, overridden in OPENCODE_CONFIG_CONTENT"
volatile: tuple[tuple[str, str], ...] = ()
VARIABLE = "OPENCODE_CONFIG_CONTENT"
_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/', re.S)


def _jsonc(text: str) -> Any:
    """JSON with comments (OpenCode's ``.jsonc``): comments outside strings dropped."""
    return json.loads(_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else "", text))


def _read(path: Path) -> dict[str, Any]:
    try:
        value = _jsonc(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def config_files(environ: Mapping[str, str], cwd: Path) -> list[Path]:
    """The files OpenCode reads, weakest first."""
    home = Path(environ.get("HOME") or Path.home())
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [
        config_home / "opencode" / n for n in ("config.json", "opencode.json", "opencode.jsonc")
    ]
    if environ.get("OPENCODE_CONFIG"):
        files.append(Path(environ["OPENCODE_CONFIG"]))
    project: list[Path] = []
    for folder in (cwd, *cwd.parents):
        project[:0] = [folder / "opencode.jsonc", folder / "opencode.json"]
        if (folder / ".git").exists():
            break
    return files + project


def configuration(environ: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for path in config_files(environ, cwd):
        if path.is_file():
            merged = _merge(merged, _read(path))
    try:
        inline = json.loads(environ.get(VARIABLE) or "{}")
    except ValueError:
        inline = {}
    return _merge(merged, inline) if isinstance(inline, dict) else merged


def _active(command: list[str], config: dict[str, Any]) -> str | None:
    model = config.get("model")
    for i, arg in enumerate(command):
        if arg in ("--model", "-m") and i + 1 < len(command):
            model = command[i + 1]
        elif arg.startswith("--model="):
            model = arg.split("=", 1)[1]
    return model.split("/", 1)[0] if isinstance(model, str) and "/" in model else None


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    base = sdk.redirect(command, environ, proxy, cwd)
    upstreams, notes = dict(base.upstreams), list(base.notes)
    config = configuration(environ, cwd)
    providers = config.get("provider") if isinstance(config.get("provider"), dict) else {}
    assert isinstance(providers, dict)
    chosen = _active(command, config)
    named = [p for p, v in providers.items() if isinstance(v, dict)]
    provider = chosen if chosen in named else next(iter(named), None)
    environ_out = dict(base.environ)
    if provider is not None:
        spec = providers[provider]
        options = spec.get("options") if isinstance(spec.get("options"), dict) else {}
        url = options.get("baseURL") if isinstance(options, dict) else None
        anthropic = spec.get("npm") == "@ai-sdk/anthropic"
        family = "anthropic" if anthropic else "openai"
        if isinstance(url, str) and url:
            upstreams[family] = url.removesuffix("/").removesuffix("/v1") if anthropic else url
            notes.append(f"provider {provider!r} names the upstream {url}")
        to = f"{proxy}/anthropic/v1" if anthropic else f"{proxy}/openai"
        inline = json.loads(environ.get(VARIABLE) or "{}") if _json(environ.get(VARIABLE)) else {}
        override = {"provider": {provider: {"options": {"baseURL": to}}}}
        environ_out[VARIABLE] = json.dumps(_merge(inline, override))
        notes.append(f"{VARIABLE} sets provider {provider!r} baseURL to {to}")
    environ_out["PWD"] = str(cwd)  # OpenCode takes its project from $PWD, as a shell sets it
    return Redirect(
        client=name,
        command=list(command),
        environ=environ_out,
        upstreams=upstreams,
        notes=notes,
    )


def _json(text: str | None) -> bool:
    try:
        return isinstance(json.loads(text or ""), dict)
    except ValueError:
        return False
