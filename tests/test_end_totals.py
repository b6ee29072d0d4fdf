"""An ``episode.end``'s totals read as a typed record: what the runner records, and what an
older or foreign end holds (missing keys default, unknown ones kept)."""

from __future__ import annotations

from pathlib import Path

from agentrunner import TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.values.events import EpisodeEnd
from providers.scripted import ScriptedModel


def test_a_runs_end_reads_as_its_typed_totals(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "t.db") as store, WorkspaceEnv() as env:
        rollout = run_agent_episode(
            env=env, task_id="demo-mean", seed=0, model_fn=ScriptedModel("demo"), store=store
        )
        end = store.last_of_kind(rollout.episode_id, "episode.end")
        assert end is not None
        typed = end.typed()
    assert isinstance(typed, EpisodeEnd)
    spend = typed.spend
    assert spend.reward == rollout.total_reward == 1.0
    assert spend.tokens == rollout.tokens and spend.tokens["input"]
    assert spend.cost_usd == rollout.cost_usd


def test_an_end_without_totals_or_with_foreign_keys_still_reads() -> None:
    bare = EpisodeEnd(stop_reason="done", turns=1, total_reward=None)
    assert (bare.spend.tokens, bare.spend.cost_usd, bare.spend.reward) == ({}, None, None)
    foreign = EpisodeEnd(
        stop_reason="done", turns=2, total_reward=1.0, totals={"cost_usd": 0.5, "steps": 9}
    )
    assert foreign.spend.cost_usd == 0.5 and foreign.spend.model_extra == {"steps": 9}
