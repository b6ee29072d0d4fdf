"""Prices for imported usage: the genai-prices provider a model name means, and a cost for a
model call whose source recorded none.

Agents write model names in several ways: bare (``claude-sonnet-4``, ``gpt-4o``), litellm style
(``anthropic/claude-...``, ``openai/gpt-4o``, ``vertex_ai/gemini-...``) or as OpenRouter ids.
genai-prices lists a model under its provider and its bare name, so the prefix has to go, and
a bare name has to say its provider by its family.
"""

from __future__ import annotations

from agentrunner.values.types import AgentUsage
from providers.usage import priced

PROVIDER_PREFIXES = {
    "anthropic": "anthropic",
    "azure": "azure",
    "bedrock": "aws",
    "cerebras": "cerebras",
    "cohere": "cohere",
    "deepseek": "deepseek",
    "fireworks": "fireworks",
    "fireworks_ai": "fireworks",
    "gemini": "google",
    "google": "google",
    "groq": "groq",
    "mistral": "mistral",
    "moonshot": "moonshotai",
    "moonshotai": "moonshotai",
    "openai": "openai",
    "openrouter": "openrouter",
    "perplexity": "perplexity",
    "together": "together",
    "together_ai": "together",
    "vertex_ai": "google",
    "x-ai": "x-ai",
    "xai": "x-ai",
    "zai": "zai",
}
"""A model name's ``provider/`` prefix -> the provider's id in genai-prices."""

MODEL_FAMILIES = (
    ("claude", "anthropic"),
    ("gpt", "openai"),
    ("chatgpt", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("gemini", "google"),
    ("deepseek", "deepseek"),
    ("mistral", "mistral"),
    ("codestral", "mistral"),
    ("devstral", "mistral"),
    ("magistral", "mistral"),
    ("codex", "openai"),
    ("grok", "x-ai"),
)
"""A bare model name's start -> its provider (short ones such as ``o1`` only as a whole word)."""


def provider_of(model: str) -> tuple[str | None, str]:
    """The provider a model name tells (None when it tells none), and the name that provider
    lists it under."""
    head, slash, rest = model.partition("/")
    if slash and head.lower() in PROVIDER_PREFIXES:
        return PROVIDER_PREFIXES[head.lower()], rest
    name = model.rsplit("/", 1)[-1]
    low = name.lower()
    for family, provider in MODEL_FAMILIES:
        if low.startswith(family) and (len(family) > 2 or low[2:3] in ("", "-")):
            return provider, name
    return None, model


def with_cost(usage: AgentUsage, model: str | None, provider: str | None = None) -> AgentUsage:
    """``usage`` with a cost from genai-prices' bundled table when the source recorded none.

    ``provider`` is what the source says served the model (Codex's ``model_provider``, an
    OpenRouter model class); without it the model's name tells. OpenRouter lists models by
    their whole ids (``anthropic/claude-...``), so those keep their prefix.
    """
    if usage.cost_usd is not None or not (usage.input_tokens or usage.output_tokens):
        return usage
    if not model:
        return usage
    told, name = provider_of(model)
    if provider == "openrouter":
        name = model
    provider = provider or told
    return priced(usage, name, provider_id=provider) if provider else usage
