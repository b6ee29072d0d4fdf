"""DPO pairs are made from what the branches did, so no row option changes which pairs exist.

The branches here: a demo-mean parent, a fork at turn 4 that replays the parent's own action
there (as a fan-out continuation replays a sampled one: the same text and tool calls, no
reasoning), and a fork that submits at once instead (reward 0).
"""

from __future__ import annotations

from typing import Any

import pytest
from test_fanout import FIX, SUBMIT

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.export import ExportOptions, export_rows
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from providers import get_model

TURN = 4


def _run_forks(store: TraceStore, parent: str, *actions: Any) -> None:
    for action in actions:
        (fork,) = fork_episode(store, parent, turn=TURN, action=action)
        resume_episode(store, fork)


def _replayed(store: TraceStore, episode_id: str, *, parsed: bool = False) -> dict[str, Any]:
    """The episode's action at TURN as a fan-out candidate: its text and tool calls (the
    arguments raw, or ``parsed``: then the fork records them re-encoded, keys sorted)."""
    row = store.last_at_turn(episode_id, "model.response", TURN)
    assert row is not None
    message = store.message(row.payload["message_hash"])
    assert message.reasoning  # the parent reasoned; the replay will not carry it
    calls = [
        {"name": c.name, "arguments": c.parsed_arguments() if parsed else c.arguments}
        for c in message.tool_calls
    ]
    return {"message": message.content, "tool_calls": calls}


def _pairs(store: TraceStore, options: ExportOptions) -> list[tuple[list[str], list[str]]]:
    _, rows = export_rows(store, "dpo", options=options)
    return [
        (sorted(r["chosen_source"]["episodes"]), sorted(r["rejected_source"]["episodes"]))
        for r in rows
    ]


@pytest.fixture
def parent(store: TraceStore, env: WorkspaceEnv) -> str:
    model = get_model("scripted:demo")
    return run_agent_episode(env=env, task_id="demo-mean", model_fn=model, store=store).episode_id


def test_dpo_pairs_are_the_same_with_and_without_reasoning(store: TraceStore, parent: str) -> None:
    _run_forks(store, parent, _replayed(store, parent), SUBMIT)
    plain = _pairs(store, ExportOptions())
    assert len(plain) == 1
    assert _pairs(store, ExportOptions(reasoning_key="reasoning_content")) == plain


def test_dpo_pairs_are_the_same_whatever_form_tool_arguments_take(
    store: TraceStore, parent: str
) -> None:
    replayed = _replayed(store, parent, parsed=True)
    assert replayed["tool_calls"][0]["arguments"] == FIX["arguments"]  # its keys sorted now
    _run_forks(store, parent, replayed, SUBMIT)
    as_objects = _pairs(store, ExportOptions(tool_args="object"))
    assert len(as_objects) == 1
    assert _pairs(store, ExportOptions(tool_args="string")) == as_objects


def test_dpo_pairs_are_the_same_with_and_without_tool_results(
    store: TraceStore, parent: str
) -> None:
    _run_forks(store, parent, _replayed(store, parent), SUBMIT)
    plain = _pairs(store, ExportOptions())
    assert _pairs(store, ExportOptions(with_tool_results=True)) == plain


def test_dpo_side_with_reasoning_comes_from_a_branch_that_reasoned(
    store: TraceStore, parent: str
) -> None:
    _run_forks(store, parent, _replayed(store, parent), SUBMIT)
    _, rows = export_rows(store, "dpo", options=ExportOptions(reasoning_key="thinking"))
    (row,) = list(rows)
    assert row["chosen"][0]["thinking"]
    assert row["chosen_source"]["episode_id"] == parent
