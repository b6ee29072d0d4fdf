"""``TraceScreen``: one episode's events, live, with detail, find, jumps, replay and branching.

Layout: a two-line header, the virtualized :class:`EventList`, the :class:`DetailPane`
(side by side when the terminal is wide, stacked when narrow) and a find bar. Every store
read runs in a worker: the row layout once, pages as rows come on screen, the selected
event's detail, and a poll for events after the last seq (the list follows the tail only
while its cursor is on the last row; otherwise the header counts the new events). Decision
points mark their rows (``c`` lists their candidates and forks).
"""

from __future__ import annotations

import time
from functools import partial
from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.timer import Timer
from textual.widgets import Footer, Input

from agentrunner.store import EpisodeSummary, Segment
from agentrunner.tui import keys
from agentrunner.tui.data import (
    ADOPTED_TURN,
    EDITED_TURN,
    POLL_BATCH,
    Match,
    PollResult,
    TraceData,
    find,
    load_pages,
    next_of_kinds,
    open_trace,
    poll,
    summary,
)
from agentrunner.tui.detail import Detail, load_detail
from agentrunner.tui.replay import Replay
from agentrunner.tui.rowindex import RowIndex
from agentrunner.tui.screens.trace_actions import TraceActions
from agentrunner.tui.widgets.detail_pane import DetailPane
from agentrunner.tui.widgets.event_list import EventList
from agentrunner.tui.widgets.trace_header import Position, TraceHeader
from agentrunner.values.events import Status

WIDE = 120  # columns from which list and detail sit side by side
DETAIL_DELAY_S = 0.06  # wait for the cursor to settle before reading the detail
SUMMARY_EVERY_S = 1.0  # while the episode runs or events arrive
SUMMARY_IDLE_S = 5.0  # otherwise (someone may resume it from elsewhere)
JUMPS = {
    "turn": ("model.request", EDITED_TURN, ADOPTED_TURN),
    "tool": ("tool.call",),
    "problem": ("error", "cancel"),
}


