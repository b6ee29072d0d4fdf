"""Context figures (issue 27): the time to build each request stays flat as an episode grows.

Run on demand: ``pytest tests/benchmarks/test_bench_context.py -m benchmark -s``. An episode of
500 turns (a 2 kB tool output each, a 32k-token window) grows one turn at a time; at every
turn the episode's policy picks what the request sends and the budget estimates it, as the
runner does before each request. Printed: the mean time per request around turn 50 and
around turn 500, and their ratio (the issue's target: within 1.5x). Nothing asserts a time.
"""

from __future__ import annotations

import time

import pytest

from agentrunner.runtime.context import Budget, ContextPolicy, HistoryView, parse_policy
from agentrunner.runtime.context.policies import Compaction, MaskCache, ToolOrigin
from agentrunner.values.types import AgentToolCall, Message

pytestmark = pytest.mark.benchmark

TURNS = 500
WINDOW = 32_000
OUTPUT = "x" * 2000
AROUND = 10  # turns measured on each side of 50 and of 500 (block boundaries among them)
REPEATS = 5  # episodes built; each turn's figure is its fastest (the machine is shared)


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
        started = time.perf_counter()
        view = HistoryView(
            history, turn, budget, compaction, compact, lambda: origins, mask_cache=cache
        )
        sent = policy.select(view)
        budget.estimate(sent.messages)
        times[turn] = (time.perf_counter() - started) * 1000
        for message in _turn_messages(turn):
            if message.role == "tool":
                origins[len(history)] = ToolOrigin(turn, turn * 10 + 1)
            history.append(message)
    return times


def _mean(times: dict[int, float], turns: range) -> float:
    return sum(times[t] for t in turns) / len(turns)


@pytest.mark.parametrize("text", ["mask:10", "summarize"])
def test_request_building_stays_flat_as_the_episode_grows(text: str) -> None:
    for incremental in (False, True):
        runs = [
            _per_request_ms(parse_policy(text), incremental=incremental) for _ in range(REPEATS)
        ]
        times = {turn: min(run[turn] for run in runs) for turn in runs[0]}
        early = _mean(times, range(50 - AROUND, 50 + AROUND))
        late = _mean(times, range(TURNS - 2 * AROUND + 1, TURNS + 1))
        kept = "kept between requests" if incremental else "redone every request (before)"
        print(
            f"\n{text}, masked view and character count {kept}: a request takes {early:.3f} ms"
            f" at turn 50, {late:.3f} ms at turn 500 ({late / early:.2f}x; target within 1.5x)"
        )
