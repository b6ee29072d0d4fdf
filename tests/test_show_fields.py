"""``show`` reads every kind of event untyped (``agentrunner.cli.event_fields``), so each of
the twelve event models has every field named there: a field added to a model cannot slip
past the type check. (``tests/test_event_fields.py`` checks the six commonest kinds so.)"""

from __future__ import annotations

from typing import get_args

import pytest
from pydantic import BaseModel

from agentrunner.cli import event_fields
from agentrunner.values import events

MODELS: dict[str, type[BaseModel]] = {
    model.model_fields["kind"].default: model
    for model in get_args(get_args(events.EventPayload)[0])
}
TYPED_ONLY = {"model.response": {"opaque"}}
"""Fields whose rows are always read typed (a response with opaque parts)."""


def test_every_kind_of_event_is_read_untyped() -> None:
    assert set(event_fields._REQUIRED) == set(event_fields._OPTIONAL) == set(MODELS)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_every_field_of_the_model_is_checked(kind: str) -> None:
    fields = MODELS[kind].model_fields
    declared = set(fields) - {"kind"} - TYPED_ONLY.get(kind, set())
    required = {name for name in declared if fields[name].is_required()}
    assert set(event_fields._REQUIRED[kind]) == required
    assert set(event_fields._OPTIONAL[kind]) == declared - required


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        ("cancel", '{"where": "nowhere", "reason": "r"}'),
        ("resume", '{"from_seq": 1, "env_restore": "none", "dangling": [1]}'),
        ("resume", '{"from_seq": 1, "env_restore": "none", "reason": "retry"}'),
        ("episode.end", '{"stop_reason": "done", "turns": 1}'),
        ("error", '{"where": "tool", "type": "T", "message": "m", "retryable": 1}'),
    ],
)
def test_a_payload_the_model_would_refuse_or_convert_is_read_typed(kind: str, payload: str) -> None:
    assert event_fields.read_fields(kind, payload) is None


def test_a_payload_of_its_types_is_read_as_stored() -> None:
    end = events.EpisodeEnd(stop_reason="done", turns=2, total_reward=None)
    fields = event_fields.read_fields("episode.end", end.model_dump_json(exclude={"kind"}))
    assert fields is not None and events.EpisodeEnd.model_validate(fields) == end
