"""The wire APIs the recorder reads: a registry from an API's name to its module, and the
rule that tells a request's API from its path (loaded on first use)."""

from __future__ import annotations

import importlib
from typing import cast

from agentrunner.record.dialects.base import Dialect

DIALECTS = {
    "anthropic-messages": "agentrunner.record.dialects.anthropic",
    "openai-chat": "agentrunner.record.dialects.openai_chat",
    "openai-responses": "agentrunner.record.dialects.openai_responses",
    "gemini": "agentrunner.record.dialects.gemini",
}
_BY_PATH = (
    ("/messages", "anthropic-messages"),
    ("/chat/completions", "openai-chat"),
    ("/responses", "openai-responses"),
    (":generateContent", "gemini"),
    (":streamGenerateContent", "gemini"),
)


def dialect(api: str) -> Dialect:
    """The dialect of ``api`` (a name in :data:`DIALECTS`)."""
    try:
        module = DIALECTS[api]
    except KeyError:
        raise ValueError(f"unknown API {api!r}; known: {', '.join(DIALECTS)}") from None
    return cast(Dialect, importlib.import_module(module))


def api_of(method: str, path: str) -> str | None:
    """The API a request is a model call of (None: anything else, forwarded unrecorded)."""
    if method != "POST":
        return None
    path = path.rstrip("/")
    for suffix, api in _BY_PATH:
        if path.endswith(suffix):
            return api
    return None
