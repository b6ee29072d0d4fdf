"""The trace screen: virtualized rows, navigation, jumps, find, folding and the detail pane."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rich.console import Console
from textual.widgets import Input

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.rows import RowInfo, RunInfo
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane

from .conftest import CANCELLED, DONE, FAILED, IDLE, wait_for

pytestmark = pytest.mark.anyio


def _screen(app: AgentRunnerApp) -> TraceScreen:
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def find(pilot, screen: TraceScreen, term: str) -> None:  # type: ignore[no-untyped-def]
    """Type ``term`` in the find bar, Enter (the first match), Esc (close the bar)."""
    await pilot.press("slash")
    screen.query_one("#find", Input).value = term
    await pilot.press("enter", "escape")


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
    if detail is None:
        return ""
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


async def test_find_matches_a_streams_text_split_across_its_chunks(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(CANCELLED)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await find(pilot, screen, "integer division rounding down")  # 3 chunks, one message
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        info, folded = screen.event_list.info(screen.event_list.cursor)
    assert folded and isinstance(info, RunInfo) and info.turn == 1


async def test_find_matches_the_joined_chunks_of_a_stream_that_has_no_response(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(CANCELLED)  # cancelled while turn 3 streamed: no response, no message
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await find(pilot, screen, "needs ceiling division")
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        info, folded = screen.event_list.info(screen.event_list.cursor)
    assert folded and isinstance(info, RunInfo) and info.turn == 3


async def test_enter_in_the_find_bar_goes_to_the_next_match_and_keeps_it_open(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        box = screen.query_one("#find", Input)
        await pilot.press("slash")
        box.value = "stats.py"
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        first = screen.event_list.cursor
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.event_list.cursor > first)
        assert box.has_class("-shown") and box.has_focus


async def test_escape_closes_the_find_bar_and_stays_on_the_trace(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        box = screen.query_one("#find", Input)
        await pilot.press("slash")
        box.value = "stats.py"
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.event_list.cursor > 0)
        await pilot.press("escape")
        assert app.screen is screen and not box.has_class("-shown")
        assert screen.event_list.has_focus


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


@pytest.mark.parametrize("size", [(120, 30), (160, 40), (80, 24)])
async def test_zoomed_detail_pane_fits_the_terminal(
    make_app: Callable[..., AgentRunnerApp], size: tuple[int, int]
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=size) as pilot:
        screen = await _open(app, pilot)
        pane = screen.query_one(DetailPane)
        await wait_for(pilot, lambda: pane.detail is not None)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.maximized is pane)
        await pilot.pause()
        assert screen.region.contains_region(pane.region)
        assert pane.virtual_size.width <= pane.scrollable_content_region.width


async def test_tool_output_in_a_requests_input_is_plain_text_not_markdown(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        await pilot.press("right_square_bracket", "right_square_bracket")  # turn 2's request
        await wait_for(pilot, lambda: "last input message (tool)" in _detail_text(screen))
        lines = [line.strip() for line in _detail_text(screen).splitlines()]
    assert "tests/__init__.py" in lines and "tests/test_stats.py" in lines


async def test_an_edited_turn_has_a_turn_marker_in_the_gutter(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(IDLE)  # a fork whose turn 5 was edited (seq 97): no model request
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        await pilot.press("G")
        await wait_for(pilot, lambda: lst.span(lst.cursor)[0] == 97 and lst.visible_loaded())
        line = lst.render_line(lst.cursor - round(lst.scroll_y)).text
    assert line.split()[:2] == ["97", "━━T5✎"]


async def test_brackets_reach_an_edited_turn(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(IDLE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot)
        lst = screen.event_list
        for _ in range(5):
            await pilot.press("right_square_bracket")
            await wait_for(pilot, lambda: "turn at seq" in screen.note)
            screen.note = ""
        await wait_for(pilot, lambda: lst.span(lst.cursor)[0] == 97)
