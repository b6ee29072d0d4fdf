"""Retrying calls to flaky network services."""

import logging
import time

log = logging.getLogger(__name__)

TRANSIENT_ERRORS = (ConnectionError, TimeoutError)


def call_with_retry(func, attempts=3, retry_on=TRANSIENT_ERRORS, backoff=0.5, sleep=time.sleep):
    """Call ``func()`` and return its result, retrying transient failures.

    * Only exceptions that are instances of ``retry_on`` are retried; any other exception
      propagates immediately.
    * ``func`` is called at most ``attempts`` times. Between two attempts we wait
      ``backoff``, then ``2 * backoff``, ``4 * backoff``... seconds (using ``sleep``); there
      is no wait after the last attempt.
    * If every attempt fails, the exception from the last attempt is raised.
    * Whatever ``func`` returns is returned as is (None, 0 and [] are valid results).
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    delay = backoff
    for attempt in range(1, attempts + 1):
        try:
            result = func()
            if result:
                return result
        except Exception as exc:
            log.warning("attempt %d/%d failed: %s", attempt, attempts, exc)
        sleep(delay)
        delay *= 2
    return None
