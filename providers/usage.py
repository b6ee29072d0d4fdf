"""Token usage normalised into ``AgentUsage``, priced offline with genai-prices.

``input_tokens`` always includes cached tokens (read and written), whatever the provider
reports; ``cost_usd`` comes from the price table bundled with the installed genai-prices
(never fetched over the network) and is ``None`` when the model or provider is unknown.
"""

from __future__ import annotations

from typing import Any

from agentrunner.values.types import AgentUsage


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) else 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def from_openai_responses(usage: dict[str, Any]) -> AgentUsage:
    """Responses API ``usage`` (input includes cached tokens already)."""
    details = _dict(usage.get("input_tokens_details"))
    return AgentUsage(
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cache_read_tokens=_int(details.get("cached_tokens")),
        cache_write_tokens=_int(details.get("cache_write_tokens")),
        reasoning_tokens=_int(_dict(usage.get("output_tokens_details")).get("reasoning_tokens")),
    )


def from_openai_chat(usage: dict[str, Any]) -> AgentUsage:
    """Chat Completions ``usage`` (OpenAI's cached_tokens, or DeepSeek's cache-hit tokens)."""
    details = _dict(usage.get("prompt_tokens_details"))
    cache_read = _int(details.get("cached_tokens")) or _int(usage.get("prompt_cache_hit_tokens"))
    return AgentUsage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cache_read_tokens=cache_read,
        cache_write_tokens=_int(details.get("cache_write_tokens")),
        reasoning_tokens=_int(
            _dict(usage.get("completion_tokens_details")).get("reasoning_tokens")
        ),
    )


def from_anthropic(usage: dict[str, Any]) -> AgentUsage:
    """Messages API ``usage``: its ``input_tokens`` excludes the cache, so add it back."""
    read = _int(usage.get("cache_read_input_tokens"))
    write = _int(usage.get("cache_creation_input_tokens"))
    return AgentUsage(
        input_tokens=_int(usage.get("input_tokens")) + read + write,
        output_tokens=_int(usage.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=_int(_dict(usage.get("output_tokens_details")).get("thinking_tokens")),
    )


def priced(
    usage: AgentUsage,
    model: str,
    *,
    provider_id: str | None = None,
    api_url: str | None = None,
    service_tier: str | None = None,
) -> AgentUsage:
    """``usage`` with ``cost_usd`` and ``price_source`` filled from genai-prices' bundled table.

    The provider is named by ``provider_id`` or recognised from ``api_url``; an unknown
    model or provider leaves the cost ``None``.
    """
    import genai_prices

    if provider_id is None and api_url is None:
        return usage
    if usage.input_tokens is None or usage.output_tokens is None:
        return usage  # unknown counts have no price
    counts = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        output_tokens=usage.output_tokens,
    )
    context = {"service_tier": service_tier} if service_tier else None
    try:
        if provider_id is not None:
            price = genai_prices.calc_price(
                counts, model, provider_id=provider_id, price_context=context
            )
        else:
            price = genai_prices.calc_price(
                counts, model, provider_api_url=api_url, price_context=context
            )
    except (LookupError, ValueError):
        return usage.model_copy(update={"cost_usd": None, "price_source": None})
    tier = f", {service_tier} tier" if service_tier and service_tier != "default" else ""
    source = (
        f"genai-prices {genai_prices.__version__} (bundled): "
        f"{price.provider.id}/{price.model.id}{tier}"
    )
    return usage.model_copy(update={"cost_usd": float(price.total_price), "price_source": source})
