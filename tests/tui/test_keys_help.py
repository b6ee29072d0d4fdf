"""Keys: every binding has an id, help lists them all, and a keymap can change them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.binding import Binding

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.keys import binding_sections
from agentrunner.tui.screens.episodes import EpisodesScreen
from agentrunner.tui.screens.fork import ForkScreen
from agentrunner.tui.screens.help import HelpScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio
DESIGN_KEYS = ("j", "k", "g", "G", "slash", "right_square_bracket", "left_square_bracket")
DESIGN_KEYS += ("space", "f", "b", "d", "R", "x", "question_mark", "n", "N")


def _all_bindings() -> list[Binding]:
    return [b for _, bindings in binding_sections() for b in bindings if isinstance(b, Binding)]


def test_every_binding_has_an_id() -> None:
    bindings = _all_bindings()
    assert bindings and all(b.id for b in bindings)


def test_the_design_keys_are_bound() -> None:
    keys = {k for b in _all_bindings() for k in b.key.split(",")}
    assert set(DESIGN_KEYS) <= keys


async def test_question_mark_lists_every_binding(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        await pilot.press("a")  # every screen's keys, not only this one's
        await wait_for(pilot, lambda: help_screen.show_all)
        rows = {binding_id: keys for keys, _, binding_id in help_screen.rows}
        await pilot.press("escape")
        assert isinstance(app.screen, TraceScreen)
    assert {b.id for b in _all_bindings()} <= set(rows)
    assert rows["trace.next_turn"] == "]" and rows["app.help"] == "?"


async def test_help_shows_keymap_overrides(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(keymap={"trace.fork": "F"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        await pilot.press("a")
        await wait_for(pilot, lambda: help_screen.show_all)
        rows = {binding_id: keys for keys, _, binding_id in help_screen.rows}
    assert rows["trace.fork"] == "F"


async def test_keymap_rebinds_a_key_by_its_id(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE, keymap={"trace.fork": "F"})
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.event_list.visible_loaded())
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        await pilot.press("f")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, ForkScreen)
        await pilot.press("F")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen))


@pytest.mark.parametrize("episode", [None, DONE], ids=["episodes", "trace"])
async def test_the_footer_shows_help_and_quit_at_80_columns(
    make_app: Callable[..., AgentRunnerApp], episode: str | None
) -> None:
    app = make_app(episode)
    async with app.run_test(size=(80, 24)) as pilot:
        screen_type = TraceScreen if episode else EpisodesScreen
        await wait_for(pilot, lambda: isinstance(app.screen, screen_type))
        await pilot.pause()
        keys = list(app.screen.query("Footer FooterKey"))
        docked = [k.region for k in keys if k.has_class("-command-palette")]
        shown = {
            key.description  # type: ignore[attr-defined]
            for key in keys
            if key.region.width
            and key.region.right <= 80
            and not any(key.region.overlaps(r) for r in docked if r != key.region)
        }
    assert {"Help", "Quit"} <= shown
