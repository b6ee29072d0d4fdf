"""Store reads off the UI thread: run in a thread worker, results come back as messages.

``ReaderScreen.read(fn, *args, then=callback)`` calls ``fn(store, *args)`` in a thread
worker (each worker thread has its own SQLite connection: ``TraceStore`` keeps one per
thread) and posts :class:`WorkDone` back to the screen, whose handler calls ``then`` on the
UI thread. Expected failures (the project's errors, SQLite errors) come back as
:class:`WorkFailed` and are shown as notifications. Every screen of the app with a footer is
a ``ReaderScreen``: it also shows episode ids the app's one way (``ids``) and lists the keys
for help and quit first in its footer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from textual.binding import ActiveBinding
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker

from agentrunner.tui.format import IdPrefixes
from agentrunner.tui.keys import pinned_first
from agentrunner.values.errors import AgentRunnerError
from agentrunner.values.safe_text import visible

if TYPE_CHECKING:
    from agentrunner.tui.app import AgentRunnerApp

T = TypeVar("T")


class WorkDone(Message):
    """A worker's value, to be applied on the UI thread."""

    def __init__(self, apply: Callable[[Any], None], value: Any) -> None:
        super().__init__()
        self.apply, self.value = apply, value


class WorkFailed(Message):
    """A worker failed with an expected error (shown to the user)."""

    def __init__(self, error: str, on_error: Callable[[str], None] | None) -> None:
        super().__init__()
        self.error, self.on_error = error, on_error


class ReaderScreen(Screen[None]):
    """A screen whose store reads run in thread workers (and whose footer lists the keys
    for help and quit first, where a narrow terminal cannot hide them)."""

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        return pinned_first(super().active_bindings)

    @property
    def ids(self) -> IdPrefixes:
        """How episode ids are shown: their shortest prefix unique in the store."""
        return self.runner_app.ids

    @property
    def runner_app(self) -> AgentRunnerApp:
        """The app, typed: screens of this package only run inside :class:`AgentRunnerApp`."""
        return cast("AgentRunnerApp", self.app)

    def read(
        self,
        fn: Callable[..., T],
        *args: Any,
        then: Callable[[T], None],
        group: str = "read",
        exclusive: bool = False,
        on_error: Callable[[str], None] | None = None,
    ) -> Worker[None]:
        """Run ``fn(store, *args)`` in a thread worker; call ``then(value)`` on the UI thread."""

        def work() -> None:
            try:
                with self.runner_app.reading() as store:
                    value = fn(store, *args)
            except AgentRunnerError as exc:
                self.post_message(WorkFailed(str(exc), on_error))
                return
            self.post_message(WorkDone(then, value))

        return self.run_worker(work, thread=True, group=group, exclusive=exclusive)

    def on_work_done(self, message: WorkDone) -> None:
        message.stop()
        message.apply(message.value)

    def on_work_failed(self, message: WorkFailed) -> None:
        message.stop()
        self.notify(
            visible(message.error), title="error", severity="error", timeout=8, markup=False
        )
        if message.on_error is not None:
            message.on_error(message.error)
