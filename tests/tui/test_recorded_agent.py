"""The TUI on a recorded agent: an episode the recording proxy wrote opens like a native one."""

from __future__ import annotations

from pathlib import Path

import pytest
from record_support import anthropic_tool, last_json, record
from sse_replay import Reply, SSEReplayServer

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import wait_for

pytestmark = pytest.mark.anyio


async def test_a_recorded_episode_opens_with_its_request_chunks_and_tool_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    with SSEReplayServer(Reply(events=anthropic_tool("toolu_1", "Bash", {"command": "ls"}))) as up:
        done = record("anthropic_tool_stream", db=db, anthropic=up.url)
    (episode,) = last_json(done.stdout)["episodes"]
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, screen.event_list.visible_loaded)
        kinds = [
            info.kind
            for info, _ in map(screen.event_list.info, range(screen.event_list.row_count))
            if info
        ]
    assert kinds[0] == "episode.start" and "model.request" in kinds and "tool.call" in kinds
