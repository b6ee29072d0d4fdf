"""``openai-chat:MODEL``: Chat Completions streaming, for OpenAI and any compatible server.

Point it at vLLM, Ollama, llama.cpp or DeepSeek with ``base_url=`` (``--base-url``) or
``OPENAI_BASE_URL``. Reasoning comes from ``delta.reasoning_content`` or
``delta.reasoning`` when the server sends it; tool-call deltas are assembled by their
``index`` (only the first fragment carries the id and name); usage arrives on a last
chunk because the request asks for ``stream_options={"include_usage": True}``.
"""

from __future__ import annotations

import uuid
from typing import Any

from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentTurn
from providers._openai_client import OpenAIAdapter
from providers.openai_messages import chat_messages, chat_tools
from providers.streaming import Fold, SdkStream
from providers.turn_builder import TurnBuilder
from providers.usage import from_openai_chat

REASONING_FIELDS = ("reasoning_content", "reasoning")


class ChatFold:
    """Folds ``chat.completion.chunk`` objects (choice 0) into a turn."""

    def __init__(self) -> None:
        self.service_tier: str | None = None

    def feed(self, chunk: dict[str, Any], builder: TurnBuilder) -> None:
        builder.model = str(chunk.get("model") or builder.model)
        if chunk.get("service_tier"):
            self.service_tier = str(chunk["service_tier"])
        if isinstance(chunk.get("usage"), dict):
            builder.usage = from_openai_chat(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) == 0:
                self._choice(choice, builder)

    def _choice(self, choice: dict[str, Any], b: TurnBuilder) -> None:
        delta = choice.get("delta") or {}
        for name in REASONING_FIELDS:
            if isinstance(delta.get(name), str):
                b.reasoning(delta[name])
                break
        if isinstance(delta.get("content"), str):
            b.text(delta["content"])
        if isinstance(delta.get("refusal"), str):
            b.refusal(delta["refusal"])
        for call in delta.get("tool_calls") or []:
            key = str(call.get("index", 0))
            function = call.get("function") or {}
            # servers that send no id get a unique one (ids must not repeat across turns)
            call_id = str(call.get("id") or f"call_{uuid.uuid4().hex[:16]}_{key}")
            b.start_call(key, call_id, str(function.get("name") or ""))
            if function.get("arguments"):
                b.call_args(key, str(function["arguments"]))
        if choice.get("finish_reason"):
            b.stop_reason = str(choice["finish_reason"])

    def turn(self, builder: TurnBuilder) -> AgentTurn:
        return builder.turn()


class OpenAIChatModel(OpenAIAdapter):
    """``openai-chat:MODEL``: streams ``POST /chat/completions``."""

    provider = "openai-chat"

    def __init__(
        self,
        model: str,
        *,
        max_completion_tokens: int | None = None,
        temperature: float | None = None,
        reasoning_effort: str | None = None,
        extra_body: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        params: dict[str, Any] = {"stream_options": {"include_usage": True}}
        optional = {
            "max_completion_tokens": max_completion_tokens,
            "temperature": temperature,
            "reasoning_effort": reasoning_effort,
            "extra_body": extra_body,
        }
        given = {k: v for k, v in optional.items() if v is not None}
        params.update(given)
        super().__init__(model, params=params, options=given, **options)

    def spec(self) -> dict[str, Any]:
        return {**super().spec(), "api": "chat.completions"}

    def build_request(self, context: AgentContext) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            **self.params,
            **context.params,
            "messages": chat_messages(context.messages),
        }
        if context.tools:
            request["tools"] = chat_tools(context.tools)
        return request

    def open_stream(self, request: dict[str, Any]) -> SdkStream:
        stream: SdkStream = self.client.chat.completions.create(stream=True, **request)
        return stream

    def new_fold(self) -> Fold:
        return ChatFold()


def create(name: str, **options: Any) -> OpenAIChatModel:
    """The registry's entry for ``openai-chat:MODEL``."""
    return OpenAIChatModel(name, **options)
