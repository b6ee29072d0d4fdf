"""``TraceHeader``: the trace screen's two status lines (episode, then position and modes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from agentrunner.store import EpisodeSummary
from agentrunner.tui import format as fmt
from agentrunner.tui.widgets.styled import STATUS_CLASSES, status_text
from agentrunner.values.safe_text import one_line_visible

_PARTS = ("id", "live", "new", "replay", "dim")


@dataclass(frozen=True)
class Position:
    """Where the cursor is and what the view is doing."""

    row: int = 0
    rows: int = 0
    seq: int = 0
    last_seq: int = 0
    new: int = 0  # live events that arrived while the cursor was not at the bottom
    following: bool = False
    folded: bool = True
    replay: str = ""  # "", or e.g. "▶ replay 2×"
    note: str = ""  # last find / jump message


class TraceHeader(Widget):
    """Episode summary and position; data comes down as the two reactives."""

    COMPONENT_CLASSES: ClassVar[set[str]] = STATUS_CLASSES | {f"trace-header--{p}" for p in _PARTS}

    summary: reactive[EpisodeSummary | None] = reactive(None)
    position: reactive[Position] = reactive(Position)
    prefixes: reactive[dict[str, str]] = reactive(dict)  # short ids (unique in the store)

    def _short(self, episode_id: str) -> str:
        return self.prefixes.get(episode_id, episode_id)

    def render(self) -> Group:
        line = Text(no_wrap=True, overflow="ellipsis")
        style = {
            p: self.get_component_rich_style(f"trace-header--{p}", partial=True) for p in _PARTS
        }
        e = self.summary
        if e is None:
            line.append("loading…")
        else:
            line.append(self._short(e.episode_id), style["id"])
            model = e.model_spec.spec
            line.append(one_line_visible(f" {e.task_id} · {model} · "))
            line.append_text(status_text(self, e.status))
            line.append(
                f" · {fmt.plural(e.turns, 'turn')} · reward {fmt.reward(e.total_reward)} · "
                f"{fmt.tokens(e.tokens)} tok · {fmt.cost(e.cost_usd)}"
            )
            if e.parent_episode_id:
                line.append(f" · ↳ {self._short(e.parent_episode_id)}@{e.fork_seq}")
        p = self.position
        first, line = line, Text(no_wrap=True, overflow="ellipsis")
        line.append(f"row {p.row + 1 if p.rows else 0}/{p.rows} · seq {p.seq}/{p.last_seq}")
        if p.following:
            line.append(" · ● live", style["live"])
        if p.new:
            line.append(f" · ↓ {p.new} new (G)", style["new"])
        if p.replay:
            line.append(f" · {p.replay}", style["replay"])
        line.append(" · chunks folded" if p.folded else " · chunks shown", "dim")
        if p.note:
            line.append(f" · {one_line_visible(p.note)}", style["dim"])
        return Group(first, line)
