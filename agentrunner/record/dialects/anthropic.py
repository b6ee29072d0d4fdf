"""Anthropic Messages (``POST /v1/messages``) as the recorder reads it.

The top-level ``system`` becomes the chain's first message (``body_field="system"``), each
message of ``messages`` one message of the chain, kept verbatim; ``tool_result`` blocks are
the results of the calls the model made in the turn before. Stream events are folded by the
native adapter's :class:`~providers.anthropic_adapter.MessagesFold`.
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
from providers.anthropic_adapter import MessagesFold
from providers.streaming import Fold

api = "anthropic-messages"
provider = "anthropic"


def split(body: dict[str, Any], path: str = "") -> Split:
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list):
        raise ValueError("the body has no messages list")
    messages: list[Message] = []
    if "system" in body:
        system = body["system"]
        messages.append(
            Message(role="system", content=text_of(system), raw=system, body_field="system")
        )
    messages.extend(_message(m) for m in raw_messages)
    tools = [_tool(t) for t in body.get("tools") or [] if isinstance(t, dict)]
    return split_of(body, messages, tools, {"messages", "system"})


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message(role="user", raw=raw)
    content = raw.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    calls = tuple(
        AgentToolCall(
            call_id=str(b.get("id") or ""),
            name=str(b.get("name") or ""),
            arguments=json.dumps(b.get("input") or {}, ensure_ascii=False),
        )
        for b in blocks
        if b.get("type") == "tool_use"
    )
    thinking = "".join(str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking")
    return Message(
        role=role_of(raw.get("role")),  # type: ignore[arg-type]
        content=text_of(content),
        reasoning=thinking or None,
        tool_calls=calls,
        raw=raw,
    )


def _tool(raw: dict[str, Any]) -> ToolSpec:
    return tool_spec(raw, raw, "input_schema")


def rebuild(
    messages: list[Message], tools: list[ToolSpec], params: dict[str, Any]
) -> dict[str, Any]:
    return rebuilt(messages, tools, params, "messages")


def new_fold() -> Fold:
    return MessagesFold()


def whole(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed message as the events of its stream."""
    usage = body.get("usage") or {}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": body.get("model"), "usage": usage}}
    ]
    for index, block in enumerate(body.get("content") or []):
        if isinstance(block, dict):
            events.append({"type": "content_block_start", "index": index, "content_block": block})
            events.append({"type": "content_block_stop", "index": index})
    events.append(
        {"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason")}, "usage": {}}
    )
    return events


def tool_outputs(message: Message) -> list[ToolOutput]:
    raw = message.raw
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        return []
    return [
        ToolOutput(
            call_id=str(block.get("tool_use_id") or ""),
            text=text_of(block.get("content")),
            is_error=bool(block.get("is_error")),
        )
        for block in content
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def with_user_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    """A text block joins the last user message (tool results included), or a new one."""
    messages = list(body.get("messages") or [])
    last = messages[-1] if messages else None
    if isinstance(last, dict) and last.get("role") == "user":
        content = last.get("content")
        blocks = (
            [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
        )
        messages[-1] = {**last, "content": [*blocks, {"type": "text", "text": text}]}
    else:
        messages.append({"role": "user", "content": text})
    return {**body, "messages": messages}
