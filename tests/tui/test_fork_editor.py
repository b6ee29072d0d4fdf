"""The fork editor reads without colour (a chosen mode is marked ●, the others ○) and its
focus starts on the choice of mode, then moves to where the user types."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets import RadioSet, TextArea

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.fork import ForkScreen, ModeButton
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio


async def _editor(app: AgentRunnerApp, pilot) -> ForkScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    trace = app.screen
    assert isinstance(trace, TraceScreen)
    await wait_for(pilot, trace.event_list.visible_loaded)
    await pilot.press("right_square_bracket")
    await wait_for(pilot, lambda: trace.event_list.cursor > 0)
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen))
    editor = app.screen
    assert isinstance(editor, ForkScreen)
    return editor


def _marks(editor: ForkScreen) -> list[str]:
    """Each mode button as drawn, without its colours: its mark and its label."""
    return [button.render().plain.strip() for button in editor.query(ModeButton)]


async def test_focus_starts_on_the_choice_of_mode(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        editor = await _editor(app, pilot)
        await pilot.pause()
        assert isinstance(editor.focused, RadioSet)


async def test_the_chosen_mode_is_marked_by_its_glyph_not_only_by_colour(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        editor = await _editor(app, pilot)
        before = _marks(editor)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: editor.mode == "inject")
        after = _marks(editor)
    assert [m[:8] for m in before] == ["▐●▌ edit", "▐○▌ inje", "▐○▌ resa"]
    assert [m[:8] for m in after] == ["▐○▌ edit", "▐●▌ inje", "▐○▌ resa"]


async def test_picking_a_mode_moves_the_focus_to_its_text(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        editor = await _editor(app, pilot)
        await pilot.press("down", "enter")
        area = editor.query_one("#fork-text", TextArea)
        await wait_for(pilot, lambda: area.has_focus)
        await pilot.press("h", "i")
        assert area.text == "hi"
