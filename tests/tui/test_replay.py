"""Replay: the trace unfolds row by row, step by step or with its recorded timing."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.replay import SPEEDS
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio


async def _open(app: AgentRunnerApp, pilot) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


async def test_space_plays_back_with_recorded_timing_and_pauses(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        await pilot.press("plus", "plus", "plus")  # 8×: events 0.25 s apart play every ~31 ms
        await pilot.press("space")
        assert screen.replay is not None and screen.replay.state == "playing"
        assert lst.row_count < len(lst.index)  # later rows are hidden until played
        start = lst.limit or 0
        await wait_for(pilot, lambda: (lst.limit or 0) >= start + 3)
        await pilot.press("space")
        await pilot.pause()  # a tick already queued before the pause lands first
        paused_at = lst.limit
        await pilot.pause(0.2)
        assert screen.replay.state == "paused" and lst.limit == paused_at
        assert lst.cursor == lst.row_count - 1  # the cursor follows the newest revealed row


async def test_step_reveals_one_row_and_step_back_hides_it(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        await pilot.press("full_stop")
        assert lst.limit == 2
        await pilot.press("full_stop", "full_stop")
        assert lst.limit == 4 and lst.cursor == 3
        await pilot.press("comma")
        assert lst.limit == 3


async def test_speed_keys_change_the_playback_speed(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        assert screen.replay is not None and screen.replay.speed == 1.0
        await pilot.press("plus")
        assert screen.replay.speed == 2.0
        await pilot.press("minus", "minus", "minus", "minus")
        assert screen.replay.speed == SPEEDS[0]


async def test_escape_ends_the_replay_and_shows_every_row(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        await pilot.press("full_stop", "escape")
        assert lst.limit is None and lst.row_count == len(lst.index)
        assert isinstance(app.screen, TraceScreen)


async def test_playback_waits_the_recorded_gap_between_events(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        started = time.monotonic()
        await pilot.press("space")  # events of the fixture are 0.25 s apart; 1× speed
        await wait_for(pilot, lambda: (lst.limit or 0) >= 3)
        assert time.monotonic() - started >= 0.45
