"""Neutral messages and tools in OpenAI's request shapes, and Responses output kept as layout.

A Responses turn is a list of output items (reasoning, message, function_call, ...). The
adapter keeps them in the assistant message as ``OpaquePart(provider="openai")``, one per
item, in order: reasoning items (and any item type it does not model) verbatim, exactly as
``response.output_item.done`` sent them; message and function_call items as placeholders
holding everything but the text and the arguments, which live once in the message's
``content``/``refusal`` and ``tool_calls``. Rebuilding fills the placeholders back in, so
the next request carries the turn's items byte for byte (encrypted reasoning included).
If the message was edited since (a fork), it falls back to the opaque items followed by
a plain assistant message and the calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrunner.values.types import AgentToolCall, Message, OpaquePart, ToolSpec
from providers.turn_builder import UNKNOWN_EVENTS

PROVIDER = "openai"
_PLACEHOLDERS = frozenset({"message", "function_call"})
_FIELD = {"output_text": "text", "refusal": "refusal"}


# -- tools


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": False,
        }
        for t in tools
    ]


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


# -- Responses: output items <-> layout parts


def layout_parts(items: Sequence[dict[str, Any]]) -> list[OpaquePart]:
    """The opaque/placeholder parts for a turn's output items, in output order."""
    parts: list[OpaquePart] = []
    for item in items:
        kind = str(item.get("type", ""))
        data = dict(item)
        if kind == "message":
            data["content"] = [_strip(c) for c in item.get("content") or []]
        elif kind == "function_call":
            data.pop("arguments", None)
        parts.append(OpaquePart(provider=PROVIDER, type=kind, data=data))
    return parts


def _strip(content: dict[str, Any]) -> dict[str, Any]:
    field = _FIELD.get(str(content.get("type")))
    if field is None:
        return dict(content)
    out = {k: v for k, v in content.items() if k != field}
    out["chars"] = len(str(content.get(field) or ""))
    return out


def responses_input(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The Responses ``input`` for a conversation (stateless: everything is sent)."""
    items: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant":
            items.extend(_assistant_items(m))
        elif m.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}
            )
        else:
            items.append({"role": m.role, "content": m.content})
    return items


def _assistant_items(m: Message) -> list[dict[str, Any]]:
    parts = [p for p in m.opaque if p.provider == PROVIDER and p.type != UNKNOWN_EVENTS]
    calls = {c.call_id: c for c in m.tool_calls}
    if parts and _fits(parts, m, calls):
        return _fill(parts, m, calls)
    items = [dict(p.data) for p in parts if p.type not in _PLACEHOLDERS]
    if m.content or m.refusal:
        items.append({"role": "assistant", "content": m.content or m.refusal or ""})
    items.extend(_function_call(c) for c in m.tool_calls)
    return items


def _chars(parts: list[OpaquePart], kind: str) -> int:
    return sum(
        int(c.get("chars", 0))
        for p in parts
        if p.type == "message"
        for c in p.data.get("content") or []
        if c.get("type") == kind
    )


def _fits(parts: list[OpaquePart], m: Message, calls: dict[str, AgentToolCall]) -> bool:
    placed = [p.data.get("call_id") for p in parts if p.type == "function_call"]
    return (
        _chars(parts, "output_text") == len(m.content)
        and _chars(parts, "refusal") == len(m.refusal or "")
        and sorted(map(str, placed)) == sorted(calls)
    )


def _fill(
    parts: list[OpaquePart], m: Message, calls: dict[str, AgentToolCall]
) -> list[dict[str, Any]]:
    cursor = {"output_text": 0, "refusal": 0}
    source = {"output_text": m.content, "refusal": m.refusal or ""}
    items: list[dict[str, Any]] = []
    for p in parts:
        if p.type == "function_call":
            call = calls[str(p.data.get("call_id"))]
            items.append({**p.data, "name": call.name, "arguments": call.arguments})
        elif p.type == "message":
            content = []
            for c in p.data.get("content") or []:
                kind = str(c.get("type"))
                if kind not in cursor or "chars" not in c:
                    content.append(dict(c))
                    continue
                start, n = cursor[kind], int(c["chars"])
                cursor[kind] = start + n
                piece = {k: v for k, v in c.items() if k != "chars"}
                piece[_FIELD[kind]] = source[kind][start : start + n]
                content.append(piece)
            items.append({**p.data, "content": content})
        else:
            items.append(dict(p.data))
    return items


def _function_call(call: AgentToolCall) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
    }


# -- Chat Completions


def chat_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Chat Completions ``messages`` (reasoning is not sent back)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.refusal:
                msg["refusal"] = m.refusal
            if m.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": c.call_id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in m.tool_calls
                ]
            elif msg["content"] is None:
                msg["content"] = ""
            out.append(msg)
        else:
            out.append({"role": m.role, "content": m.content})
    return out
