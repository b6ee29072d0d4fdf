"""``?`` lists the keys of the screen it is pressed on first, then the keys that work
everywhere; the other screens' keys only on ``a``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.episodes import EpisodesScreen
from agentrunner.tui.screens.help import HelpScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio


async def _help(app: AgentRunnerApp, pilot, on: type) -> HelpScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, on))
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
    help_screen = app.screen
    assert isinstance(help_screen, HelpScreen)
    return help_screen


def _ids(help_screen: HelpScreen) -> list[str]:
    return [binding_id for _, _, binding_id in help_screen.rows]


async def test_help_on_the_trace_lists_the_trace_keys_first_then_the_global_ones(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(80, 24)) as pilot:
        help_screen = await _help(app, pilot, TraceScreen)
        ids = _ids(help_screen)
    assert help_screen.titles == ["Trace (this screen)", "Everywhere"]
    assert ids[0] == "trace.down" and {"trace.files", "app.help", "app.quit"} <= set(ids)
    assert not any(i.startswith("episodes.") for i in ids)


async def test_help_on_the_episodes_screen_lists_the_episodes_keys_first(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        help_screen = await _help(app, pilot, EpisodesScreen)
        ids = _ids(help_screen)
    assert help_screen.titles == ["Episodes (this screen)", "Everywhere"]
    assert ids[0] == "episodes.open" and not any(i.startswith("trace.") for i in ids)


async def test_a_in_help_adds_the_other_screens_keys_after_this_screens(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(80, 24)) as pilot:
        help_screen = await _help(app, pilot, TraceScreen)
        await pilot.press("a")
        await wait_for(pilot, lambda: help_screen.show_all)
        titles = help_screen.titles
    assert titles[:3] == ["Trace (this screen)", "Everywhere", "Episodes"]
    assert "Files changed" in titles and "Trace" not in titles
