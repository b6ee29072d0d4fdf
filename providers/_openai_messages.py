"""The OpenAI message helpers' old, private address: they are public in
:mod:`providers.openai_messages`, which the adapters and the importers both import."""

from __future__ import annotations

from providers.openai_messages import (
    PROVIDER,
    chat_messages,
    chat_tools,
    layout_parts,
    responses_input,
    responses_tools,
)

__all__ = [
    "PROVIDER",
    "chat_messages",
    "chat_tools",
    "layout_parts",
    "responses_input",
    "responses_tools",
]
