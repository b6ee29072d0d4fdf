"""What a wire API's dialect provides, and the pieces the dialects share.

A dialect turns one API's request bodies into the conversation as the client sent it (each
message kept verbatim in ``Message.raw``, its text in the neutral fields), rebuilds the exact
body from what the store holds, and folds the API's stream events into the same chunks, calls
and usage the native adapters record (it reuses their folds: one mapping per API).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentrunner.values.model import AgentContext
from agentrunner.values.types import Chunk, Message, ToolSpec
from providers.streaming import Fold
from providers.turn_builder import TurnBuilder


@dataclass(frozen=True)
class Split:
    """One request body taken apart: the conversation, the tools, everything else verbatim."""

    model: str
    messages: list[Message]
    tools: list[ToolSpec]
    params: dict[str, Any]
    stream: bool


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result as the client sends it back to the model in a later request."""

    call_id: str
    text: str
    is_error: bool = False


class Dialect(Protocol):
    """One wire API (Anthropic Messages, OpenAI Chat Completions, OpenAI Responses, Gemini)."""

    api: str
    """The API's name as recorded (``anthropic-messages``, ``openai-chat``, ...)."""
    provider: str
    """The provider the price table knows (``anthropic``, ``openai``)."""

    def split(self, body: dict[str, Any], path: str = "") -> Split:
        """The body taken apart; ``path`` (with its query) where the API puts the model
        or the streaming choice in it (Gemini)."""
        ...

    def rebuild(
        self, messages: list[Message], tools: list[ToolSpec], params: dict[str, Any]
    ) -> dict[str, Any]: ...

    def new_fold(self) -> Fold: ...

    def whole(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """A non-streamed answer as the stream events that would have carried it."""
        ...

    def tool_outputs(self, message: Message) -> list[ToolOutput]: ...

    def with_user_message(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        """``body`` with ``text`` added as the user's last words (``record --fork --message``)."""
        ...


@dataclass
class SseDecoder:
    """Splits a ``text/event-stream`` body, fed in pieces as they arrive, into its events'
    data (JSON text; ``[DONE]`` and comments dropped). Bytes are kept until an event is whole."""

    _pending: bytes = b""
    _data: list[str] = field(default_factory=list)

    def feed(self, data: bytes) -> list[str]:
        self._pending += data
        lines = self._pending.split(b"\n")
        self._pending = lines.pop()
        events: list[str] = []
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            if not line:
                self._flush(events)
            elif line.startswith("data:"):
                self._data.append(line[5:].removeprefix(" "))
        return events

    def close(self) -> list[str]:
        """Whatever the stream held at its end (an event without its blank line)."""
        events = self.feed(b"\n\n") if self._pending else []
        self._flush(events)
        return events

    def _flush(self, events: list[str]) -> None:
        if self._data:
            text = "\n".join(self._data)
            self._data = []
            if text.strip() != "[DONE]":
                events.append(text)


def stream_events(texts: list[str]) -> list[dict[str, Any]]:
    """The JSON objects among an SSE stream's event data (anything else is not an event)."""
    out = []
    for text in texts:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def builder(provider: str, model: str, chunks: list[Chunk]) -> TurnBuilder:
    """A turn builder whose deltas land in ``chunks`` (the journal records them from there)."""
    context = AgentContext(
        messages=[], tools=[], turn=0, task_id="", seed=0, on_chunk=chunks.append
    )
    return TurnBuilder(context, provider=provider, model=model)


def text_of(content: Any, kinds: tuple[str, ...] = ("text",)) -> str:
    """The text of a message's content: a string, or the text of its parts of ``kinds``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        str(part.get("text") or "")
        for part in content
        if isinstance(part, dict) and part.get("type") in kinds
    )


def split_of(
    body: dict[str, Any], messages: list[Message], tools: list[ToolSpec], fields: set[str]
) -> Split:
    """A body taken apart: ``messages`` from its ``fields``, ``tools`` from its ``tools``
    (when it declared any), everything else kept verbatim as params."""
    left_out = fields | ({"tools"} if tools else set())
    return Split(
        model=str(body.get("model") or "unknown"),
        messages=messages,
        tools=tools,
        params={k: v for k, v in body.items() if k not in left_out},
        stream=bool(body.get("stream")),
    )


def tool_spec(raw: dict[str, Any], declared: dict[str, Any], schema_key: str) -> ToolSpec:
    """A tool as the client declared it (``raw``, kept whole): its name, description and the
    schema under ``schema_key`` are read from ``declared`` (``raw`` or a part of it)."""
    schema = declared.get(schema_key)
    return ToolSpec(
        name=str(declared.get("name") or raw.get("type") or "unnamed"),
        description=str(declared.get("description") or ""),
        parameters=schema if isinstance(schema, dict) else {},
        raw=raw,
    )


def rebuilt(
    messages: list[Message], tools: list[ToolSpec], params: dict[str, Any], list_key: str
) -> dict[str, Any]:
    """A request body from the store: the params, each message as the client sent it in the
    body's ``list_key`` (or the body field it came in), the tools as declared."""
    body = dict(params)
    items = []
    for m in messages:
        if m.body_field:
            body[m.body_field] = m.raw
        else:
            items.append(m.raw)
    body.setdefault(list_key, items)
    if tools:
        body["tools"] = [t.raw for t in tools]
    return body


def role_of(value: Any) -> str:
    """A role the neutral message knows (``developer`` is the system's; unknown is a user's)."""
    if value in ("system", "developer"):
        return "system"
    return value if value in ("user", "assistant", "tool") else "user"
