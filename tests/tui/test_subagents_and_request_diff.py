"""The TUI on a recorded agent that started a sub-agent: the branches screen shows the
sub-agent under the episode that spawned it, and `r` on a model call shows what changed in
its request against the call before it."""

from __future__ import annotations

from pathlib import Path

import pytest
from record_support import last_json, record
from sse_replay import Reply, SSEReplayServer

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.branches import BranchesScreen, LineageTree
from agentrunner.tui.screens.request_diff import RequestDiffScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import wait_for

pytestmark = pytest.mark.anyio


def _message(content: list[dict[str, object]], stop: str) -> dict[str, object]:
    return {"id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": stop,
            "usage": {"input_tokens": 5, "output_tokens": 5}}  # fmt: skip


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, str, str]:
    """(store, parent, sub-agent): an agent whose first call starts a sub-agent."""
    task = {"description": "look", "prompt": "Look in utils.py for the bug."}
    spawn = {"type": "tool_use", "id": "toolu_agent", "name": "Agent", "input": task}
    replies = [
        Reply(body=_message([spawn], "tool_use")),
        Reply(body=_message([{"type": "text", "text": "It is on line 3."}], "end_turn")),
        Reply(body=_message([{"type": "text", "text": "Fixed."}], "end_turn")),
    ]
    db = tmp_path / "t.db"
    with SSEReplayServer(*replies) as upstream:
        done = record("anthropic_subagent", db=db, anthropic=upstream.url)
    assert done.returncode == 0, done.stderr
    parent, child = last_json(done.stdout)["episodes"]
    return db, parent, child


async def test_the_branches_screen_shows_a_sub_agent_under_the_episode_that_spawned_it(
    recorded: tuple[Path, str, str],
) -> None:
    db, parent, child = recorded
    app = AgentRunnerApp(db, child)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        await wait_for(pilot, lambda: trace.episode_id is not None)  # `b` needs it read
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        screen = app.screen
        assert isinstance(screen, BranchesScreen)
        await wait_for(pilot, lambda: len(screen.branches) == 2)
        tree = screen.query_one(LineageTree)
        (top,) = tree.root.children
        (below,) = top.children
        assert (top.data, below.data) == (parent, child)
        assert "sub-agent of call toolu_agent" in str(below.label)


async def test_r_on_a_model_call_shows_the_messages_its_request_added(
    recorded: tuple[Path, str, str],
) -> None:
    db, parent, _ = recorded
    app = AgentRunnerApp(db, parent)
    async with app.run_test(size=(140, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        trace = app.screen
        assert isinstance(trace, TraceScreen)
        await wait_for(pilot, trace.event_list.visible_loaded)
        lst = trace.event_list
        rows = [lst.info(i)[0] for i in range(lst.row_count)]
        second = max(i for i, info in enumerate(rows) if info and info.kind == "model.request")
        lst.move(second)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RequestDiffScreen))
        screen = app.screen
        assert isinstance(screen, RequestDiffScreen)
        await wait_for(pilot, lambda: bool(getattr(screen, "lines", None)))
        text = "\n".join(line.plain for line in screen.lines)
    assert "call 2" in text and "2 added" in text and "It is on line 3." in text
