"""``RequestDiffScreen``: what changed in one model call's request against the call before
(``agentrunner show EP --request-diff K`` in the TUI), read in a worker."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from agentrunner.request_diff import describe, diff, pick
from agentrunner.tui import keys
from agentrunner.tui.work import ReaderScreen

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend


def request_diff_lines(store: StoreBackend, episode_id: str, turn: int) -> list[Text]:
    """Call ``turn`` against the call before it, as lines (read in a worker)."""
    before, after = pick(store, episode_id, str(turn))
    return describe(diff(before, after), verbose=True)


@keys.listed("Request diff")
class RequestDiffScreen(ReaderScreen):
    """One model call's request compared with the one before it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "scroll(1)", "Down", show=False, id="request_diff.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="request_diff.up"),
        Binding("escape", "back", "Back", id="request_diff.back"),
    ]

    def __init__(self, episode_id: str, turn: int) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.turn = turn

    def compose(self) -> ComposeResult:
        yield Static(
            f"request of call {self.turn} of {self.ids(self.episode_id)} against the call"
            " before it…",
            id="request-diff-header",
        )
        with VerticalScroll(id="request-diff-scroll"):
            yield Static(id="request-diff-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#request-diff-scroll").focus()
        self.read(
            request_diff_lines,
            self.episode_id,
            self.turn,
            then=self._loaded,
            on_error=self._failed,
        )

    def _failed(self, error: str) -> None:
        self.dismiss()  # the error was shown already

    def _loaded(self, lines: list[Text]) -> None:
        self.lines = lines
        self.query_one("#request-diff-body", Static).update(Text("\n").join(lines))

    def action_scroll(self, lines: int) -> None:
        self.query_one("#request-diff-scroll", VerticalScroll).scroll_relative(
            y=lines, animate=False
        )

    def action_back(self) -> None:
        self.dismiss()
