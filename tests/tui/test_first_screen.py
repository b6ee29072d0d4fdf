"""`tui EP`'s first screen: the trace alone, with only what it needs loaded; the screens it
does not show load when opened (help still lists every screen's keys), and closing the
trace shows the episodes list. The list asks for every page its first screen needs at once.

What a first screen loaded is read in a fresh process (the test process has imported every
screen already): it runs the app headless until the trace's rows are on screen, then writes
``sys.modules`` and the binding ids help knows. Nothing is timed here (the time is
``tests/benchmarks/test_bench_tui.py``'s).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.data import PAGE
from agentrunner.tui.keys import binding_ids
from agentrunner.tui.rowindex import RowIndex
from agentrunner.tui.screens.episodes import EpisodesScreen
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.event_list import RUN_SCAN, EventList

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio

FIRST_SCREEN = """
import asyncio, json, sys
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.trace import TraceScreen

async def first_screen(db, episode):
    app = AgentRunnerApp(db, episode, poll_s=3600)
    async with app.run_test(size=(120, 40)):
        while not isinstance(app.screen, TraceScreen) or not app.screen.event_list.visible_loaded():
            await asyncio.sleep(0.01)
        return sorted(sys.modules), [type(s).__name__ for s in app.screen_stack]

out, db, episode = sys.argv[1:]
modules, stack = asyncio.run(first_screen(db, episode))
from agentrunner.tui.data import PAGE
from agentrunner.tui.keys import binding_ids
from agentrunner.tui.rowindex import RowIndex
json.dump({"modules": modules, "stack": stack, "ids": binding_ids()}, open(out, "w"))
"""

NOT_FOR_THE_TRACE = (
    "agentrunner.tui.screens.episodes",
    "agentrunner.tui.screens.report",
    "agentrunner.tui.screens.branches",
    "agentrunner.tui.screens.fork",
    "agentrunner.tui.screens.files",
    "agentrunner.tui.screens.decisions",
    "agentrunner.tui.screens.request_diff",
    "agentrunner.tui.screens.diff",
    "agentrunner.tui.screens.help",
    "agentrunner.lifecycle.resume",  # the resume rule loads the runner and every environment
    "agentrunner.lifecycle.decisions",
    "agentrunner.report",
    "agentrunner.export",
    "agentrunner.envs",
    "agentrunner.lifecycle.fork",
    "markdown_it",  # the first row's detail is JSON, not Markdown
)


@pytest.fixture(scope="module")
def first_screen(template_db: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    """What ``tui DONE`` had loaded and stacked at its first screen, and the binding ids
    help knew afterwards."""
    tmp = tmp_path_factory.mktemp("first-screen")
    db, out = tmp / "traces.db", tmp / "loaded.json"
    db.write_bytes(template_db.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_SCREEN, str(out), str(db), DONE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    loaded: dict[str, list] = json.loads(out.read_text())
    return loaded


def test_the_first_screen_of_a_trace_loads_no_other_screen_and_no_runner(
    first_screen: dict[str, list],
) -> None:
    modules = set(first_screen["modules"])
    loaded = [p for p in NOT_FOR_THE_TRACE if any(m == p or m.startswith(p + ".") for m in modules)]
    assert loaded == []


def test_the_first_screen_of_a_trace_is_the_trace_alone(first_screen: dict[str, list]) -> None:
    assert first_screen["stack"] == ["Screen", "TraceScreen"]  # Textual's default screen below


def test_help_knows_every_screens_keys_though_only_the_trace_was_opened(
    first_screen: dict[str, list],
) -> None:
    assert first_screen["ids"] == binding_ids()  # this process has loaded every screen


async def test_closing_the_trace_tui_ep_opened_shows_the_episodes_list(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen))
        table = app.screen.query_one(DataTable)
        await wait_for(pilot, lambda: table.row_count > 0)
        assert [type(s) for s in app.screen_stack][1:] == [EpisodesScreen]


class ListApp(App[None]):
    """An event list alone, recording the pages it asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[frozenset[int]] = []

    def compose(self) -> ComposeResult:
        yield EventList()

    def on_event_list_pages_wanted(self, message: EventList.PagesWanted) -> None:
        self.asked.append(message.pages)


async def test_a_new_trace_asks_at_once_for_every_page_its_first_screen_needs() -> None:
    # rows: 1, 2, 3, a run of chunks 4..399, 400, 401, 402, a run 403..899, 900
    seqs = [1, 2, 3, 400, 401, 402, 900]
    run_ends = [4 + RUN_SCAN - 1, 403 + RUN_SCAN - 1]  # a folded run is summarised from these
    app = ListApp()
    async with app.run_test(size=(80, 24)) as pilot:
        app.query_one(EventList).set_index(RowIndex(seqs, 900))
        await pilot.pause()
    needed = {(seq - 1) // PAGE for seq in [*seqs, 4, 403, *run_ends]}
    assert app.asked[0] == needed
