"""The episodes screen: every episode with status, totals and lineage; filter, sort, open."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Input

from agentrunner import TraceStore
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.branches import BranchesScreen
from agentrunner.tui.screens.episodes import COLUMNS, EpisodesScreen, EpisodesTable
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
    assert set(rows) == {ep[:8] for ep in (DONE, FORK, IDLE, CANCELLED, FAILED)}
    assert [rows[ep[:8]][1] for ep in (DONE, FORK, IDLE, CANCELLED, FAILED)] == [
        "completed",
        "completed",
        "pending",
        "cancelled",
        "failed",
    ]
    assert rows[FORK[:8]][5] == f"↳ {DONE[:8]}@37" and rows[DONE[:8]][5] == "2 forks"
    assert rows[DONE[:8]][2:5] == ["demo-mean", "1", "$0.0000"] and rows[DONE[:8]][6] == "7"


async def test_ids_are_the_shortest_prefixes_unique_in_the_store(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path, same_ms_forks: tuple[str, str]
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 7)
        shown = [r[0] for r in _rows(app)]
    with TraceStore(tui_db) as store:
        resolved = [store.resolve(prefix) for prefix in shown]
    assert len(set(resolved)) == 7 and min(len(p) for p in shown) == 8
    assert {"01JFFF0000A", "01JFFF0000B"} <= set(shown)


async def test_status_reward_cost_and_lineage_are_in_view_at_80_columns(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.screen.query_one(EpisodesTable)
        await wait_for(pilot, lambda: table.row_count == 5)
        await pilot.pause()
        columns = table.ordered_columns[: COLUMNS.index("lineage") + 1]
        right = sum(column.get_render_width(table) for column in columns)
        width = table.scrollable_content_region.width
    assert {"status", "reward", "cost", "lineage"} <= {str(c.label) for c in columns}
    assert right <= width


async def test_filter_keeps_matching_episodes(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        await pilot.press("slash")
        app.screen.query_one("#episodes-filter", Input).value = "paginate"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 1)
        assert _rows(app)[0][0] == CANCELLED[:8]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)


async def test_sort_cycles_columns_and_reverses(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        assert _rows(app)[0][0] == FAILED[:8]  # newest first
        await pilot.press("s")  # by status
        await pilot.press("S")  # ascending
        assert isinstance(app.screen, EpisodesScreen) and app.screen.sort_key == "status"
        # The table is refilled after the keys are handled: wait for the sorted rows.
        await wait_for(pilot, lambda: _sorted_statuses(app) is not None)
        statuses = _sorted_statuses(app)
    assert statuses is not None and len(statuses) == 5


def _sorted_statuses(app: AgentRunnerApp) -> list[str] | None:
    """The table's statuses once all five rows are there in ascending order, else None."""
    statuses = [r[1] for r in _rows(app)]
    return statuses if len(statuses) == 5 and statuses == sorted(statuses) else None


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
        with BackgroundWriter(tui_db, tmp_path / "snap", gated=True) as w:
            assert w.episode_id is not None
            short = w.episode_id[:8]
            await wait_for(
                pilot, lambda: any(r[0] == short and r[1] == "running" for r in _rows(app))
            )
            w.release(100)  # the writer runs to its end only now: no race with the list
            await wait_for(
                pilot,
                lambda: any(r[0] == short and r[1] == "completed" for r in _rows(app)),
                timeout=60,
            )


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


async def test_after_its_first_listing_the_screen_reads_only_what_changed(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        screen = app.screen
        assert isinstance(screen, EpisodesScreen)
        assert screen.last_read == 5  # the first look: every episode
        screen.reload()
        await wait_for(pilot, lambda: screen.last_read == 0)  # nothing changed: none read
        with TraceStore(tui_db) as store:
            added = store.create_episode(task_id="later", seed=7, env={}, model={})
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 6)
        assert screen.last_read == 1
        rows = {r[0]: r for r in _rows(app)}
    with TraceStore(tui_db) as store:
        assert {store.resolve(shown) for shown in rows} == set(store.episode_ids())
    assert any(added.startswith(shown) and rows[shown][2] == "later" for shown in rows)
