"""Context figures (issue 27): the time to build each request stays flat as an episode grows.

Run on demand: ``pytest tests/benchmarks/test_bench_context.py -m benchmark -s``. Two figures:

- the policy alone: an episode of 500 turns (a 2 kB tool output each, a 32k-token window)
  grows one turn at a time; at every turn the episode's policy picks what the request sends
  and the budget estimates it, as the runner does before each request;
- the runner: the 500-turn episode of ``tests/test_long_episode.py`` run on a SQLite store,
  each request timed from the last event recorded before its ``model.request`` to the model
  receiving it (the policy, the estimate, the sent chain stored, the request recorded).

Printed: the mean CPU time per request around turn 50 and up to turn 500, and their ratio (the
issue's target: within 1.5x). Nothing asserts a time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from agentrunner import AgentContext, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.runtime.context import Budget, ContextPolicy, HistoryView, parse_policy
from agentrunner.runtime.context.policies import Compaction, MaskCache, ToolOrigin
from agentrunner.runtime.runner import RunConfig
from agentrunner.values.events import ModelRequest
from agentrunner.values.types import AgentToolCall, Message
from providers.scripted import ScriptedModel
from tests.test_long_episode import TASK, long_script, long_tasks

pytestmark = pytest.mark.benchmark

TURNS = 500
WINDOW = 32_000
OUTPUT = "x" * 2000
EARLY, LATE = range(25, 75), range(TURNS - 49, TURNS + 1)
"""The turns measured around turn 50 and up to turn 500: as many of mask:10's block boundaries
in each, and of the SQLite store's checkpoints of its write-ahead log (one every 50 turns)."""
REPEATS = 5  # episodes built; each turn's figure is its fastest (the machine is shared)
RUNS = 3  # episodes run by the runner, for the same
CLOCK = time.thread_time
"""The CPU time of the thread building requests: what other processes on a shared machine
do, and the store's waits for the disk, stay out of the figures."""


def _turn_messages(turn: int) -> list[Message]:
    call = AgentToolCall(call_id=f"c{turn}", name="read_file", arguments='{"path": "out.txt"}')
    return [
        Message(role="assistant", content=f"step {turn}", tool_calls=(call,)),
        Message(role="tool", content=OUTPUT, tool_call_id=f"c{turn}", name="read_file"),
    ]


def _summarize(request: list[Message], covers: int, turn: int) -> Compaction:
    """A compaction as a summarizing model answers it: a short text for the older part."""
    return Compaction(f"summary of {len(request)} messages", covers, turn, seq=turn * 10)


def _per_request_ms(policy: ContextPolicy, *, incremental: bool) -> dict[int, float]:
    """Milliseconds to build request ``turn`` (the policy's selection and its estimate);
    not ``incremental``: a new mask cache and character count every request (each masks and
    counts the whole history, as before they were kept)."""
    history = [Message(role="system", content="sys"), Message(role="user", content="task")]
    origins: dict[int, ToolOrigin] = {}
    budget, cache = Budget(WINDOW), MaskCache()
    compaction: Compaction | None = None
    times: dict[int, float] = {}
    for turn in range(1, TURNS + 1):

        def compact(request: list[Message], covers: int, at: int = turn) -> Compaction:
            nonlocal compaction
            compaction = _summarize(request, covers, at)
            return compaction

        if not incremental:
            budget, cache = Budget(WINDOW), MaskCache()
        started = CLOCK()
        view = HistoryView(
            history, turn, budget, compaction, compact, lambda: origins, mask_cache=cache
        )
        sent = policy.select(view)
        budget.estimate(sent.messages)
        times[turn] = (CLOCK() - started) * 1000
        for message in _turn_messages(turn):
            if message.role == "tool":
                origins[len(history)] = ToolOrigin(turn, turn * 10 + 1)
            history.append(message)
    return times


def _figures(runs: list[dict[int, float]]) -> str:
    """Each turn's fastest time over ``runs``, as means around turn 50 and up to 500."""
    times = {turn: min(run[turn] for run in runs) for turn in runs[0]}
    early, late = (sum(times[t] for t in turns) / len(turns) for turns in (EARLY, LATE))
    return (
        f"{early:.3f} ms at turn 50, {late:.3f} ms at turn 500 ({late / early:.2f}x; target"
        " within 1.5x)"
    )


@pytest.mark.parametrize("text", ["mask:10", "summarize"])
def test_request_building_stays_flat_as_the_episode_grows(text: str) -> None:
    for incremental in (False, True):
        runs = [
            _per_request_ms(parse_policy(text), incremental=incremental) for _ in range(REPEATS)
        ]
        kept = "kept between requests" if incremental else "redone every request"
        print(f"\n{text}, the policy alone, its view and count {kept}: {_figures(runs)}")


class BuildTimes:
    """The scripted model of the long episode, timing how long the runner took to build each
    request: from the last event recorded before the request's ``model.request`` (a tool's
    result, or a compaction's usage) to this model receiving the request."""

    def __init__(self, script: Path) -> None:
        self.scripted = ScriptedModel(str(script), pace=0)
        self.last_event = CLOCK()
        self.began: dict[int, float] = {}
        self.ms: dict[int, float] = {}

    def observe(self, seq: int, turn: int, payload: BaseModel) -> None:
        if isinstance(payload, ModelRequest) and payload.purpose == "turn":
            self.began[turn] = self.last_event
        else:
            self.last_event = CLOCK()

    def __call__(self, context: AgentContext) -> AgentTurn:
        if context.purpose == "turn":
            self.ms[context.turn] = (CLOCK() - self.began[context.turn]) * 1000
        return self.scripted(context)


def _runner_ms(text: str, tmp_path: Path, run: int) -> dict[int, float]:
    """Milliseconds the runner took to build each request of the 500-turn episode."""
    model = BuildTimes(long_script(tmp_path))
    env = WorkspaceEnv(tasks_path=long_tasks(tmp_path), snapshots=False)
    store = TraceStore(tmp_path / f"bench-{run}.db")
    config = RunConfig(max_turns=TURNS, context=text, context_window=WINDOW)
    try:
        run_agent_episode(
            env=env,
            task_id=TASK,
            model_fn=model,
            store=store,
            config=config,
            observer=model.observe,
        )
    finally:
        env.close()
        store.close()
    return model.ms


@pytest.mark.parametrize("text", ["mask:10", "summarize"])
def test_the_runner_builds_each_request_in_flat_time(text: str, tmp_path: Path) -> None:
    runs = [_runner_ms(text, tmp_path, run) for run in range(RUNS)]
    print(f"\n{text}, the runner on a SQLite store: {_figures(runs)}")
