"""An imported Claude Code session in the TUI: its trace opens, and R says why it cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrunner import TraceStore
from agentrunner.imports import claude_code
from agentrunner.imports.importer import import_file
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.trace import TraceScreen
from tests.imports.conftest import FIXTURES, needs

from .conftest import wait_for

pytestmark = [pytest.mark.anyio, needs("claude-code")]


@pytest.fixture
def imported(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "traces.db"
    with TraceStore(db) as store:
        main, _subagent = import_file(
            store, FIXTURES / "claude-code" / "subagent.jsonl", claude_code
        )
        return db, main.episode_id


async def test_an_imported_session_opens_with_every_event(imported: tuple[Path, str]) -> None:
    db, episode = imported
    with TraceStore(db) as store:
        events = store.episode(episode).last_seq
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.summary is not None)
        assert screen.summary is not None and screen.summary.stop_reason == "imported"
        await wait_for(pilot, lambda: screen.event_list.index.last_seq == events)


async def test_resuming_an_imported_session_says_it_has_no_environment(
    imported: tuple[Path, str],
) -> None:
    db, episode = imported
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.summary is not None)
        await pilot.press("R")
        notes = app._notifications
        await wait_for(pilot, lambda: any("no environment" in n.message for n in notes))
