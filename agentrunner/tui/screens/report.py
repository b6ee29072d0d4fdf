"""``ReportScreen``: the evaluation report (``agentrunner report``'s tables) of the episodes
the list shows.

The episodes screen passes the ids it lists; the report is computed in a thread worker by
``collect`` and ``report`` (pass = reward >= 1.0), per model and per task. As ``agentrunner
report`` does, only root episodes count unless ``f`` counts the listed forks too; ``r``
reads the store again (running episodes change).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from agentrunner.report.build import ReportFilter, collect, report
from agentrunner.report.records import Metrics, Report
from agentrunner.report.text import METRIC_COLUMNS, cells
from agentrunner.tui import format as fmt
from agentrunner.tui import keys
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.safe_text import one_line_visible, visible

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend

BY = ("model",)


@dataclass(frozen=True)
class ListedReport:
    """The report of the listed episodes (``None`` when none of them counts)."""

    made: Report | None
    counted: int  # episodes the report counts
    forks: int  # listed forks
    include_forks: bool  # whether they are counted


def listed_report(
    store: StoreBackend, episode_ids: Sequence[str], include_forks: bool
) -> ListedReport:
    """``report(collect(...))`` over exactly ``episode_ids`` (roots only unless
    ``include_forks``), grouped by model."""
    wanted = set(episode_ids)
    every = collect(store, ReportFilter(include_forks=True))
    listed = [f for f in every if f.summary.episode_id in wanted]
    roots = [f for f in listed if f.summary.parent_episode_id is None]
    counted = listed if include_forks else roots
    made = report(counted, BY) if counted else None
    return ListedReport(made, len(counted), len(listed) - len(roots), include_forks)


def notes(overall: Metrics) -> str:
    """Stop reasons and the most frequent errors, over every counted episode."""
    stops = ", ".join(f"{k} {v}" for k, v in overall.stop_reasons.items())
    lines = [f"stop reasons: {stops or '-'}"]
    errors = overall.errors
    lines.append("top errors:" + ("" if errors else " none"))
    lines += [f"  {e.count} x {e.error}" for e in errors]
    return "\n".join(lines)


def _right(texts: list[str], *, bold: bool = False) -> list[Text]:
    return [Text(t, style="bold" if bold else "", justify="right") for t in texts]


class ReportTable(DataTable[Text]):
    """One of the report's tables (wide: scrolls sideways when focused)."""

    def __init__(self, table_id: str) -> None:
        super().__init__(id=table_id, cursor_type="none", zebra_stripes=True)


@keys.listed("Report")
class ReportScreen(ReaderScreen):
    """The report of the episodes listed (by id), with what the list was filtered by."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "forks", "Count forks", id="report.forks"),
        Binding("r", "refresh", "Refresh", id="report.refresh"),
        Binding("j", "scroll(1)", "Down", show=False, id="report.down"),
        Binding("k", "scroll(-1)", "Up", show=False, id="report.up"),
        Binding("g", "home", "Top", show=False, id="report.first"),
        Binding("G", "end", "Bottom", show=False, id="report.last"),
        Binding("escape", "back", "Back", id="report.back"),
    ]

    def __init__(self, episode_ids: Sequence[str], described: str = "") -> None:
        super().__init__()
        self.episode_ids = tuple(episode_ids)
        self.described = described  # how the list was filtered, for the header
        self.include_forks = False
        self.result: ListedReport | None = None

    def compose(self) -> ComposeResult:
        yield Static(self._head("reading…"), id="report-header")
        with VerticalScroll(id="report-scroll"):
            yield Static("", id="report-empty")
            yield Static("by model", classes="report-title")
            yield ReportTable("report-groups")
            yield Static("", id="report-notes")
            yield Static("per task", classes="report-title")
            yield ReportTable("report-tasks")
        yield Footer()

    def on_mount(self) -> None:
        groups = self.query_one("#report-groups", ReportTable)
        for column in (*BY, *METRIC_COLUMNS):
            groups.add_column(column, key=column)
        tasks = self.query_one("#report-tasks", ReportTable)
        for column in ("task", *BY, *METRIC_COLUMNS):
            tasks.add_column(column, key=column)
        self._show_tables(False)
        if not self.episode_ids:
            self._say("the list is empty: nothing to report (clear the filter with Esc)")
            return
        groups.focus()
        self.reload()

    def _head(self, state: str) -> str:
        listed = fmt.plural(len(self.episode_ids), "episode")
        filtered = f" (filter “{self.described}”)" if self.described else ""
        return f"report of {listed} listed{filtered} · {state} · pass = reward ≥ 1"

    def reload(self) -> None:
        if not self.episode_ids:
            return
        self.query_one("#report-header", Static).update(self._head("reading…"))
        self.read(
            listed_report,
            self.episode_ids,
            self.include_forks,
            then=self._loaded,
            group="report",
            exclusive=True,
        )

    def _loaded(self, result: ListedReport) -> None:
        if result.include_forks != self.include_forks:
            return  # an older read, overtaken by a press of f
        self.result = result
        state = f"{result.counted} counted"
        if result.forks and not self.include_forks:
            state += f", {fmt.plural(result.forks, 'fork')} not (f counts them)"
        elif result.forks:
            state += f" with {fmt.plural(result.forks, 'fork')}"
        self.query_one("#report-header", Static).update(self._head(state))
        made = result.made
        if made is None:
            self._show_tables(False)
            self._say("every listed episode is a fork: f counts them")
            return
        self._say("")
        self._fill(made)
        self._show_tables(True)

    def _say(self, text: str) -> None:
        empty = self.query_one("#report-empty", Static)
        empty.update(text)
        empty.display = bool(text)

    def _show_tables(self, shown: bool) -> None:
        for widget in self.query(".report-title, ReportTable, #report-notes"):
            widget.display = shown

    def _fill(self, made: Report) -> None:
        groups = self.query_one("#report-groups", ReportTable)
        groups.clear()
        for group in made.groups:
            keys = [Text(one_line_visible(value)) for value in group.values]
            groups.add_row(*keys, *_right(cells(group.metrics)))
        everything = [Text("all") for _ in made.by]
        groups.add_row(*everything, *_right(cells(made.overall), bold=True))
        self.query_one("#report-notes", Static).update(Text(visible(notes(made.overall))))
        tasks = self.query_one("#report-tasks", ReportTable)
        tasks.clear()
        for task in made.tasks:
            for n, row in enumerate(task.rows):
                first = task.task_id if n == 0 else ""
                key = one_line_visible(row.model)
                tasks.add_row(Text(one_line_visible(first)), Text(key), *_right(cells(row.metrics)))

    # ------------------------------------------------------------------ actions

    def action_forks(self) -> None:
        self.include_forks = not self.include_forks
        self.reload()

    def action_refresh(self) -> None:
        self.reload()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#report-scroll", VerticalScroll).scroll_relative(y=lines, animate=False)

    def action_home(self) -> None:
        self.query_one("#report-scroll", VerticalScroll).scroll_home(animate=False)

    def action_end(self) -> None:
        self.query_one("#report-scroll", VerticalScroll).scroll_end(animate=False)

    def action_back(self) -> None:
        self.dismiss()
