"""``EpisodesScreen``: every episode in the store, with status, totals and lineage.

Filter (``/``) matches id, task, model, status and parent; ``s`` cycles the sort column and
``S`` reverses it. The list is re-read every second in a worker, so running episodes update
in place; Enter opens the selected episode's trace, ``r`` the report of what is listed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from agentrunner.store import EpisodeSummary
from agentrunner.store.listing import ListingChanges, ListingCursor
from agentrunner.tui import actions, keys
from agentrunner.tui import format as fmt
from agentrunner.tui.data import id_prefixes, prefixes_around
from agentrunner.tui.widgets.styled import STATUS_CLASSES, status_text
from agentrunner.tui.work import ReaderScreen
from agentrunner.values.safe_text import one_line_visible, plain

if TYPE_CHECKING:
    from textual.worker import Worker

    from agentrunner.store.protocol import StoreBackend

# what a narrow terminal (80 columns) must show comes first: the rest scrolls into view
QUIET_POLL_S = 10.0
"""How often the screen looks at a store that sends notices while none of its episodes runs."""
COLUMNS = (
    "id",
    "status",
    "task",
    "reward",
    "cost",
    "lineage",
    "turns",
    "tokens",
    "model",
    "started",
)
SORTS: dict[str, Callable[[EpisodeSummary], Any]] = {
    "started": lambda e: e.episode_id,
    "status": lambda e: e.status,
    "task": lambda e: e.task_id,
    "reward": lambda e: e.total_reward,
    "cost": lambda e: e.cost_usd or 0.0,
    "turns": lambda e: e.turns,
    "tokens": lambda e: e.tokens.get("input", 0) + e.tokens.get("output", 0),
    "model": lambda e: e.model_spec.spec,
}


@dataclass(frozen=True)
class _Changes:
    """One look at the store: what changed since ``since`` and the ids' short prefixes."""

    since: ListingCursor | None
    changes: ListingChanges
    prefixes: dict[str, str]


def list_changes(store: StoreBackend, since: ListingCursor | None, known: list[str]) -> _Changes:
    """Every episode on the first look (or after a removal), then only what changed since the
    last (:mod:`agentrunner.store.listing`); the short prefix of every id listed the first
    time, then of each new id and its neighbours among ``known`` (the ids listed so far,
    sorted), the only ones a new id can lengthen."""
    changes = store.listing_changes(since)
    if changes.whole:
        return _Changes(since, changes, id_prefixes(store))
    new = {e.episode_id for e in changes.episodes}.difference(known)
    return _Changes(since, changes, prefixes_around(known, new) if new else {})


class EpisodesTable(DataTable[Text]):
    """The episodes table, with its own (re-mappable) keys."""

    COMPONENT_CLASSES: ClassVar[set[str]] = STATUS_CLASSES
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", id="episodes.open"),
        Binding("j,down", "cursor_down", "Down", show=False, id="episodes.down"),
        Binding("k,up", "cursor_up", "Up", show=False, id="episodes.up"),
        Binding("g,home", "scroll_top", "First", show=False, id="episodes.first"),
        Binding("G,end", "scroll_bottom", "Last", show=False, id="episodes.last"),
        Binding("pagedown", "page_down", "Page down", show=False, id="episodes.page_down"),
        Binding("pageup", "page_up", "Page up", show=False, id="episodes.page_up"),
    ]

    def __init__(self) -> None:
        super().__init__(id="episodes-table", cursor_type="row", zebra_stripes=True)


