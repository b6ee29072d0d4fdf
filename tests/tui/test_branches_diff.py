"""The branches view (lineage tree with status, reward, cost) and the diff against a parent."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.branches import BranchesScreen, LineageTree
from agentrunner.tui.screens.diff import DiffScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import DONE, FORK, IDLE, wait_for

pytestmark = pytest.mark.anyio


def _labels(app: AgentRunnerApp) -> list[str]:
    tree = app.screen.query_one(LineageTree)
    return [str(tree.get_node_at_line(i).label) for i in range(tree.last_line + 1)]  # type: ignore[union-attr]


async def _branches(app: AgentRunnerApp, pilot) -> BranchesScreen:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    await wait_for(pilot, lambda: app.screen.episode_id is not None)  # type: ignore[attr-defined]
    await pilot.press("b")
    await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
    screen = app.screen
    assert isinstance(screen, BranchesScreen)
    await wait_for(pilot, lambda: len(screen.branches) == 3)
    return screen


async def test_b_shows_the_lineage_tree_with_status_reward_and_cost(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(FORK)
    async with app.run_test(size=(120, 30)) as pilot:
        await _branches(app, pilot)
        labels = _labels(app)
    assert labels[0].startswith(DONE[:8] + " ") and "completed · reward 1 · $0.0000" in labels[0]
    assert labels[1].startswith(FORK[:8] + " ") and "fork at turn 3 (seq 37)" in labels[1]
    assert labels[2].startswith(IDLE[:8] + " ") and "pending" in labels[2]


async def test_enter_on_a_branch_opens_its_trace(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(FORK)
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await _branches(app, pilot)
        assert screen.selected_id() == FORK
        await pilot.press("k", "enter")
        await wait_for(
            pilot,
            lambda: isinstance(app.screen, TraceScreen) and app.screen.episode_ref == DONE,
        )


async def test_d_diffs_a_fork_against_its_parent_from_the_fork_point(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(FORK)
    async with app.run_test(size=(120, 30)) as pilot:
        await _branches(app, pilot)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, DiffScreen))
        diff = app.screen
        assert isinstance(diff, DiffScreen)
        await wait_for(pilot, lambda: diff.result is not None)
        assert diff.result is not None
        lines = diff.result.lines
    assert diff.result.fork_turn == 3 and diff.result.fork_seq == 37
    assert "+T2 user (fork):" in lines and "+    Check the edge cases too." in lines
    assert not any(line.startswith("-T1") for line in lines)  # nothing before the fork point


async def test_d_on_a_root_episode_says_there_is_no_parent(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await wait_for(pilot, lambda: app.screen.summary is not None)  # type: ignore[attr-defined]
        await pilot.press("d")
        assert isinstance(app.screen, TraceScreen)


async def test_branch_ids_made_in_the_same_millisecond_are_told_apart(
    make_app: Callable[..., AgentRunnerApp], same_ms_forks: tuple[str, str]
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(120, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await wait_for(pilot, lambda: app.screen.episode_id is not None)  # type: ignore[attr-defined]
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchesScreen))
        screen = app.screen
        assert isinstance(screen, BranchesScreen)
        await wait_for(pilot, lambda: len(screen.branches) == 5)
        await pilot.pause()
        ids = [label.split(" ")[0] for label in _labels(app)]
    assert "01JFFF0000A" in ids and "01JFFF0000B" in ids and len(set(ids)) == 5
