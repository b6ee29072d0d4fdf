"""``HelpScreen``: every key of every screen, with its binding id (for keymaps)."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from agentrunner.tui.keys import binding_sections


class HelpScreen(ModalScreen[None]):
    """Lists the bindings of the app and of each screen (keymap overrides applied)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="help.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="help.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, str, str]] = []  # (keys, what it does, binding id)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(self._table(), id="help-text")

    def _keys(self, binding: Binding) -> str:
        overrides: dict[str, str] = getattr(self.app, "keymap_overrides", {})
        keys = overrides.get(binding.id or "", binding.key)
        return " ".join(
            self.app.get_key_display(replace(binding, key=k.strip(), key_display=None))
            for k in keys.split(",")
        )

    def _table(self) -> Table:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("key", no_wrap=True)
        table.add_column("does")
        table.add_column("binding id", style="dim", no_wrap=True)
        for title, bindings in binding_sections():
            table.add_row(Text(title, style="bold underline"), "", "")
            for b in _as_bindings(bindings):
                row = (self._keys(b), b.description, b.id or "")
                self.rows.append(row)
                table.add_row(*row)
            table.add_row("", "", "")
        return table

    def action_close(self) -> None:
        self.dismiss()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_relative(y=lines, animate=False)


def _as_bindings(bindings: list[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]