@keys.listed("Episodes", EpisodesTable)
class EpisodesScreen(ReaderScreen):
    """The store's episodes, newest first by default."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", id="episodes.filter"),
        Binding("s", "sort", "Sort", id="episodes.sort"),
        Binding("S", "reverse", "Reverse sort", show=False, id="episodes.reverse"),
        Binding("b", "branches", "Branches", id="episodes.branches"),
        Binding("d", "diff", "Diff", show=False, id="episodes.diff"),
        Binding("R", "resume", "Resume", id="episodes.resume"),
        Binding("x", "cancel", "Cancel run", id="episodes.cancel"),
        Binding("r", "report", "Report", show=False, id="episodes.report"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="episodes.escape"),
    ]

    episodes: reactive[tuple[EpisodeSummary, ...]] = reactive(())
    filter_text: reactive[str] = reactive("")
    sort_key: reactive[str] = reactive("started")
    sort_reverse: reactive[bool] = reactive(True)

    def __init__(self) -> None:
        super().__init__()
        self._shown: list[tuple[Any, ...]] = []
        self._loaded = False
        self._cursor: ListingCursor | None = None
        self._by_id: dict[str, EpisodeSummary] = {}
        self._sorted_ids: list[str] = []
        self.last_read = 0
        """How many episodes the last look at the store read (all of them the first time,
        then only those that changed)."""
        self._read_at = 0.0
        self._look: Worker[None] | None = None
        self._again = False
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="episodes-header")
        yield Input(placeholder="filter: id, task, model, status…", id="episodes-filter")
        yield EpisodesTable()
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(EpisodesTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        table.focus()

    def on_screen_resume(self) -> None:
        """Read (and keep re-reading) the list only while this screen is shown."""
        if self.app.screen is not self:  # a trace was opened on top at once
            return
        self.reload()
        if self._timer is None:
            poll_s: float = self.runner_app.poll_s
            self._timer = self.set_interval(poll_s * 4, self._tick)
        else:
            self._timer.resume()

    def on_screen_suspend(self) -> None:
        if self._timer is not None:
            self._timer.pause()

    def _tick(self) -> None:
        """The poll: every tick while an episode runs (its turns and spend grow without a
        notice) or the store sends no notices; else every :data:`QUIET_POLL_S` (a writer on
        another machine that died sends none)."""
        if (
            self.runner_app.hears_changes
            and not self._cursor_running()
            and time.monotonic() - self._read_at < QUIET_POLL_S
        ):
            return
        self.reload()

    def store_changed(self) -> None:
        """A notice: another connection changed how episodes are listed."""
        self.reload()

    def _cursor_running(self) -> bool:
        return self._cursor is not None and bool(self._cursor.running)

    def reload(self) -> None:
        """Look at the store: one look at a time (a look waits while the store's server is
        out of reach); asked meanwhile, one more look follows it."""
        if self._look is not None and not self._look.is_finished:
            self._again = True
            return
        self._read_at = time.monotonic()
        self._look = self.read(
            list_changes,
            self._cursor,
            self._sorted_ids,  # replaced, never changed in place: the worker may read it
            then=self._loaded_changes,
            group="episodes",
            on_error=lambda _: self._look_again(),
        )

    def _look_again(self) -> None:
        if self._again:
            self._again = False
            self.reload()

    def _loaded_changes(self, value: _Changes) -> None:
        self.call_after_refresh(self._look_again)
        if value.since is not self._cursor:  # an older look, overtaken by one applied since
            return
        changes = value.changes
        self._cursor = changes.cursor
        self._loaded = True
        self.ids.update(value.prefixes)
        self.last_read = len(changes.episodes)
        if changes.whole:
            self._by_id = {e.episode_id: e for e in changes.episodes}
        elif changes.episodes:
            self._by_id.update((e.episode_id, e) for e in changes.episodes)
        else:
            return  # nothing changed (a prefix only changes with a new episode)
        self._sorted_ids = sorted(self._by_id)
        self.episodes = tuple(self._by_id[i] for i in reversed(self._sorted_ids))  # newest first
        self._refill()

    # ------------------------------------------------------------------ view

    def shown_episodes(self) -> list[EpisodeSummary]:
        """The episodes shown, filtered and sorted."""
        needle = self.filter_text.strip().lower()
        rows = [
            e
            for e in self.episodes
            if not needle
            or needle
            in " ".join(
                (
                    e.episode_id,
                    e.task_id,
                    e.model_spec.spec,
                    e.status,
                    e.parent_episode_id or "",
                )
            ).lower()
        ]
        rows.sort(key=SORTS[self.sort_key], reverse=self.sort_reverse)
        return rows

    def _refill(self) -> None:
        table = self.query_one(EpisodesTable)
        forks: dict[str, int] = {}
        for e in self.episodes:
            if e.parent_episode_id:
                forks[e.parent_episode_id] = forks.get(e.parent_episode_id, 0) + 1
        rows = [(e, forks.get(e.episode_id, 0)) for e in self.shown_episodes()]
        ids = self.ids
        signature = [(e, n, ids(e.episode_id), ids(e.parent_episode_id)) for e, n in rows]
        arrow = "↓" if self.sort_reverse else "↑"
        head = f"{len(rows)}/{len(self.episodes)} episodes · sort {self.sort_key} {arrow}"
        if self.filter_text:
            head += f" · filter “{self.filter_text}”"
        if not self.episodes and self._loaded:
            head += " · none yet: start one with `agentrunner run`"
        self.query_one("#episodes-header", Static).update(plain(one_line_visible(head)))
        if signature == self._shown:
            return
        self._shown = signature
        current = self.selected()
        table.clear()
        for e, n in rows:
            table.add_row(*self._cells(e, n), key=e.episode_id)
        if current is not None and current.episode_id in {e.episode_id for e, _ in rows}:
            table.move_cursor(row=table.get_row_index(current.episode_id), animate=False)

    def _cells(self, e: EpisodeSummary, forks: int) -> list[Text]:
        table = self.query_one(EpisodesTable)
        cells = {
            "id": Text(self.ids(e.episode_id)),
            "status": status_text(table, e.status),
            "task": Text(one_line_visible(e.task_id)),
            "reward": Text(fmt.reward(e.total_reward), justify="right"),
            "cost": Text(fmt.cost(e.cost_usd), justify="right"),
            "lineage": Text(fmt.lineage(e, forks, self.ids)),
            "turns": Text(str(e.turns), justify="right"),
            "tokens": Text(fmt.tokens(e.tokens), justify="right"),
            "model": Text(one_line_visible(e.model_spec.spec)),
            "started": Text(fmt.started(e.created_at)),
        }
        return [cells[column] for column in COLUMNS]

    def watch_episodes(self) -> None:
        self._refill()

    def watch_filter_text(self) -> None:
        self._refill()

    def watch_sort_key(self) -> None:
        self._refill()

    def watch_sort_reverse(self) -> None:
        self._refill()

    def selected(self) -> EpisodeSummary | None:
        table = self.query_one(EpisodesTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((e for e in self.episodes if e.episode_id == key), None)

    # ------------------------------------------------------------------ actions

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value:
            self.runner_app.open_episode(event.row_key.value)

    def action_filter(self) -> None:
        box = self.query_one("#episodes-filter", Input)
        box.add_class("-shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one(EpisodesTable).focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#episodes-filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.filter_text = ""
        self.query_one(EpisodesTable).focus()

    def action_sort(self) -> None:
        keys = list(SORTS)
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse

    def _with_selected(self, fn: Callable[[ReaderScreen, EpisodeSummary], object]) -> None:
        episode = self.selected()
        if episode is not None:
            fn(self, episode)

    def action_branches(self) -> None:
        from agentrunner.tui.screens.branches import BranchesScreen  # loads when first opened

        episode = self.selected()
        if episode is not None:
            self.app.push_screen(BranchesScreen(episode.episode_id))

    def action_report(self) -> None:
        """The report of the episodes listed (as filtered; the order does not matter)."""
        from agentrunner.tui.screens.report import ReportScreen  # the report's code: ~0.1 s

        listed = [e.episode_id for e in self.shown_episodes()]
        self.app.push_screen(ReportScreen(listed, self.filter_text.strip()))

    def action_diff(self) -> None:
        self._with_selected(actions.diff)

    def action_resume(self) -> None:
        self._with_selected(actions.resume)

    def action_cancel(self) -> None:
        self._with_selected(actions.cancel)
