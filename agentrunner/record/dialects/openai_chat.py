"""OpenAI Chat Completions (``POST .../chat/completions``) as the recorder reads it.

Every message of ``messages`` is one message of the chain, kept verbatim; ``role: tool``
messages are the results of the calls the model made before. Chunks are folded by the
native adapter's :class:`~providers.openai_chat.ChatFold`.
"""

from __future__ import annotations

import json
from typing import Any

from agentrunner.record.dialects.base import (
    Split,
    ToolOutput,
    rebuilt,
    role_of,
    split_of,
    text_of,
    tool_spec,
)
from agentrunner.values.types import AgentToolCall, Message, ToolSpec
from providers.openai_chat import ChatFold
from providers.streaming import Fold

api = "openai-chat"
provider = "openai"


def split(body: dict[str, Any], path: str = "") -> Split:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise ValueError("the body has no messages list")
    tools = [_tool(t) for t in body.get("tools") or [] if isinstance(t, dict)]
    return split_of(body, [_message(m) for m in raw_messages], tools, {"messages"})


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message(role="user", raw=raw)
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or []):
        if not isinstance(call, dict):
            continue
        function = call.get("function") or {}
        arguments = function.get("arguments", "{}")
        calls.append(
            AgentToolCall(
                call_id=str(call.get("id") or f"call_{i}"),
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
            )
        )
    reasoning = raw.get("reasoning_content") or raw.get("reasoning")
    return Message(
        role=role_of(raw.get("role")),  # type: ignore[arg-type]
        content=text_of(raw.get("content")),
        reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
        tool_calls=tuple(calls),
        tool_call_id=str(raw["tool_call_id"]) if raw.get("tool_call_id") else None,
        name=str(raw["name"]) if isinstance(raw.get("name"), str) else None,
        raw=raw,
    )


def _tool(raw: dict[str, Any]) -> ToolSpec:
    inner = raw.get("function")
    return tool_spec(raw, inner if isinstance(inner, dict) else raw, "parameters")


def rebuild(
    messages: list[Message], tools: list[ToolSpec], params: dict[str, Any]
) -> dict[str, Any]:
    return rebuilt(messages, tools, params, "messages")


def new_fold() -> Fold:
    return ChatFold()


def whole(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed completion as one chunk carrying all of choice 0."""
    choices = body.get("choices") or [{}]
    first = choices[0] if isinstance(choices[0], dict) else {}
    message = dict(first.get("message") or {})
    message["tool_calls"] = [
        {**call, "index": i} for i, call in enumerate(message.get("tool_calls") or [])
    ]
    return [
        {
            "model": body.get("model"),
            "usage": body.get("usage"),
            "choices": [
                {"index": 0, "delta": message, "finish_reason": first.get("finish_reason")}
            ],
        }
    ]


def tool_outputs(message: Message) -> list[ToolOutput]:
    if message.role != "tool" or message.tool_call_id is None:
        return []
    return [ToolOutput(call_id=message.tool_call_id, text=message.content)]


def with_user_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {**body, "messages": [*(body.get("messages") or []), {"role": "user", "content": text}]}
