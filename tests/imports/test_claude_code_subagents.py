"""Claude Code sessions with subagents, laid out as Claude Code lays them out: one episode per
session and per subagent, each from one source, the subagent's linked to its parent, whatever
order the files are imported in. Counts are the fixture README's, computed from the raw files."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports.registry import import_paths
from tests.imports.conftest import FIXTURES, needs

INCREMENTAL = FIXTURES / "claude-code" / "codemie-incremental-subagents"
SESSION = "e9fb405b-169f-40eb-9396-7e75076f045d"  # its sessionId
AGENT = "a485154"
STARTED_BY = "toolu_bdrk_019PUUtqzQg8U5ogfuyQ7yLV"  # the main session's Task call
FULL = {"requests": 11, "calls": 14, "results": 14, "input": 381_842, "output": 10_099}
SUBAGENT = {"requests": 6, "calls": 20, "results": 20}
OLD = FIXTURES / "claude-code" / "codemie-2.0.64"
OLD_SESSION = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
SPOTTER = FIXTURES / "claude-code" / "subagent.jsonl"  # 2.1.38, agent_progress records
SPOTTER_SESSION = "491e126e-1e71-469c-ade2-fcc8af567c74"


def _counts(store: TraceStore, episode_id: str) -> dict[str, int]:
    seen: Counter[str] = Counter()
    for row in store.iter_events(episode_id):
        seen[row.kind] += 1
        if row.kind == "usage":
            seen["input"] += row.payload["input_tokens"]
            seen["output"] += row.payload["output_tokens"]
    return {
        "requests": seen["model.request"],
        "calls": seen["tool.call"],
        "results": seen["tool.result"],
        "input": seen["input"],
        "output": seen["output"],
    }


def _episodes(store: TraceStore) -> dict[str, Any]:
    """Every episode by the session id it was imported from."""
    return {e.env["session_id"]: e for e in store.list_episodes()}


def _project(tmp_path: Path) -> Path:
    """The incremental session's second snapshot as Claude Code lays out a project folder."""
    project = tmp_path / "project"
    (project / SESSION / "subagents").mkdir(parents=True)
    shutil.copy(INCREMENTAL / "turn-2.jsonl", project / f"{SESSION}.jsonl")
    shutil.copy(
        INCREMENTAL / "turn-2" / "subagents" / f"agent-{AGENT}.jsonl",
        project / SESSION / "subagents",
    )
    return project


@needs("claude-code/codemie-incremental-subagents")
@pytest.mark.parametrize("order", ["folder", "main file first", "subagent file first"])
def test_a_project_folder_imports_the_same_whatever_the_order(tmp_path: Path, order: str) -> None:
    project = _project(tmp_path)
    main = project / f"{SESSION}.jsonl"
    subagent = project / SESSION / "subagents" / f"agent-{AGENT}.jsonl"
    runs = {
        "folder": [[project]],
        "main file first": [[main], [subagent]],
        "subagent file first": [[subagent], [main]],
    }[order]
    with TraceStore(tmp_path / "traces.db") as store:
        for paths in runs:
            import_paths(store, paths)
        episodes = _episodes(store)
        assert sorted(episodes) == [SESSION, f"{SESSION}/agent-{AGENT}"]
        parent, child = episodes[SESSION], episodes[f"{SESSION}/agent-{AGENT}"]
        assert _counts(store, parent.episode_id) == FULL
        assert {k: v for k, v in _counts(store, child.episode_id).items() if k in SUBAGENT} == (
            SUBAGENT
        )
        assert child.env["spawned_by"] == {"episode_id": parent.episode_id, "call_id": STARTED_BY}


