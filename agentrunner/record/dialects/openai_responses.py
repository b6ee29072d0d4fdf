"""OpenAI Responses (``POST .../responses``) as the recorder reads it.

``instructions`` becomes the chain's first message (``body_field="instructions"``), each item
of ``input`` one message of the chain, kept verbatim (a plain-string ``input`` is one user
message with ``body_field="input"``); ``function_call_output`` and ``custom_tool_call_output``
items are the results of the calls the model made before. Events are folded by the native
adapter's :class:`~providers.openai_responses.ResponsesFold`.
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
from providers.openai_responses import ResponsesFold
from providers.streaming import Fold

api = "openai-responses"
provider = "openai"
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")
_CALLS = {"function_call": "arguments", "custom_tool_call": "input"}
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def split(body: dict[str, Any], path: str = "") -> Split:
    messages: list[Message] = []
    if "instructions" in body:
        value = body["instructions"]
        messages.append(
            Message(role="system", content=text_of(value), raw=value, body_field="instructions")
        )
    items = body.get("input")
    if isinstance(items, str):
        messages.append(Message(role="user", content=items, raw=items, body_field="input"))
    elif isinstance(items, list):
        messages.extend(_item(i) for i in items)
    else:
        raise ValueError("the body has no input")
    tools = [_tool(t) for t in body.get("tools") or [] if isinstance(t, dict)]
    return split_of(body, messages, tools, {"input", "instructions"})


def _item(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message(role="user", raw=raw)
    kind = raw.get("type") or "message"
    if kind in _CALLS:
        arguments = raw.get(_CALLS[kind])
        call = AgentToolCall(
            call_id=str(raw.get("call_id") or raw.get("id") or ""),
            name=str(raw.get("name") or ""),
            arguments=arguments if isinstance(arguments, str) else json.dumps(arguments),
        )
        return Message(role="assistant", tool_calls=(call,), raw=raw)
    if kind in _OUTPUTS:
        output = raw.get("output")
        return Message(
            role="tool",
            content=output if isinstance(output, str) else text_of(output, _TEXT_PARTS),
            tool_call_id=str(raw.get("call_id") or ""),
            raw=raw,
        )
    if kind == "reasoning":
        summary = text_of(raw.get("summary"), _TEXT_PARTS)
        return Message(role="assistant", reasoning=summary or None, raw=raw)
    role = raw.get("role") if kind == "message" else "user"
    return Message(
        role=role_of(role),  # type: ignore[arg-type]
        content=text_of(raw.get("content"), _TEXT_PARTS),
        raw=raw,
    )


def _tool(raw: dict[str, Any]) -> ToolSpec:
    return tool_spec(raw, raw, "parameters")


def rebuild(
    messages: list[Message], tools: list[ToolSpec], params: dict[str, Any]
) -> dict[str, Any]:
    return rebuilt(messages, tools, params, "input")


def new_fold() -> Fold:
    return ResponsesFold()


def whole(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed response as the event that ends its stream."""
    return [{"type": "response.completed", "response": body}]


def tool_outputs(message: Message) -> list[ToolOutput]:
    if message.role != "tool" or message.tool_call_id is None:
        return []
    return [ToolOutput(call_id=message.tool_call_id, text=message.content)]


def with_user_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    items = body.get("input")
    if isinstance(items, str):
        return {**body, "input": f"{items}\n\n{text}"}
    return {**body, "input": [*(items or []), {"role": "user", "content": text}]}
