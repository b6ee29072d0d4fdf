"""``show``'s untyped read of the commonest payloads (``agentrunner.cli.event_fields``)
names every field of each event model, so a field added to a model cannot slip past its
type check; and what it accepts is what the typed read gives."""

from __future__ import annotations

import json

import pytest

from agentrunner.cli import event_fields
from agentrunner.values import events

MODELS = {
    "model.request": events.ModelRequest,
    "model.chunk": events.ModelChunk,
    "model.response": events.ModelResponse,
    "usage": events.Usage,
    "tool.call": events.ToolCall,
    "tool.result": events.ToolResult,
}
TYPED_ONLY = {"model.response": {"opaque"}}
"""Fields whose rows are always read typed (a response with opaque parts)."""


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_field_of_the_model_is_checked(kind: str) -> None:
    declared = set(MODELS[kind].model_fields) - {"kind"} - TYPED_ONLY.get(kind, set())
    listed = set(event_fields._REQUIRED[kind]) | set(event_fields._OPTIONAL[kind])
    assert listed == declared, f"{kind}: add {declared - listed}, remove {listed - declared}"


def test_an_accepted_payload_reads_as_the_typed_model_does() -> None:
    usage = events.Usage(call_id="c", input_tokens=3, price_source="genai-prices")
    raw = usage.model_dump_json()
    fields = event_fields.read_fields("usage", raw)
    assert fields is not None and events.Usage.model_validate(fields) == usage
    converted = json.dumps({**json.loads(raw), "input_tokens": "3"})  # the model converts it
    assert event_fields.read_fields("usage", converted) is None
    assert (
        event_fields.read_fields("usage", json.dumps({"call_id": "c", "price_source": 7})) is None
    )
