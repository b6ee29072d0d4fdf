"""The trace screen marks what a context policy did: a compaction call is a ``compact`` row,
its detail shows the tokens before and after, what it dropped and its summary (never read as
markup), ``h`` on it opens the messages it replaced; a request that masked tool outputs says
how many, and its detail names each placeholder's original.

The stores are real ``summarize`` and ``mask:2`` episodes of the scripted model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console, RenderableType

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.runtime.runner import RunConfig
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.compaction import CompactionScreen
from agentrunner.tui.screens.trace import TraceScreen
from agentrunner.tui.widgets.detail_pane import DetailPane
from providers.scripted import ScriptedModel

from .conftest import wait_for

pytestmark = pytest.mark.anyio

COMMAND = "python -c \"print('x' * 2000)\""
TURNS = [
    {"text": f"step {i}", "tool_calls": [{"name": "bash", "arguments": {"command": COMMAND}}]}
    for i in range(12)
]
SUMMARY = "So far [bold red]twelve[/] prints [link=http://x]here[/link]."


def _episode(tmp_path: Path, context: str, window: int) -> tuple[Path, str]:
    script = tmp_path / "script.json"
    episode = {"match": "", "turns": TURNS, "summary": SUMMARY}
    script.write_text(json.dumps({"name": "long", "episodes": [episode]}))
    db = tmp_path / "t.db"
    config = RunConfig(max_turns=12, context=context, context_window=window)
    with TraceStore(db) as store, WorkspaceEnv(snapshot_dir=tmp_path / "snapshots") as env:
        model = ScriptedModel(str(script), pace=0)
        ran = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store, config=config
        )
    return db, ran.episode_id


def _requests(db: Path, episode: str) -> list[tuple[int, int, dict[str, Any]]]:
    with TraceStore(db) as store:
        return [
            (e.seq, e.turn, e.payload)
            for e in store.iter_events(episode)
            if e.kind == "model.request"
        ]


def _text(renderable: RenderableType) -> str:
    console = Console(width=120, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


async def _at_seq(pilot, app: AgentRunnerApp, seq: int) -> tuple[TraceScreen, str]:  # type: ignore[no-untyped-def]
    """Open the trace, put the cursor on ``seq``'s row; the screen and the row as drawn."""
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: screen.episode_id is not None)
    lst = screen.event_list
    lst.move(lst.index.row_of(seq))
    await wait_for(pilot, lambda: lst.span(lst.cursor)[0] == seq and lst.visible_loaded())
    pane = screen.query_one(DetailPane)
    await wait_for(pilot, lambda: pane.detail is not None and f"seq {seq} " in pane.detail.title)
    return screen, lst.render_line(lst.cursor - round(lst.scroll_y)).text


def _detail(screen: TraceScreen) -> str:
    detail = screen.query_one(DetailPane).detail
    assert detail is not None
    return _text(detail.body)


@pytest.fixture
def summarized(tmp_path: Path) -> tuple[Path, str]:
    return _episode(tmp_path, "summarize", 4000)


def _first_compaction(db: Path, episode: str) -> int:
    requests = _requests(db, episode)
    return next(i for i, r in enumerate(requests) if r[2]["purpose"] == "compaction")


async def test_a_compaction_call_is_a_compact_row_not_a_model_turn(
    summarized: tuple[Path, str],
) -> None:
    db, episode = summarized
    requests = _requests(db, episode)
    seq, turn, request = requests[_first_compaction(db, episode)]
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(160, 40)) as pilot:
        _, line = await _at_seq(pilot, app, seq)
    assert line.split()[:3] == [str(seq), f"≋≋T{turn}", "compact"]
    assert f"context compacted: summary of {request['covers']} messages" in line


