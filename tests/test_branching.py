"""Branching while running: decision points sample K candidates at one input, run M recorded
continuations of each, value them by mean reward and adopt the best (or keep the main
line's own); everything is read back from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import run_cli

from agentrunner import Branching, TraceStore, run_agent_episode
from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.lifecycle.decisions import PROPOSAL, decisions, read_decisions, spend
from agentrunner.lifecycle.resume import resume_episode
from agentrunner.store.groups import ForkGroup
from agentrunner.values.errors import ModelError, UsageError
from providers.scripted import ScriptedModel

DEMO = Path(__file__).parent.parent / "providers" / "scripts" / "demo.json"
SUBMIT = {"text": "Submitting as it is.", "tool_calls": [{"name": "submit", "arguments": {}}]}


def _script(tmp_path: Path, alternatives: list[dict[str, Any]], at: int = 3) -> ScriptedModel:
    """The demo's `mean` episode whose turn ``at + 1`` offers ``alternatives`` (the fix is
    the demo's own turn: continuing from it earns reward 1; submitting first earns 0)."""
    demo = json.loads(DEMO.read_text())
    episode = next(e for e in demo["episodes"] if "mean()" in e["match"])
    turns = list(episode["turns"])
    turns[at] = {"alternatives": [turns[at] if a == "fix" else a for a in alternatives]}
    path = tmp_path / "branchy.json"
    path.write_text(json.dumps({"name": "branchy", "episodes": [{**episode, "turns": turns}]}))
    return ScriptedModel(str(path), pace=0)


def _run(store: TraceStore, tmp_path: Path, model: ScriptedModel, branching: Branching) -> Any:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        return run_agent_episode(
            env=env, task_id="demo-mean", model_fn=model, store=store, branching=branching
        )


def _values(store: TraceStore, group: ForkGroup) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for member in group.members:
        if member.sample != PROPOSAL:
            out.setdefault(member.candidate, []).append(
                store.episode(member.episode_id).total_reward
            )
    return out


def _adopted(store: TraceStore, episode_id: str, turn: int) -> Any:
    (row,) = [e for e in store.iter_events(episode_id, kinds=["message"]) if e.turn == turn]
    return row.typed()


