"""The fields of one Codex rollout record, read by key: what a record is, the texts a UI event
may copy, tool calls and outputs, token counts and times (:mod:`codex` turns records into
items with them)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentrunner.imports.items import text_of
from agentrunner.values.types import AgentToolCall, AgentUsage

LINE_TYPES = (
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
    "token_usage_record",
    "world_state",
)
TEXT_PARTS = frozenset({"input_text", "output_text"})


def kind_of(record: Any) -> tuple[str, dict[str, Any]]:
    """What a record is: ``session_meta``, ``turn_context``, ``compacted``, ``item:<type>``
    (``item:message:<role>``), ``event:<type>``, or ``bad``."""
    payload = record.get("payload") if isinstance(record, dict) else None
    if not isinstance(payload, dict) or record.get("type") not in LINE_TYPES:
        return "bad", {}
    line, kind = str(record["type"]), str(payload.get("type"))
    if line == "response_item":
        return f"item:{kind}" + (f":{payload.get('role')}" if kind == "message" else ""), payload
    return (f"event:{kind}" if line == "event_msg" else line), payload


def offers(kind: str, payload: dict[str, Any]) -> list[tuple[str, str]]:
    """The texts of a record that a UI event may copy, as (event kind, text)."""
    if kind == "item:reasoning":
        return [("event:agent_reasoning", t) for t in texts(payload, "summary")] + [
            ("event:agent_reasoning_raw_content", t) for t in texts(payload, "content")
        ]
    if kind in ("item:message:assistant", "item:message:user"):
        parts = texts(payload, "content")
        copy = "event:agent_message" if kind.endswith("assistant") else "event:user_message"
        return [(copy, text) for text in ("".join(parts), "\n".join(parts), *parts)]
    return []


def dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def texts(item: dict[str, Any], key: str) -> list[str]:
    return [str(p["text"]) for p in dicts(item.get(key)) if p.get("text")]


def part_type(part: Any) -> str:
    return str(part.get("type")) if isinstance(part, dict) else "input_text"


def reasoning_texts(item: dict[str, Any]) -> list[str]:
    """A reasoning item's summary texts, or its raw reasoning when it has no summary (as the
    OpenAI adapter streams them)."""
    return texts(item, "summary") or texts(item, "content")


def tool_call(item: dict[str, Any], fallback_id: str) -> AgentToolCall:
    call_id = str(item.get("call_id") or item.get("id") or fallback_id)
    if item.get("type") == "local_shell_call":
        arguments = json.dumps(item.get("action"), ensure_ascii=False)
        return AgentToolCall(call_id=call_id, name="local_shell", arguments=arguments)
    raw = item.get("input") if item.get("type") == "custom_tool_call" else item.get("arguments")
    arguments = raw if isinstance(raw, str) else "" if raw is None else json.dumps(raw)
    return AgentToolCall(call_id=call_id, name=str(item.get("name") or ""), arguments=arguments)


def output_text(output: Any) -> tuple[str, str | None, bool]:
    """A tool output as the model read it, an error, and whether to keep the record whole."""
    if isinstance(output, str):
        return output, None, False
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        failed = output.get("success") is False
        return output["content"], "the tool reported failure" if failed else None, False
    if isinstance(output, list):
        return text_of(output), None, any(part_type(p) not in TEXT_PARTS for p in output)
    return text_of(output), None, True


def usage_of(counts: dict[str, Any]) -> AgentUsage:
    """Codex's counts: input includes the cached input, output includes the reasoning."""

    def n(key: str) -> int:
        value = counts.get(key)
        return int(value) if isinstance(value, int | float) else 0

    return AgentUsage(
        input_tokens=n("input_tokens"),
        output_tokens=n("output_tokens"),
        cache_read_tokens=n("cached_input_tokens"),
        reasoning_tokens=n("reasoning_output_tokens"),
    )


def minus(totals: dict[str, Any], before: Any) -> dict[str, Any]:
    """Running totals less the ones before (when a token_count gives no last usage)."""
    before = before if isinstance(before, dict) else {}
    return {
        k: v - before[k] if isinstance(v, int) and isinstance(before.get(k), int) else v
        for k, v in totals.items()
    }


def seconds_between(start: str | None, end: str | None) -> float | None:
    try:
        begun = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        ended = datetime.fromisoformat(str(end).replace("Z", "+00:00"))
        seconds = (ended - begun).total_seconds()
    except (ValueError, TypeError):  # no time, an unreadable one, or naive against aware
        return None
    return seconds if seconds >= 0 else None
