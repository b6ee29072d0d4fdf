"""The Gemini API (``POST /v1beta/models/MODEL:generateContent`` and
``:streamGenerateContent``) as the recorder reads it.

The model and whether the answer streams are in the request's path, not its body. The
``systemInstruction`` becomes the chain's first message (``body_field``), each entry of
``contents`` one message, kept verbatim (thought signatures included, so the body is rebuilt
exactly); ``role: "model"`` is the assistant. Each function declaration is one tool: the
first of a ``tools`` entry keeps the whole entry as it was sent (``raw``) and the others ride
in it (``raw`` None), so the entries are rebuilt as they were. A ``functionCall`` part is a
tool call and a ``functionResponse`` part of a later request its result. Both are named
``NAME#K``, the K-th call of that name in the turn, which the results follow in order: the
API often gives no call id, and clients then invent their own for the response (Gemini CLI
does), so ids would not match; an id either side sent stays in the raw message.

Streams come as SSE (``alt=sse``) or as one JSON array of the same chunks; a non-streamed
answer is one such chunk. Each chunk holds the parts that arrived (text, thought text,
whole function calls) and the usage so far (``usageMetadata``, cumulative, the last wins).
``countTokens`` is not a model call: it is forwarded unrecorded.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentrunner.record.dialects.base import Split, ToolOutput
from agentrunner.values.types import (
    AgentToolCall,
    AgentTurn,
    AgentUsage,
    Message,
    OpaquePart,
    ToolSpec,
)
from providers.streaming import Fold
from providers.turn_builder import TurnBuilder

api = "gemini"
provider = "google"

_PATH = re.compile(r"/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)")
METHODS = (":generateContent", ":streamGenerateContent")
"""The path endings of a model call (``countTokens`` and the rest are forwarded unrecorded)."""


def model_of(path: str) -> str | None:
    match = _PATH.search(path)
    return match.group("model") if match else None


def retarget(path: str, model: str) -> str:
    """``path`` asking ``model`` instead (``record --fork --model``)."""
    return _PATH.sub(lambda m: f"/models/{model}:{m.group('method')}", path, count=1)


def split(body: dict[str, Any], path: str = "") -> Split:
    raw_contents = body.get("contents")
    if not isinstance(raw_contents, list):
        raise ValueError("the body has no contents list")
    messages: list[Message] = []
    for field in ("systemInstruction", "system_instruction"):
        if field in body:
            system = body[field]
            messages.append(
                Message(role="system", content=_text(system), raw=system, body_field=field)
            )
    messages.extend(_message(c) for c in raw_contents)
    tools = _tools(body.get("tools"))
    fields = {"contents", "systemInstruction", "system_instruction"} | (
        {"tools"} if tools else set()
    )
    match = _PATH.search(path)
    return Split(
        model=match.group("model") if match else "unknown",
        messages=messages,
        tools=tools,
        params={k: v for k, v in body.items() if k not in fields},
        stream=bool(match and match.group("method") == "streamGenerateContent")
        and "alt=sse" in path,
    )


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(content: Any, *, thought: bool = False) -> str:
    return "".join(
        str(p.get("text") or "") for p in _parts(content) if bool(p.get("thought")) == thought
    )


def _calls(parts: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(call id, name, arguments) of each ``functionCall`` part, in order."""
    seen: dict[str, int] = {}
    out = []
    for part in parts:
        call = part.get("functionCall")
        if not isinstance(call, dict):
            continue
        name = str(call.get("name") or "")
        k = seen.get(name, 0)
        seen[name] = k + 1
        args = call.get("args")
        out.append((f"{name}#{k}", name, args if isinstance(args, dict) else {}))
    return out


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict):
        return Message(role="user", raw=raw)
    parts = _parts(raw)
    calls = tuple(
        AgentToolCall(call_id=i, name=n, arguments=json.dumps(a, ensure_ascii=False))
        for i, n, a in _calls(parts)
    )
    return Message(
        role="assistant" if raw.get("role") == "model" else "user",
        content=_text(raw),
        reasoning=_text(raw, thought=True) or None,
        tool_calls=calls,
        raw=raw,
    )


