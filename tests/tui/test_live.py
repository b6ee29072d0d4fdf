"""Live follow and cancel: a running episode written by another writer streams into view."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.confirm import ConfirmScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import BackgroundWriter, wait_for

pytestmark = pytest.mark.anyio


async def _open_live(app: AgentRunnerApp, pilot) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    # the first summary of a running episode moves the cursor to its tail: wait for it, so
    # that it cannot land after a key the test presses
    await wait_for(pilot, lambda: screen.summary is not None)
    return screen


async def test_running_episode_streams_in_and_the_tail_is_followed(
    make_app: Callable[..., AgentRunnerApp], writer: BackgroundWriter
) -> None:
    app = make_app(writer.episode_id, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_live(app, pilot)
        lst = screen.event_list
        first = lst.index.last_seq
        await wait_for(pilot, lambda: lst.index.last_seq > first + 20)
        assert lst.at_bottom and screen.new_events == 0
        await wait_for(pilot, lambda: screen.summary is not None and screen.summary.turns >= 3)
        assert lst.at_bottom
        # every event arrived live; runs of streamed chunks were folded as they came
        runs = [r for r in range(lst.row_count) if lst.span(r)[1] > lst.span(r)[0]]
    assert len(runs) >= 2


async def test_new_events_are_counted_when_the_cursor_is_not_at_the_bottom(
    make_app: Callable[..., AgentRunnerApp], gated_writer: BackgroundWriter
) -> None:
    writer = gated_writer  # it writes a turn only when released: no race with the cursor
    app = make_app(writer.episode_id, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_live(app, pilot)
        lst = screen.event_list
        writer.release()
        await wait_for(pilot, lambda: lst.row_count > 3)
        await pilot.press("g")
        writer.release()
        await wait_for(pilot, lambda: screen.new_events > 0)
        assert lst.cursor == 0
        await pilot.press("G")
        await wait_for(pilot, lambda: screen.new_events == 0 and lst.at_bottom)


async def test_x_cancels_the_running_episode_after_confirmation(
    make_app: Callable[..., AgentRunnerApp], gated_writer: BackgroundWriter
) -> None:
    writer = gated_writer
    app = make_app(writer.episode_id, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_live(app, pilot)
        await wait_for(pilot, lambda: screen.summary is not None)
        await wait_for(
            pilot, lambda: screen.summary is not None and screen.summary.status == "running"
        )
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: screen.summary is not None and screen.summary.status == "cancelled",
        )
        kinds = [info.kind for info, _ in (screen.event_list.info(r) for r in range(3)) if info]
    writer.thread.join(120)
    assert writer.rollout.status == "cancelled" and kinds[0] == "episode.start"


async def test_n_declines_the_cancel(
    make_app: Callable[..., AgentRunnerApp], gated_writer: BackgroundWriter, tui_db: Path
) -> None:
    writer = gated_writer
    app = make_app(writer.episode_id, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open_live(app, pilot)
        await wait_for(
            pilot, lambda: screen.summary is not None and screen.summary.status == "running"
        )
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: app.screen is screen)
        after = screen.event_list.index.last_seq
        writer.release()
        await wait_for(pilot, lambda: screen.event_list.index.last_seq > after + 5)
    with sqlite3.connect(tui_db) as conn:
        (requested,) = conn.execute(
            "SELECT cancel_requested_at FROM control WHERE episode_id = ?", (writer.episode_id,)
        ).fetchone()
    assert requested is None
