"""The report screen: ``r`` on the episodes list shows ``agentrunner report``'s tables for
what the list shows (filtered like it); Esc goes back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from agentrunner import TraceStore
from agentrunner.report.build import ReportFilter, collect, report
from agentrunner.report.records import Report
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.episodes import EpisodesScreen, EpisodesTable
from agentrunner.tui.screens.report import ReportScreen, ReportTable, cells

from .conftest import wait_for

pytestmark = pytest.mark.anyio


def _expected(db: Path, where: ReportFilter) -> Report:
    with TraceStore(db) as store:
        return report(collect(store, where), ["model"])


async def _listed(pilot: Pilot[Any], rows: int, needle: str = "") -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
    if needle:
        await pilot.press("slash")
        app.screen.query_one("#episodes-filter", Input).value = needle
        await pilot.press("enter")
    await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == rows)


async def _report(pilot: Pilot[Any]) -> ReportScreen:
    app = pilot.app
    await pilot.press("r")
    await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
    screen = app.screen
    assert isinstance(screen, ReportScreen)
    await wait_for(pilot, lambda: screen.result is not None)
    return screen


def _table(screen: ReportScreen, table_id: str) -> list[list[str]]:
    table = screen.query_one(f"#{table_id}", ReportTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_r_reports_the_listed_episodes_as_agentrunner_report_does(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await _listed(pilot, 5)
        screen = await _report(pilot)
        assert screen.result is not None
        made, counted = screen.result.made, screen.result.counted
        groups = _table(screen, "report-groups")
        tasks = _table(screen, "report-tasks")
        notes = str(screen.query_one("#report-notes", Static).render())
    expected = _expected(tui_db, ReportFilter())  # every root episode, as the CLI counts
    assert made == expected and counted == 3
    assert groups == [
        *([*g.values, *cells(g.metrics)] for g in expected.groups),
        ["all", *cells(expected.overall)],
    ]
    assert groups[-1][1:4] == ["3", "1/1/1", "33% [6%, 79%]"]  # by hand: 1 of 3 passed
    assert tasks == [
        [task.task_id if n == 0 else "", row.model, *cells(row.metrics)]
        for task in expected.tasks
        for n, row in enumerate(task.rows)
    ]
    assert [row[0] for row in tasks] == ["demo-mean", "", "paginate-off-by-one"]
    assert "stop reasons:" in notes and "ProviderServerError" in notes


async def test_a_filtered_list_reports_only_what_it_lists(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await _listed(pilot, 4, needle="demo-mean")  # the two roots and the two forks
        screen = await _report(pilot)
        assert screen.result is not None
        made, counted, forks = screen.result.made, screen.result.counted, screen.result.forks
    assert made == _expected(tui_db, ReportFilter(tasks=("demo-mean",)))
    assert (counted, forks) == (2, 2)


async def test_f_counts_the_listed_forks_too(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await _listed(pilot, 5)
        screen = await _report(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: screen.result is not None and screen.result.counted == 5)
        made = screen.result.made
    assert made == _expected(tui_db, ReportFilter(include_forks=True))


async def test_an_empty_list_says_so_instead_of_a_table(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await _listed(pilot, 0, needle="no such episode")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportScreen))
        screen = app.screen
        empty = screen.query_one("#report-empty", Static)
        await wait_for(pilot, lambda: empty.display)
        said = str(empty.render())
        tables_shown = [t.display for t in screen.query(ReportTable)]
    assert "the list is empty" in said and tables_shown == [False, False]


async def test_escape_goes_back_to_the_list_as_it_was(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        await _listed(pilot, 1, needle="paginate")
        await _report(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen))
        screen = app.screen
        assert isinstance(screen, EpisodesScreen)
        assert screen.filter_text == "paginate"
        assert screen.query_one(EpisodesTable).row_count == 1