def _tools(entries: Any) -> list[ToolSpec]:
    tools: list[ToolSpec] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        declared = entry.get("functionDeclarations") or entry.get("function_declarations")
        if not isinstance(declared, list) or not declared:
            tools.append(ToolSpec(name=next(iter(entry), "tool"), description="", raw=entry))
            continue
        for n, spec in enumerate(d for d in declared if isinstance(d, dict)):
            schema = spec.get("parametersJsonSchema") or spec.get("parameters")
            tools.append(
                ToolSpec(
                    name=str(spec.get("name") or "unnamed"),
                    description=str(spec.get("description") or ""),
                    parameters=schema if isinstance(schema, dict) else {},
                    raw=entry if n == 0 else None,
                )
            )
    return tools


def rebuild(
    messages: list[Message], tools: list[ToolSpec], params: dict[str, Any]
) -> dict[str, Any]:
    body = dict(params)
    contents = []
    for m in messages:
        if m.body_field:
            body[m.body_field] = m.raw
        else:
            contents.append(m.raw)
    body.setdefault("contents", contents)
    if tools:
        body["tools"] = [t.raw for t in tools if t.raw is not None]
    return body


class GeminiFold:
    """One answer's chunks: text and thought text streamed as they come, function calls
    whole, the parts kept (with their signatures) as the turn's opaque layout."""

    def __init__(self) -> None:
        self.parts: list[dict[str, Any]] = []
        self._names: dict[str, int] = {}

    def feed(self, event: dict[str, Any], b: TurnBuilder) -> None:
        if isinstance(event.get("usageMetadata"), dict):
            b.usage = usage(event["usageMetadata"])
        b.request_id = str(event.get("responseId") or b.request_id or "") or None
        b.model = str(event.get("modelVersion") or b.model)
        candidates = event.get("candidates")
        if not isinstance(candidates, list) or not candidates:
            if "error" in event or "promptFeedback" in event:
                b.keep_raw(event)
            return
        first = candidates[0] if isinstance(candidates[0], dict) else {}
        for part in _parts(first.get("content")):
            self._part(part, b)
        if first.get("finishReason"):
            b.stop_reason = str(first["finishReason"])

    def _part(self, part: dict[str, Any], b: TurnBuilder) -> None:
        self.parts.append(part)
        call = part.get("functionCall")
        if isinstance(call, dict):
            name = str(call.get("name") or "")
            k = self._names.get(name, 0)
            self._names[name] = k + 1
            call_id = f"{name}#{k}"
            args = call.get("args")
            b.start_call(call_id, call_id, name)
            b.finish_call(
                call_id, json.dumps(args if isinstance(args, dict) else {}, ensure_ascii=False)
            )
        elif part.get("thought"):
            b.reasoning(str(part.get("text") or ""))
        elif "text" in part:
            b.text(str(part.get("text") or ""))

    def turn(self, b: TurnBuilder) -> AgentTurn:
        layout = OpaquePart(provider=provider, type="parts", data={"parts": self.parts})
        return b.turn([layout] if self.parts else [])


def usage(meta: dict[str, Any]) -> AgentUsage:
    """``usageMetadata``: the prompt (cached tokens included) in, answer and thoughts out."""

    def count(key: str) -> int:
        value = meta.get(key)
        return int(value) if isinstance(value, int | float) else 0

    thoughts = count("thoughtsTokenCount")
    return AgentUsage(
        input_tokens=count("promptTokenCount") + count("toolUsePromptTokenCount"),
        output_tokens=count("candidatesTokenCount") + thoughts,
        cache_read_tokens=count("cachedContentTokenCount"),
        reasoning_tokens=thoughts,
    )


def new_fold() -> Fold:
    return GeminiFold()


def whole(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A non-streamed answer is one chunk of the stream."""
    return [body]


def tool_outputs(message: Message) -> list[ToolOutput]:
    seen: dict[str, int] = {}
    out = []
    for part in _parts(message.raw):
        result = part.get("functionResponse")
        if not isinstance(result, dict):
            continue
        name = str(result.get("name") or "")
        k = seen.get(name, 0)
        seen[name] = k + 1
        response = result.get("response")
        error = isinstance(response, dict) and set(response) == {"error"}
        out.append(
            ToolOutput(
                call_id=f"{name}#{k}",
                text=json.dumps(response, ensure_ascii=False),
                is_error=error,
            )
        )
    return out


def with_user_message(body: dict[str, Any], text: str) -> dict[str, Any]:
    """A text part joins the last user content (function responses included), or a new one."""
    contents = list(body.get("contents") or [])
    last = contents[-1] if contents else None
    if isinstance(last, dict) and last.get("role", "user") == "user":
        contents[-1] = {**last, "parts": [*_parts(last), {"text": text}]}
    else:
        contents.append({"role": "user", "parts": [{"text": text}]})
    return {**body, "contents": contents}
