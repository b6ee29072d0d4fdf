"""The long episode issue 27 must show: 500 scripted turns whose tool outputs are about 2 kB,
with a 32k-token window, under each context policy. ``none`` stops with ``context_exhausted``
before it sends an over-limit request and ``resume --context mask:10`` goes on; ``mask:10`` and
``summarize`` complete. Every request's recorded estimate (but the first, made before any
report) is within 10% of the input tokens the scripted model counted, and the request
rebuilt from the log at turns 10, 250 and 499 is byte for byte the one the model received."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.runtime.runner import RunConfig
from providers.scripted import ScriptedModel

TURNS = 500
WINDOW = 32_000
TASK = "long-read"
CHECKED_TURNS = (10, 250, 499)


def long_tasks(tmp_path: Path) -> Path:
    """A task of our own: a 2 kB file to read, and room for 500 tool calls."""
    lines = [f"{i:04d} " + "lorem ipsum dolor sit amet " * 2 for i in range(36)]
    task = {
        "task_id": TASK,
        "prompt": "Read out.txt again and again (a long episode). Call submit() at the end.",
        "max_steps": TURNS + 10,
        "files": {"out.txt": "\n".join(lines) + "\n"},
    }
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([task]))
    return path


def long_script(tmp_path: Path) -> Path:
    """499 turns reading the file, then ``submit()`` at turn 500."""
    read = {"name": "read_file", "arguments": {"path": "out.txt"}}
    turns: list[dict[str, Any]] = [
        {"text": f"step {i}", "tool_calls": [read]} for i in range(1, TURNS)
    ]
    turns.append({"text": "done", "tool_calls": [{"name": "submit", "arguments": {}}]})
    path = tmp_path / "long.json"
    path.write_text(json.dumps({"name": "long", "episodes": [{"match": "", "turns": turns}]}))
    return path


class Received:
    """The scripted model, keeping what each call received, by its kind and turn."""

    def __init__(self, path: Path) -> None:
        self.scripted = ScriptedModel(str(path), pace=0)
        self.turns: dict[int, AgentContext] = {}

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.purpose == "turn":
            self.turns[context.turn] = context
        return self.scripted(context)


@pytest.fixture
def long_env(tmp_path: Path) -> Iterator[WorkspaceEnv]:
    env = WorkspaceEnv(tasks_path=long_tasks(tmp_path), snapshots=False)
    yield env
    env.close()


def _run(store: TraceStore, env: WorkspaceEnv, model: Received, policy: str) -> tuple[str, str]:
    config = RunConfig(max_turns=TURNS, context=policy, context_window=WINDOW)
    rollout = run_agent_episode(env=env, task_id=TASK, model_fn=model, store=store, config=config)
    return rollout.episode_id, rollout.stop_reason


def _estimates_and_counts(store: TraceStore, episode_id: str) -> list[tuple[int, int, str]]:
    """Each answered request's recorded estimate, the input tokens the model counted, its
    call id."""
    estimates: dict[str, int] = {}
    pairs: list[tuple[int, int, str]] = []
    for event in store.iter_events(episode_id):
        if event.kind == "model.request":
            estimates[event.payload["call_id"]] = event.payload["input_tokens_estimate"]
        elif event.kind == "usage":
            call_id = event.payload["call_id"]
            pairs.append((estimates[call_id], event.payload["input_tokens"], call_id))
    return pairs


def _assert_recorded_exactly(store: TraceStore, episode_id: str, model: Received) -> None:
    pairs = _estimates_and_counts(store, episode_id)[1:]  # the first has no report to go by
    off = [(call, e, n) for e, n, call in pairs if abs(e - n) > 0.1 * n]
    assert off == []
    for turn in CHECKED_TURNS:
        rebuilt = store.reconstruct_request(episode_id, turn)
        received = model.turns[turn]
        assert [m.model_dump_json() for m in rebuilt.messages] == [
            m.model_dump_json() for m in received.messages
        ]
        assert rebuilt.tools == received.tools


@pytest.mark.parametrize("policy", ["mask:10", "summarize"])
def test_a_500_turn_episode_completes_under_the_window(
    policy: str, store: TraceStore, long_env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = Received(long_script(tmp_path))
    episode_id, stop = _run(store, long_env, model, policy)
    assert (stop, max(model.turns)) == ("done", TURNS)
    assert max(n for _, n, _ in _estimates_and_counts(store, episode_id)) <= WINDOW
    _assert_recorded_exactly(store, episode_id, model)


def test_none_stops_before_the_window_and_resume_with_mask_completes(
    store: TraceStore, long_env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = Received(long_script(tmp_path))
    episode_id, stop = _run(store, long_env, model, "none")
    stopped_at = max(model.turns)
    assert stop == "context_exhausted"
    assert max(n for _, n, _ in _estimates_and_counts(store, episode_id)) <= WINDOW
    env = WorkspaceEnv(tasks_path=long_tasks(tmp_path), snapshots=False)
    try:
        rollout = resume_episode(
            store, episode_id, env=env, model_fn=model, context={"context": "mask:10"}
        )
    finally:
        env.close()
    assert (rollout.stop_reason, stopped_at < 100, max(model.turns)) == ("done", True, TURNS)
    _assert_recorded_exactly(store, episode_id, model)
