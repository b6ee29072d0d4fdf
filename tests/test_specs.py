"""Recorded model and environment specs, fork groups and decision outcomes read back typed,
and what is written stays the JSON it was."""

from __future__ import annotations

import json
from pathlib import Path

from agentrunner.envs.workspace import WorkspaceEnv
from agentrunner.store import TraceStore
from agentrunner.store.groups import (
    DecisionOutcome,
    FanOutConfig,
    create_fork_group,
    fork_groups,
    outcomes,
    record_outcome,
)
from agentrunner.values.branching import Branching, DecisionConfig
from agentrunner.values.specs import (
    UNKNOWN,
    ImportedSpec,
    OtherSpec,
    RecordedSpec,
    WorkspaceSpec,
    env_spec,
    model_spec,
)
from providers import get_model

OUTCOME = {
    "adopted": 1,
    "candidates": [
        {
            "candidate": i,
            "proposal": f"p{i}",
            "value": float(i),
            "spread": 0.0,
            "n": 1,
            "duplicate_of": None,
            "continuations": [f"c{i}"],
            "rewards": [float(i)],
            "failed": [],
        }
        for i in (0, 1)
    ],
}


def test_a_model_spec_reads_the_recorded_fields_and_keeps_the_rest() -> None:
    recorded = get_model("scripted:demo").spec()
    spec = model_spec({**recorded, "seen": 1})
    assert (spec.spec, spec.provider, spec.model) == ("scripted:demo", "scripted", "demo")
    assert spec.model_extra == {"seen": 1}


def test_a_model_record_without_a_spec_reads_as_unknown() -> None:
    assert model_spec({"provider": "custom"}).spec == UNKNOWN
    assert not model_spec({}).named


def test_a_workspace_env_spec_reads_as_a_workspace_spec(tmp_path: Path) -> None:
    with WorkspaceEnv(snapshot_dir=tmp_path / "snaps") as env:
        spec = env_spec(env.spec())
    assert isinstance(spec, WorkspaceSpec) and spec.tasks == "bundled"


def test_imported_and_recorded_env_specs_read_by_their_kind() -> None:
    imported = env_spec({"kind": "import", "format": "codex", "session_id": "s"})
    replayed = env_spec({"kind": "replay", "agent": "codex", "replay_of": "e1"})
    assert isinstance(imported, ImportedSpec) and imported.session_id == "s"
    assert isinstance(replayed, RecordedSpec) and replayed.model_extra == {"replay_of": "e1"}


def test_an_env_of_a_kind_not_known_keeps_everything_it_recorded() -> None:
    spec = env_spec({"kind": "mine", "url": "x"})
    assert isinstance(spec, OtherSpec) and spec.kind == "mine"
    assert spec.model_dump() == {"kind": "mine", "url": "x"}


def test_a_field_an_imported_source_gave_the_wrong_type_is_left_out_of_the_read() -> None:
    spec = env_spec({"kind": "import", "session_id": 3, "agent": "codex"})
    assert isinstance(spec, ImportedSpec) and (spec.session_id, spec.agent) == (None, "codex")
    assert model_spec({"spec": 5, "provider": "codex"}).spec == UNKNOWN


def _episode(store: TraceStore) -> str:
    return store.create_episode(task_id="t", seed=0, env={"kind": "x"}, model={"spec": "a:b"})


def test_fork_groups_read_back_with_a_fan_out_or_a_decision_config(store: TraceStore) -> None:
    parent = _episode(store)
    fanout = {"actions": [], "k": 2, "n": 1, "horizon": None, "model": None}
    create_fork_group(store, parent, 0, 1, fanout)
    create_fork_group(store, parent, 0, 2, Branching(every=2, actions=2, samples=1).config())
    fanned, decided = fork_groups(store, parent)
    assert isinstance(fanned.config, FanOutConfig) and fanned.decision is None
    assert isinstance(decided.config, DecisionConfig) and decided.decision == decided.config
    assert (decided.turn, decided.decision.actions, decided.decision.adopt) == (2, 2, "best")


def test_a_decision_outcome_is_written_as_the_json_it_was_and_reads_back_typed(
    store: TraceStore,
) -> None:
    group = create_fork_group(store, _episode(store), 0, 2, {"kind": "decision", **_settings()})
    record_outcome(store, group, DecisionOutcome.model_validate(OUTCOME))
    (text,) = store.raw_connection().execute("SELECT outcome FROM decision_outcomes").fetchone()
    assert text == json.dumps(OUTCOME, sort_keys=True)
    read = outcomes(store, [group])[group]
    assert read.adopted == 1 and [c.rewards for c in read.candidates] == [[0.0], [1.0]]


def _settings() -> dict[str, object]:
    return {"actions": 2, "samples": 1, "adopt": "best", "horizon": None}
