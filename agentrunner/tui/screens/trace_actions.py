"""The trace screen's actions that start something: replay, fork, branches, decision
points, diff, files changed, a request's diff, the history behind a compaction, resume and
cancel (the base of :class:`~agentrunner.tui.screens.trace.TraceScreen`). The screens they
open, and forking, load when first used: the trace's first screen does not wait for them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.reactive import reactive

from agentrunner.store import EpisodeSummary, Segment
from agentrunner.tui import actions
from agentrunner.tui.decisions import DecisionPoint, decision_points
from agentrunner.tui.replay import Replay
from agentrunner.tui.rows import RowInfo
from agentrunner.tui.widgets.event_list import EventList
from agentrunner.tui.work import ReaderScreen

if TYPE_CHECKING:
    from agentrunner.tui.forking import ForkPrefill, ForkRequest


class TraceActions(ReaderScreen):
    """Replay, branch, resume and cancel, for one episode's trace."""

    summary: reactive[EpisodeSummary | None] = reactive(None, init=False)
    episode_id: str | None
    segments: list[Segment]
    replay: Replay | None
    follow: bool
    note: str
    _update_position: Callable[[], None]  # redraws the header's position line (and note)
    points: list[DecisionPoint]
    """The decision points of the episode's history (they mark rows of the list)."""
    _points_read_at: tuple[int, str] | None = None  # (turns, status) when last read
    cancelling = False
    """A cancel was requested here and the episode still reads as running."""

    @property
    def event_list(self) -> EventList:
        return self.query_one(EventList)

    # ------------------------------------------------------------------ replay

    def action_play(self) -> None:
        if self.replay is not None and self.event_list.row_count:
            self.replay.toggle()

    def action_step(self, delta: int) -> None:
        if self.replay is not None and self.event_list.row_count:
            self.replay.step(delta)

    def action_speed(self, direction: int) -> None:
        if self.replay is not None:
            self.replay.faster() if direction > 0 else self.replay.slower()

    # ------------------------------------------------------------------ branch, resume, cancel

    def action_fork(self) -> None:
        lst = self.event_list
        info, _ = lst.info(lst.cursor) if lst.row_count else (None, False)
        if self.episode_id is None or info is None or self.summary is None:
            return
        if self.summary.turns < 1:
            self.notify("this episode has no model turn to fork at yet", severity="warning")
            return
        turn = min(max(info.turn, 1), self.summary.turns)
        from agentrunner.tui.forking import fork_prefill

        self.read(
            fork_prefill,
            self.episode_id,
            self.segments,
            turn,
            info.seq,
            then=self._open_fork_editor,
        )

    def _open_fork_editor(self, prefill: ForkPrefill) -> None:
        from agentrunner.tui.screens.fork import ForkScreen

        self.app.push_screen(ForkScreen(prefill), self._forked)

    def _forked(self, request: ForkRequest | None) -> None:
        from agentrunner.tui.forking import make_fork

        if request is not None:
            self.read(make_fork, request, then=self._run_fork)

    def _run_fork(self, made: tuple[str, dict[str, str]]) -> None:
        fork_id, prefixes = made
        self.ids.update(prefixes)
        app = self.runner_app
        app.runs.start(fork_id)
        self.notify(f"fork {self.ids(fork_id)} created; running it in the background")
        app.open_episode(fork_id, follow=True)

    def action_branches(self) -> None:
        from agentrunner.tui.screens.branches import BranchesScreen

        if self.episode_id is not None:
            self.app.push_screen(BranchesScreen(self.episode_id))

    # ------------------------------------------------------------------ decision points

    def read_decisions(self, summary: EpisodeSummary) -> None:
        """Read the decision points again when the episode moved on (or one is not
        finished: its forks are running)."""
        key = (summary.turns, summary.status)
        if key == self._points_read_at and all(p.done for p in self.points):
            return
        self._points_read_at = key
        self.read(decision_points, self.segments, then=self._marked, group="decisions")

    def _marked(self, points: list[DecisionPoint]) -> None:
        self.points = points
        self.event_list.marks = {p.row_seq: p.mark() for p in points}

    def action_decisions(self) -> None:
        """The decision points, opened at the cursor's (or the next, or the last one)."""
        if self.episode_id is None:
            return
        if not self.points:
            self.notify("no decision points in this episode's history", severity="warning")
            return
        lst = self.event_list
        info, _ = lst.info(lst.cursor) if lst.row_count else (None, False)
        seq = lst.span(lst.cursor)[0] if lst.row_count else 0
        turn = info.turn if info is not None else -1
        point = next(
            (p for p in self.points if p.decision.turn == turn),
            next((p for p in self.points if p.row_seq >= seq), self.points[-1]),
        )
        group = point.decision.group_id
        from agentrunner.tui.screens.decisions import DecisionsScreen

        self.app.push_screen(DecisionsScreen(self.episode_id, self.segments, group))

    def action_diff(self) -> None:
        if self.summary is not None:
            actions.diff(self, self.summary)

    def action_files(self) -> None:
        """The episode's whole change, file by file (and apply, for a repository's)."""
        from agentrunner.tui.screens.files import FilesScreen

        if self.episode_id is not None:
            self.app.push_screen(FilesScreen(self.episode_id))

    def action_request_diff(self) -> None:
        """What changed in the cursor's model call's request against the call before it."""
        lst = self.event_list
        info, _ = lst.info(lst.cursor) if lst.row_count else (None, False)
        if self.episode_id is None or info is None:
            return
        if info.turn < 2:
            self.notify("no model call before this one to compare with", severity="warning")
            return
        from agentrunner.tui.screens.request_diff import RequestDiffScreen

        self.app.push_screen(RequestDiffScreen(self.episode_id, info.turn))

    def action_compaction(self) -> None:
        """The messages the compaction at the cursor replaced (its summary stands for them)."""
        lst = self.event_list
        info, _ = lst.info(lst.cursor) if lst.row_count else (None, False)
        if self.episode_id is None or info is None:
            return
        if not (isinstance(info, RowInfo) and info.compaction):
            self.notify("put the cursor on a compaction row (compact) first", severity="warning")
            return
        from agentrunner.tui.screens.compaction import CompactionScreen

        self.app.push_screen(CompactionScreen(self.episode_id, self.segments, info.seq))

    def action_resume(self) -> None:
        if self.summary is not None:
            actions.resume(self, self.summary, open_trace=False, then=self._follow_tail)

    def _follow_tail(self) -> None:
        self.event_list.move(self.event_list.row_count - 1)
        self.follow = True

    def action_cancel(self) -> None:
        if self.summary is not None:
            actions.cancel(self, self.summary, requested=self._cancel_requested)

    def _cancel_requested(self) -> None:
        """Say so at once; the status is read on every poll until the writer has stopped."""
        self.cancelling = True
        self.note = "cancel requested: the run stops at its next step"
        self._update_position()
