"""Branch and resume from the TUI: the fork editor, the fork's lineage, background runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Input, TextArea

from agentrunner import TraceStore
from agentrunner.tui.app import AgentRunnerApp
from agentrunner.tui.screens.fork import ForkScreen
from agentrunner.tui.screens.trace import TraceScreen

from .conftest import CANCELLED, DONE, FAILED, wait_for

QUIET = 3600.0  # no polling unless the test asks for it

pytestmark = pytest.mark.anyio


async def _open(app: AgentRunnerApp, pilot, episode: str) -> TraceScreen:  # type: ignore[no-untyped-def]
    await wait_for(
        pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.episode_id == episode
    )
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, screen.event_list.visible_loaded)
    return screen


def _events(db: Path, episode: str) -> list[tuple[int, str, str]]:
    with TraceStore(db) as store:
        return [(r.seq, r.kind, r.payload_json) for r in store.iter_events(episode)]


async def _fork_editor(app: AgentRunnerApp, pilot, screen: TraceScreen) -> ForkScreen:  # type: ignore[no-untyped-def]
    await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
    await wait_for(
        pilot, lambda: (screen.event_list.info(screen.event_list.cursor)[0] or screen).turn == 3
    )
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(app.screen, ForkScreen))
    editor = app.screen
    assert isinstance(editor, ForkScreen)
    return editor


async def test_f_opens_the_editor_prefilled_with_the_turns_assistant_message(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, DONE)
        editor = await _fork_editor(app, pilot, screen)
        value = json.loads(editor.query_one("#fork-text", TextArea).text)
        assert editor.prefill.turn == 3 and editor.prefill.model == "scripted:demo"
    assert value["tool_calls"][0]["name"] == "bash" and "divisor" in value["message"]


async def test_fork_with_an_edit_creates_a_child_and_leaves_the_parent_unchanged(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    before = _events(tui_db, DONE)
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, DONE)
        editor = await _fork_editor(app, pilot, screen)
        edit = {"message": "Straight to the fix.", "tool_calls": [{"name": "submit"}]}
        editor.query_one("#fork-text", TextArea).load_text(json.dumps(edit))
        await pilot.press("ctrl+s")
        await wait_for(
            pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen is not screen
        )
        fork_screen = app.screen
        assert isinstance(fork_screen, TraceScreen)
        await wait_for(pilot, lambda: fork_screen.episode_id is not None)
        fork_id = fork_screen.episode_id
        assert fork_id is not None and fork_id in app.runs.started
        await wait_for(
            pilot,
            lambda: fork_screen.summary is not None and fork_screen.summary.status == "completed",
            timeout=30,
        )
    with TraceStore(tui_db) as store:
        fork = store.episode(fork_id)
        edit_event = store.events(fork_id, after_seq=fork.fork_seq or 0, limit=1)[0]
        message = store.message(edit_event.payload["message_hash"])
    assert (fork.parent_episode_id, fork.fork_seq) == (DONE, 37)
    assert edit_event.payload["reason"] == "edit" and message.content == "Straight to the fix."
    assert _events(tui_db, DONE) == before


async def test_fork_can_inject_a_user_message_with_another_model(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path, tmp_path: Path
) -> None:
    script = tmp_path / "giveup.json"
    turn = {"reasoning": "Done here.", "text": "Submitting.", "tool_calls": [{"name": "submit"}]}
    script.write_text(json.dumps({"name": "giveup", "episodes": [{"match": "", "turns": [turn]}]}))
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, DONE)
        editor = await _fork_editor(app, pilot, screen)
        editor.set_mode("inject")
        await pilot.pause()
        editor.query_one("#fork-text", TextArea).load_text("Please also add a test.")
        editor.query_one("#fork-model", Input).value = f"scripted:{script}"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(app.runs.started) == 1)
        fork_id = app.runs.started[0]
        await wait_for(pilot, lambda: fork_id not in app.runs.active)
    with TraceStore(tui_db) as store:
        fork = store.episode(fork_id)
        first = store.events(fork_id, after_seq=fork.fork_seq or 0, limit=1)[0]
        assert store.message(first.payload["message_hash"]).content == "Please also add a test."
        assert fork.model["spec"] == f"scripted:{script}" and fork.status == "completed"


async def test_invalid_edit_is_refused_in_the_editor(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, DONE)
        editor = await _fork_editor(app, pilot, screen)
        editor.query_one("#fork-text", TextArea).load_text("{not json")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ForkScreen) and not app.runs.started
        await pilot.press("escape")
        assert app.screen is screen


async def test_R_resumes_a_cancelled_episode_and_follows_it(
    make_app: Callable[..., AgentRunnerApp], tui_db: Path
) -> None:
    app = make_app(CANCELLED, poll_s=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await _open(app, pilot, CANCELLED)
        before = screen.event_list.index.last_seq
        await pilot.press("R")
        await wait_for(pilot, lambda: CANCELLED in app.runs.started)
        await wait_for(
            pilot,
            lambda: screen.summary is not None and screen.summary.status == "completed",
            timeout=30,
        )
        await wait_for(pilot, lambda: screen.event_list.at_bottom)
        assert screen.event_list.index.last_seq > before
    with TraceStore(tui_db) as store:
        assert store.events(CANCELLED, kinds=["resume"])[0].attempt == 2


async def test_after_R_the_last_row_stays_in_view_when_the_run_outgrows_the_list(
    make_app: Callable[..., AgentRunnerApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRUNNER_SCRIPTED_PACE", "0")
    app = make_app(CANCELLED, poll_s=QUIET)  # one poll, when the test asks: one big batch
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await _open(app, pilot, CANCELLED)
        lst = screen.event_list
        before = lst.index.last_seq
        assert lst.row_count < lst.size.height  # the trace fits: no scrollbar yet
        await pilot.press("R")
        await wait_for(pilot, lambda: CANCELLED not in app.runs.active)
        screen.poll_now()
        await wait_for(pilot, lambda: lst.index.last_seq > before)
        assert lst.row_count > lst.size.height
        assert lst.cursor == lst.row_count - 1 and lst.cursor in lst.visible_rows()


def _notes(app: AgentRunnerApp) -> list[str]:
    return [n.message for n in app._notifications]


async def test_R_refuses_a_completed_episode(make_app: Callable[..., AgentRunnerApp]) -> None:
    app = make_app(DONE)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(app, pilot, DONE)
        await pilot.press("R")
        await wait_for(pilot, lambda: any("cannot be resumed" in n for n in _notes(app)))
        assert not app.runs.started


async def test_R_refuses_an_episode_that_failed_on_an_error_retrying_cannot_fix(
    make_app: Callable[..., AgentRunnerApp],
) -> None:
    app = make_app(FAILED)
    async with app.run_test(size=(100, 30)) as pilot:
        await _open(app, pilot, FAILED)
        await pilot.press("R")
        await wait_for(pilot, lambda: any("cannot be resumed" in n for n in _notes(app)))
        assert not app.runs.started
    assert any("non-retryable" in n and "502 Bad Gateway" in n for n in _notes(app))
