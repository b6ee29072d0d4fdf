"""Any client built on the OpenAI, Anthropic or Google GenAI SDKs, or on litellm (aider,
mini-swe-agent, the OpenAI Agents SDK, scripts): their base-URL variables point at the proxy."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentrunner.record.clients import Redirect

name = "sdk"
programs: frozenset[str] = frozenset()
summary = (
    "OpenAI/Anthropic/Google GenAI SDKs and litellm: ANTHROPIC_BASE_URL, OPENAI_BASE_URL,"
    " OPENAI_API_BASE, GOOGLE_GEMINI_BASE_URL"
)
volatile: tuple[tuple[str, str], ...] = ()


def redirect(command: list[str], environ: Mapping[str, str], proxy: str, cwd: Path) -> Redirect:
    found = {
        "anthropic": environ.get("ANTHROPIC_BASE_URL"),
        "openai": environ.get("OPENAI_BASE_URL") or environ.get("OPENAI_API_BASE"),
        "gemini": environ.get("GOOGLE_GEMINI_BASE_URL"),
    }
    changed = {
        "ANTHROPIC_BASE_URL": f"{proxy}/anthropic",
        "OPENAI_BASE_URL": f"{proxy}/openai",
        "OPENAI_API_BASE": f"{proxy}/openai",
        "GOOGLE_GEMINI_BASE_URL": f"{proxy}/gemini",
    }
    return Redirect(
        client=name,
        command=list(command),
        environ={**environ, **changed},
        upstreams={family: url for family, url in found.items() if url},
        notes=[f"{key}={value}" for key, value in changed.items()],
    )