def test_best_adopts_the_candidate_whose_continuations_earn_most(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _script(tmp_path, [SUBMIT, "fix"])
    rollout = _run(store, tmp_path, model, Branching(every=4, actions=2, samples=2))
    (group,) = decisions(store, rollout.episode_id)
    assert group.turn == 4 and group.decision is not None and group.decision.adopt == "best"
    assert _values(store, group) == {0: [0.0, 0.0], 1: [1.0, 1.0]}
    adopted = _adopted(store, rollout.episode_id, 4)
    assert adopted.reason == "adopted" and adopted.role == "assistant"
    assert "str_replace" in store.message(adopted.message_hash).model_dump_json()
    assert (rollout.status, rollout.total_reward) == ("completed", 1.0)


def test_measure_keeps_the_main_line_s_own_sample_and_values_the_others(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _script(tmp_path, [SUBMIT, "fix"])
    rollout = _run(
        store, tmp_path, model, Branching(every=4, actions=2, samples=2, adopt="measure")
    )
    (group,) = decisions(store, rollout.episode_id)
    assert _values(store, group) == {0: [0.0, 0.0], 1: [1.0, 1.0]}
    adopted = _adopted(store, rollout.episode_id, 4)
    assert "submit" in store.message(adopted.message_hash).model_dump_json()
    assert rollout.total_reward == 0.0


def test_each_decision_point_records_k_proposals_and_k_times_m_continuations(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _script(tmp_path, [SUBMIT, "fix", "fix"])
    rollout = _run(store, tmp_path, model, Branching(every=4, actions=3, samples=2))
    (group,) = decisions(store, rollout.episode_id)
    roles = sorted((m.candidate, m.sample) for m in group.members)
    assert roles == [(i, s) for i in range(3) for s in (PROPOSAL, 0, 1)]
    main_seq = group.fork_seq
    assert all(store.episode(m.episode_id).fork_seq == main_seq for m in group.members)
    spent = spend(store, rollout.episode_id)
    assert spent["decisions"] == 1 and spent["tokens"]["output"] > 0


def test_bad_settings_are_refused_before_anything_runs() -> None:
    with pytest.raises(UsageError, match="at least 1"):
        Branching(every=0, actions=2, samples=2)
    with pytest.raises(UsageError, match="best or measure"):
        Branching(every=1, actions=2, samples=2, adopt="worst")  # type: ignore[arg-type]


class _Costly:
    """The scripted model, each call costing one cent."""

    provider = "scripted"

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner, self.model, self.params = inner, inner.model, inner.params

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def __call__(self, context: Any) -> Any:
        turn = self.inner(context)
        return turn.model_copy(update={"usage": turn.usage.model_copy(update={"cost_usd": 0.01})})


def test_max_cost_stops_branching_not_the_episode_and_says_so_once(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _Costly(_script(tmp_path, [SUBMIT, "fix"], at=1))  # the choice at turn 2
    branching = Branching(every=2, actions=2, samples=1, max_cost=0.05)
    rollout = _run(store, tmp_path, model, branching)  # type: ignore[arg-type]
    (group,) = decisions(store, rollout.episode_id)  # turn 2 only: then the budget was spent
    assert group.turn == 2
    stops = [e.typed() for e in store.iter_events(rollout.episode_id, kinds=["cancel"])]
    assert len(stops) == 1 and "branching stopped" in stops[0].reason  # type: ignore[union-attr]
    assert "--max-cost $0.0500 reached" in stops[0].reason  # type: ignore[union-attr]
    assert spend(store, rollout.episode_id)["cost_usd"] >= 0.05
    assert rollout.status == "completed"


def _main(store: TraceStore) -> str:
    """The one root episode of the store."""
    (root,) = [e.episode_id for e in store.list_episodes() if e.parent_episode_id is None]
    return root


def _continuation_ids(store: TraceStore, episode_id: str) -> list[str]:
    groups = list(decisions(store, episode_id))
    return [m.episode_id for g in groups for m in g.members if m.sample != PROPOSAL]


def test_a_cancel_during_a_decision_point_resumes_to_the_same_decision(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _script(tmp_path, [SUBMIT, "fix"])
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        cancelled = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=model,
            store=store,
            branching=Branching(every=4, actions=2, samples=2, concurrency=1),
            cancel_check=lambda: bool(
                _continuation_ids(store, store.list_episodes()[-1].episode_id)
            ),
        )
    assert cancelled.status == "cancelled"
    resumed = resume_episode(store, cancelled.episode_id, model_fn=model)
    assert (resumed.status, resumed.total_reward) == ("completed", 1.0)
    adopted = _adopted(store, cancelled.episode_id, 4)  # the decision turn was not skipped
    assert "str_replace" in store.message(adopted.message_hash).model_dump_json()
    for fork in _continuation_ids(store, cancelled.episode_id):
        assert store.episode(fork).status == "completed"


class _Failing:
    """The scripted model, failing for good where ``fails(context)`` says so."""

    provider = "scripted"

    def __init__(self, inner: ScriptedModel, fails: Any) -> None:
        self.inner, self.model, self.params, self.fails = inner, inner.model, {}, fails

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def __call__(self, context: Any) -> Any:
        if self.fails(context):
            raise ModelError("the provider refused this request", retryable=False)
        return self.inner(context)


def test_a_proposal_that_fails_proposes_nothing_and_the_others_are_decided_on(
    store: TraceStore, tmp_path: Path
) -> None:
    model = _Failing(_script(tmp_path, [SUBMIT, "fix", "fix"]), lambda c: c.sample == 1)
    rollout = _run(store, tmp_path, model, Branching(every=4, actions=3, samples=1))  # type: ignore[arg-type]
    (made,) = read_decisions(store, rollout.episode_id)
    assert [c.index for c in made.candidates] == [0, 2] and made.adopted == 2
    assert (rollout.status, rollout.total_reward) == ("completed", 1.0)


def test_continuations_that_fail_for_good_are_not_valued(store: TraceStore, tmp_path: Path) -> None:
    def after_the_fix(context: Any) -> bool:  # the continuations of candidate 1 only
        return context.sample is None and any(
            "return total / len(values)" in m.model_dump_json() for m in context.messages
        )

    model = _Failing(_script(tmp_path, [SUBMIT, "fix"]), after_the_fix)
    rollout = _run(store, tmp_path, model, Branching(every=4, actions=2, samples=2))  # type: ignore[arg-type]
    (made,) = read_decisions(store, rollout.episode_id)
    by_index = {c.index: c for c in made.candidates}
    assert by_index[0].rewards == [0.0, 0.0] and by_index[1].rewards == []  # failed: not 0.0
    assert made.adopted == 0 and rollout.total_reward == 0.0


def test_an_environment_forks_cannot_rebuild_is_refused_before_anything_branches(
    store: TraceStore, tmp_path: Path
) -> None:
    class Custom(WorkspaceEnv):
        def spec(self) -> dict[str, Any]:
            return {**super().spec(), "kind": "custom"}

    with (
        Custom(snapshot_dir=tmp_path / "snaps") as env,
        pytest.raises(UsageError, match="env_factory"),
    ):
        run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=_script(tmp_path, [SUBMIT, "fix"]),
            store=store,
            branching=Branching(every=4, actions=2, samples=1),
        )
    assert not list(decisions(store, _main(store)))  # nothing branched


def test_resume_all_after_a_cancelled_decision_finishes_it_through_the_main_line(
    db_path: Path, tmp_path: Path
) -> None:
    model = _script(tmp_path, [SUBMIT, "fix"])
    with TraceStore(db_path) as store, WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        cancelled = run_agent_episode(
            env=env,
            task_id="demo-mean",
            model_fn=model,
            store=store,
            branching=Branching(every=4, actions=2, samples=2, concurrency=1),
            cancel_check=lambda: bool(_continuation_ids(store, _main(store))),
        )
    result = run_cli("resume", "--all", "--db", str(db_path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report["skipped"] == []
    with TraceStore(db_path) as store:
        assert store.episode(cancelled.episode_id).status == "completed"
        assert all(
            store.episode(f).status == "completed"
            for f in _continuation_ids(store, cancelled.episode_id)
        )
