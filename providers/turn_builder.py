"""``TurnBuilder``: folds one call's streamed deltas into an ``AgentTurn``.

Every delta goes to ``context.emit`` (which records it at once, and raises ``Cancelled``
when the episode is being cancelled) before it is kept, so what the builder holds is
exactly what was recorded; a partial turn built after a broken stream is what arrived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentrunner.values.model import AgentContext
from agentrunner.values.types import AgentToolCall, AgentTurn, AgentUsage, Channel, OpaquePart

UNKNOWN_EVENTS = "unknown_events"


@dataclass
class _Call:
    call_id: str
    name: str
    parts: list[str] = field(default_factory=list)
    final: str | None = None

    @property
    def arguments(self) -> str:
        return self.final if self.final is not None else "".join(self.parts)


class TurnBuilder:
    """Accumulates one model call: reasoning, text, refusal, tool calls, opaque parts."""

    def __init__(self, context: AgentContext, *, provider: str, model: str) -> None:
        self.context = context
        self.provider = provider
        self.model = model
        self.request_id: str | None = None
        self.stop_reason: str | None = None
        self.usage = AgentUsage()
        self.chunks = 0
        self._reasoning: list[str] = []
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[str, _Call] = {}
        self._unknown: list[dict[str, Any]] = []

    # -- deltas, recorded as they arrive

    def _emit(self, channel: Channel, text: str, call_id: str | None = None) -> bool:
        if not text:
            return False
        self.context.emit(channel, text, call_id)
        self.chunks += 1
        return True

    def reasoning(self, text: str) -> None:
        if self._emit("reasoning", text):
            self._reasoning.append(text)

    def text(self, text: str) -> None:
        if self._emit("text", text):
            self._text.append(text)

    def refusal(self, text: str) -> None:
        if self._emit("refusal", text):
            self._refusal.append(text)

    def start_call(self, key: str, call_id: str, name: str) -> None:
        """A tool call begins; ``key`` is how the stream refers to it (index, item id)."""
        if key not in self._calls:
            self._calls[key] = _Call(call_id=call_id, name=name)
        else:
            call = self._calls[key]
            call.call_id = call.call_id or call_id
            call.name = call.name or name

    def call_args(self, key: str, text: str) -> None:
        call = self._calls.setdefault(key, _Call(call_id=key, name=""))
        if self._emit("tool_args", text, call.call_id):
            call.parts.append(text)

    def finish_call(self, key: str, arguments: str) -> None:
        """The provider's final argument string; streams the part deltas did not carry."""
        call = self._calls.get(key)
        if call is None:
            return
        streamed = "".join(call.parts)
        if arguments.startswith(streamed):
            self.call_args(key, arguments[len(streamed) :])
        call.final = arguments

    def keep_raw(self, event: dict[str, Any]) -> None:
        """Keep a stream event of a type this adapter does not know, verbatim."""
        self._unknown.append(event)

    # -- what arrived so far

    @property
    def text_so_far(self) -> str:
        return "".join(self._text)

    @property
    def reasoning_so_far(self) -> str:
        return "".join(self._reasoning)

    @property
    def refusal_so_far(self) -> str:
        return "".join(self._refusal)

    def call_id(self, key: str) -> str | None:
        call = self._calls.get(key)
        return call.call_id if call is not None else None

    def tool_calls(self) -> tuple[AgentToolCall, ...]:
        return tuple(
            AgentToolCall(call_id=c.call_id, name=c.name, arguments=c.arguments)
            for c in self._calls.values()
        )

    def turn(self, opaque: list[OpaquePart] | None = None) -> AgentTurn:
        """The turn as it stands; ``opaque`` are the provider's layout/opaque parts."""
        parts = list(opaque or [])
        if self._unknown:
            parts.append(
                OpaquePart(
                    provider=self.provider, type=UNKNOWN_EVENTS, data={"events": self._unknown}
                )
            )
        return AgentTurn(
            reasoning=self.reasoning_so_far or None,
            message=self.text_so_far,
            tool_calls=self.tool_calls(),
            usage=self.usage,
            provider=self.provider,
            model=self.model,
            provider_request_id=self.request_id,
            stop_reason=self.stop_reason,
            refusal=self.refusal_so_far or None,
            opaque=tuple(parts),
        )