@keys.listed("Trace")
class TraceScreen(TraceActions):
    """One episode's trace."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j,down", "move(1)", "Down", show=False, id="trace.down"),
        Binding("k,up", "move(-1)", "Up", show=False, id="trace.up"),
        Binding("pagedown,ctrl+d", "page(1)", "Page down", show=False, id="trace.page_down"),
        Binding("pageup,ctrl+u", "page(-1)", "Page up", show=False, id="trace.page_up"),
        Binding("g,home", "first", "First", show=False, id="trace.first"),
        Binding("G,end", "last", "Last", show=False, id="trace.last"),
        Binding("right_square_bracket", "jump('turn', True)", "Next turn", id="trace.next_turn"),
        Binding(
            "left_square_bracket",
            "jump('turn', False)",
            "Prev turn",
            show=False,
            id="trace.prev_turn",
        ),
        Binding("t", "jump('tool', True)", "Next tool call", show=False, id="trace.next_tool"),
        Binding("T", "jump('tool', False)", "Prev tool call", show=False, id="trace.prev_tool"),
        Binding("e", "jump('problem', True)", "Next error", show=False, id="trace.next_error"),
        Binding("E", "jump('problem', False)", "Prev error", show=False, id="trace.prev_error"),
        Binding("slash", "find", "Find", id="trace.find"),
        Binding("n", "find_again(True)", "Next match", show=False, id="trace.find_next"),
        Binding("N", "find_again(False)", "Prev match", show=False, id="trace.find_prev"),
        Binding("z", "fold", "Fold chunks", show=False, id="trace.fold"),
        Binding("o", "full", "Full output", show=False, id="trace.full"),
        Binding("enter", "zoom", "Zoom detail", show=False, id="trace.zoom"),
        Binding("space", "play", "Play/pause", id="trace.play"),
        Binding("full_stop", "step(1)", "Step", show=False, id="trace.step"),
        Binding("comma", "step(-1)", "Step back", show=False, id="trace.step_back"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, id="trace.faster"),
        Binding("minus", "speed(-1)", "Slower", show=False, id="trace.slower"),
        Binding("f", "fork", "Fork", id="trace.fork"),
        Binding("b", "branches", "Branches", id="trace.branches"),
        Binding("c", "decisions", "Decision points", show=False, id="trace.decisions"),
        Binding("d", "diff", "Diff", show=False, id="trace.diff"),
        Binding("F", "files", "Files changed", show=False, id="trace.files"),
        Binding("r", "request_diff", "Request diff", show=False, id="trace.request_diff"),
        Binding(
            "h", "compaction", "History behind a compaction", show=False, id="trace.compaction"
        ),
        Binding("R", "resume", "Resume", id="trace.resume"),
        Binding("x", "cancel", "Cancel run", id="trace.cancel"),
        Binding("escape", "back", "Back", id="trace.back"),
    ]

    def __init__(self, episode: str, *, follow: bool = False) -> None:
        super().__init__()
        self.episode_ref = episode
        self.follow = follow
        self.episode_id: str | None = None
        self.segments: list[Segment] = []
        self.new_events = 0
        self.note = ""
        self.full_output = False
        self.last_term = ""
        self._polling = False
        self._summary_at = time.monotonic()
        self._fresh_events = False
        self._detail_token = 0
        self._detail_timer: Timer | None = None
        self.replay: Replay | None = None
        self.points = []

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield TraceHeader(id="trace-header")
        with Container(id="trace-body"):
            yield EventList(id="events")
            yield DetailPane(id="detail")
        yield Input(placeholder="find: Enter next match · Esc close (then n / N)", id="find")
        yield Footer()

    def on_mount(self) -> None:
        self.replay = Replay(self.event_list, self.set_timer, self._update_position)
        self.event_list.focus()
        self.read(open_trace, self.episode_ref, then=self._opened, on_error=self._failed_open)
        self.set_interval(self.runner_app.poll_s, self.poll_now)

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#trace-body").set_class(event.size.width < WIDE, "-narrow")

    def _failed_open(self, error: str) -> None:
        self.dismiss()

    def _opened(self, data: TraceData) -> None:
        self.episode_id = data.episode_id
        self.segments = data.segments
        self.ids.update(data.prefixes)
        self.query_one(TraceHeader).prefixes = data.prefixes
        events_ = self.event_list
        events_.set_index(
            RowIndex(data.nonchunk, data.last_seq, folded=events_.folded), at_end=self.follow
        )
        self._update_position()
        self.read(summary, data.episode_id, then=self._summarized, group="summary")

    def _summarized(self, value: EpisodeSummary) -> None:
        first = self.summary is None
        self._summary_at = time.monotonic()
        self._fresh_events = False
        self.summary = value
        if self.cancelling and value.status != Status.RUNNING:
            self.cancelling = False
            self.note = f"run {value.status}"
        self.read_decisions(value)
        if first and value.status == Status.RUNNING and self.event_list.cursor == 0:
            self.event_list.move(self.event_list.row_count - 1)  # follow a running episode

    def watch_summary(self, summary: EpisodeSummary | None) -> None:
        self.query_one(TraceHeader).summary = summary
        self._update_position()

    def _update_position(self) -> None:
        lst = self.event_list
        if lst.at_bottom:
            self.new_events = 0
        lo = lst.span(lst.cursor)[0] if lst.row_count else 0
        running = self.summary is not None and self.summary.status == Status.RUNNING
        self.query_one(TraceHeader).position = Position(
            row=lst.cursor,
            rows=lst.row_count,
            seq=lo,
            last_seq=lst.index.last_seq,
            new=self.new_events,
            following=running and lst.at_bottom and lst.limit is None,
            folded=lst.folded,
            replay=self.replay.label() if self.replay else "",
            note=self.note,
        )

    # ------------------------------------------------------------------ data

    def on_event_list_pages_wanted(self, message: EventList.PagesWanted) -> None:
        if self.episode_id is None:
            self.event_list.forget_pending()
            return
        self.read(
            load_pages,
            self.episode_id,
            self.segments,
            message.pages,
            then=self.event_list.put_pages,
            group="pages",
        )

    def poll_now(self) -> None:
        """Read the events appended after the last one shown (the poll timer calls this)."""
        if self.episode_id is None or self._polling or self.summary is None:
            return
        self._polling = True
        age = time.monotonic() - self._summary_at
        busy = self._fresh_events or self.summary.status == Status.RUNNING
        due = age >= SUMMARY_IDLE_S or (busy and age >= SUMMARY_EVERY_S) or self.cancelling
        self.read(
            partial(poll, with_summary=due),
            self.episode_id,
            self.segments,
            self.event_list.index.last_seq,
            then=self._polled,
            group="poll",
            on_error=lambda _: setattr(self, "_polling", False),
        )

    def _polled(self, result: PollResult) -> None:
        self._polling = False
        if result.rows and result.rows[0].seq == self.event_list.index.last_seq + 1:
            lst = self.event_list
            was_bottom = lst.at_bottom and lst.limit is None
            added = lst.append(result.rows)
            self._fresh_events = True
            if not was_bottom:
                self.new_events += added
        if result.summary is not None:
            self._summarized(result.summary)
        self._update_position()
        if len(result.rows) == POLL_BATCH:
            self.poll_now()

    def on_event_list_cursor_moved(self, message: EventList.CursorMoved) -> None:
        self._update_position()
        if self._detail_timer is not None:
            self._detail_timer.stop()
        self._detail_timer = self.set_timer(
            DETAIL_DELAY_S, partial(self._load_detail, message.lo, message.hi)
        )

    def _load_detail(self, lo: int, hi: int) -> None:
        if self.episode_id is None:
            return
        self._detail_token += 1
        token = self._detail_token
        self.read(
            partial(load_detail, full=self.full_output),
            self.episode_id,
            self.segments,
            lo,
            hi,
            then=partial(self._show_detail, token),
            group="detail",
        )

    def _show_detail(self, token: int, detail: Detail) -> None:
        if token == self._detail_token:
            self.query_one(DetailPane).detail = detail

    # ------------------------------------------------------------------ moving

    def action_move(self, delta: int) -> None:
        self.event_list.move_by(delta)

    def action_page(self, direction: int) -> None:
        self.event_list.move_by(direction * self.event_list.page_rows())

    def action_first(self) -> None:
        self.event_list.move(0)

    def action_last(self) -> None:
        self.event_list.move(self.event_list.row_count - 1)
        self._update_position()

    def _goto_seq(self, seq: int | None, what: str) -> None:
        if seq is None:
            self.note = f"no {what}"
        else:
            lst = self.event_list
            row = lst.index.row_of(seq)
            if lst.limit is not None and row >= lst.limit:
                lst.limit = row + 1
            lst.move(row)
            self.note = f"{what} at seq {seq}"
        self._update_position()

    def _cursor_span(self) -> tuple[int, int]:
        lst = self.event_list
        return lst.span(lst.cursor) if lst.row_count else (0, 0)

    def action_jump(self, what: str, forward: bool) -> None:
        if self.episode_id is None:
            return
        lo, hi = self._cursor_span()
        names = {"turn": "model turn", "tool": "tool call", "problem": "error or cancel"}
        direction = "next" if forward else "previous"
        self.read(
            next_of_kinds,
            self.segments,
            JUMPS[what],
            hi if forward else lo,
            forward,
            then=lambda seq: self._goto_seq(seq, f"{direction} {names[what]}"),
            group="jump",
        )

    # ------------------------------------------------------------------ find

    def action_find(self) -> None:
        box = self.query_one("#find", Input)
        box.add_class("-shown")
        box.value = self.last_term
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: the next match (the bar stays open for the next Enter; Esc closes it)."""
        event.stop()
        term = event.value.strip()
        new_search = term != self.last_term
        self.last_term = self.event_list.term = term
        if term:
            self._find(True, from_cursor=new_search)
        else:
            self._close_find()

    def _close_find(self) -> None:
        self.query_one("#find", Input).remove_class("-shown")
        self.event_list.focus()

    def action_find_again(self, forward: bool) -> None:
        self._find(forward, from_cursor=False)

    def _find(self, forward: bool, *, from_cursor: bool) -> None:
        """The next (previous) match past the cursor's row, wrapping round at the end (the
        start); ``from_cursor``: a match on the cursor's row counts (a new search)."""
        if not self.last_term or self.episode_id is None:
            return
        cursor = lo, hi = self._cursor_span()
        if from_cursor:
            lo, hi = hi + 1, lo - 1  # search from just inside the cursor's row
        term = self.last_term
        self.note = f"searching “{term}”…"
        self._update_position()
        self.read(
            find,
            self.segments,
            term,
            hi if forward else lo,
            forward,
            self.event_list.index.last_seq,
            then=lambda match: self._found(match, term, cursor),
            group="find",
            exclusive=True,
        )

    def _found(self, match: Match, term: str, cursor: tuple[int, int]) -> None:
        """Go to the match; the note says when the search wrapped round (and when it came
        back to the cursor's own row: the only match)."""
        only = match.wrapped and match.seq is not None and cursor[0] <= match.seq <= cursor[1]
        self._goto_seq(match.seq, f"{'only ' if only else ''}match for “{term}”")
        if match.wrapped:
            self.note += " (wrapped)"
            self._update_position()

    # ------------------------------------------------------------------ view modes

    def action_fold(self) -> None:
        self.event_list.folded = not self.event_list.folded
        self._update_position()

    def action_full(self) -> None:
        self.full_output = not self.full_output
        self.note = "full output" if self.full_output else "output capped"
        lo, hi = self._cursor_span()
        self._load_detail(lo, hi)
        self._update_position()

    def action_zoom(self) -> None:
        if self.maximized is None:
            self.maximize(self.query_one(DetailPane), container=False)
        else:
            self.minimize()

    def action_back(self) -> None:
        if self.query_one("#find", Input).has_class("-shown"):
            self._close_find()
        elif self.maximized is not None:
            self.minimize()
        elif self.replay is not None and self.replay.active:
            self.replay.stop()
        else:
            self.dismiss()
