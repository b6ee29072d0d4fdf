"""What a recorded model or environment spec says in a listing, read from its JSON dict
without validating it (no pydantic, so ``ls`` does not load the spec models): the same text
:class:`agentrunner.values.specs.ModelSpec`'s ``spec`` and
:func:`agentrunner.values.specs.env_spec`'s ``kind`` give, since a field not of its type is
left out of those reads."""

from __future__ import annotations

from typing import Any

UNKNOWN = "?"
"""The spec of a model an episode did not name (every episode this project writes names one)."""


def model_text(recorded: dict[str, Any]) -> str:
    """The recorded model's ``spec`` (``provider:model``), or :data:`UNKNOWN`."""
    spec = recorded.get("spec")
    return spec if isinstance(spec, str) else UNKNOWN


def env_kind(recorded: dict[str, Any]) -> str | None:
    """The recorded environment's ``kind``; None when it names none."""
    kind = recorded.get("kind")
    return kind if isinstance(kind, str) else None
