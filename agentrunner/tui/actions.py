"""Actions shared by the episodes, trace and branches screens: resume, cancel, branches, diff.

Each takes the screen it is invoked from and the episode's summary; store access runs in
workers (cancel requests are the store's control-table writes; resumes run in the
background through the app's :class:`~agentrunner.tui.runs.BackgroundRuns`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentrunner.store import EpisodeSummary, TraceStore
from agentrunner.tui.format import RESUMABLE
from agentrunner.tui.screens.confirm import ConfirmScreen

if TYPE_CHECKING:
    from agentrunner.tui.app import AgentRunnerApp
    from agentrunner.tui.work import ReaderScreen

CANCEL_REASON = "cancelled from the TUI"


def _app(screen: ReaderScreen) -> AgentRunnerApp:
    from agentrunner.tui.app import AgentRunnerApp

    app = screen.app
    assert isinstance(app, AgentRunnerApp)
    return app


def _request_cancel(store: TraceStore, episode_id: str) -> str:
    store.request_cancel(episode_id, CANCEL_REASON)
    return episode_id


def cancel(screen: ReaderScreen, episode: EpisodeSummary) -> None:
    """Ask (with confirmation) the running episode's writer to cancel; it polls within 1 s."""
    short_id = screen.ids
    if episode.status != "running":
        screen.notify(f"{short_id(episode.episode_id)} is {episode.status}, not running")
        return

    def confirmed(yes: bool | None) -> None:
        if yes:
            screen.read(
                _request_cancel,
                episode.episode_id,
                then=lambda ep: screen.notify(f"cancel requested for {short_id(ep)}"),
            )

    question = f"Cancel running episode {short_id(episode.episode_id)} ({episode.task_id})?"
    screen.app.push_screen(ConfirmScreen(question), confirmed)


def resume(screen: ReaderScreen, episode: EpisodeSummary, *, open_trace: bool = True) -> bool:
    """Resume a cancelled or interrupted episode in the background (and follow it)."""
    short_id = screen.ids
    if episode.status not in RESUMABLE:
        screen.notify(
            f"{short_id(episode.episode_id)} is {episode.status}: only cancelled or "
            "interrupted episodes can be resumed",
            severity="warning",
        )
        return False
    app = _app(screen)
    app.runs.start(episode.episode_id)
    screen.notify(f"resuming {short_id(episode.episode_id)} in the background")
    if open_trace:
        app.open_episode(episode.episode_id, follow=True)
    return True


def branches(screen: ReaderScreen, episode_id: str) -> None:
    from agentrunner.tui.screens.branches import BranchesScreen

    screen.app.push_screen(BranchesScreen(episode_id))


def diff(screen: ReaderScreen, episode: EpisodeSummary) -> None:
    if episode.parent_episode_id is None:
        screen.notify(f"{screen.ids(episode.episode_id)} is not a fork: nothing to diff against")
        return
    from agentrunner.tui.screens.diff import DiffScreen

    screen.app.push_screen(DiffScreen(episode.episode_id))
