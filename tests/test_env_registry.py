"""Environment kinds come from one registry: a kind listed there (here, one this file defines)
is built from its ``--env`` value and rebuilt from the spec its episode recorded, with nothing
else to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentrunner import AgentContext, AgentToolCall, AgentTurn, TraceStore, run_agent_episode
from agentrunner.envs.factory import env_from_spec, make_env
from agentrunner.envs.registry import KINDS, EnvFlag, EnvKind, flag_help
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.errors import UsageError
from agentrunner.values.events import StopReason
from agentrunner.values.types import ToolSpec

TICK = ToolSpec(name="tick", description="count one")


class Counter:
    """Done after ``limit`` ticks, with reward 1."""

    def __init__(self, limit: int) -> None:
        self.limit, self.ticks = limit, 0

    def spec(self) -> dict[str, Any]:
        return {"kind": "counter", "limit": self.limit}

    def reset(self, task_id: str, seed: int) -> ResetResult:
        self.ticks = 0
        return ResetResult(prompt="tick until it says done", tools=(TICK,))

    def step(self, action: ToolAction) -> StepResult:
        self.ticks += 1
        done = self.ticks >= self.limit
        return StepResult(observation=str(self.ticks), reward=1.0 if done else 0.0, done=done)

    def close(self) -> None:
        pass


class CounterSpec(BaseModel):
    kind: Literal["counter"] = "counter"
    limit: int


COUNTER = EnvKind(
    "counter",
    CounterSpec,
    lambda spec: Counter(spec.limit),
    EnvFlag(
        "counter:N",
        lambda value: value.startswith("counter:"),
        lambda value, _: Counter(int(value.removeprefix("counter:"))),
        help="done after N ticks",
    ),
)


@pytest.fixture(autouse=True)
def _counter_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(KINDS, COUNTER.name, COUNTER)


def _tick(context: AgentContext) -> AgentTurn:
    return AgentTurn(tool_calls=(AgentToolCall(call_id=f"c{context.turn}", name="tick"),))


def test_a_registered_kind_is_built_from_its_env_value() -> None:
    env = make_env("counter:3")
    assert isinstance(env, Counter) and env.limit == 3


def test_a_registered_kind_is_rebuilt_from_the_spec_its_episode_recorded(db_path: Path) -> None:
    store = TraceStore(db_path)
    rollout = run_agent_episode(env=make_env("counter:2"), task_id="t", model_fn=_tick, store=store)
    recorded = store.episode(rollout.episode_id).env
    rebuilt = env_from_spec(recorded, store)
    assert rollout.total_reward == 1.0 and recorded == {"kind": "counter", "limit": 2}
    assert isinstance(rebuilt, Counter) and rebuilt.limit == 2


def test_a_cancelled_episode_of_a_registered_kind_resumes_in_an_environment_rebuilt(
    db_path: Path,
) -> None:
    store = TraceStore(db_path)
    turns: list[int] = []

    def tick_once(context: AgentContext) -> AgentTurn:
        turns.append(context.turn)
        return _tick(context)

    cancelled = run_agent_episode(
        env=make_env("counter:3"),
        task_id="t",
        model_fn=tick_once,
        store=store,
        cancel_check=lambda: len(turns) >= 1,
    )
    resumed = resume_episode(store, cancelled.episode_id, model_fn=_tick)
    assert cancelled.stop_reason == StopReason.CANCELLED and cancelled.total_reward == 0.0
    assert resumed.stop_reason == StopReason.DONE and resumed.total_reward == 1.0


def test_the_env_help_names_a_registered_kind() -> None:
    assert flag_help() == (
        "'workspace' (the coding workspace, default) or an OpenEnv server URL "
        "(http://HOST:PORT) or counter:N (done after N ticks)"
    )


def test_an_unknown_env_value_is_refused_naming_every_registered_one() -> None:
    with pytest.raises(UsageError) as refused:
        make_env("nothing")
    assert str(refused.value) == (
        "--env must be 'workspace' or an OpenEnv server URL (http://HOST:PORT) or counter:N, "
        "not 'nothing'"
    )


def test_a_recorded_spec_its_kind_cannot_read_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"recorded counter environment does not read \(limit"):
        env_from_spec({"kind": "counter", "limit": "many"})
