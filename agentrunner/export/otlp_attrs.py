"""OTLP export, attributes: span attribute values as OTLP ``KeyValue`` s, and the GenAI /
OpenInference names of a model call's provider, request parameters and token usage."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openinference.semconv.trace import SpanAttributes as OI
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

from agentrunner.values.events import Usage
from agentrunner.values.redaction import Redactor, scrub

Attributes = dict[str, Any]
"""Span attributes before they become OTLP ``KeyValue`` s: str, bool, int, float, or a list
of str; a None value is left out."""

PROVIDERS = {
    "openai": "openai",
    "anthropic": "anthropic",
    "gemini": "gcp.gemini",
    "google": "gcp.gemini",
    "mistral": "mistral_ai",
    "groq": "groq",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "bedrock": "aws.bedrock",
}
"""agentrunner's provider names -> the GenAI conventions' ``gen_ai.provider.name`` values
(any other name is kept as recorded)."""

PARAMETERS = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "max_output_tokens": "gen_ai.request.max_tokens",
    "max_tokens": "gen_ai.request.max_tokens",
    "max_completion_tokens": "gen_ai.request.max_tokens",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",
    "reasoning_effort": "gen_ai.request.reasoning.effort",
}
"""Request parameters the GenAI conventions name (all of them are also in OpenInference's
``llm.invocation_parameters``, as recorded)."""


def any_value(value: Any) -> AnyValue:
    match value:
        case bool():
            return AnyValue(bool_value=value)
        case int():
            return AnyValue(int_value=value)
        case float():
            return AnyValue(double_value=value)
        case str():
            return AnyValue(string_value=value)
        case list() | tuple():
            return AnyValue(array_value=ArrayValue(values=[any_value(v) for v in value]))
    return AnyValue(string_value=str(value))


def key_values(attributes: Mapping[str, Any], redactor: Redactor | None = None) -> list[KeyValue]:
    """Attributes as OTLP ``KeyValue`` s (None values left out), every string made one
    protobuf can carry (no lone surrogate) and, with ``redactor``, cleared of the secrets it
    knows (a store recorded where a key was not known)."""
    clean, _ = scrub(dict(attributes), redactor)
    return [
        KeyValue(key=key, value=any_value(value))
        for key, value in clean.items()
        if value is not None
    ]


def provider_name(provider: str) -> str:
    return PROVIDERS.get(provider, provider)


def request_parameters(params: Mapping[str, Any]) -> Attributes:
    """The request parameters the GenAI conventions name (a single stop string made a list)."""
    out: Attributes = {}
    for name, value in params.items():
        key = PARAMETERS.get(name)
        if key is None or value is None or isinstance(value, dict):
            continue
        if key == "gen_ai.request.stop_sequences" and isinstance(value, str):
            value = [value]
        out[key] = value
    return out


def usage_attributes(usage: Usage) -> Attributes:
    """A call's ``usage`` event in both conventions; an unknown count (None) is left out,
    never written as 0. Input tokens include the cached ones, as recorded."""
    known = [n for n in (usage.input_tokens, usage.output_tokens) if n is not None]
    return {
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
        "gen_ai.usage.reasoning.output_tokens": usage.reasoning_tokens,
        OI.LLM_TOKEN_COUNT_PROMPT: usage.input_tokens,
        OI.LLM_TOKEN_COUNT_COMPLETION: usage.output_tokens,
        OI.LLM_TOKEN_COUNT_TOTAL: sum(known) if known else None,
        OI.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_READ: usage.cache_read_tokens,
        OI.LLM_TOKEN_COUNT_PROMPT_DETAILS_CACHE_WRITE: usage.cache_write_tokens,
        OI.LLM_TOKEN_COUNT_COMPLETION_DETAILS_REASONING: usage.reasoning_tokens,
        OI.LLM_COST_TOTAL: usage.cost_usd,
        "agentrunner.cost_usd": usage.cost_usd,
    }
