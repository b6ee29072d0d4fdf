"""``CompactionScreen``: the messages a compaction replaced, the history behind its summary
(``h`` on a compaction row of the trace), read in a worker."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from agentrunner.store import Segment
from agentrunner.tui import keys
from agentrunner.tui.compaction import replaced_history
from agentrunner.tui.work import ReaderScreen


@keys.listed("Compaction history")
class CompactionScreen(ReaderScreen):
    """The history a compaction's summary stands for, message by message."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "scroll(1)", "Down", show=False, id="compaction.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="compaction.up"),
        Binding("escape", "back", "Back", id="compaction.back"),
    ]

    def __init__(self, episode_id: str, segments: list[Segment], seq: int) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.segments = segments
        self.seq = seq
        self.messages: list[RenderableType] = []

    def compose(self) -> ComposeResult:
        yield Static(
            Text(f"the history behind the compaction at seq {self.seq}…"), id="compaction-header"
        )
        with VerticalScroll(id="compaction-scroll"):
            yield Static(id="compaction-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#compaction-scroll").focus()
        self.read(
            replaced_history,
            self.episode_id,
            self.segments,
            self.seq,
            then=self._loaded,
            on_error=self._failed,
        )

    def _failed(self, error: str) -> None:
        self.dismiss()  # the error was shown already

    def _loaded(self, history: tuple[str, list[RenderableType]]) -> None:
        title, self.messages = history
        self.query_one("#compaction-header", Static).update(Text(title))
        body = Group(*self.messages) if self.messages else Text("(no messages recorded)")
        self.query_one("#compaction-body", Static).update(body)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#compaction-scroll", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_back(self) -> None:
        self.dismiss()
