"""ATIF export, import, export again: what agentrunner wrote under ``extra`` comes back.

Every episode of the store :func:`test_export_atif.made` builds (a root with a verifier's
result, forks, edits, a fan-out, a batch, cancelled, failed and resumed episodes) is exported
into a folder, the folder imported into a fresh store, and the copies are compared with the
originals: reward, task, seed, model, status, lineage, the edit marker, and the KTO and DPO
rows exported from them. Also: ``agent.version`` is never empty, and an episode with a
sub-agent child names it in the result of the call that started it (``subagent_trajectory_ref``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import test_export_atif
from record_support import last_json, record
from sse_replay import Reply, SSEReplayServer
from test_export_atif import ATIF, Made, needs_schema, rule_violations, schema_errors

from agentrunner import TraceStore
from agentrunner.export import Selection, atif_trajectory, export_rows, select_episodes
from agentrunner.export.atif import write_atif
from agentrunner.imports import atif
from agentrunner.imports.importer import import_file
from agentrunner.imports.registry import import_paths
from agentrunner.values.events import MessageEvent, Status

FOREIGN = ATIF.parent
made = test_export_atif.made
"""The store of one episode of each kind that the ATIF export's tests read (a fixture)."""


@dataclass
class Copy:
    """The fresh store the exported folder was imported into, and which copy is whose."""

    store: TraceStore
    of: dict[str, str]  # original episode id -> its copy's


@pytest.fixture(scope="module")
def copied(made: Made, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Copy]:
    tmp = tmp_path_factory.mktemp("round-trip")
    every = select_episodes(made.store, Selection(statuses=(), include_proposals=True))
    written, _ = write_atif(made.store, every.episodes, tmp / "out", directory=True)
    assert written == len(every.episodes)
    store = TraceStore(tmp / "copy.db")
    reports = import_paths(store, [tmp / "out"])
    of = {s.source.session_id.split("/")[0]: s.episode_id for r in reports for s in r.sessions}
    assert sorted(of) == sorted(e.episode_id for e in every.episodes)
    yield Copy(store, of)
    store.close()


def _without_ids(row: Any) -> Any:
    """An export row without what names episodes, seqs, turns or groups of one store."""
    if isinstance(row, dict):
        return {
            k: _without_ids(v)
            for k, v in row.items()
            if k not in ("episode_id", "seq", "turn", "episodes", "fork_groups", "group_id")
        }
    if isinstance(row, list):
        return [_without_ids(v) for v in row]
    return row


def _rows(store: TraceStore, fmt: str) -> list[Any]:
    _, rows = export_rows(store, fmt)
    return sorted((_without_ids(r) for r in rows), key=lambda r: json.dumps(r, sort_keys=True))


# ------------------------------------------------------------------ what comes back


def test_each_copy_has_its_originals_reward_task_seed_model_and_status(
    made: Made, copied: Copy
) -> None:
    for kind, episode_id in made.ids.items():
        was, now = made.store.episode(episode_id), copied.store.episode(copied.of[episode_id])
        assert (now.total_reward, now.task_id, now.seed) == (
            was.total_reward,
            was.task_id,
            was.seed,
        )
        # a fork never run (pending) comes back started, as interrupted: resumable either way
        status = Status.INTERRUPTED if was.status == "pending" else was.status
        assert (now.model, now.status, now.stop_reason) == (was.model, status, was.stop_reason), (
            kind
        )


def test_each_fork_copy_is_a_fork_of_its_parents_copy(made: Made, copied: Copy) -> None:
    for episode_id in made.ids.values():
        was, now = made.store.episode(episode_id), copied.store.episode(copied.of[episode_id])
        parent = was.parent_episode_id
        assert now.parent_episode_id == (copied.of[parent] if parent is not None else None)
        ancestors = [copied.of[a] for a in made.store.ancestors(episode_id)]
        assert copied.store.ancestors(now.episode_id) == ancestors


