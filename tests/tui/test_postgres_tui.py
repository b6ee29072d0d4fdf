"""The TUI on a Postgres store: the same episodes screen as on the SQLite file it was copied
from, and an episode written over another connection (another machine, as far as the store
can tell) streaming in live."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pg
import pytest
from pg import PostgresServer

from agentrunner import TraceStore
from agentrunner.store.transfer import copy_episode, lineage_order
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.episodes import EpisodesTable
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import CANCELLED, DONE, FAILED, FORK, IDLE, BackgroundWriter, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def pg_tui(tui_db: Path, pg_url: str) -> str:
    """The TUI tests' deterministic store, copied into Postgres."""
    with TraceStore(tui_db) as src, TraceStore(pg_url) as dst:
        for episode_id in lineage_order(src, None):
            copy_episode(src, dst, episode_id)
    return pg_url


@pytest.fixture
def pg_writer(pg_tui: str, tmp_path: Path) -> Iterator[BackgroundWriter]:
    with BackgroundWriter(pg_tui, tmp_path / "live-snapshots") as w:
        yield w


async def test_the_episodes_screen_lists_a_postgres_store_as_its_sqlite_original(
    pg_tui: str,
) -> None:
    app = AgentRunnerApp(pg_tui)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        table = app.screen.query_one(EpisodesTable)
        rows = {
            str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)
        }
    assert rows == {
        DONE[:8]: "completed",
        FORK[:8]: "completed",
        IDLE[:8]: "pending",
        CANCELLED[:8]: "cancelled",
        FAILED[:8]: "failed",
    }


async def test_an_episode_written_over_another_connection_streams_in(
    pg_writer: BackgroundWriter, pg_tui: str
) -> None:
    app = AgentRunnerApp(pg_tui, pg_writer.episode_id, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.summary is not None)
        first = screen.event_list.index.last_seq
        await wait_for(pilot, lambda: screen.event_list.index.last_seq > first + 20)
        await wait_for(pilot, lambda: screen.summary is not None and screen.summary.turns >= 3)


async def test_a_server_out_of_reach_is_said_while_the_screens_wait_and_they_go_on_after(
    tui_db: Path,
) -> None:
    reason = pg.why_not()
    if reason is not None:
        pytest.skip(f"no Postgres server: {reason}")
    server = PostgresServer()  # its own: this test stops it
    try:
        url = server.schema_url()
        with TraceStore(tui_db) as src, TraceStore(url) as dst:
            for episode_id in lineage_order(src, None):
                copy_episode(src, dst, episode_id)
        app = AgentRunnerApp(url, poll_s=0.05)
        async with app.run_test(size=(160, 30)) as pilot:
            await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
            server.shut("fast")

            def said() -> list[str]:
                return [str(n.message) for n in app._notifications]

            await wait_for(pilot, lambda: any("store unreachable for" in m for m in said()))
            server.start()
            await wait_for(pilot, lambda: "store reachable again" in said())
            table = app.screen.query_one(EpisodesTable)
            assert table.row_count == 5
    finally:
        server.stop()


async def test_with_nothing_running_a_notice_brings_a_new_episode_in_without_a_poll(
    pg_tui: str,
) -> None:
    app = AgentRunnerApp(pg_tui, poll_s=3600)  # its own polls never come during the test
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 5)
        assert app.hears_changes
        with TraceStore(pg_tui) as store:  # another connection (another machine)
            added = store.create_episode(task_id="heard", seed=3, env={}, model={})
            await wait_for(pilot, lambda: app.screen.query_one(EpisodesTable).row_count == 6)
            store.claim_writer(added)
            table = app.screen.query_one(EpisodesTable)
            await wait_for(
                pilot,
                lambda: "running" in [str(table.get_row_at(i)[1]) for i in range(table.row_count)],
            )
            store.release_writer(added)
            await wait_for(
                pilot,
                lambda: "running" not in [str(table.get_row_at(i)[1]) for i in range(6)],
            )
