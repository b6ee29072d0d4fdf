"""A stored message as ``show`` reads it: a plain one (text and reasoning, no tool calls) from
its JSON fields, anything else through the :class:`~agentrunner.values.types.Message` model, so
a transcript of plain messages loads no pydantic model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend
    from agentrunner.values.types import Message

PLAIN_FIELDS = frozenset({"role", "content", "reasoning", "refusal", "name", "body_field", "raw"})
"""The keys a plain message may hold (the model's own, but tool calls and opaque parts)."""


@dataclass(frozen=True)
class PlainMessage:
    """What ``show`` reads of a message with no tool calls."""

    content: str
    reasoning: str | None
    tool_calls: tuple[()] = ()


def _plain(data: dict[str, Any]) -> PlainMessage | None:
    content, reasoning = data.get("content", ""), data.get("reasoning")
    typed = isinstance(data.get("role"), str) and isinstance(content, str)
    if typed and (reasoning is None or isinstance(reasoning, str)) and data.keys() <= PLAIN_FIELDS:
        return PlainMessage(content, reasoning)
    return None


def read_message(store: StoreBackend, message_hash: str) -> PlainMessage | Message:
    """The message ``message_hash`` names: plain from its fields, else the typed model (a
    missing one raises the store's ``StoreError``)."""
    data = store.message_json(message_hash)
    plain = _plain(data)
    if plain is not None:
        return plain
    from agentrunner.values.types import Message

    return Message.model_validate(data)
