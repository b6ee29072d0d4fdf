"""Critical sections: where a Ctrl-C must not land (a store append), a value beneath the store.

Inside ``with critical:`` an interrupt that arrives is kept in the thread's :data:`state` and
raised as ``KeyboardInterrupt`` when the outermost section ends, so an event is either fully
committed and counted or not written at all. The SIGINT handler that fills ``state`` is the
runtime's (:mod:`agentrunner.runtime.interrupts`); the store only marks its sections.
"""

from __future__ import annotations

import threading


class _State(threading.local):
    """Per-thread interrupt state (class defaults: no lookups with fallbacks on the hot path)."""

    depth = 0
    pending: str | None = None
    raised = False
    suppressed = False


state = _State()


class _Critical:
    """Context manager marking a section where KeyboardInterrupt must not land."""

    __slots__ = ()

    def __enter__(self) -> None:
        state.depth += 1

    def __exit__(self, *exc: object) -> None:
        depth = state.depth = state.depth - 1
        if depth == 0 and state.pending:
            reason = state.pending
            state.pending = None
            state.raised = True
            raise KeyboardInterrupt(reason)


critical = _Critical()
