"""What the recording proxy adds to the events it records, read back typed: a request's wire
API (which rebuilds the exact body the client sent) and an answer's bytes as they passed (which
a replay serves back).

A ``model.request`` the proxy records carries ``api``; a ``model.response`` or ``error`` for
a call it forwarded carries ``answer``. Events that did not come through the proxy have
neither, and these read them as None.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError


class _Extras(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ProxiedRequest(_Extras):
    """A ``model.request``'s wire API, when the proxy recorded it."""

    api: str | None = None


class KeptAnswer(_Extras):
    """The answer's bytes, kept as a blob with their HTTP status and content type."""

    status: int | None = None
    content_type: str | None = None
    body: str
    """The blob's hash."""


class ProxiedAnswer(_Extras):
    """A ``model.response`` or ``error``'s kept answer, and how long the call took."""

    answer: KeptAnswer | None = None
    latency_s: float | None = None


def proxied_request(payload: dict[str, Any]) -> ProxiedRequest:
    """The proxy's part of a ``model.request`` payload (``api`` None when it is not one)."""
    try:
        return ProxiedRequest.model_validate(payload)
    except ValidationError:  # an ``api`` that is not a wire API's name
        return ProxiedRequest()


def proxied_answer(payload: dict[str, Any]) -> ProxiedAnswer:
    """The proxy's part of a ``model.response`` or ``error`` payload (``answer`` None when
    the proxy kept none, or kept one that is not an answer's record)."""
    try:
        return ProxiedAnswer.model_validate(payload)
    except ValidationError:
        return ProxiedAnswer()