async def test_a_compactions_detail_shows_tokens_before_and_after_and_its_summary_as_text(
    summarized: tuple[Path, str],
) -> None:
    db, episode = summarized
    requests = _requests(db, episode)
    at = _first_compaction(db, episode)
    (seq, turn, compaction), before, after = requests[at], requests[at - 1], requests[at + 1]
    with TraceStore(db) as store:
        usage = {
            e.payload["call_id"]: e.payload["input_tokens"]
            for e in store.iter_events(episode)
            if e.kind == "usage"
        }
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(160, 40)) as pilot:
        screen, _ = await _at_seq(pilot, app, seq)
        shown = _detail(screen)
    assert f"tokens before  {usage[before[2]['call_id']]:,} (turn {turn - 1}'s request)" in shown
    assert f"tokens after   {usage[after[2]['call_id']]:,} (turn {turn}'s request)" in shown
    assert f"dropped        {compaction['covers'] - 2} message(s) replaced" in shown
    assert "[bold red]twelve[/] prints [link=http://x]here[/link]" in shown  # not markup


async def test_h_on_a_compaction_opens_the_messages_it_replaced(
    summarized: tuple[Path, str],
) -> None:
    db, episode = summarized
    seq, _, request = _requests(db, episode)[_first_compaction(db, episode)]
    with TraceStore(db) as store:
        replaced = store.message_chain(request["tip_hash"])[2:-1]  # less the head and the ask
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(160, 40)) as pilot:
        await _at_seq(pilot, app, seq)
        await pilot.press("h")
        await wait_for(pilot, lambda: isinstance(app.screen, CompactionScreen))
        history = app.screen
        assert isinstance(history, CompactionScreen)
        await wait_for(pilot, lambda: bool(history.messages))
        shown = "\n".join(_text(m) for m in history.messages)
    steps = [m.content for m in replaced if m.role == "assistant"]
    assert len(history.messages) == len(replaced)
    assert [line.strip(" │") for line in shown.splitlines() if "step " in line] == steps


async def test_a_request_that_masked_outputs_says_so_and_names_each_original(
    tmp_path: Path,
) -> None:
    db, episode = _episode(tmp_path, "mask:2", 2500)
    requests = _requests(db, episode)
    seq, _, request = next(r for r in requests if r[2]["masked"])
    with TraceStore(db) as store:
        results = {e.seq for e in store.iter_events(episode) if e.kind == "tool.result"}
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(160, 40)) as pilot:
        screen, line = await _at_seq(pilot, app, seq)
        shown = _detail(screen)
    named = [
        int(text.rsplit(" ", 1)[1])
        for text in shown.splitlines()
        if text.startswith("⊘ masked bash output · 2,014 characters · original at seq ")
    ]
    assert f"· {request['masked']} tool outputs masked" in line
    assert len(named) == request["masked"] and set(named) <= results


@pytest.mark.parametrize("which", ["claude-code", "codex"])
async def test_an_imported_sessions_compaction_is_a_compact_row_too(
    which: str, tmp_path: Path
) -> None:
    from agentrunner.imports import claude_code, codex
    from tests.imports.conftest import only_episode
    from tests.imports.test_compaction_import import CLAUDE, CODEX

    path, fmt = (CLAUDE, claude_code) if which == "claude-code" else (CODEX, codex)
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    db = tmp_path / "imported.db"
    with TraceStore(db) as store:
        episode = only_episode(store, path, fmt)
    seq, turn, request = _requests(db, episode)[_first_compaction(db, episode)]
    with TraceStore(db) as store:
        summary = "".join(
            e.payload["text"]
            for e in store.iter_events(episode, kinds=["model.chunk"])
            if e.payload["call_id"] == request["call_id"]
        )
    app = AgentRunnerApp(db, episode)
    async with app.run_test(size=(160, 40)) as pilot:
        screen, line = await _at_seq(pilot, app, seq)
        shown = " ".join(_detail(screen).split())
    assert line.split()[:3] == [str(seq), f"≋≋T{turn}", "compact"]
    assert "context compacted" in line
    assert summary and " ".join(summary.split())[:60] in shown
