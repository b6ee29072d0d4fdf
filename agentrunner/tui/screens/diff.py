"""``DiffScreen``: a fork against its parent, from the fork point (unified diff)."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from agentrunner.tui import format as fmt
from agentrunner.tui import keys
from agentrunner.tui.lineage import DiffResult, diff
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.formatting import diff_line_kind
from agentrunner.values.safe_text import visible

_LINE_CLASSES = ("add", "remove", "hunk", "file")


class DiffBody(Static):
    """The diff text; line colours come from the app's ``.tcss``."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {f"diff-body--{c}" for c in _LINE_CLASSES}

    def show(self, result: DiffResult) -> None:
        text = self.coloured(result.lines, "no difference after the fork point (yet)")
        if result.truncated:
            fork = result.prefixes[result.fork.episode_id]
            text.append(f"… cut after {fork}'s first events\n")
        self.update(text)

    def coloured(self, lines: list[str], empty: str) -> Text:
        """Diff lines coloured by kind (controls shown, never obeyed); ``empty`` if none."""
        style = {
            c: self.get_component_rich_style(f"diff-body--{c}", partial=True) for c in _LINE_CLASSES
        }
        text = Text()
        if not lines:
            text.append(empty)
        for line in lines:
            kind = diff_line_kind(line)
            text.append(visible(line) + "\n", style[kind] if kind else "")
        return text


@keys.listed("Diff")
class DiffScreen(ReaderScreen):
    """A fork compared with its parent."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "scroll(1)", "Down", show=False, id="diff.down"),
        Binding("k,up", "scroll(-1)", "Up", show=False, id="diff.up"),
        Binding("g,home", "home", "Top", show=False, id="diff.first"),
        Binding("G,end", "end", "Bottom", show=False, id="diff.last"),
        Binding("escape", "back", "Back", id="diff.back"),
    ]

    def __init__(self, fork_id: str) -> None:
        super().__init__()
        self.fork_id = fork_id
        self.result: DiffResult | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"diff of {self.ids(self.fork_id)} against its parent…", id="diff-header")
        with VerticalScroll(id="diff-scroll"):
            yield DiffBody(id="diff-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#diff-scroll").focus()
        self.read(diff, self.fork_id, then=self._loaded, on_error=self._failed)

    def _failed(self, error: str) -> None:
        self.dismiss()

    def _loaded(self, result: DiffResult) -> None:
        self.result = result
        self.ids.update(result.prefixes)
        f, p = result.fork, result.parent
        self.query_one("#diff-header", Static).update(
            f"fork {self.ids(f.episode_id)} vs parent {self.ids(p.episode_id)} from "
            f"turn {result.fork_turn} (seq {result.fork_seq}) · reward "
            f"{fmt.reward(p.total_reward)} → {fmt.reward(f.total_reward)} · cost "
            f"{fmt.cost(p.cost_usd)} → {fmt.cost(f.cost_usd)} · turns {p.turns} → {f.turns}"
        )
        self.query_one(DiffBody).show(result)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#diff-scroll", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_home(self) -> None:
        self.query_one("#diff-scroll", VerticalScroll).scroll_home(animate=False)

    def action_end(self) -> None:
        self.query_one("#diff-scroll", VerticalScroll).scroll_end(animate=False)

    def action_back(self) -> None:
        self.dismiss()
