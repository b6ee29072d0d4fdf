"""The listing's plain reads of a recorded model and environment
(``agentrunner.values.spec_text``, no pydantic) give the text the typed reads
(``agentrunner.values.specs``) give, odd records included."""

from __future__ import annotations

from typing import Any

import pytest

from agentrunner.values.spec_text import env_kind, model_text
from agentrunner.values.specs import env_spec, model_spec

MODELS: list[dict[str, Any]] = [
    {"spec": "scripted:demo", "provider": "scripted", "model": "demo"},
    {},
    {"spec": None},
    {"spec": 7, "model": "gpt"},
    {"spec": "", "agent": "codex"},
]
ENVS: list[dict[str, Any]] = [
    {"kind": "workspace", "tasks": "bundled"},
    {"kind": "openenv", "url": "http://127.0.0.1:1"},
    {"kind": "import", "format": "atif", "path": 3},
    {"kind": "replay"},
    {"kind": "mine", "x": 1},
    {"kind": 5},
    {},
]


@pytest.mark.parametrize("recorded", MODELS)
def test_the_model_text_is_the_typed_specs(recorded: dict[str, Any]) -> None:
    assert model_text(recorded) == model_spec(recorded).spec


@pytest.mark.parametrize("recorded", ENVS)
def test_the_env_kind_is_the_typed_specs(recorded: dict[str, Any]) -> None:
    assert env_kind(recorded) == env_spec(recorded).kind
