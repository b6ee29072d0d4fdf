"""The trace screen's actions that start something: replay, fork, branches, diff, resume
and cancel (the base of :class:`~agentrunner.tui.screens.trace.TraceScreen`)."""

from __future__ import annotations

from textual.reactive import reactive

from agentrunner.store import EpisodeSummary, Segment
from agentrunner.tui import actions
from agentrunner.tui.forking import ForkPrefill, ForkRequest, fork_prefill, make_fork
from agentrunner.tui.replay import Replay
from agentrunner.tui.screens.branches import BranchesScreen
from agentrunner.tui.screens.fork import ForkScreen
from agentrunner.tui.widgets.event_list import EventList
from agentrunner.tui.work import ReaderScreen


class TraceActions(ReaderScreen):
    """Replay, branch, resume and cancel, for one episode's trace."""

    summary: reactive[EpisodeSummary | None] = reactive(None, init=False)
    episode_id: str | None
    segments: list[Segment]
    replay: Replay | None
    follow: bool

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
        self.read(
            fork_prefill,
            self.episode_id,
            self.segments,
            turn,
            info.seq,
            then=self._open_fork_editor,
        )

    def _open_fork_editor(self, prefill: ForkPrefill) -> None:
        self.app.push_screen(ForkScreen(prefill), self._forked)

    def _forked(self, request: ForkRequest | None) -> None:
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
        if self.episode_id is not None:
            self.app.push_screen(BranchesScreen(self.episode_id))

    def action_diff(self) -> None:
        if self.summary is not None:
            actions.diff(self, self.summary)

    def action_resume(self) -> None:
        if self.summary is not None:
            actions.resume(self, self.summary, open_trace=False, then=self._follow_tail)

    def _follow_tail(self) -> None:
        self.event_list.move(self.event_list.row_count - 1)
        self.follow = True

    def action_cancel(self) -> None:
        if self.summary is not None:
            actions.cancel(self, self.summary)
