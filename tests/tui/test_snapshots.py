"""SVG snapshots of the main screens on the deterministic store (pytest-textual-snapshot).

Update them after a deliberate visual change with ``pytest tests/tui --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.pilot import Pilot

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.branches import BranchesScreen
from agentrunner.tui.screens.episodes import EpisodesTable
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane

from .conftest import DONE, FORK, wait_for

QUIET = 3600.0  # no polling while the screenshot is taken


async def _trace_ready(pilot: Pilot[Any]) -> TraceScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


async def _detail_for(pilot: Pilot[Any], screen: TraceScreen, kind: str) -> None:
    def ready() -> bool:
        detail = screen.query_one(DetailPane).detail
        return detail is not None and detail.title.startswith(kind)

    await wait_for(pilot, ready)
    await wait_for(pilot, screen.event_list.visible_loaded)
    pane = screen.query_one(DetailPane)
    height = -1
    while pane.virtual_size.height != height:  # the pane's layout has settled
        height = pane.virtual_size.height
        await pilot.pause(0.05)


def test_episodes_screen(snap_compare: Callable[..., bool], tui_db: Any) -> None:
    app = AgentRunnerApp(tui_db, poll_s=QUIET)

    async def ready(pilot: Pilot[Any]) -> None:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


def test_trace_screen_narrow_on_a_folded_stream(
    snap_compare: Callable[..., bool], tui_db: Any
) -> None:
    app = AgentRunnerApp(tui_db, DONE, poll_s=QUIET)

    async def ready(pilot: Pilot[Any]) -> None:
        screen = await _trace_ready(pilot)
        for turn in (1, 2, 3):
            await pilot.press("right_square_bracket")
            await wait_for(
                pilot,
                lambda t=turn: (
                    (screen.event_list.info(screen.event_list.cursor)[0] or screen).turn == t
                ),  # type: ignore[misc]
            )
        await pilot.press("j")
        await _detail_for(pilot, screen, "model.chunk")

    assert snap_compare(app, terminal_size=(80, 24), run_before=ready)


def test_trace_screen_wide_on_a_tool_result(snap_compare: Callable[..., bool], tui_db: Any) -> None:
    app = AgentRunnerApp(tui_db, DONE, poll_s=QUIET)

    async def ready(pilot: Pilot[Any]) -> None:
        screen = await _trace_ready(pilot)
        await pilot.press("t")
        await _detail_for(pilot, screen, "tool.call")
        await pilot.press("t")
        await wait_for(pilot, lambda: screen.event_list.cursor > 8)
        await pilot.press("j")
        await _detail_for(pilot, screen, "tool.result")

    assert snap_compare(app, terminal_size=(140, 36), run_before=ready)


def test_branches_screen(snap_compare: Callable[..., bool], tui_db: Any) -> None:
    app = AgentRunnerApp(tui_db, FORK, poll_s=QUIET)

    async def ready(pilot: Pilot[Any]) -> None:
        await _trace_ready(pilot)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        screen = app.screen
        assert isinstance(screen, BranchesScreen)
        await wait_for(pilot, lambda: len(screen.branches) == 3)
        await wait_for(pilot, lambda: screen.selected_id() == FORK)
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 24), run_before=ready)
