"""A cancelled run reads as cancelled on the trace screen's next poll after its end is
recorded (not when a summary timer next comes round)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens import trace
from agentrunner.tui.screens.confirm import ConfirmScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import BackgroundWriter, wait_for

pytestmark = pytest.mark.anyio
QUIET = 3600.0  # no timer fires during the test: it polls by hand


def _writing(db: Path, episode: str) -> None:
    """Wait until the writer has claimed its episode and begun (the screen reads its status
    once when it opens: no timer re-reads it in these tests)."""
    deadline = time.monotonic() + 120
    while True:
        with TraceStore(db) as store:
            if store.episode(episode).status == "running":
                return
        assert time.monotonic() < deadline, "the writer never started"
        time.sleep(0.02)


def _ended(db: Path, episode: str) -> bool:
    with TraceStore(db) as store:
        return bool(store.events(episode, kinds=["episode.end"], limit=1))


async def _running(app: AgentRunnerApp, pilot) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.summary is not None and screen.summary.status == "running")
    return screen


async def _poll_once_until_cancelled(pilot, screen: TraceScreen) -> None:  # type: ignore[no-untyped-def]
    """One poll (no timer fires during the test, so nothing else reads the store), then wait
    for what it brings: the status read in that same poll."""
    screen.poll_now()
    await wait_for(
        pilot, lambda: screen.summary is not None and screen.summary.status == "cancelled"
    )


async def test_the_poll_that_brings_the_end_of_a_cancelled_run_shows_it_cancelled(
    make_app: Callable[..., AgentRunnerApp],
    gated_writer: BackgroundWriter,
    tui_db: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "SUMMARY_EVERY_S", QUIET)  # the summary timer never comes due
    monkeypatch.setattr(trace, "SUMMARY_IDLE_S", QUIET)
    writer = gated_writer
    assert writer.episode_id is not None
    _writing(tui_db, writer.episode_id)
    app = make_app(writer.episode_id, poll_s=QUIET)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _running(app, pilot)
        writer.stop.set()  # its writer cancels (as a cancel request makes it do)
        writer.thread.join(120)
        assert _ended(tui_db, writer.episode_id)
        await _poll_once_until_cancelled(pilot, screen)


async def test_a_cancel_request_says_so_at_once_and_the_status_follows(
    make_app: Callable[..., AgentRunnerApp],
    gated_writer: BackgroundWriter,
    tui_db: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trace, "SUMMARY_EVERY_S", QUIET)
    monkeypatch.setattr(trace, "SUMMARY_IDLE_S", QUIET)
    writer = gated_writer
    assert writer.episode_id is not None
    _writing(tui_db, writer.episode_id)
    app = make_app(writer.episode_id, poll_s=QUIET)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _running(app, pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: "cancel requested" in screen.note)
        writer.thread.join(120)  # the gated model polls the request: the writer stops
        await _poll_once_until_cancelled(pilot, screen)
        await wait_for(pilot, lambda: screen.note == "run cancelled")
