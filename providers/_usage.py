"""The usage helpers' old, private address: they are public in :mod:`providers.usage`, which the
adapters and the importers both import."""

from __future__ import annotations

from providers.usage import from_anthropic, from_openai_chat, from_openai_responses, priced

__all__ = ["from_anthropic", "from_openai_chat", "from_openai_responses", "priced"]
