"""Translate a provider's failure into the project's typed errors: the one boundary.

The SDK adapters pull what they know out of an SDK exception (HTTP status, the provider's
error type and code, its message, the request id) and hand it to :func:`classify`, which
picks the :mod:`agentrunner.values.errors` class and writes one clear message. Nothing here
imports an SDK.
"""

from __future__ import annotations

import re

from agentrunner.values.errors import (
    BadRequestError,
    ContextOverflowError,
    ModelError,
    ProviderAuthError,
    ProviderConfigError,
    ProviderServerError,
    RateLimitError,
)

# Codes and messages the providers use when the history no longer fits the context window.
_OVERFLOW_CODES = frozenset(
    {"context_length_exceeded", "exceed_context_size_error", "prompt_too_long", "request_too_large"}
)
_OVERFLOW_TEXT = re.compile(
    r"context[_ ]length|context window|context size|maximum context|prompt is too long|"
    r"input length and `?max_tokens`? exceed|too many (?:input )?tokens|"
    r"exceeds? the (?:model'?s? )?(?:context|maximum (?:context|input))",
    re.IGNORECASE,
)
# Error types a provider reports in its body (or in a mid-stream error event).
_TYPE_CLASSES: dict[str, type[ModelError]] = {
    "authentication_error": ProviderAuthError,
    "permission_error": ProviderAuthError,
    "rate_limit_error": RateLimitError,
    "rate_limit_exceeded": RateLimitError,
    "overloaded_error": ProviderServerError,
    "api_error": ProviderServerError,
    "server_error": ProviderServerError,
    "timeout_error": ProviderServerError,
    "invalid_request_error": BadRequestError,
    "not_found_error": BadRequestError,
    "request_too_large": ContextOverflowError,
}
_NOT_RETRYABLE_CODES = frozenset({"insufficient_quota", "billing_hard_limit_reached"})


def missing_key(env_var: str, provider: str) -> ProviderConfigError:
    """The error for a provider whose API key is not set (one short line, so that it
    does not wrap on an 80-column terminal)."""
    return ProviderConfigError(f"{env_var} is not set; export it to use {provider} models")


def connection_detail(exc: BaseException) -> str:
    """An SDK connection error's message with its underlying cause."""
    cause = exc.__cause__
    text = str(exc) or type(exc).__name__
    return f"{text} ({cause})" if cause is not None and str(cause) not in text else text


def classify(
    *,
    provider: str,
    message: str,
    status: int | None = None,
    error_type: str | None = None,
    code: str | None = None,
    request_id: str | None = None,
    env_var: str | None = None,
    secret: str | None = None,
) -> ModelError:
    """The typed error for one failure.

    ``status`` is the HTTP status (``None`` when the connection failed, 200 for an error
    event inside a stream); ``error_type`` / ``code`` are the provider's own words for it.
    ``secret`` (the API key) is scrubbed from the message if the provider echoed it.
    """
    text = " ".join(message.split()) or "no details"
    if secret:
        text = text.replace(secret, "[redacted]")
    where = f"{provider}" + (f" (HTTP {status})" if status and status != 200 else "")
    tail = f" [request id {request_id}]" if request_id else ""
    cls = _pick(status, error_type, code, text)
    if cls is ProviderAuthError:
        hint = f"; check {env_var}" if env_var else ""
        return ProviderAuthError(f"{where} refused the credentials: {text}{hint}{tail}")
    if cls is ContextOverflowError:
        return ContextOverflowError(f"{where}: the history no longer fits: {text}{tail}")
    if cls is RateLimitError:
        if code in _NOT_RETRYABLE_CODES:
            return RateLimitError(f"{where} quota exhausted: {text}{tail}", retryable=False)
        return RateLimitError(f"{where} rate-limited the call: {text}{tail}")
    if cls is ProviderServerError:
        if status is None:
            return ProviderServerError(f"cannot reach {provider}: {text}{tail}")
        return ProviderServerError(f"{where} failed on its side: {text}{tail}")
    if cls is BadRequestError:
        return BadRequestError(f"{where} rejected the request: {text}{tail}")
    return ModelError(f"{where}: {text}{tail}")


def _pick(
    status: int | None, error_type: str | None, code: str | None, text: str
) -> type[ModelError]:
    if code in _OVERFLOW_CODES or status == 413:
        return ContextOverflowError
    if code in _NOT_RETRYABLE_CODES:
        return RateLimitError
    by_type = _TYPE_CLASSES.get(error_type or "") or _TYPE_CLASSES.get(code or "")
    by_status = _by_status(status)
    # Inside a stream (or without a response) the provider's error type is all there is.
    cls = by_type if by_type is not None and status in (None, 200) else by_status or by_type
    if cls in (BadRequestError, ProviderServerError, None) and _OVERFLOW_TEXT.search(text):
        return ContextOverflowError
    return cls or ModelError


def _by_status(status: int | None) -> type[ModelError] | None:
    if status is None or status == 200:  # connection failed, or an error event mid-stream
        return ProviderServerError
    if status in (401, 403):
        return ProviderAuthError
    if status == 429:
        return RateLimitError
    if status in (408, 409) or status >= 500:
        return ProviderServerError
    if 400 <= status < 500:
        return BadRequestError
    return None