@needs("claude-code/codemie-incremental-subagents")
def test_naming_only_the_main_file_imports_its_subagents_too(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with TraceStore(tmp_path / "traces.db") as store:
        import_paths(store, [project / f"{SESSION}.jsonl"])
        child = _episodes(store)[f"{SESSION}/agent-{AGENT}"]
        assert _counts(store, child.episode_id)["requests"] == SUBAGENT["requests"]


@needs("claude-code/codemie-incremental-subagents")
def test_a_subagent_file_without_its_main_file_makes_no_empty_parent(tmp_path: Path) -> None:
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(INCREMENTAL / "turn-2" / "subagents" / f"agent-{AGENT}.jsonl", alone)
    with TraceStore(tmp_path / "traces.db") as store:
        import_paths(store, [alone])
        episodes = _episodes(store)
        assert list(episodes) == [f"{SESSION}/agent-{AGENT}"]
        child = episodes[f"{SESSION}/agent-{AGENT}"]
        assert child.env["spawned_by"] == {"episode_id": None, "call_id": None}
        kept = [row.payload["raw"] for row in store.iter_events(child.episode_id, kinds=["error"])]
        assert [r["type"] for r in kept] == ["progress"]  # its hook record, in its own episode


@needs("claude-code/codemie-2.0.64")
def test_every_subagent_file_of_a_session_is_an_episode_of_its_own(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "traces.db") as store:
        import_paths(store, [OLD])
        episodes = _episodes(store)
        agents = sorted(p.stem for p in OLD.glob("agent-*.jsonl"))
        assert sorted(episodes) == sorted([OLD_SESSION, *(f"{OLD_SESSION}/{a}" for a in agents)])
        parent = episodes[OLD_SESSION]
        assert _counts(store, parent.episode_id) == {
            "requests": 7,
            "calls": 6,
            "results": 6,
            "input": 251_832,
            "output": 806,
        }
        for agent in agents:
            child = episodes[f"{OLD_SESSION}/{agent}"]
            assert _counts(store, child.episode_id)["requests"] == 1
            assert child.env["spawned_by"]["episode_id"] == parent.episode_id


@needs("claude-code")
def test_a_subagent_with_its_own_file_is_imported_once_from_it(tmp_path: Path) -> None:
    """Claude Code >= 2.1 copies a subagent's records into the main file (agent_progress)
    and writes them in the subagent's own file: one episode, its spend counted once."""
    project = tmp_path / "project"
    (project / SPOTTER_SESSION / "subagents").mkdir(parents=True)
    shutil.copy(SPOTTER, project / f"{SPOTTER_SESSION}.jsonl")
    copies: dict[str, list[str]] = {}
    for line in SPOTTER.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        data = record.get("data") or {}
        if record.get("type") == "progress" and data.get("type") == "agent_progress":
            own = {**data["message"], "isSidechain": True, "agentId": data["agentId"]}
            own["sessionId"] = SPOTTER_SESSION
            copies.setdefault(data["agentId"], []).append(json.dumps(own) + "\n")
    for agent, lines in copies.items():
        own_file = project / SPOTTER_SESSION / "subagents" / f"agent-{agent}.jsonl"
        own_file.write_text("".join(lines), encoding="utf-8")
    with TraceStore(tmp_path / "alone.db") as alone:  # the main file with only its copies
        shutil.copy(SPOTTER, tmp_path / f"{SPOTTER_SESSION}.jsonl")
        import_paths(alone, [tmp_path / f"{SPOTTER_SESSION}.jsonl"])
        want = {s: _counts(alone, e.episode_id) for s, e in _episodes(alone).items()}
    with TraceStore(tmp_path / "traces.db") as store:
        import_paths(store, [project])
        got = {s: _counts(store, e.episode_id) for s, e in _episodes(store).items()}
        assert got == want  # one episode per subagent, nothing counted twice
        assert sorted(got) == sorted(
            [SPOTTER_SESSION, *(f"{SPOTTER_SESSION}/agent-{a}" for a in copies)]
        )


@needs("claude-code/codemie-incremental-subagents")
@pytest.mark.parametrize("first", ["turn-1.jsonl", "turn-2.jsonl"])
def test_two_snapshots_of_one_session_are_one_episode(tmp_path: Path, first: str) -> None:
    """``turn-1.jsonl`` is a byte prefix of ``turn-2.jsonl``; both start with a summary."""
    other = "turn-2.jsonl" if first == "turn-1.jsonl" else "turn-1.jsonl"
    with TraceStore(tmp_path / "traces.db") as store:
        import_paths(store, [INCREMENTAL / first])
        import_paths(store, [INCREMENTAL / other])
        mains = [e for e in store.list_episodes() if e.env["session_id"] == SESSION]
        assert len(mains) == 1
        assert _counts(store, mains[0].episode_id) == FULL
        assert all(e.env["session_id"].startswith(SESSION) for e in store.list_episodes())
