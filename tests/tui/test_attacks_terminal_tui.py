"""Terminal injection in the TUI: recorded text is drawn with its control characters visible
(``^[``), never handed to the terminal, and never read as markup.

The episode is the one of ``tests/test_attacks_terminal.py`` (a real ``run`` whose prompt,
reasoning, text, tool arguments and command output carry every sequence). What is checked is
what the widgets draw: the text of the segments Textual writes to the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from terminal_payloads import (
    ATTACKS,
    LINK,
    MARKUP,
    PAYLOAD,
    Recorded,
    missing_visible,
    raw_controls,
    record_attack,
)
from textual.geometry import Region
from textual.widgets import Input, TextArea

from agentrunner import TraceStore
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.episodes import EpisodesScreen, EpisodesTable
from agentrunner.tui.screens.fork import ForkScreen
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane

from .conftest import wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record_attack(tmp_path_factory.mktemp("terminal-tui"))


def _drawn(app: AgentRunnerApp) -> str:
    """Every line the current screen's widgets draw (what reaches the terminal)."""
    lines = []
    for widget in app.screen.query("*"):
        if widget.display and widget.size.area:
            for strip in widget.render_lines(Region(0, 0, *widget.size)):
                lines.append("".join(segment.text for segment in strip))
    return "\n".join(lines)


async def _open(app: AgentRunnerApp, pilot: Any) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


async def _every_detail(app: AgentRunnerApp, pilot: Any, screen: TraceScreen) -> list[str]:
    """The screen as drawn with each row of the trace selected in turn (its detail loaded)."""
    pane = screen.query_one(DetailPane)
    events = screen.event_list
    drawn = []
    while True:
        info, _ = events.info(events.cursor)
        assert info is not None
        want = f"seq {info.seq}"

        def shown(want: str = want) -> bool:
            title = pane.detail.title if pane.detail is not None else ""
            return title.split(" · ")[1].split("–")[0] == want if " · " in title else False

        await wait_for(pilot, shown)
        await pilot.pause()
        drawn.append(_drawn(app))
        before = events.cursor
        await pilot.press("j")
        await pilot.pause()
        if events.cursor == before:
            return drawn


async def test_trace_rows_and_every_detail_draw_no_raw_control_character(
    recorded: Recorded,
) -> None:
    app = AgentRunnerApp(recorded.db, recorded.episode_id)
    async with app.run_test(size=(220, 60)) as pilot:
        screen = await _open(app, pilot)
        drawn = await _every_detail(app, pilot, screen)
    raw = {name for text in drawn for name in raw_controls(text)}
    assert len(drawn) > 10 and not raw, f"raw control characters drawn: {sorted(raw)}"


async def test_the_details_show_every_sequence_visibly(recorded: Recorded) -> None:
    app = AgentRunnerApp(recorded.db, recorded.episode_id)
    async with app.run_test(size=(220, 60)) as pilot:
        screen = await _open(app, pilot)
        drawn = "\n".join(await _every_detail(app, pilot, screen))
    assert not missing_visible(drawn)


async def test_markup_in_recorded_text_is_drawn_literally(recorded: Recorded) -> None:
    app = AgentRunnerApp(recorded.db, recorded.episode_id)
    async with app.run_test(size=(220, 60)) as pilot:
        screen = await _open(app, pilot)
        drawn = "\n".join(await _every_detail(app, pilot, screen))
    assert all(m in drawn for m in MARKUP) and "ghost[/]^[]0;pwned^G" in drawn


async def test_a_link_in_the_model_text_is_shown_with_its_address(recorded: Recorded) -> None:
    app = AgentRunnerApp(recorded.db, recorded.episode_id)
    async with app.run_test(size=(220, 60)) as pilot:
        screen = await _open(app, pilot)
        drawn = await _every_detail(app, pilot, screen)
    streams = [text for text in drawn if "model.chunk · seq" in text]
    assert any("(https://evil.example/docs)" in text for text in streams)


async def test_the_episodes_screen_shows_a_task_id_with_escapes_visibly(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    with TraceStore(db) as store:
        store.create_episode(task_id=f"t {PAYLOAD}", seed=0, env={}, model={})
    app = AgentRunnerApp(db)
    async with app.run_test(size=(200, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen))
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 1)
        await pilot.pause()
        drawn = _drawn(app)
    assert not raw_controls(drawn) and "t ^[]52;c;aGFja2Vk^G ^[]0;pwned^G" in drawn


async def test_a_filter_with_markup_is_shown_literally_in_the_episodes_header(
    tmp_path: Path,
) -> None:
    db = tmp_path / "traces.db"
    TraceStore(db).close()
    app = AgentRunnerApp(db)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen))
        await pilot.press("slash")
        app.screen.query_one(Input).value = "[/]x"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "“[/]x”" in _drawn(app))


async def test_an_error_notification_is_shown_literally(tmp_path: Path) -> None:
    db = tmp_path / "traces.db"
    TraceStore(db).close()
    app = AgentRunnerApp(db, "nope[/]" + ATTACKS["window title (OSC 0)"][0])

    def toasts() -> str:
        return "\n".join(str(toast.render()) for toast in app.screen.query("Toast"))

    async with app.run_test(size=(160, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: "nope[/]" in toasts())
        shown = toasts()
    assert not raw_controls(shown)


async def test_the_fork_editor_shows_escapes_as_json_escapes_of_the_same_message(
    recorded: Recorded,
) -> None:
    app = AgentRunnerApp(recorded.db, recorded.episode_id)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket")  # turn 1's model request

        def at_turn_1() -> bool:
            info, _ = screen.event_list.info(screen.event_list.cursor)
            return info is not None and info.turn == 1

        await wait_for(pilot, at_turn_1)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen))
        await pilot.pause()
        drawn = _drawn(app)
        value = json.loads(app.screen.query_one("#fork-text", TextArea).text)
    assert "\\u009b2J" in drawn and not raw_controls(drawn)
    assert value["message"] == f"saying {PAYLOAD} {LINK}"
