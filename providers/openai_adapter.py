"""``openai:MODEL``: the OpenAI Responses API, streamed and recorded chunk by chunk.

Stateless multi-turn: every request is sent with ``store=False`` and
``include=["reasoning.encrypted_content"]``, and carries the whole history, the previous
turns' reasoning items passed back verbatim next to their function calls (see
:mod:`providers.openai_messages`). Chat Completions and OpenAI-compatible servers are
``openai-chat:MODEL`` (:mod:`providers.openai_chat`).

Options (``get_model("openai:gpt-5", **options)``): ``api_key`` (else ``OPENAI_API_KEY``),
``base_url`` (else ``OPENAI_BASE_URL``), ``reasoning_effort``, ``reasoning_summary``
(``"auto"`` by default for reasoning models, ``None`` to not ask), ``max_output_tokens``,
``temperature``, ``service_tier``, ``extra_body``, ``timeout``, ``max_retries`` (4),
``retry_delay`` / ``retry_max_delay`` (seconds), ``price_provider`` (a genai-prices
provider id, for a proxy in front of OpenAI), ``on_event`` (sees every raw stream event).
"""

from __future__ import annotations

import re
from typing import Any

from agentrunner.values.model import AgentContext
from providers._openai_client import OpenAIAdapter
from providers.openai_chat import OpenAIChatModel
from providers.openai_chat import create as create_chat
from providers.openai_messages import responses_input, responses_tools
from providers.openai_responses import ResponsesFold
from providers.streaming import Fold, SdkStream

_REASONING_MODEL = re.compile(r"^(o\d|gpt-5|codex)", re.IGNORECASE)
_DEFAULT = object()


class OpenAIResponsesModel(OpenAIAdapter):
    """``openai:MODEL``: streams ``POST /responses``."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        reasoning_effort: str | None = None,
        reasoning_summary: Any = _DEFAULT,
        max_output_tokens: int | None = None,
        temperature: float | None = None,
        service_tier: str | None = None,
        extra_body: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        given = {
            "reasoning_effort": reasoning_effort,
            "max_output_tokens": max_output_tokens,
            "temperature": temperature,
            "service_tier": service_tier,
            "extra_body": extra_body,
        }
        recorded = {k: v for k, v in given.items() if v is not None}
        if reasoning_summary is _DEFAULT:
            reasoning_summary = "auto" if _REASONING_MODEL.match(model) else None
        else:
            recorded["reasoning_summary"] = reasoning_summary
        reasoning = {"effort": reasoning_effort, "summary": reasoning_summary}
        params: dict[str, Any] = {"store": False, "include": ["reasoning.encrypted_content"]}
        optional = {
            "reasoning": {k: v for k, v in reasoning.items() if v is not None} or None,
            "max_output_tokens": max_output_tokens,
            "temperature": temperature,
            "service_tier": service_tier,
            "extra_body": extra_body,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(model, params=params, options=recorded, **options)

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "api": "responses"}

    def build_request(self, context: AgentContext) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            **self.params,
            **context.params,
            "input": responses_input(context.messages),
        }
        if context.tools:
            request["tools"] = responses_tools(context.tools)
        return request

    def open_stream(self, request: dict[str, Any]) -> SdkStream:
        stream: SdkStream = self.client.responses.create(stream=True, **request)
        return stream

    def new_fold(self) -> Fold:
        return ResponsesFold(self.server)


def create(name: str, **options: Any) -> OpenAIResponsesModel:
    """The registry's entry for ``openai:MODEL`` (the Responses API)."""
    return OpenAIResponsesModel(name, **options)


__all__ = ["OpenAIChatModel", "OpenAIResponsesModel", "create", "create_chat"]
