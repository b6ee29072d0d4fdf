"""The writer's heartbeat thread: refreshes the lease and watches for cancel requests.

Every second it refreshes the episode's heartbeat in the control table and checks for a
cancel request from another process (or the caller's ``cancel_check``). While a shared
store's server is out of reach, a beat waits for it like every statement (up to the store's
patience: :mod:`agentrunner.store.postgres_pool`); the lease's fence keeps a writer that comes
back after another took the episode over from writing more. A request is
remembered for the runner's cooperative checks and, when the run owns the main thread,
also delivered as an interrupt so that a blocking model call or tool step stops at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentrunner.runtime import interrupts
from agentrunner.store.control import HEARTBEAT_INTERVAL_S, HEARTBEAT_STALE_S, LeaseLostError
from agentrunner.values.errors import StoreError, StoreUnreachableError

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


class Heartbeat:
    """Background lease refresher and cancel watcher for one episode."""

    def __init__(
        self,
        store: StoreBackend,
        episode_id: str,
        cancel_check: Callable[[], bool] | None,
        *,
        interrupt_main: bool,
        checkpoint: Callable[[], tuple[int, dict[str, Any]] | None] = lambda: None,
        on_store_lost: Callable[[str], None] = lambda problem: None,
        interval_s: float = HEARTBEAT_INTERVAL_S,
        lost_after_s: float = HEARTBEAT_STALE_S / 2,
    ) -> None:
        self._lost_after = lost_after_s
        self._on_store_lost = on_store_lost
        self._checkpoint = checkpoint
        self._store = store
        self._episode_id = episode_id
        self._cancel_check = cancel_check
        self._interrupt_main = interrupt_main
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="agentrunner-heartbeat", daemon=True)
        self._reason: str | None = None
        self._delivered = False

    def reason(self) -> str | None:
        """The pending cancel reason (polled by the runner between steps and chunks)."""
        if self._reason is None and self._cancel_check is not None and self._cancel_check():
            self._reason = "cancel_check"
        return self._reason

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        try:
            self._beat()
        finally:
            self._store.done_in_this_thread()

    def _beat(self) -> None:
        failing_since: float | None = None
        while not self._stop.wait(self._interval):
            problem = self._store.identity_problem()
            if problem is not None:
                self._on_store_lost(problem)
            try:
                requested = self._store.heartbeat(self._episode_id, self._checkpoint())
            except LeaseLostError as exc:  # taken over: the next append would fail anyway
                self._on_store_lost(str(exc))
                continue
            except StoreUnreachableError as exc:  # waited out for the store's patience already
                self._on_store_lost(
                    f"{exc}; episode {self._episode_id} stops here (resume it later)"
                )
                continue
            except StoreError as exc:  # a full disk: the next beat tries again
                failing_since = failing_since or time.monotonic()
                self._silent_too_long(time.monotonic() - failing_since, exc)
                continue
            failing_since = None
            if self._reason is None and requested is not None:
                self._reason = f"cancel request: {requested}"
            if self._reason is None and self._cancel_check is not None and self._cancel_check():
                self._reason = "cancel_check"
            if self._reason is not None and self._interrupt_main and not self._delivered:
                self._delivered = True
                interrupts.interrupt_main(self._reason)

    def _silent_too_long(self, silent_s: float, exc: Exception) -> None:
        """A shared (Postgres) store's writer whose heartbeat has not landed for half the
        staleness threshold stops: other machines are about to take the episode over."""
        if self._store.shared and silent_s >= self._lost_after:
            self._on_store_lost(
                f"the heartbeat has not reached the trace store {self._store.where} for"
                f" {silent_s:.0f} s ({exc}); another machine may take episode"
                f" {self._episode_id} over, so this run stops here (resume it later)"
            )
