"""Neutral messages and tools in Anthropic's Messages shapes, and content blocks kept as layout.

An assistant turn is a list of content blocks. The adapter keeps them in the assistant
message as ``OpaquePart(provider="anthropic")``, one per block, in order: ``thinking``
(with its signature), ``redacted_thinking``, server-tool blocks and any block type it does
not model verbatim, exactly as streamed; ``text`` and ``tool_use`` blocks as placeholders
holding everything but the text and the input, which live once in the message's
``content`` and ``tool_calls``. Rebuilding fills them back in, so the next request carries
the turn's blocks unchanged and in order (interleaved thinking between tool calls
included). If the message was edited since (a fork), it falls back to the opaque blocks
followed by the text and the tool calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrunner.values.types import AgentToolCall, Message, OpaquePart, ToolSpec
from providers.turn_builder import UNKNOWN_EVENTS

PROVIDER = "anthropic"
_PLACEHOLDERS = frozenset({"text", "tool_use"})


def tools_param(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def layout_parts(blocks: Sequence[dict[str, Any]]) -> list[OpaquePart]:
    """The opaque/placeholder parts for a turn's content blocks, in order.

    A thinking block that never got its signature (a broken stream) cannot be sent back,
    so it is left out.
    """
    parts: list[OpaquePart] = []
    for block in blocks:
        kind = str(block.get("type", ""))
        data = dict(block)
        if kind == "text":
            data["chars"] = len(str(data.pop("text", "") or ""))
        elif kind == "tool_use":
            data.pop("input", None)
        elif kind == "thinking" and not data.get("signature"):
            continue
        parts.append(OpaquePart(provider=PROVIDER, type=kind, data=data))
    return parts


def request_messages(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for a conversation; tool results join one user turn."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            system.append(m.content)
            continue
        if m.role == "assistant":
            blocks = _assistant_blocks(m)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
            continue
        block: dict[str, Any] = (
            {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            if m.role == "tool"
            else {"type": "text", "text": m.content}
        )
        if out and out[-1]["role"] == "user":
            out[-1]["content"].append(block)
        else:
            out.append({"role": "user", "content": [block]})
    for msg in out:
        content = msg["content"]
        if msg["role"] == "user" and len(content) == 1 and content[0]["type"] == "text":
            msg["content"] = content[0]["text"]
    return ("\n\n".join(system) or None), out


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    parts = [p for p in m.opaque if p.provider == PROVIDER and p.type != UNKNOWN_EVENTS]
    calls = {c.call_id: c for c in m.tool_calls}
    if parts and _fits(parts, m, calls):
        blocks = _fill(parts, m, calls)
    else:
        blocks = [dict(p.data) for p in parts if p.type not in _PLACEHOLDERS]
        if m.content:
            blocks.append({"type": "text", "text": m.content})
        blocks.extend(_tool_use(c, {}) for c in m.tool_calls)
    # The API refuses empty text blocks.
    return [b for b in blocks if b.get("type") != "text" or b.get("text")]


def _fits(parts: list[OpaquePart], m: Message, calls: dict[str, AgentToolCall]) -> bool:
    chars = sum(int(p.data.get("chars", 0)) for p in parts if p.type == "text")
    placed = [str(p.data.get("id")) for p in parts if p.type == "tool_use"]
    return chars == len(m.content) and sorted(placed) == sorted(calls)


def _fill(
    parts: list[OpaquePart], m: Message, calls: dict[str, AgentToolCall]
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    cursor = 0
    for p in parts:
        if p.type == "text":
            n = int(p.data.get("chars", 0))
            block = {k: v for k, v in p.data.items() if k != "chars"}
            block["text"] = m.content[cursor : cursor + n]
            cursor += n
            blocks.append(block)
        elif p.type == "tool_use":
            blocks.append(_tool_use(calls[str(p.data.get("id"))], p.data))
        else:
            blocks.append(dict(p.data))
    return blocks


def _tool_use(call: AgentToolCall, extra: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = call.parsed_arguments()
    except ValueError:  # the model wrote malformed JSON; the tool result said so
        arguments = {}
    return {**extra, "type": "tool_use", "id": call.call_id, "name": call.name, "input": arguments}
