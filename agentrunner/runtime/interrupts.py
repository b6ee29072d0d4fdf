"""Ctrl-C and cross-thread cancel delivered at safe points.

While a run is active on the main thread, SIGINT raises ``KeyboardInterrupt`` as usual,
except inside a ``critical`` section (a store append, :mod:`agentrunner.values.critical`), where it
is deferred to the end of the section, so an event is either fully committed and counted or
not written at all.
Once one interrupt has been raised, further ones are ignored until the run ends, so a
second Ctrl-C cannot cut the recording of the cancel and the episode's end.
"""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from agentrunner.values.critical import critical as critical  # re-exported: its old address
from agentrunner.values.critical import state as _local


class _Policy:
    """Process-wide: whether a cancelled run leaves SIGINT ignored (see :func:`cancel_is_final`)."""

    ignore_after_cancel = False


_policy = _Policy()


@contextmanager
def cancel_is_final() -> Iterator[None]:
    """For a command line: once a run is cancelled by Ctrl-C the process only reports and
    exits, so later Ctrl-Cs are ignored instead of killing it before it has said how it
    ended. A library caller (a notebook, a server) keeps its own SIGINT handling."""
    previous = _policy.ignore_after_cancel
    _policy.ignore_after_cancel = True
    try:
        yield
    finally:
        _policy.ignore_after_cancel = previous


class _Suppressed:
    """Context manager: while finishing a cancel, further interrupts are ignored."""

    __slots__ = ()

    def __enter__(self) -> None:
        _local.suppressed = True

    def __exit__(self, *exc: object) -> None:
        _local.suppressed = False


suppressed = _Suppressed()


_next_reason: str | None = None  # set by interrupt_main(), read by the handler


def _handler(signum: int, frame: FrameType | None) -> None:
    """The SIGINT handler (it runs on the main thread, so ``_local`` is the main thread's)."""
    global _next_reason
    reason, _next_reason = _next_reason or "SIGINT", None
    if _local.suppressed or _local.raised:
        return  # the run is already cancelling: a second Ctrl-C must not break its ending
    if _local.depth > 0:
        _local.pending = reason
        return
    _local.raised = True
    raise KeyboardInterrupt(reason)


def interrupt_main(reason: str) -> None:
    """From another thread: interrupt the main thread as Ctrl-C would, with a reason."""
    global _next_reason
    _next_reason = reason
    _thread.interrupt_main(signal.SIGINT)


@contextmanager
def sigint_guard() -> Iterator[bool]:
    """Install the deferring SIGINT handler for the duration (main thread only).

    Yields whether it was installed; off the main thread nothing changes and cancellation
    is cooperative only.
    """
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = signal.signal(signal.SIGINT, _handler)
    _local.raised = False
    try:
        yield True
    finally:
        cancelled = _local.raised
        _local.raised = False
        signal.signal(
            signal.SIGINT, signal.SIG_IGN if cancelled and _policy.ignore_after_cancel else previous
        )
