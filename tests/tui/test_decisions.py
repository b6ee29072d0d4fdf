"""Decision points in the TUI: the adopted row of a main line is marked with the candidates,
their values and the adopted one; ``c`` lists every fork the decision made and Enter opens
one."""

from __future__ import annotations

import dataclasses
import io
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from test_branching import SUBMIT, _run, _script
from textual.pilot import Pilot

from agentrunner import Branching, TraceStore
from agentrunner.lifecycle.decisions import PROPOSAL, decisions, read_decisions
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.store.groups import GroupMember, add_group_member, create_fork_group
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.decisions import DecisionsScreen, DecisionTree
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane
from agentrunner.values.formatting import unique_prefixes

from .conftest import DONE, wait_for

pytestmark = pytest.mark.anyio
SIZE = (160, 40)
BRANCHING = Branching(every=4, actions=2, samples=2)


@dataclass
class Branched:
    db: Path
    main: str
    adopted_seq: int
    members: dict[tuple[int, int], str]  # (candidate, sample) -> fork id


@pytest.fixture(scope="module")
def branched_template(tmp_path_factory: pytest.TempPathFactory) -> Branched:
    """A main line with one decision point at turn 4 (candidate 0 submits: reward 0;
    candidate 1 fixes: reward 1; best adopts 1), and a fork of it at turn 6."""
    root = tmp_path_factory.mktemp("branched")
    with TraceStore(root / "traces.db") as store:
        model = _script(root, [SUBMIT, "fix"])
        rollout = _run(store, root, model, BRANCHING)
        (decision,) = read_decisions(store, rollout.episode_id)
        (group,) = decisions(store, rollout.episode_id)
    assert decision.adopted_seq is not None
    members = {(m.candidate, m.sample): m.episode_id for m in group.members}
    return Branched(root / "traces.db", rollout.episode_id, decision.adopted_seq, members)


@pytest.fixture
def branched(branched_template: Branched, tmp_path: Path) -> Branched:
    """A private copy of the store."""
    db = tmp_path / "traces.db"
    shutil.copy(branched_template.db, db)
    return dataclasses.replace(branched_template, db=db)


async def _trace(app: AgentRunnerApp, pilot: Pilot[Any]) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None and bool(screen.points))
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


async def _at_seq(pilot: Pilot[Any], screen: TraceScreen, seq: int) -> str:
    """Put the cursor on ``seq``'s row; the row as drawn."""
    lst = screen.event_list
    lst.move(lst.index.row_of(seq))
    await wait_for(pilot, lambda: lst.span(lst.cursor)[0] == seq and lst.visible_loaded())
    return lst.render_line(lst.cursor - round(lst.scroll_y)).text


def _detail_text(screen: TraceScreen) -> str:
    detail = screen.query_one(DetailPane).detail
    if detail is None:
        return ""
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(detail.body)
    return detail.title + "\n" + console.export_text()


async def _decisions(app: AgentRunnerApp, pilot: Pilot[Any]) -> DecisionsScreen:
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, DecisionsScreen))
    screen = app.screen
    assert isinstance(screen, DecisionsScreen)
    await wait_for(pilot, lambda: bool(screen.points))
    tree = screen.query_one(DecisionTree)
    await wait_for(pilot, lambda: tree.cursor_node is not None and tree.last_line > 0)
    return screen


def _labels(screen: DecisionsScreen) -> list[str]:
    tree = screen.query_one(DecisionTree)
    return [str(tree.get_node_at_line(i).label) for i in range(tree.last_line + 1)]  # type: ignore[union-attr]


async def test_the_adopted_row_is_marked_with_the_candidates_values_and_the_adopted_one(
    branched: Branched,
) -> None:
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _trace(app, pilot)
        line = await _at_seq(pilot, screen, branched.adopted_seq)
    assert line.split()[:3] == [str(branched.adopted_seq), "━━T4◆", "decision"]
    assert "◆ best of 2 · 0: 0.00±0.00 (2) · ★1: 1.00±0.00 (2) │ str_replace(" in line


async def test_brackets_stop_at_the_adopted_turn_of_a_decision_point(branched: Branched) -> None:
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _trace(app, pilot)
        lst = screen.event_list
        for _ in range(4):  # turns 1, 2, 3, then the decision point's turn 4
            screen.note = ""
            await pilot.press("right_square_bracket")
            await wait_for(pilot, lambda: "turn at seq" in screen.note)
        assert lst.span(lst.cursor)[0] == branched.adopted_seq


