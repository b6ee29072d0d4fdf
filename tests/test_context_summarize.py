"""Context policies as objects (the ``ContextPolicy`` hook) and ``summarize``: a compaction
call recorded as its own marked model call, the history going on from the system prompt, the
task, the summary and the last turns, exactly rebuildable, and never a compaction loop."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.fork import fork_episode
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.readers.state import rebuild
from agentrunner.runtime.context import HistoryView, Sent
from agentrunner.runtime.runner import RunConfig
from tests.test_context_policies import Received, _payloads, _printing_turns, _script


@dataclass(frozen=True)
class LastTurns:
    """A custom policy: the system prompt and the task, then the last ``n`` messages."""

    n: int
    name: str = "last-turns"

    def settings(self) -> dict[str, Any]:
        return {"n": self.n}

    def select(self, view: HistoryView) -> Sent:
        head, rest = view.messages[:2], view.messages[2:]
        return Sent([*head, *rest[-self.n :]])


def _run(
    store: TraceStore, env: WorkspaceEnv, model: Received, max_turns: int, **settings: Any
) -> tuple[str, str]:
    config = RunConfig(max_turns=max_turns, **settings)
    rollout = run_agent_episode(
        env=env, task_id="demo-mean", model_fn=model, store=store, config=config
    )
    return rollout.episode_id, rollout.stop_reason


def _main_calls(model: Received) -> list[list[Any]]:
    """What the model received in the episode's turns (a compaction call sends no tools)."""
    return [list(call.messages) for call in model.calls if call.tools]


