"""OTLP export, content: a model call's messages as span attributes, in both conventions.

The OpenTelemetry GenAI conventions hold a call's messages in ``gen_ai.input.messages`` and
``gen_ai.output.messages`` (JSON text: a list of ``{role, parts}``, each part ``text``,
``reasoning``, ``tool_call`` or ``tool_call_response``; an output message has its
``finish_reason``). OpenInference, which Arize Phoenix reads, flattens them into
``llm.input_messages.{i}.message.*`` / ``llm.output_messages.{i}.message.*`` keys (role,
content, tool calls with their function name and JSON arguments, the tool call id a tool
message answers) and shows ``input.value`` / ``output.value``. Both are written only when the
export captures content; nothing here is ever written otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openinference.semconv.trace import (
    MessageAttributes,
    SpanAttributes,
    ToolCallAttributes,
)

from agentrunner.export.otlp_attrs import Attributes
from agentrunner.values.types import Message

JSON_MIME = "application/json"


def _arguments(raw: str) -> Any:
    """A tool call's arguments: the parsed object when the model wrote valid JSON, else the
    raw string it wrote."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _parts(message: Message) -> list[dict[str, Any]]:
    """A message's GenAI parts, in the order the model produced them."""
    if message.role == "tool":
        return [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        ]
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append({"type": "reasoning", "content": message.reasoning})
    if message.content:
        parts.append({"type": "text", "content": message.content})
    if message.refusal:
        parts.append({"type": "refusal", "content": message.refusal})
    parts.extend(
        {
            "type": "tool_call",
            "id": call.call_id,
            "name": call.name,
            "arguments": _arguments(call.arguments),
        }
        for call in message.tool_calls
    )
    return parts


def genai_message(message: Message, finish_reason: str | None = None) -> dict[str, Any]:
    """One message in the GenAI conventions' JSON shape (an output message with its
    ``finish_reason``)."""
    shaped: dict[str, Any] = {"role": message.role, "parts": _parts(message)}
    if message.name:
        shaped["name"] = message.name
    if finish_reason is not None:
        shaped["finish_reason"] = finish_reason
    return shaped


def _openinference_message(prefix: str, message: Message) -> Attributes:
    """One message as OpenInference's flattened ``{prefix}.message.*`` keys."""
    out: Attributes = {f"{prefix}.{MessageAttributes.MESSAGE_ROLE}": message.role}
    if message.content:
        out[f"{prefix}.{MessageAttributes.MESSAGE_CONTENT}"] = message.content
    if message.tool_call_id:
        out[f"{prefix}.{MessageAttributes.MESSAGE_TOOL_CALL_ID}"] = message.tool_call_id
    if message.name:
        out[f"{prefix}.{MessageAttributes.MESSAGE_NAME}"] = message.name
    for j, call in enumerate(message.tool_calls):
        key = f"{prefix}.{MessageAttributes.MESSAGE_TOOL_CALLS}.{j}"
        out[f"{key}.{ToolCallAttributes.TOOL_CALL_ID}"] = call.call_id
        out[f"{key}.{ToolCallAttributes.TOOL_CALL_FUNCTION_NAME}"] = call.name
        out[f"{key}.{ToolCallAttributes.TOOL_CALL_FUNCTION_ARGUMENTS_JSON}"] = call.arguments
    return out


def chat_input(inputs: Sequence[Message]) -> Attributes:
    """A model call's input content: the exact messages it received (its message chain)."""
    given = [genai_message(m) for m in inputs]
    out: Attributes = {
        "gen_ai.input.messages": json.dumps(given, ensure_ascii=False),
        SpanAttributes.INPUT_VALUE: json.dumps({"messages": given}, ensure_ascii=False),
        SpanAttributes.INPUT_MIME_TYPE: JSON_MIME,
    }
    for i, message in enumerate(inputs):
        out.update(_openinference_message(f"{SpanAttributes.LLM_INPUT_MESSAGES}.{i}", message))
    return out


def chat_output(output: Message, finish_reason: str | None) -> Attributes:
    """A model call's output content: the answer it gave."""
    answer = genai_message(output, finish_reason)
    return {
        "gen_ai.output.messages": json.dumps([answer], ensure_ascii=False),
        SpanAttributes.OUTPUT_VALUE: output.content,
        **_openinference_message(f"{SpanAttributes.LLM_OUTPUT_MESSAGES}.0", output),
    }


def tool_content(arguments: str, observation: str | None) -> Attributes:
    """A tool call's content attributes: its arguments as the model wrote them and the
    observation the model saw (None: no result was recorded)."""
    out: Attributes = {
        "gen_ai.tool.call.arguments": arguments,
        SpanAttributes.INPUT_VALUE: arguments,
    }
    if not isinstance(_arguments(arguments), str):
        out[SpanAttributes.INPUT_MIME_TYPE] = JSON_MIME
    if observation is not None:
        out["gen_ai.tool.call.result"] = observation
        out[SpanAttributes.OUTPUT_VALUE] = observation
    return out
