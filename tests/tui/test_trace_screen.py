"""The trace screen: virtualized rows, navigation, jumps, find, folding and the detail pane."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rich.console import Console
from textual.widgets import Input

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.rows import RowInfo
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane

from .conftest import DONE, FAILED, wait_for

pytestmark = pytest.mark.anyio


def _screen(app: AgentRunnerApp) -> TraceScreen:
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def find(pilot, screen: TraceScreen, term: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.press("slash")
    screen.query_one("#find", Input).value = term
    await pilot.press("enter")


async def _open(app: AgentRunnerApp, pilot) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = _screen(app)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


def _kind(screen: TraceScreen) -> str:
    info, _ = screen.event_list.info(screen.event_list.cursor)
    assert info is not None
    return info.kind


def _detail_text(screen: TraceScreen) -> str:
    detail = screen.query_one(DetailPane).detail
    assert detail is not None
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(detail.body)
    return detail.title + "\n" + console.export_text()


async def test_rows_are_drawn_lazily_never_one_widget_per_event(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        widgets = len(list(screen.query("*")))
        assert screen.event_list.index.last_seq == 149
        assert screen.event_list.row_count < 149  # streamed chunks folded into runs
        assert widgets < 40


async def test_j_k_g_and_G_move_the_cursor(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        await pilot.press("j", "j", "j")
        assert lst.cursor == 3
        await pilot.press("k")
        assert lst.cursor == 2
        await pilot.press("G")
        assert lst.cursor == lst.row_count - 1 and _kind(screen) == "episode.end"
        await pilot.press("g")
        assert lst.cursor == 0 and _kind(screen) == "episode.start"


async def test_brackets_jump_between_model_turns(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: _kind(screen) == "model.request")
        first = screen.event_list.cursor
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: screen.event_list.cursor > first)
        info, _ = screen.event_list.info(screen.event_list.cursor)
        assert info is not None and (info.kind, info.turn) == ("model.request", 2)
        await pilot.press("left_square_bracket")
        await wait_for(pilot, lambda: screen.event_list.cursor == first)


async def test_t_jumps_to_the_next_tool_call(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("t")
        await wait_for(pilot, lambda: _kind(screen) == "tool.call")
        await wait_for(pilot, lambda: "list_files" in _detail_text(screen))


async def test_find_n_and_N_walk_the_matches(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await find(pilot, screen, "stats.py")
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        first = screen.event_list.cursor
        await pilot.press("n")
        await wait_for(pilot, lambda: screen.event_list.cursor > first)
        await pilot.press("N")
        await wait_for(pilot, lambda: screen.event_list.cursor == first)
        assert screen.event_list.term == "stats.py"


async def test_find_reports_no_match(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await find(pilot, screen, "no-such-text-anywhere")
        await wait_for(pilot, lambda: "no match" in screen.note)
        assert screen.event_list.cursor == 0


async def test_z_unfolds_streamed_chunks_into_one_row_each(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        folded = screen.event_list.row_count
        await pilot.press("z")
        assert screen.event_list.row_count == 149 > folded
        await pilot.press("z")
        assert screen.event_list.row_count == folded


async def test_folded_run_detail_shows_reasoning_text_and_arguments(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket")
        await wait_for(pilot, lambda: _kind(screen) == "model.request")
        await pilot.press("j")
        await wait_for(pilot, lambda: "thinking" in _detail_text(screen))
        text = _detail_text(screen)
    assert "The report says averages are wrong" in text and "tool arguments" in text


async def test_tool_result_output_is_capped_until_o(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("t")
        await wait_for(pilot, lambda: _kind(screen) == "tool.call")
        first = screen.event_list.cursor
        await pilot.press("t")
        await wait_for(pilot, lambda: screen.event_list.cursor > first)
        await pilot.press("j")
        await wait_for(pilot, lambda: "tool.result" in _detail_text(screen))
        assert "Small statistics helpers" in _detail_text(screen)
        await pilot.press("o")
        await wait_for(pilot, lambda: screen.full_output)


async def test_errors_are_prominent_and_e_jumps_to_them(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(FAILED)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("e")
        await wait_for(pilot, lambda: _kind(screen) == "error")
        info, _ = screen.event_list.info(screen.event_list.cursor)
        assert isinstance(info, RowInfo) and info.tone == "error"
        assert "502 Bad Gateway" in info.text
        await wait_for(pilot, lambda: "ERROR" in _detail_text(screen))


async def test_escape_goes_back_to_the_episodes(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(app, pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, TraceScreen))


async def test_works_in_80x24(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        assert screen.query_one("#trace-body").has_class("-narrow")
        assert screen.event_list.size.height >= 8 and screen.query_one(DetailPane).size.height >= 5


async def test_enter_zooms_the_detail_pane_and_escape_restores_it(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("enter")
        assert isinstance(screen.maximized, DetailPane)
        await pilot.press("escape")
        assert screen.maximized is None and app.screen is screen
