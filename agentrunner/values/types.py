"""Values that flow between models, the runner and environments (pure pydantic, no ids).

Identity (message hashes, event seqs) belongs to the store; these are plain data.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentrunner.values.redaction import scrub

Role = Literal["system", "user", "assistant", "tool"]
Channel = Literal["reasoning", "text", "tool_args", "refusal"]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentToolCall(_Value):
    """One tool call as the model wrote it.

    ``arguments`` is kept as the raw string the model produced (a dict is accepted and
    serialised), so malformed JSON is recorded exactly and reported back to the model.
    """

    call_id: str
    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _raw_arguments(cls, value: Any) -> str:
        if isinstance(value, str):
            return value
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a JSON object; raises ``ValueError`` with a readable reason.

        A lone surrogate the JSON text escapes (``"\\ud800"``, as providers send) becomes
        U+FFFD in the parsed form, keys too: UTF-8 cannot carry it, so neither the store nor
        a tool could; ``arguments`` keeps the text as written."""
        text = self.arguments.strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
            ) from None
        if not isinstance(value, dict):
            raise ValueError(f"arguments must be a JSON object, got {type(value).__name__}")
        return scrub(value, None)[0] if "\\" in text or not text.isascii() else value

    def checked_arguments(self) -> tuple[dict[str, Any] | None, str | None]:
        """The arguments as a JSON object and None, or None and why they are not one."""
        try:
            return self.parsed_arguments(), None
        except ValueError as exc:
            return None, str(exc)


class AgentUsage(_Value):
    """Token usage of one model call, normalised across providers.

    ``input_tokens`` includes cached tokens; ``cache_read_tokens`` / ``cache_write_tokens``
    say how many of them were read from / written to the provider's prompt cache. A count is
    None when it is unknown (an imported trace that did not say): unknown is never 0.
    """

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_tokens: int | None = 0
    cache_write_tokens: int | None = 0
    reasoning_tokens: int | None = 0

    @classmethod
    def unknown(cls) -> AgentUsage:
        """A call whose usage its source did not record."""
        return cls(
            input_tokens=None,
            output_tokens=None,
            cache_read_tokens=None,
            cache_write_tokens=None,
            reasoning_tokens=None,
        )

    cost_usd: float | None = None
    price_source: str | None = None


class OpaquePart(_Value):
    """Provider-opaque data kept verbatim (thinking signatures, encrypted reasoning, ...)."""

    provider: str
    type: str
    data: dict[str, Any]


class Message(_Value):
    """One message of the conversation, in a provider-neutral shape."""

    role: Role
    content: str = ""
    reasoning: str | None = None
    refusal: str | None = None
    tool_calls: tuple[AgentToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    opaque: tuple[OpaquePart, ...] = ()
    raw: Any = None
    """A recorded client's message exactly as it sent it (provider-native, verbatim); for a
    system prompt it sent as a body field, that field's value (see ``body_field``). None for
    the runner's own messages, whose native form the provider adapter builds."""
    body_field: str | None = None
    """The request body field a recorded system prompt came in (``system``, ``instructions``)."""


class AgentTurn(_Value):
    """What a model returns for one turn (the plain, provider-neutral form)."""

    reasoning: str | None = None
    message: str = ""
    tool_calls: tuple[AgentToolCall, ...] = ()
    usage: AgentUsage = Field(default_factory=AgentUsage)
    provider: str | None = None
    model: str | None = None
    provider_request_id: str | None = None
    stop_reason: str | None = None
    refusal: str | None = None
    opaque: tuple[OpaquePart, ...] = ()

    def to_message(self) -> Message:
        return Message(
            role="assistant",
            content=self.message,
            reasoning=self.reasoning,
            refusal=self.refusal,
            tool_calls=self.tool_calls,
            opaque=self.opaque,
        )


class ToolSpec(_Value):
    """A tool offered to the model: name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )
    raw: dict[str, Any] | None = None
    """The tool exactly as a recorded client declared it (provider-native), or None."""


class Chunk(_Value):
    """One streamed delta as it arrives from the model."""

    channel: Channel
    text: str
    tool_call_id: str | None = None
