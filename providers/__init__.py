"""Model adapters, loaded lazily by name: ``get_model("scripted:demo")``.

A spec is ``PROVIDER:MODEL``. Each provider lives in its own module (named so that it never
shadows an SDK) and is imported only when asked for, so the core never imports an SDK.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentrunner.errors import UsageError
from agentrunner.model import Model

PROVIDERS: dict[str, str] = {
    "scripted": "providers.scripted",
    "openai": "providers.openai_adapter",  # the Responses API
    "openai-chat": "providers._openai_chat",  # Chat Completions, OpenAI-compatible servers
    "anthropic": "providers.anthropic_adapter",  # the Messages API
}


def get_model(spec: str, **options: Any) -> Model:
    """Build the model adapter for ``spec`` (e.g. ``scripted:demo``)."""
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise UsageError(f"model spec {spec!r} must look like PROVIDER:MODEL, e.g. scripted:demo")
    module_name = PROVIDERS.get(provider)
    if module_name is None:
        known = ", ".join(sorted(PROVIDERS))
        raise UsageError(f"unknown model provider {provider!r} in {spec!r}; known: {known}")
    module = importlib.import_module(module_name)
    model: Model = module.create(name, **options)
    return model


__all__ = ["PROVIDERS", "get_model"]
