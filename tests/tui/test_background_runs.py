"""Runs the TUI starts (R, a fork's run) are processes of their own: a cancel stops one in
the middle of a tool step (not when the step is done), and quitting the TUI cancels them."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.confirm import ConfirmScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio
LONG_STEP = "sleep 600"  # a tool step that outlasts every deadline of these tests


@pytest.fixture
def sleeper(tui_db: Path, tmp_path: Path) -> str:
    """A fork of DONE, never run, whose model's first action is a very long tool step."""
    turn = {
        "text": "waiting",
        "tool_calls": [{"name": "bash", "arguments": {"command": LONG_STEP}}],
    }
    script = tmp_path / "sleeper.json"
    script.write_text(json.dumps({"name": "sleeper", "episodes": [{"match": "", "turns": [turn]}]}))
    with TraceStore(tui_db) as store:
        (fork,) = fork_episode(store, DONE, turn=1, model=f"scripted:{script}")
    return fork


def _in_the_long_step(db: Path, episode: str) -> bool:
    """The run recorded its tool call: it is inside the step (no cancel check until done)."""
    with TraceStore(db) as store:
        fork_seq = store.episode(episode).fork_seq or 0
        return bool(store.events(episode, after_seq=fork_seq, kinds=["tool.call"], limit=1))


def _own_kinds(db: Path, episode: str) -> list[str]:
    """The kinds of the events the fork recorded itself (after its fork point)."""
    with TraceStore(db) as store:
        fork_seq = store.episode(episode).fork_seq or 0
        return [r.kind for r in store.events(episode, after_seq=fork_seq)]


def _status(db: Path, episode: str) -> str:
    with TraceStore(db) as store:
        return str(store.episode(episode).status)


async def _resumed(app: AgentRunnerApp, pilot, db: Path, episode: str) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.summary is not None)
    await pilot.press("R")
    await wait_for(pilot, lambda: _in_the_long_step(db, episode))
    await wait_for(pilot, lambda: screen.summary is not None and screen.summary.status == "running")
    return screen


async def test_x_stops_a_run_the_tui_started_in_the_middle_of_its_tool_step(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path, sleeper: str
) -> None:
    app = make_app(sleeper, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _resumed(app, pilot, tui_db, sleeper)
        await pilot.press("x")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(
            pilot, lambda: screen.summary is not None and screen.summary.status == "cancelled"
        )
        await wait_for(pilot, lambda: sleeper not in app.runs.active)
    # stopped inside the step: it recorded no result (a resume runs the call again); a run
    # that could not be interrupted would record the step's result (its timeout) first
    assert _own_kinds(tui_db, sleeper)[-3:] == ["tool.call", "cancel", "episode.end"]


async def test_quitting_the_tui_cancels_the_runs_it_started(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path, sleeper: str
) -> None:
    app = make_app(sleeper, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await _resumed(app, pilot, tui_db, sleeper)
        await pilot.press("q")
    deadline = time.monotonic() + 120  # bounds a failing test only
    while _status(tui_db, sleeper) != "cancelled":
        assert time.monotonic() < deadline, f"still {_status(tui_db, sleeper)}"
        time.sleep(0.05)
