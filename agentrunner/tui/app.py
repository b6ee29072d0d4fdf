"""``AgentRunnerApp``: the Textual app (screens, global keys, the store, background runs).

The episodes screen is the base; ``tui EP`` opens that episode's trace alone, and the
episodes screen takes its place when it is closed (so the first screen neither builds nor
reads the list). Screens other than the trace load when first opened. The app owns one
``TraceStore`` shared by the screens' thread workers (one SQLite connection per thread),
opened lazily on the first worker so the UI thread never touches the store.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, AwaitComplete, ScreenStackError
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen

from agentrunner.store import TraceStore
from agentrunner.tui import keys
from agentrunner.tui.format import IdPrefixes
from agentrunner.tui.keys import check_keymap, screen_section
from agentrunner.tui.runs import BackgroundRuns, RunFinished
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.values.errors import StoreError
from agentrunner.values.safe_text import visible

if TYPE_CHECKING:
    from agentrunner.store.notices import Listener
    from agentrunner.store.protocol import StoreBackend


class StoreChanged(Message):
    """Another connection changed how the store's episodes are listed (a Postgres notice)."""


POLL_S = 0.25  # live trace polling interval (episodes and branches poll every 4th tick)
OUTAGE_NOTE_S = 30.0
"""How often the app says again that its store is still out of reach."""


@keys.listed("Everywhere")
class AgentRunnerApp(App[None]):
    """Browse episodes, follow running ones, replay, branch and resume traces."""

    CSS_PATH = "styles.tcss"
    TITLE = "agentrunner"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("q", "quit", "Quit", id="app.quit"),
    ]

    def __init__(
        self,
        db_path: str | Path,
        episode: str | None = None,
        *,
        poll_s: float = POLL_S,
        keymap: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.db_path = str(db_path)
        """What opens the store again (a file's path or a database URL: never shown)."""
        self.start_episode = episode
        self.poll_s = poll_s
        self.keymap_overrides = dict(keymap or {})
        if self.keymap_overrides:
            check_keymap(self.keymap_overrides)  # Textual would ignore unknown ids silently
        self.runs = BackgroundRuns(self, self.db_path)
        self.ids = IdPrefixes()  # how every screen shows episode ids
        self.last_opened: str | None = episode
        self._store: StoreBackend | None = None
        self._store_lock = threading.Lock()
        self._reading = 0  # workers inside the store right now
        self._closing = False
        self._outage_said_at: float | None = None
        self._listener: Listener | None = None

    @contextmanager
    def reading(self) -> Iterator[StoreBackend]:
        """The app's store for one worker's reads (opened on first use, in a worker).

        Connections are closed only once no worker is inside the store: closing a
        connection another thread is using could crash SQLite.
        """
        with self._store_lock:
            if self._closing:
                raise StoreError("the app is closing")
            if self._store is None:
                self._store = TraceStore(self.db_path)
                self._listener = self._store.listen(self._heard)
            store = self._store
            self._reading += 1
        try:
            yield store
        finally:
            with self._store_lock:
                self._reading -= 1
                if self._closing and self._reading == 0:
                    self._close_store()

    @property
    def hears_changes(self) -> bool:
        """Whether the store tells the app of changes (Postgres notices): screens then poll
        only what runs, and read again when told."""
        return self._listener is not None

    def _heard(self) -> None:
        """(The listener's thread) another connection changed how episodes are listed: told
        to the UI without waiting for it (the listener never blocks on the UI)."""
        self.post_message(StoreChanged())

    def on_store_changed(self, message: StoreChanged) -> None:
        message.stop()
        with contextlib.suppress(ScreenStackError):  # no screen yet, or none left
            changed = getattr(self.screen, "store_changed", None)
            if callable(changed):
                changed()

    def _close_store(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def on_mount(self) -> None:
        self.set_interval(1.0, self._watch_store)
        if self.keymap_overrides:
            self.set_keymap(self.keymap_overrides)
        if self.start_episode:
            self.open_episode(self.start_episode)
        else:
            self.push_screen(self._episodes_screen())

    def _watch_store(self) -> None:
        """Say so while the store's server is out of reach (the screens' reads wait for it,
        so their rows stand still), and again when it is back."""
        store = self._store
        problem = None if store is None else store.unreachable()
        now = time.monotonic()
        if problem is not None:
            said = self._outage_said_at
            if said is None or now - said >= OUTAGE_NOTE_S:
                self._outage_said_at = now
                self.notify(
                    visible(problem),
                    title="store",
                    severity="warning",
                    timeout=OUTAGE_NOTE_S,
                    markup=False,
                )
        elif self._outage_said_at is not None:
            self._outage_said_at = None
            self.notify("store reachable again", title="store", markup=False)

    @staticmethod
    def _episodes_screen() -> Screen[None]:
        from agentrunner.tui.screens.episodes import EpisodesScreen  # not for `tui EP`

        return EpisodesScreen()

    def pop_screen(self) -> AwaitComplete:
        """Close the top screen; closing the trace that ``tui EP`` opened shows the episodes."""
        if len(self.screen_stack) == 2 and isinstance(self.screen, TraceScreen):
            return self.switch_screen(self._episodes_screen())
        return super().pop_screen()

    def open_episode(self, episode_id: str, *, follow: bool = False) -> None:
        self.last_opened = episode_id
        self.push_screen(TraceScreen(episode_id, follow=follow))

    def action_help(self) -> None:
        from agentrunner.tui.screens.help import HelpScreen  # loads every screen's keys

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(screen_section(self.screen)))

    async def action_quit(self) -> None:
        self.runs.stop_all()
        self.exit()

    def on_run_finished(self, message: RunFinished) -> None:
        ep = self.ids(message.episode_id)
        if message.error and message.status == "not run":
            self.notify(
                visible(f"{ep} could not run: {message.error}"),
                severity="error",
                timeout=8,
                markup=False,
            )
        else:
            reward = "-" if message.total_reward is None else f"{message.total_reward:g}"
            self.notify(f"{ep} {message.status} · reward {reward}", title="run finished")

    def on_unmount(self) -> None:
        self.runs.stop_all()
        with self._store_lock:
            self._closing = True
            if self._reading == 0:
                self._close_store()


def run_tui(
    db_path: str | Path, episode: str | None = None, *, keymap: Mapping[str, str] | None = None
) -> AgentRunnerApp:
    """Run the app until the user quits; return it (for what it opened and started)."""
    app = AgentRunnerApp(db_path, episode, keymap=keymap)
    app.run()
    return app