async def test_the_adopted_row_s_detail_lists_every_candidate_with_its_forks(
    branched: Branched,
) -> None:
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _trace(app, pilot)
        await _at_seq(pilot, screen, branched.adopted_seq)
        await wait_for(pilot, lambda: "decision point · best" in _detail_text(screen))
        text = _detail_text(screen)
    assert "★ candidate 1 · value 1.000 ± 0.000 (n 2) adopted" in text
    assert "candidate 0 · value 0.000 ± 0.000 (n 2)" in text
    with TraceStore(branched.db) as store:
        shortest = unique_prefixes(store.episode_ids(), minimum=8)
    assert all(shortest[fork] in text for fork in branched.members.values())


async def test_c_lists_the_decision_point_s_candidates_and_every_fork_it_made(
    branched: Branched,
) -> None:
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        await _trace(app, pilot)
        labels = _labels(await _decisions(app, pilot))
    assert labels[0].startswith("turn 4 · decision point at seq ")
    assert labels[0].endswith("· best · adopted candidate 1 · 6 forks")
    assert labels[1].startswith("candidate 0 · value 0.000 ± 0.000 (n 2) · submit()")
    assert labels[5].startswith("★ candidate 1 · value 1.000 ± 0.000 (n 2) adopted · str_replace(")
    with TraceStore(branched.db) as store:
        ids = {k: unique_prefixes(store.episode_ids())[v] for k, v in branched.members.items()}
    assert labels[2].startswith(f"proposal {ids[(0, PROPOSAL)]} completed · reward 0")
    assert labels[7].startswith(f"continuation 0 {ids[(1, 0)]} completed · reward 1")
    assert labels[8].startswith(f"continuation 1 {ids[(1, 1)]} completed · reward 1")


async def test_enter_on_a_continuation_opens_its_trace(branched: Branched) -> None:
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        await _trace(app, pilot)
        await _decisions(app, pilot)
        await pilot.press(*["j"] * 7, "enter")  # candidate 1's continuation 0
        await wait_for(
            pilot,
            lambda: (
                isinstance(app.screen, TraceScreen)
                and app.screen.episode_ref == branched.members[(1, 0)]
            ),
        )
        await pilot.press("escape")  # back on the decision points
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionsScreen))


async def test_a_fork_of_the_main_line_marks_the_decision_point_it_inherits(
    branched: Branched,
) -> None:
    with TraceStore(branched.db) as store:
        (fork,) = fork_episode(store, branched.main, turn=6, message="Double-check it.")
    app = AgentRunnerApp(branched.db, fork)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _trace(app, pilot)
        line = await _at_seq(pilot, screen, branched.adopted_seq)
        assert "★1: 1.00±0.00 (2)" in line
        labels = _labels(await _decisions(app, pilot))
    assert labels[0].endswith("· best · adopted candidate 1 · 6 forks")


async def test_c_on_an_episode_without_decision_points_says_so(tui_db: Path) -> None:
    app = AgentRunnerApp(tui_db, DONE)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: screen.summary is not None)
        await pilot.press("c")
        said = "no decision points in this episode's history"
        await wait_for(pilot, lambda: said in [n.message for n in app._notifications])
        assert isinstance(app.screen, TraceScreen)


async def test_an_unfinished_decision_point_marks_the_main_line_s_last_row_before_it(
    branched: Branched,
) -> None:
    """A decision point whose proposal never ran (the main line stopped mid-decision)."""
    with TraceStore(branched.db) as store:
        main = store.episode(branched.main)
        (seq,) = [
            r.seq for r in store.iter_events(branched.main, kinds=["tool.result"]) if r.turn == 5
        ]
        group = create_fork_group(store, branched.main, seq, 6, BRANCHING.config())
        fork = store.create_episode(
            task_id=main.task_id,
            seed=main.seed,
            env=main.env,
            model=main.model,
            parent_episode_id=branched.main,
            fork_seq=seq,
        )
        add_group_member(store, group, GroupMember(fork, 0, PROPOSAL, None))
    app = AgentRunnerApp(branched.db, branched.main)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _trace(app, pilot)
        await wait_for(pilot, lambda: len(screen.points) == 2)
        line = await _at_seq(pilot, screen, seq)
    assert "◆ decision T6 not finished · 1 fork to finish │ " in line
