"""Model adapters, loaded lazily by name: ``get_model("scripted:demo")``.

A spec is ``PROVIDER:MODEL``. Each provider lives in its own module (named so that it never
shadows an SDK) and is imported only when asked for, so the core never imports an SDK.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from agentrunner.values.errors import UsageError
from agentrunner.values.model import Model

PROVIDERS: dict[str, str] = {
    "scripted": "providers.scripted",
    "openai": "providers.openai_adapter",  # the Responses API
    "openai-chat": "providers.openai_chat",  # Chat Completions, OpenAI-compatible servers
    "anthropic": "providers.anthropic_adapter",  # the Messages API
}


# Provider-neutral model options (what the CLI offers) -> each adapter's own option name.
# A provider missing from an entry does not take that option.
MODEL_OPTIONS: dict[str, dict[str, str]] = {
    "reasoning_effort": {"openai": "reasoning_effort", "openai-chat": "reasoning_effort"},
    "thinking": {"anthropic": "thinking"},
    "temperature": {
        "openai": "temperature",
        "openai-chat": "temperature",
        "anthropic": "temperature",
    },
    "max_output_tokens": {
        "openai": "max_output_tokens",
        "openai-chat": "max_completion_tokens",
        "anthropic": "max_tokens",
    },
    "price_provider": {
        "openai": "price_provider",
        "openai-chat": "price_provider",
        "anthropic": "price_provider",
    },
}


def unsupported_options(spec: str, names: Iterable[str]) -> list[str]:
    """Those of the neutral option ``names`` that the provider of ``spec`` does not take."""
    provider = spec.partition(":")[0]
    return [n for n in names if provider not in MODEL_OPTIONS.get(n, {})]


def adapter_options(spec: str, **options: Any) -> dict[str, Any]:
    """Neutral model options (``None``: not given) in the adapter's own names, e.g.
    ``max_output_tokens`` is ``max_completion_tokens`` for ``openai-chat`` and ``max_tokens``
    for ``anthropic``. An option the provider does not take is a ``UsageError``."""
    given = {k: v for k, v in options.items() if v is not None}
    refused = unsupported_options(spec, given)
    if refused:
        provider = spec.partition(":")[0]
        raise UsageError(f"{provider} models do not take the option(s) {', '.join(refused)}")
    provider = spec.partition(":")[0]
    return {MODEL_OPTIONS[k][provider]: v for k, v in given.items()}


def model_from_spec(spec: Mapping[str, Any], **overrides: Any) -> Model:
    """Build again the adapter an episode recorded (``model.spec()`` in ``episode.start``):
    same model, base URL and options, with ``overrides`` (adapter option names) on top."""
    options = {**(spec.get("options") or {}), **overrides}
    if spec.get("base_url"):
        options.setdefault("base_url", spec["base_url"])
    return get_model(str(spec["spec"]), **options)


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


__all__ = [
    "MODEL_OPTIONS",
    "PROVIDERS",
    "adapter_options",
    "get_model",
    "model_from_spec",
    "unsupported_options",
]
