"""The episodes screen: every episode with status, totals and lineage; filter, sort, open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Input

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.branches import BranchesScreen
from agentrunner.tui.screens.episodes import EpisodesScreen, EpisodesTable
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import CANCELLED, DONE, FAILED, FORK, IDLE, BackgroundWriter, wait_for

pytestmark = pytest.mark.anyio


def _rows(app: AgentRunnerApp) -> list[list[str]]:
    table = app.screen.query_one(EpisodesTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_lists_every_episode_with_status_word_and_lineage(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        rows = {r[0]: r for r in _rows(app)}
    assert set(rows) == {ep[:10] for ep in (DONE, FORK, IDLE, CANCELLED, FAILED)}
    assert [rows[ep[:10]][1] for ep in (DONE, FORK, IDLE, CANCELLED, FAILED)] == [
        "completed",
        "completed",
        "interrupted",
        "cancelled",
        "failed",
    ]
    assert rows[FORK[:10]][-1] == f"↳ {DONE[:8]}@37" and rows[DONE[:10]][-1] == "2 forks"
    assert rows[DONE[:10]][2:5] == ["demo-mean", "7", "1"]


async def test_filter_keeps_matching_episodes(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.press("slash")
        app.screen.query_one("#episodes-filter", Input).value = "paginate"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 1)
        assert _rows(app)[0][0] == CANCELLED[:10]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)


async def test_sort_cycles_columns_and_reverses(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        assert _rows(app)[0][0] == FAILED[:10]  # newest first
        await pilot.press("s")  # by status
        await pilot.press("S")  # ascending
        await pilot.pause()
        statuses = [r[1] for r in _rows(app)]
        assert isinstance(app.screen, EpisodesScreen) and app.screen.sort_key == "status"
    assert statuses == sorted(statuses)


async def test_enter_opens_the_selected_episode(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.press("j", "enter")  # second newest: the cancelled episode
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.episode_id == CANCELLED)


async def test_list_updates_while_an_episode_runs(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path, tmp_path: Path
) -> None:
    app = make_app(poll_s=0.05)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        with BackgroundWriter(tui_db, tmp_path / "snap", pace=0.002) as w:
            assert w.episode_id is not None
            short = w.episode_id[:10]
            await wait_for(pilot, lambda: any(r[0] == short for r in _rows(app)))
            statuses = [r[1] for r in _rows(app) if r[0] == short]
            await wait_for(
                pilot,
                lambda: any(r[0] == short and r[1] == "completed" for r in _rows(app)),
                timeout=30,
            )
    assert statuses[0] in ("running", "completed")


async def test_b_on_the_list_opens_the_selected_episodes_branches(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.press("j", "j", "j", "b")  # newest first: the fork is fourth
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        screen = app.screen
        assert isinstance(screen, BranchesScreen) and screen.episode_id == FORK


async def test_R_on_the_list_resumes_the_selected_episode_and_follows_it(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(poll_s=0.05)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.press("j", "R")  # the cancelled episode
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen) and app.runs.started == [CANCELLED]
        await wait_for(
            pilot,
            lambda: screen.summary is not None and screen.summary.status == "completed",
            timeout=30,
        )