def test_a_copy_exported_again_keeps_the_originals_reward_task_seed_model_and_lineage(
    made: Made, copied: Copy
) -> None:
    for kind, episode_id in made.ids.items():
        first = atif_trajectory(made.store, episode_id)
        again = atif_trajectory(copied.store, copied.of[episode_id])
        assert first is not None and again is not None
        one, two = first["extra"]["agentrunner"], again["extra"]["agentrunner"]
        for key in ("total_reward", "task_id", "seed", "stop_reason"):
            assert two[key] == one[key], (kind, key)
        assert [copied.of[a] for a in one["ancestors"]] == two["ancestors"], kind
        model = again["agent"]["extra"]["agentrunner"]["model"]
        assert model == first["agent"]["extra"]["agentrunner"]["model"], kind
        rewards = [r["extra"]["agentrunner"]["reward"] for r in _results(again)]
        assert rewards == [r["extra"]["agentrunner"]["reward"] for r in _results(first)], kind


def _results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for s in doc["steps"] for r in (s.get("observation") or {}).get("results", [])]


def test_an_edited_action_is_read_back_as_an_edit_not_a_model_call(
    made: Made, copied: Copy
) -> None:
    for kind in ("edit", "reasoned-edit"):
        copy = copied.of[made.ids[kind]]
        own = [r for r in copied.store.iter_events(copy) if r.episode_id == copy]
        edits = [r.typed() for r in own if r.kind == "message"]
        said = [e.reason for e in edits if isinstance(e, MessageEvent) and e.role == "assistant"]
        assert said == ["edit"], kind
        doc = atif_trajectory(copied.store, copy)
        assert doc is not None
        (step,) = [s for s in doc["steps"] if s["extra"]["agentrunner"].get("reason") == "edit"]
        assert step["llm_call_count"] == 0 and not step.get("is_copied_context"), kind


def test_kto_rows_of_the_copies_equal_the_originals(made: Made, copied: Copy) -> None:
    original = _rows(made.store, "kto")
    assert sum(r["label"] for r in original) > 0
    assert _rows(copied.store, "kto") == original


def test_dpo_rows_of_the_copies_equal_the_originals(made: Made, copied: Copy) -> None:
    original = _rows(made.store, "dpo")
    assert original
    assert _rows(copied.store, "dpo") == original


def test_a_foreign_trajectory_without_a_reward_imports_with_an_unknown_reward(
    tmp_path: Path,
) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        path = FOREIGN / "atif" / "harbor-atif2otel__trajectory_pass.json"
        (report,) = import_file(store, path, atif)
        results = store.iter_events(report.episode_id, kinds=["tool.result"])
        rewards = [row.payload.get("reward") for row in results]
        doc = atif_trajectory(store, report.episode_id)
    assert rewards and all(reward is None for reward in rewards)
    assert doc is not None and doc["extra"]["agentrunner"]["total_reward"] is None


# ------------------------------------------------------------------ agent.version, sub-agents


@needs_schema
def test_an_imported_session_whose_source_names_no_version_exports_a_valid_version(
    tmp_path: Path,
) -> None:
    with TraceStore(tmp_path / "t.db") as store:
        (report,) = import_paths(store, [FOREIGN / "mini-swe-agent" / "github_issue.traj.json"])
        (session,) = report.sessions
        assert session.source.agent_version is None
        doc = atif_trajectory(store, session.episode_id)
    assert doc is not None and doc["agent"]["version"]
    assert schema_errors(doc) == [] and rule_violations(doc) == []


def _message(content: list[dict[str, object]], stop: str) -> dict[str, object]:
    return {
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 5},
    }  # fmt: skip


def _recorded_sub_agent(db: Path) -> tuple[str, str]:
    """A recorded agent whose ``Agent`` call (``toolu_agent``) started a sub-agent: the
    parent's and the sub-agent's episode ids."""
    task = {"description": "look", "prompt": "Look in utils.py for the bug."}
    spawn = {"type": "tool_use", "id": "toolu_agent", "name": "Agent", "input": task}
    replies = [
        Reply(body=_message([spawn], "tool_use")),
        Reply(body=_message([{"type": "text", "text": "It is on line 3."}], "end_turn")),
        Reply(body=_message([{"type": "text", "text": "Fixed."}], "end_turn")),
    ]
    with SSEReplayServer(*replies) as upstream:
        done = record("anthropic_subagent", db=db, anthropic=upstream.url)
    assert done.returncode == 0, done.stderr
    parent, child = last_json(done.stdout)["episodes"]
    return parent, child


