"""Folds a Responses API stream (``POST /v1/responses``, ``stream=True``) into a turn.

Reasoning summary (and raw reasoning text) deltas become ``reasoning`` chunks, output text
deltas ``text``, refusal deltas ``refusal``, function-call argument deltas ``tool_args``
under the call's ``call_id``. Finished output items (``response.output_item.done``) are
kept verbatim for the next request; an ``error`` event or ``response.failed`` becomes a
typed error; event types this fold does not know are kept raw on the turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentrunner.values.errors import ModelError
from agentrunner.values.types import AgentTurn
from providers._errors import classify
from providers.openai_messages import layout_parts
from providers.streaming import StreamFailure
from providers.turn_builder import TurnBuilder
from providers.usage import from_openai_responses

# Known events that carry nothing the turn needs beyond what other events already give.
_IGNORED = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
    }
)
_STARTED = frozenset({"response.created", "response.in_progress", "response.queued"})


def _texts(item: dict[str, Any], key: str, kinds: set[str]) -> str:
    return "".join(
        str(part.get("text") or part.get("refusal") or "")
        for part in item.get(key) or []
        if isinstance(part, dict) and part.get("type") in kinds
    )


class ResponsesFold:
    """State of one Responses stream: output items by index and what each streamed."""

    def __init__(self, provider: str = "OpenAI") -> None:
        self.provider = provider  # who answered, for error messages
        self.items: dict[int, dict[str, Any]] = {}
        self.service_tier: str | None = None
        self._streamed: dict[tuple[int, str], str] = {}

    def feed(self, event: dict[str, Any], builder: TurnBuilder) -> None:
        kind = str(event.get("type", ""))
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event, builder)
        elif kind in _STARTED:
            self._response_meta(event.get("response") or {}, builder)
        elif kind not in _IGNORED:
            builder.keep_raw(event)

    def turn(self, builder: TurnBuilder) -> AgentTurn:
        return builder.turn(layout_parts([self.items[i] for i in sorted(self.items)]))

    # -- deltas

    def _delta(self, event: dict[str, Any], channel: str, emit: Callable[[str], None]) -> None:
        text = str(event.get("delta") or "")
        emit(text)
        key = (int(event.get("output_index", 0)), channel)
        self._streamed[key] = self._streamed.get(key, "") + text

    def _text(self, event: dict[str, Any], b: TurnBuilder) -> None:
        self._delta(event, "text", b.text)

    def _refusal(self, event: dict[str, Any], b: TurnBuilder) -> None:
        self._delta(event, "refusal", b.refusal)

    def _reasoning(self, event: dict[str, Any], b: TurnBuilder) -> None:
        self._delta(event, "reasoning", b.reasoning)

    def _call_added(self, event: dict[str, Any], b: TurnBuilder) -> None:
        item = event.get("item") or {}
        if item.get("type") == "function_call":
            key = str(event.get("output_index", 0))
            _start_call(b, key, item)

    def _call_args(self, event: dict[str, Any], b: TurnBuilder) -> None:
        b.call_args(str(event.get("output_index", 0)), str(event.get("delta") or ""))

    def _call_args_done(self, event: dict[str, Any], b: TurnBuilder) -> None:
        b.finish_call(str(event.get("output_index", 0)), str(event.get("arguments") or ""))

    # -- finished items and the response

    def _item_done(self, event: dict[str, Any], b: TurnBuilder) -> None:
        index = int(event.get("output_index", len(self.items)))
        self._take_item(index, event.get("item") or {}, b)

    def _take_item(self, index: int, item: dict[str, Any], b: TurnBuilder) -> None:
        """Keep a finished item; stream whatever of it no delta carried (some servers
        send only finished items)."""
        self.items[index] = item
        kind = item.get("type")
        if kind == "function_call":
            key = str(index)
            _start_call(b, key, item)
            b.finish_call(key, str(item.get("arguments") or ""))
        elif kind == "message":
            self._catch_up(index, "text", _texts(item, "content", {"output_text"}), b.text)
            self._catch_up(index, "refusal", _texts(item, "content", {"refusal"}), b.refusal)
        elif kind == "reasoning":
            full = _texts(item, "summary", {"summary_text"}) or _texts(
                item, "content", {"reasoning_text"}
            )
            self._catch_up(index, "reasoning", full, b.reasoning)

    def _catch_up(self, index: int, channel: str, full: str, emit: Callable[[str], None]) -> None:
        streamed = self._streamed.get((index, channel), "")
        if len(full) > len(streamed) and full.startswith(streamed):
            emit(full[len(streamed) :])
            self._streamed[(index, channel)] = full

    def _response_meta(self, response: dict[str, Any], b: TurnBuilder) -> None:
        b.model = str(response.get("model") or b.model)
        tier = response.get("service_tier")
        self.service_tier = str(tier) if tier else self.service_tier
        if isinstance(response.get("usage"), dict):
            b.usage = from_openai_responses(response["usage"])

    def _finished(self, event: dict[str, Any], b: TurnBuilder) -> None:
        response = event.get("response") or {}
        self._response_meta(response, b)
        if not self.items:  # no output_item.done events: take the response's own output
            for index, item in enumerate(response.get("output") or []):
                self._take_item(index, item, b)
        if response.get("status") == "incomplete":
            details = response.get("incomplete_details") or {}
            b.stop_reason = str(details.get("reason") or "max_output_tokens")
        else:
            b.stop_reason = str(response.get("status") or "completed")

    def _failed(self, event: dict[str, Any], b: TurnBuilder) -> None:
        response = event.get("response") or {}
        self._response_meta(response, b)
        error = response.get("error") or {}
        raise StreamFailure(_typed(self.provider, error, b))

    def _error(self, event: dict[str, Any], b: TurnBuilder) -> None:
        raise StreamFailure(_typed(self.provider, event.get("error") or event, b))


def _start_call(b: TurnBuilder, key: str, item: dict[str, Any]) -> None:
    call_id = item.get("call_id") or item.get("id") or key
    b.start_call(key, str(call_id), str(item.get("name") or ""))


def _typed(provider: str, error: dict[str, Any], b: TurnBuilder) -> ModelError:
    kind = error.get("type")
    return classify(
        provider=provider,
        status=200,
        error_type=str(kind) if kind and kind != "error" else None,
        code=str(error["code"]) if error.get("code") else None,
        message=str(error.get("message") or "the response failed"),
        request_id=b.request_id,
    )


_HANDLERS: dict[str, Callable[[ResponsesFold, dict[str, Any], TurnBuilder], None]] = {
    "response.output_text.delta": ResponsesFold._text,
    "response.refusal.delta": ResponsesFold._refusal,
    "response.reasoning_summary_text.delta": ResponsesFold._reasoning,
    "response.reasoning_text.delta": ResponsesFold._reasoning,
    "response.output_item.added": ResponsesFold._call_added,
    "response.function_call_arguments.delta": ResponsesFold._call_args,
    "response.function_call_arguments.done": ResponsesFold._call_args_done,
    "response.output_item.done": ResponsesFold._item_done,
    "response.completed": ResponsesFold._finished,
    "response.incomplete": ResponsesFold._finished,
    "response.failed": ResponsesFold._failed,
    "error": ResponsesFold._error,
}
