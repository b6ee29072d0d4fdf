"""What a context policy did, drawn for the TUI (read in a thread worker): a compaction call's
detail (tokens before and after, what it dropped and masked, its summary), the messages it
replaced (``h`` opens them), and the ``mask`` placeholders a request sent.

The facts come from :mod:`agentrunner.view.context_marks`, the page's reader. Recorded text
goes through :mod:`agentrunner.values.safe_text` and is never read as Rich markup: the
summary is shown as Markdown (what a model wrote) with links as text, tool output as plain
text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentrunner.values.safe_text import one_line_visible, plain, visible
from agentrunner.values.types import Message
from agentrunner.view.context_marks import (
    CompactionMark,
    placeholder_of,
    read_compaction,
    summary_of,
)

if TYPE_CHECKING:
    from agentrunner.store import Segment
    from agentrunner.store.protocol import StoreBackend

MASKED_STYLE = "italic yellow"
SUMMARY_STYLE = "magenta"


def _markdown(text: str) -> RenderableType:
    from rich.markdown import Markdown  # markdown-it: loaded with the first message shown

    return Markdown(visible(text), hyperlinks=False)


def _facts(mark: CompactionMark) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for name, value in mark.facts():
        table.add_row(name, plain(value))
    return table


def compaction_detail(
    store: StoreBackend, episode_id: str, segments: Sequence[Segment], seq: int
) -> list[RenderableType]:
    """The detail pane's parts for the compaction call at ``seq``."""
    mark = read_compaction(store, episode_id, seq, segments)
    head = plain(one_line_visible(mark.headline()), style=f"bold {SUMMARY_STYLE}")
    if mark.summary is None:
        summary: RenderableType = Text("the compaction call has not answered", style="yellow")
    else:
        summary = Panel(_markdown(mark.summary), title="summary", border_style=SUMMARY_STYLE)
    n = len(mark.replaced)
    hint = Text(f"h: the {n:,} message(s) it replaced", style="dim") if n else Text("")
    return [head, _facts(mark), summary, hint]


def message_panel(message: Message) -> RenderableType:
    """One message of a history: a masked output and a summary marked as what they are."""
    title = plain(one_line_visible(message.role + (f" · {message.name}" if message.name else "")))
    mask = placeholder_of(message)
    if mask is not None:
        body: RenderableType = plain(f"⊘ {mask.describe()}", style=MASKED_STYLE)
        return Panel(body, title=title, border_style="yellow")
    summary = summary_of(message)
    if summary is not None:
        said = plain(f"the summary kept in seq {summary[0]}", style="dim")
        return Panel(_markdown(summary[1]), title=title, subtitle=said, border_style=SUMMARY_STYLE)
    parts: list[RenderableType] = []
    if message.content:  # tool output as plain text, what was written as Markdown
        tool = message.role == "tool"
        parts.append(plain(message.content) if tool else _markdown(message.content))
    for call in message.tool_calls:
        parts.append(plain(f"tool call {call.name}({call.arguments})", style="cyan"))
    return Panel(Group(*parts), title=title, border_style="dim")


def replaced_history(
    store: StoreBackend, episode_id: str, segments: Sequence[Segment], seq: int
) -> tuple[str, list[RenderableType]]:
    """(a title, a panel per message) for the messages the compaction at ``seq`` replaced."""
    mark = read_compaction(store, episode_id, seq, segments)
    title = (
        f"the {len(mark.replaced):,} message(s) the compaction at turn {mark.turn} (seq "
        f"{seq}) replaced: what its summary stands for"
    )
    return title, [message_panel(m) for m in mark.replaced]


def masked_outputs(chain: Sequence[Message]) -> list[RenderableType]:
    """A line per ``mask`` placeholder a request sent (none when it sent none)."""
    marks = [m for m in (placeholder_of(message) for message in chain) if m is not None]
    if not marks:
        return []
    lines = [plain(f"⊘ {m.describe()}", style=MASKED_STYLE) for m in marks]
    head = Text(f"masked tool outputs ({len(marks):,})", style="bold")
    return [head, *lines]
