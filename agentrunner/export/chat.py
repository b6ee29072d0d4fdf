"""Stored messages and tool sets as chat-format dicts (TRL / OpenAI conversational shape).

- ``{"role": "system" | "user", "content": ...}``
- ``{"role": "assistant", "content": ..., "tool_calls": [{"id", "type": "function",
  "function": {"name", "arguments"}}]}`` (``arguments`` by default the parsed JSON object,
  which Hugging Face chat templates render with ``tojson``; with ``tool_args="string"`` the
  raw string the model wrote, as OpenAI's fine-tuning format wants; arguments that are not a
  JSON object stay the raw string), plus the reasoning under ``reasoning_key`` when asked
  for, and ``refusal`` when the model refused.
- ``{"role": "tool", "content": ..., "tool_call_id": ..., "name": ...}``
- tools: ``{"type": "function", "function": {"name", "description", "parameters"}}``.

Every message has ``role`` and ``content`` (TRL recognises a conversational row by them).
Provider-opaque parts (signatures, encrypted reasoning) are not exported.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentrunner.values.errors import UsageError
from agentrunner.values.types import AgentToolCall, Message, ToolSpec

ToolArgs = Literal["string", "object"]
MESSAGE_KEYS = ("role", "content", "refusal", "tool_calls", "tool_call_id", "name")


@dataclass(frozen=True)
class ExportOptions:
    """How rows are written.

    ``reasoning_key``: put assistant reasoning under this key (None: leave it out).
    ``tool_args``: tool-call arguments as the parsed ``object`` (default) or the raw ``string``.
    ``kto_threshold``: KTO label is ``reward >= kto_threshold``.
    ``with_tool_results``: DPO chosen/rejected also hold the tool results of the turn.

    None of them changes which rows an export makes, only how each row is written.
    """

    reasoning_key: str | None = None
    tool_args: ToolArgs = "object"
    kto_threshold: float = 1.0
    with_tool_results: bool = False

    def __post_init__(self) -> None:
        if self.reasoning_key is not None and (
            not self.reasoning_key or self.reasoning_key in MESSAGE_KEYS
        ):
            raise UsageError(
                f"--reasoning KEY cannot be {self.reasoning_key!r}: a message already uses "
                f"that key (it must be a new key, not one of {', '.join(MESSAGE_KEYS)})"
            )
        if self.tool_args not in ("string", "object"):
            raise UsageError(f"--tool-args must be string or object, not {self.tool_args!r}")


def _arguments(call: AgentToolCall, mode: ToolArgs) -> str | dict[str, Any]:
    if mode == "object":
        try:
            return call.parsed_arguments()
        except ValueError:
            return call.arguments
    return call.arguments


def chat_message(message: Message, options: ExportOptions = ExportOptions()) -> dict[str, Any]:
    """One stored message as a chat dict."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant":
        if options.reasoning_key and message.reasoning:
            out[options.reasoning_key] = message.reasoning
        if message.refusal:
            out["refusal"] = message.refusal
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": _arguments(call, options.tool_args),
                    },
                }
                for call in message.tool_calls
            ]
    elif message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        out["name"] = message.name
    return out


def chat(
    messages: Sequence[Message], options: ExportOptions = ExportOptions()
) -> list[dict[str, Any]]:
    return [chat_message(m, options) for m in messages]


def tool_schemas(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as JSON-schema function definitions (the ``tools`` column)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            },
        }
        for t in tools
    ]
