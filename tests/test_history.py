"""The one fold of an episode's log, and its readers: a model that reuses the call id
``call_0`` on three turns made three calls, and every reader (verifier rules, export, resume)
sees the three, each with its own result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, AgentToolCall, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import ExportOptions, export_rows
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.readers.history import NOT_CHUNKS, fold
from agentrunner.readers.state import rebuild
from agentrunner.verifiers import RuleVerifier, load_trajectory, verify_episode

COMMANDS = ("echo one", "echo two", "echo three")


def reusing_model(context: AgentContext) -> AgentTurn:
    """Three bash calls on three turns, all with the call id ``call_0``; then submit."""
    done = sum(1 for m in context.messages if m.role == "assistant")
    if done < len(COMMANDS):
        call = AgentToolCall(call_id="call_0", name="bash", arguments={"command": COMMANDS[done]})
    else:
        call = AgentToolCall(call_id="call_0", name="submit", arguments={})
    return AgentTurn(tool_calls=(call,), provider="test", model="reuse")


@pytest.fixture
def episode(tmp_path: Path) -> tuple[TraceStore, str]:
    store = TraceStore(tmp_path / "t.db")
    with WorkspaceEnv() as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", model_fn=reusing_model, store=store
        )
    return store, rollout.episode_id


def test_the_fold_holds_each_use_of_a_reused_call_id_with_its_own_result(
    episode: tuple[TraceStore, str],
) -> None:
    store, ep = episode
    history = fold(store.iter_events(ep, kinds=NOT_CHUNKS))
    bash = [u for u in history.tool_uses if u.call.name == "bash"]
    assert [u.call.parsed for u in bash] == [{"command": c} for c in COMMANDS]
    assert [u.result.observation.splitlines()[0] for u in bash if u.result] == [
        "one",
        "two",
        "three",
    ]


def test_verifier_rules_see_every_call_of_a_reused_id(episode: tuple[TraceStore, str]) -> None:
    store, ep = episode
    trajectory = load_trajectory(store, ep)
    assert [command for _, command in trajectory.commands()] == list(COMMANDS)
    result = verify_episode(store, ep, RuleVerifier(["tool:bash", "command:echo two"]))
    assert result.passed and result.score == 1.0


def test_export_sees_every_call_of_a_reused_id(episode: tuple[TraceStore, str]) -> None:
    store, _ = episode
    _, rows = export_rows(store, "sft", options=ExportOptions())
    (row,) = rows
    calls = [
        call["function"]
        for message in row["messages"]
        for call in message.get("tool_calls") or []
        if call["function"]["name"] == "bash"
    ]
    assert [c["arguments"] for c in calls] == [{"command": c} for c in COMMANDS]


def test_resume_runs_the_third_use_of_a_reused_id_once(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "t.db")

    class Crash(Exception):
        pass

    seen: list[Any] = []

    def crash_on_third_call(seq: int, turn: int, payload: Any) -> None:
        if payload.kind == "tool.call":
            seen.append(payload)
            if len(seen) == 3:
                raise Crash  # after the third tool.call is committed, before it runs

    with pytest.raises(Crash), WorkspaceEnv() as env:
        run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=reusing_model,
            store=store,
            observer=crash_on_third_call,
        )
    (summary,) = store.list_episodes()
    state = rebuild(store, summary.episode_id)
    assert [(p.call.call_id, p.recorded) for p in state.pending] == [("call_0", True)]
    resume_episode(store, summary.episode_id, model_fn=reusing_model)
    history = fold(store.iter_events(summary.episode_id, kinds=NOT_CHUNKS))
    bash = [u for u in history.tool_uses if u.call.name == "bash"]
    assert len(bash) == 3 and all(u.result is not None for u in bash)
