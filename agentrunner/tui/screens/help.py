"""``HelpScreen``: the keys of the screen help was opened on, then the keys that work
everywhere; ``a`` adds every other screen's (with binding ids, for keymaps)."""

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

from agentrunner.tui.keys import EVERYWHERE, binding_sections, listed


@listed("Help")
class HelpScreen(ModalScreen[None]):
    """Lists bindings by screen, the one it was opened on first (keymap overrides applied)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close"),
        Binding("a", "all", "All screens' keys", id="help.all"),
        Binding("j,down", "scroll(1)", "Down", show=False, id="help.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="help.up"),
    ]

    def __init__(self, section: str | None = None) -> None:
        """``section``: the title of the screen's section in ``binding_sections`` (None:
        help opened where no screen's keys apply, e.g. on another dialog)."""
        super().__init__()
        self.section = section
        self.show_all = False
        self.rows: list[tuple[str, str, str]] = []  # (keys, what it does, binding id)
        self.titles: list[str] = []  # the sections shown, in order

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

    def _sections(self) -> list[tuple[str, list[BindingType]]]:
        """This screen's section, then the global one, then (``a``) the others."""
        sections = dict(binding_sections())
        order = [t for t in (self.section, EVERYWHERE) if t in sections]
        if self.show_all:
            order += [t for t in sections if t not in order]
        return [(t, sections[t]) for t in order]

    def _table(self) -> Table:
        table = Table(box=None, expand=True, show_header=True, header_style="bold")
        table.add_column("key", no_wrap=True)
        table.add_column("does")
        table.add_column("binding id", style="dim", no_wrap=True)
        self.rows, self.titles = [], []
        for title, bindings in self._sections():
            shown = f"{title} (this screen)" if title == self.section else title
            self.titles.append(shown)
            table.add_row(Text(shown, style="bold underline"), "", "")
            for b in _as_bindings(bindings):
                row = (self._keys(b), b.description, b.id or "")
                self.rows.append(row)
                table.add_row(*row)
            table.add_row("", "", "")
        if not self.show_all:
            table.add_row("a", "the keys of every other screen", "")
        return table

    def action_all(self) -> None:
        self.show_all = not self.show_all
        self.query_one("#help-text", Static).update(self._table())

    def action_close(self) -> None:
        self.dismiss()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#help-box", VerticalScroll).scroll_relative(y=lines, animate=False)


def _as_bindings(bindings: list[BindingType]) -> list[Binding]:
    return [b for b in bindings if isinstance(b, Binding)]
