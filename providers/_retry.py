"""Bounded retries of one model call, each failed attempt reported before the next.

Only failures that happened before anything was streamed are retried (a rate limit, a
5xx, a dropped connection, an overload error as the stream's first event); once a chunk
is recorded, the call is never re-sent behind the recorder's back. Waits follow the
provider's ``retry-after`` when it gives one, else exponential backoff, and stop at once
when the episode is cancelled.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from agentrunner.values.errors import ModelError, ProviderServerError, RateLimitError
from agentrunner.values.model import AgentContext

T = TypeVar("T")
_RETRY_AFTER = "_agentrunner_retry_after"


def with_retry_after(error: ModelError, seconds: float | None) -> ModelError:
    """Attach the provider's ``retry-after`` hint (seconds) to a typed error."""
    if seconds is not None and seconds >= 0:
        setattr(error, _RETRY_AFTER, seconds)
    return error


def parse_retry_after(headers: object) -> float | None:
    """``retry-after-ms`` / ``retry-after`` (seconds) from response headers, if numeric."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = get(name)
        try:
            return float(value) * scale if value is not None else None
        except ValueError:
            continue
    return None


def call_with_retries(
    context: AgentContext,
    attempt: Callable[[], T],
    *,
    max_retries: int,
    base_delay: float,
    max_delay: float,
) -> T:
    """Run ``attempt`` until it succeeds, retrying retryable failures ``max_retries`` times.

    Each failure that will be retried is recorded first with
    ``context.report_error(error, attempt_number)``.
    """
    number = 1
    while True:
        try:
            return attempt()
        except (RateLimitError, ProviderServerError) as error:
            if not error.retryable or number > max_retries:
                if number > 1:  # the live view shows no "(retryable)" after this phrase
                    final = type(error)(
                        f"{error} (gave up after {number} attempts)", retryable=error.retryable
                    )
                    final.attempt = number
                    raise final from None
                raise
            context.report_error(error, number)
            _sleep(context, _delay(error, number, base_delay, max_delay))
            number += 1


def _delay(error: ModelError, number: int, base: float, cap: float) -> float:
    hinted = getattr(error, _RETRY_AFTER, None)
    if isinstance(hinted, float | int):
        return min(float(hinted), cap)
    backoff = min(cap, base * 2 ** (number - 1))
    return backoff * random.uniform(0.8, 1.0)


def _sleep(context: AgentContext, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        context.check_cancel()
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))
