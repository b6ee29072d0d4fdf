"""Find on the trace screen wraps round at either end, and a match on the cursor counts."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import Input

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio
ONLY_ON_THE_FIRST_ROW = "demo-mean"  # DONE's task id: only its episode.start (seq 1) holds it
SEVERAL = "divisor"  # DONE holds it in several rows, the first at seq 39
FIRST = 39


async def _open(app: AgentRunnerApp, pilot) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


async def _find(pilot, screen: TraceScreen, term: str) -> None:  # type: ignore[no-untyped-def]
    """Type ``term`` in the find bar, Enter, then wait for the search to land."""
    await pilot.press("slash")
    screen.query_one("#find", Input).value = term
    await pilot.press("enter", "escape")
    await _landed(pilot, screen)


async def _landed(pilot, screen: TraceScreen) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: bool(screen.note) and "searching" not in screen.note)


async def _press(pilot, screen: TraceScreen, key: str) -> None:  # type: ignore[no-untyped-def]
    screen.note = ""
    await pilot.press(key)
    await _landed(pilot, screen)


async def test_a_new_search_finds_the_match_under_the_cursor(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await _find(pilot, screen, ONLY_ON_THE_FIRST_ROW)
        assert screen.note == f"match for “{ONLY_ON_THE_FIRST_ROW}” at seq 1"
        assert screen.event_list.cursor == 0


async def test_n_on_the_only_match_wraps_round_to_it_and_says_so(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await _find(pilot, screen, ONLY_ON_THE_FIRST_ROW)
        await _press(pilot, screen, "n")
        assert screen.note == f"only match for “{ONLY_ON_THE_FIRST_ROW}” at seq 1 (wrapped)"
        assert screen.event_list.cursor == 0


async def test_n_past_the_last_match_wraps_round_to_the_first(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await _find(pilot, screen, SEVERAL)
        first = screen.event_list.cursor
        assert screen.note == f"match for “{SEVERAL}” at seq {FIRST}"
        await pilot.press("G")
        await _press(pilot, screen, "n")
        assert screen.event_list.cursor == first
        assert screen.note == f"match for “{SEVERAL}” at seq {FIRST} (wrapped)"


async def test_N_before_the_first_match_wraps_round_to_the_last(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await _find(pilot, screen, SEVERAL)
        first = screen.event_list.cursor
        await _press(pilot, screen, "N")
        assert screen.event_list.cursor > first
        assert screen.note.endswith(" (wrapped)") and not screen.note.startswith("only")
