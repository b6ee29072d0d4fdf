"""Values in OpenAI's chat shape as Python agents save them (mini-swe-agent, SWE-agent): tool
calls, usage with the cost they recorded, Unix times."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from agentrunner.values.types import AgentToolCall, AgentUsage
from providers.usage import from_openai_chat


def bash_call(call_id: str, command: str) -> AgentToolCall:
    """A shell command a text-based agent ran, as a ``bash`` tool call."""
    arguments = json.dumps({"command": command}, ensure_ascii=False)
    return AgentToolCall(call_id=call_id, name="bash", arguments=arguments)


def openai_call(call: Any, fallback_id: str) -> AgentToolCall:
    """A tool call in OpenAI's chat shape (``{id, function: {name, arguments}}``)."""
    call = as_dict(call)
    function = as_dict(call.get("function"))
    arguments = function.get("arguments", "{}")
    return AgentToolCall(
        call_id=str(call.get("id") or fallback_id),
        name=str(function.get("name") or "unknown"),
        arguments=arguments
        if isinstance(arguments, str)
        else json.dumps(arguments, ensure_ascii=False, sort_keys=True),
    )


def chat_usage(usage: Any, cost: Any) -> AgentUsage:
    """One call's usage in the OpenAI chat shape, with the cost the source recorded."""
    counted = from_openai_chat(usage) if isinstance(usage, dict) else AgentUsage()
    return with_recorded_cost(counted, usage, cost)


def with_recorded_cost(counted: AgentUsage, usage: Any, cost: Any) -> AgentUsage:
    """A call's counted usage with the cost the source recorded: ``cost`` (mini-swe-agent
    2.x's ``extra.cost``), else the usage's own ``cost`` (OpenRouter's). A zero cost is taken
    as unknown (mini-swe-agent writes 0 when it could not price a call); none stays None."""
    if not is_number(cost) and isinstance(usage, dict):
        cost = usage.get("cost")
    if not is_number(cost) or cost == 0:
        return counted
    return counted.model_copy(
        update={"cost_usd": float(cost), "price_source": "recorded in the trajectory"}
    )


def iso_time(value: Any) -> str | None:
    """A Unix time in seconds as ISO 8601 UTC (None when it is not one)."""
    if not is_number(value) or value <= 0:
        return None
    try:
        return datetime.fromtimestamp(float(value), UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        return None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