def _sub_agent_ref(doc: dict[str, Any]) -> dict[str, Any]:
    (result,) = [r for r in _results(doc) if r.get("source_call_id") == "toolu_agent"]
    (ref,) = result["subagent_trajectory_ref"]
    return dict(ref)


@needs_schema
def test_a_recorded_agent_links_its_sub_agent_in_the_result_of_the_call_that_started_it(
    tmp_path: Path,
) -> None:
    parent, child = _recorded_sub_agent(tmp_path / "t.db")
    with TraceStore(tmp_path / "t.db") as store:
        doc = atif_trajectory(store, parent)
        child_doc = atif_trajectory(store, child)
    assert doc is not None and child_doc is not None
    ref = _sub_agent_ref(doc)
    assert ref["trajectory_path"] == f"{child}.json"
    assert ref["session_id"] == child_doc["session_id"]
    assert schema_errors(doc) == [] and rule_violations(doc) == []


def test_a_sub_agent_exported_and_imported_again_is_linked_to_its_parents_copy(
    tmp_path: Path,
) -> None:
    parent, child = _recorded_sub_agent(tmp_path / "t.db")
    with TraceStore(tmp_path / "t.db") as store:
        write_atif(
            store, [store.episode(parent), store.episode(child)], tmp_path / "out", directory=True
        )
    with TraceStore(tmp_path / "copy.db") as store:
        (one, two) = import_paths(store, [tmp_path / "out"])
        copies = {
            s.source.session_id.split("/")[0]: s.episode_id for s in one.sessions + two.sessions
        }
        doc = atif_trajectory(store, copies[parent])
        assert store.episode(copies[child]).env["parent_episode"] == copies[parent]
    assert doc is not None
    assert _sub_agent_ref(doc)["trajectory_path"] == f"{copies[child]}.json"


@needs_schema
def test_an_imported_sub_agent_is_linked_from_its_parents_export(tmp_path: Path) -> None:
    sub = {
        "schema_version": "ATIF-v1.7",
        "trajectory_id": "helper",
        "agent": {"name": "demo", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Find the bug."},
            {"step_id": 2, "source": "agent", "message": "It is on line 3."},
        ],
    }
    main = {
        "schema_version": "ATIF-v1.7",
        "session_id": "s",
        "trajectory_id": "main",
        "agent": {"name": "demo", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "Fix the bug."},
            {
                "step_id": 2,
                "source": "agent",
                "tool_calls": [{"tool_call_id": "t1", "function_name": "task", "arguments": {}}],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "t1",
                            "content": "It is on line 3.",
                            "subagent_trajectory_ref": [{"trajectory_id": "helper"}],
                        }
                    ]
                },
            },
        ],
        "subagent_trajectories": [sub],
    }
    path = tmp_path / "main.json"
    path.write_text(json.dumps(main), encoding="utf-8")
    with TraceStore(tmp_path / "t.db") as store:
        parent, child = import_file(store, path, atif)
        doc = atif_trajectory(store, parent.episode_id)
    assert doc is not None
    (result,) = _results(doc)
    (ref,) = result["subagent_trajectory_ref"]
    assert ref["trajectory_path"] == f"{child.episode_id}.json"
    assert schema_errors(doc) == [] and rule_violations(doc) == []


def test_each_copy_exports_the_same_trajectory_as_its_original(made: Made, copied: Copy) -> None:
    for kind, episode_id in made.ids.items():
        first = atif_trajectory(made.store, episode_id)
        again = atif_trajectory(copied.store, copied.of[episode_id])
        assert first is not None and again is not None
        assert test_export_atif._atif_content(again) == test_export_atif._atif_content(first), kind


def test_copies_of_copies_give_the_same_training_rows(
    made: Made, copied: Copy, tmp_path: Path
) -> None:
    every = select_episodes(copied.store, Selection(statuses=(), include_proposals=True))
    write_atif(copied.store, every.episodes, tmp_path / "out", directory=True)
    with TraceStore(tmp_path / "third.db") as store:
        import_paths(store, [tmp_path / "out"])
        assert store.forks() and len(store.forks()) == len(made.store.forks())
        assert _rows(store, "kto") == _rows(made.store, "kto")
        assert _rows(store, "dpo") == _rows(made.store, "dpo")
