"""Export formats come from one registry: a format listed there (here, one this file defines)
is a choice of ``agentrunner export --format``, is explained by ``export --help`` and is
written through it, with nothing else to change."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrunner import AgentContext, AgentToolCall, AgentTurn, TraceStore, run_agent_episode
from agentrunner.cli.main import main
from agentrunner.export import FORMATS, ExportOptions, RowFormat, Selected
from agentrunner.values.environment import ResetResult, StepResult, ToolAction
from agentrunner.values.types import ToolSpec


def _ids(store: TraceStore, selected: Selected, options: ExportOptions) -> Iterator[dict[str, Any]]:
    for episode in selected.episodes:
        yield {"episode_id": episode.episode_id, "task_id": episode.task_id}


IDS = RowFormat("ids", "one row per episode, its id and task.", _ids)


class OneStep:
    """Submitted at the first step, with reward 1."""

    def spec(self) -> dict[str, Any]:
        return {"kind": "one-step"}

    def reset(self, task_id: str, seed: int) -> ResetResult:
        return ResetResult(prompt="submit", tools=(ToolSpec(name="submit", description="end"),))

    def step(self, action: ToolAction) -> StepResult:
        return StepResult(observation="submitted", reward=1.0, done=True)

    def close(self) -> None:
        pass


def _submit(context: AgentContext) -> AgentTurn:
    return AgentTurn(tool_calls=(AgentToolCall(call_id="c1", name="submit"),))


@pytest.fixture
def one_episode(db_path: Path) -> str:
    store = TraceStore(db_path)
    rollout = run_agent_episode(env=OneStep(), task_id="t1", model_fn=_submit, store=store)
    store.close()
    return rollout.episode_id


def test_a_registered_format_is_written_by_export_format(
    monkeypatch: pytest.MonkeyPatch, db_path: Path, one_episode: str, tmp_path: Path
) -> None:
    monkeypatch.setitem(FORMATS, IDS.name, IDS)
    out = tmp_path / "ids.jsonl"
    code = main(["export", "--db", str(db_path), "--format", "ids", "-o", str(out)])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert code == 0 and rows == [{"episode_id": one_episode, "task_id": "t1"}]


def test_export_help_explains_every_registered_format(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(FORMATS, IDS.name, IDS)
    with pytest.raises(SystemExit):
        main(["export", "--help"])
    unwrapped = "".join(capsys.readouterr().out.split())  # wrapping breaks lines at hyphens too
    assert all("".join(f"{name}: {f.help}".split()) in unwrapped for name, f in FORMATS.items())


def test_a_format_not_in_the_registry_is_no_choice(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as refused:
        main(["export", "--format", "ids"])
    assert refused.value.code == 2 and "invalid choice: 'ids'" in capsys.readouterr().err