def test_a_custom_policy_object_runs_and_is_recorded_by_name_and_settings(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    model = Received(_script(tmp_path, _printing_turns(5)))
    episode_id, _ = _run(store, env, model, 8, context=LastTurns(3))
    start = next(e.payload for e in store.iter_events(episode_id) if e.kind == "episode.start")
    received = _main_calls(model)
    rebuilt = [store.reconstruct_request(episode_id, t + 1).messages for t in range(len(received))]
    assert start["config"]["context"] == {"name": "last-turns", "settings": {"n": 3}}
    assert rebuilt == received
    assert max(len(r) for r in received) == 5


def _summarized_episode(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> tuple[str, str, Received]:
    model = Received(_script(tmp_path, _printing_turns(18)))
    episode_id, stop = _run(store, env, model, 18, context="summarize", context_window=4000)
    return episode_id, stop, model


def test_summarize_compacts_with_a_marked_call_and_keeps_the_episode_under_the_window(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, stop, model = _summarized_episode(store, env, tmp_path)
    requests = _payloads(store, episode_id, "model.request")
    compactions = [r for r in requests if r["purpose"] == "compaction"]
    turns = [r for r in requests if r["purpose"] == "turn"]
    reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
    assert (stop, len(turns)) == ("max_turns", 18)
    assert compactions and all(r["covers"] > 2 for r in compactions)
    assert max(reported) <= 4000
    assert len(model.calls) == len(requests)


def test_the_summary_is_sent_but_never_part_of_the_history(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, _, model = _summarized_episode(store, env, tmp_path)
    history = rebuild(store, episode_id).messages
    last_sent = _main_calls(model)[-1]
    assert sum(m.role == "assistant" for m in history) == 18
    assert not any(m.content.startswith("[summary of the episode") for m in history)
    assert last_sent[:2] == history[:2]
    assert last_sent[2].content.startswith("[summary of the episode before turn")
    assert last_sent[-1] == history[-3]  # the last turn: its message and its tool output after


def test_the_rebuilt_request_at_every_turn_equals_what_the_model_received(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    episode_id, _, model = _summarized_episode(store, env, tmp_path)
    received = _main_calls(model)
    rebuilt = [store.reconstruct_request(episode_id, t + 1).messages for t in range(18)]
    assert rebuilt == received


def test_when_even_the_compacted_history_does_not_fit_the_episode_stops_after_one_attempt(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    turns = _printing_turns(10, chars=1000) + _printing_turns(1, chars=30000)
    turns += _printing_turns(10, chars=1000)
    model = Received(_script(tmp_path, turns))
    episode_id, stop = _run(store, env, model, 30, context="summarize", context_window=6000)
    requests = _payloads(store, episode_id, "model.request")
    compactions = [r for r in requests if r["purpose"] == "compaction"]
    reported = [u["input_tokens"] for u in _payloads(store, episode_id, "usage")]
    assert stop == "context_exhausted"
    assert len(compactions) == 1
    assert max(reported) <= 6000


def _compaction_turns(store: TraceStore, episode_id: str) -> list[int]:
    return [
        e.turn
        for e in store.iter_events(episode_id)
        if e.kind == "model.request" and e.payload["purpose"] == "compaction"
    ]


def _sent(store: TraceStore, episode_id: str, turn: int) -> list[Any]:
    return list(store.reconstruct_request(episode_id, turn).messages)


def test_a_fork_after_a_compaction_starts_from_the_compacted_view_and_one_before_without_it(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    parent, _, _ = _summarized_episode(store, env, tmp_path)
    first = _compaction_turns(store, parent)[0]
    after, before = (fork_episode(store, parent, turn=t)[0] for t in (first + 1, first - 1))
    for fork_id in (after, before):
        model = Received(_script(tmp_path, _printing_turns(18)))
        resume_episode(store, fork_id, env=env, model_fn=model)
    assert _sent(store, after, first + 1) == _sent(store, parent, first + 1)
    assert _sent(store, after, first + 1)[2].content.startswith("[summary of the episode")
    assert _sent(store, before, first - 1) == _sent(store, parent, first - 1)
    made = _compaction_turns(store, parent)  # the fork before makes them again, the one
    assert _compaction_turns(store, before) == _compaction_turns(store, after) == made  # after


def _unseq(messages: list[Any]) -> list[str]:
    return [re.sub(r"event seq \d+", "event seq N", m.model_dump_json()) for m in messages]


class DiesInTheFirstCompaction(Received):
    """The scripted model, with the process dying inside the first compaction call."""

    died = False

    def __call__(self, context: AgentContext) -> AgentTurn:
        if not context.tools and not self.died:
            self.died = True
            raise SystemExit("killed inside a compaction call")
        return super().__call__(context)


def test_a_resume_interrupted_inside_a_compaction_call_runs_it_once_more_and_ends_the_same(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    reference, _, _ = _summarized_episode(store, env, tmp_path)
    model = DiesInTheFirstCompaction(_script(tmp_path, _printing_turns(18)))
    with pytest.raises(SystemExit):
        _run(store, env, model, 18, context="summarize", context_window=4000)
    episode_id = store.list_episodes()[0].episode_id
    resume_episode(store, episode_id, env=env, model_fn=model)
    first = _compaction_turns(store, reference)[0]
    assert _compaction_turns(store, episode_id) == [first, *_compaction_turns(store, reference)]
    assert rebuild(store, episode_id).messages == rebuild(store, reference).messages
    for t in range(1, 19):  # the summary names the seq that keeps it: later after a resume
        assert _unseq(_sent(store, episode_id, t)) == _unseq(_sent(store, reference, t)), t


class DiesRightAfterTheFirstCompaction(Received):
    """The scripted model, with the process dying in the turn's own call after a compaction."""

    compacted = died = False

    def __call__(self, context: AgentContext) -> AgentTurn:
        self.compacted = self.compacted or not context.tools
        if self.compacted and context.tools and not self.died:
            self.died = True
            raise SystemExit("killed in the call after a compaction")
        return super().__call__(context)


def test_a_resume_after_a_compaction_continues_the_history_not_the_summary(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    reference, _, _ = _summarized_episode(store, env, tmp_path)
    model = DiesRightAfterTheFirstCompaction(_script(tmp_path, _printing_turns(18)))
    with pytest.raises(SystemExit):
        _run(store, env, model, 18, context="summarize", context_window=4000)
    episode_id = store.list_episodes()[0].episode_id
    resume_episode(store, episode_id, env=env, model_fn=model)
    assert rebuild(store, episode_id).messages == rebuild(store, reference).messages


def test_summarize_with_a_model_asks_that_model_for_the_summary(
    store: TraceStore, env: WorkspaceEnv, tmp_path: Path
) -> None:
    summarizer = tmp_path / "summarizer.json"
    summarizer.write_text(json.dumps({"episodes": [{"summary": "THE SUMMARY"}]}))
    model = Received(_script(tmp_path, _printing_turns(18)))
    policy = f"summarize:scripted:{summarizer}"
    episode_id, _ = _run(store, env, model, 18, context=policy, context_window=4000)
    requests = _payloads(store, episode_id, "model.request")
    compactions = [r for r in requests if r["purpose"] == "compaction"]
    assert compactions and {r["model"] for r in compactions} == {str(summarizer)}
    assert _main_calls(model)[-1][2].content.endswith("\nTHE SUMMARY")
    assert len(model.calls) == len(requests) - len(compactions)
