"""Actions shared by the episodes, trace and branches screens: resume, cancel, diff.

Each takes the screen it is invoked from and the episode's summary; store access runs in
workers (cancel requests are the store's control-table writes; resumes run in the
background through the app's :class:`~agentrunner.tui.runs.BackgroundRuns`). What an
action needs (the resume rule, its dialogs) loads when it is first taken, not with the
screens that offer it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from agentrunner.store import EpisodeSummary
from agentrunner.values.events import Status

if TYPE_CHECKING:
    from agentrunner.store.protocol import StoreBackend
    from agentrunner.tui.work import ReaderScreen

CANCEL_REASON = "cancelled from the TUI"


def _why_not_resume(store: StoreBackend, episode: EpisodeSummary) -> str | None:
    from agentrunner.lifecycle.resume import can_resume  # the runner and the environments: ~0.2 s

    return can_resume(store, episode)


def _request_cancel(store: StoreBackend, episode_id: str) -> str:
    store.request_cancel(episode_id, CANCEL_REASON)
    return episode_id


def cancel(
    screen: ReaderScreen,
    episode: EpisodeSummary,
    *,
    requested: Callable[[], None] | None = None,
) -> None:
    """Ask (with confirmation) the running episode's writer to cancel; it polls within 1 s
    (a tool step that is running finishes first); ``requested`` once the request is in."""
    short_id = screen.ids
    if episode.status != Status.RUNNING:
        screen.notify(f"{short_id(episode.episode_id)} is {episode.status}, not running")
        return

    def done(episode_id: str) -> None:
        screen.notify(f"cancel requested for {short_id(episode_id)}")
        if requested is not None:
            requested()

    def confirmed(yes: bool | None) -> None:
        if yes:
            screen.read(_request_cancel, episode.episode_id, then=done)

    from agentrunner.tui.screens.confirm import ConfirmScreen

    question = f"Cancel running episode {short_id(episode.episode_id)} ({episode.task_id})?"
    screen.app.push_screen(ConfirmScreen(question), confirmed)


def resume(
    screen: ReaderScreen,
    episode: EpisodeSummary,
    *,
    open_trace: bool = True,
    then: Callable[[], None] | None = None,
) -> None:
    """Resume the episode in the background (and follow it) if it can be resumed (the one
    rule, :func:`~agentrunner.lifecycle.resume.can_resume`, read in a worker); ``then`` once
    started."""
    short_id = screen.ids

    def decided(why_not: str | None) -> None:
        if why_not is not None:
            screen.notify(
                f"{short_id(episode.episode_id)} cannot be resumed: {why_not}", severity="warning"
            )
            return
        app = screen.runner_app
        app.runs.start(episode.episode_id)
        screen.notify(f"resuming {short_id(episode.episode_id)} in the background")
        if open_trace:
            app.open_episode(episode.episode_id, follow=True)
        if then is not None:
            then()

    screen.read(_why_not_resume, episode, then=decided, group="resume")


def diff(screen: ReaderScreen, episode: EpisodeSummary) -> None:
    if episode.parent_episode_id is None:
        screen.notify(f"{screen.ids(episode.episode_id)} is not a fork: nothing to diff against")
        return
    from agentrunner.tui.screens.diff import DiffScreen

    screen.app.push_screen(DiffScreen(episode.episode_id))
