"""Responses saved in OpenAI's Responses shape by Python agents (mini-swe-agent 2.x's
``litellm_response`` and ``openrouter_response`` models keep each answer as the whole
``{"object": "response", "output": [...], "usage": ...}`` object): one saved response read as
one model call's answer.

The answer's text is its ``output_text`` parts joined, its refusal its ``refusal`` parts, its
reasoning the reasoning items' summaries (or their raw text when they have no summary), its tool
calls its ``function_call`` items; the output items themselves are kept, in order, as the
OpenAI adapter keeps a live turn's (:func:`~providers.openai_messages.layout_parts`:
reasoning, encrypted content included, verbatim), so the request the next call sent can be
rebuilt. Usage comes from the Responses ``usage`` (a response saved without one counts no
tokens: token counts have no "unknown"), the cost from what the source recorded (None when
it recorded none).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentrunner.imports.chat import as_dict, with_recorded_cost
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, Channel
from providers.openai_messages import layout_parts
from providers.usage import from_openai_responses


def is_response(value: Any) -> bool:
    """Whether a saved value is a whole Responses API response object."""
    return isinstance(value, dict) and value.get("object") == "response"


@dataclass(frozen=True)
class ReadResponse:
    """One saved response as an answer: the turn, its output as pieces in output order
    (channel, text, tool call id), and the function calls it made that the run did not run
    (those of an answer the run rejected), raw."""

    turn: AgentTurn
    pieces: list[tuple[Channel, str, str | None]]
    not_run: list[dict[str, Any]]


def read_response(
    response: dict[str, Any],
    *,
    cost: Any,
    model: str | None,
    fallback_id: str,
    acted: bool = True,
) -> ReadResponse:
    """A saved response as an answer; ``acted`` False for an answer the run rejected (its
    function calls were not run, so they are no tool calls of the history)."""
    items = [i for i in response.get("output") or [] if isinstance(i, dict)]
    said: dict[str, list[str]] = {}
    pieces: list[tuple[Channel, str, str | None]] = []
    calls: list[AgentToolCall] = []
    not_run: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "message":
            for part in _dicts(item.get("content")):
                if part.get("type") == "output_text":
                    _say(said, pieces, "text", part.get("text"))
                elif part.get("type") == "refusal":
                    _say(said, pieces, "refusal", part.get("refusal"))
        elif kind == "reasoning":
            texts = _texts(item, "summary") or _texts(item, "content")
            for text in texts:
                _say(said, pieces, "reasoning", text)
        elif kind == "function_call" and not acted:
            not_run.append(item)
        elif kind == "function_call":
            call = _function_call(item, f"{fallback_id}-{len(calls)}")
            calls.append(call)
            pieces.append(("tool_args", call.arguments, call.call_id))
    laid = [i for i in items if acted or i.get("type") != "function_call"]
    usage = response.get("usage")
    counted = from_openai_responses(usage) if isinstance(usage, dict) else AgentUsage()
    named = response.get("model")
    turn = AgentTurn(
        message="".join(said.get("text", [])),
        reasoning="".join(said.get("reasoning", [])) or None,
        refusal="".join(said.get("refusal", [])) or None,
        tool_calls=tuple(calls),
        usage=with_recorded_cost(counted, usage, cost),
        model=named if isinstance(named, str) and named else model,
        provider_request_id=_text(response.get("id")),
        stop_reason=_stop_reason(response),
        opaque=tuple(layout_parts(laid)),
    )
    return ReadResponse(turn, pieces, not_run)


def _say(
    said: dict[str, list[str]],
    pieces: list[tuple[Channel, str, str | None]],
    channel: Channel,
    text: Any,
) -> None:
    if isinstance(text, str) and text:
        said.setdefault(channel, []).append(text)
        pieces.append((channel, text, None))


def _function_call(item: dict[str, Any], fallback_id: str) -> AgentToolCall:
    raw = item.get("arguments")
    arguments = raw if isinstance(raw, str) else json.dumps(raw or {}, ensure_ascii=False)
    return AgentToolCall(
        call_id=str(item.get("call_id") or item.get("id") or fallback_id),
        name=str(item.get("name") or "unknown"),
        arguments=arguments,
    )


def _stop_reason(response: dict[str, Any]) -> str | None:
    """As the OpenAI adapter reads it: an incomplete response's reason, else its status
    (None when the saved response has neither)."""
    status = response.get("status")
    if status == "incomplete":
        reason = as_dict(response.get("incomplete_details")).get("reason")
        return str(reason or "max_output_tokens")
    return _text(status)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _texts(item: dict[str, Any], key: str) -> list[str]:
    return [str(p["text"]) for p in _dicts(item.get(key)) if p.get("text")]
