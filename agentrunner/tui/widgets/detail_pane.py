"""``DetailPane``: the selected event rendered in full (a scrollable Rich renderable)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from agentrunner.tui.detail import Detail


class DetailPane(VerticalScroll, can_focus=True):
    """Shows a :class:`~agentrunner.tui.detail.Detail`; the screen sets ``detail``."""

    ALLOW_MAXIMIZE = True
    detail: reactive[Detail | None] = reactive(None, init=False)

    def compose(self) -> ComposeResult:
        yield Static("select an event", id="detail-body")

    def watch_detail(self, detail: Detail | None) -> None:
        body = self.query_one("#detail-body", Static)
        if detail is None:
            self.border_title = ""
            body.update("select an event")
            return
        self.border_title = Text(detail.title)  # a Text: never read as markup
        self.border_subtitle = "o: full output" if detail.truncated else ""
        body.update(detail.body)
        self.scroll_home(animate=False)
