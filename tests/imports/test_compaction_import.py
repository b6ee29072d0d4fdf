"""Compactions in imported sessions are recorded as agentrunner records its own: a
``model.request`` of purpose ``compaction`` answered by the summary, made at the next turn
without being one, its usage only what the file records; ``show`` marks it where it happened,
with its summary; the history goes on from the context the agent went on from. Counts are
checked against the raw files, re-imports add nothing, and a session imported while it grew
ends as the whole file imported at once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.cli.main import main
from agentrunner.imports import claude_code, codex
from agentrunner.imports.importer import import_file
from tests.imports.conftest import FIXTURES, needs, only_episode

CLAUDE = FIXTURES / "claude-code" / "compaction" / "2206d4a0-0e54-4e7c-8938-2c3649e405f7.jsonl"
CODEX = (
    FIXTURES
    / "codex"
    / "compaction"
    / "rollout-2026-12-02T04-28-46-01a23503-1ee4-77f2-a5b5-0d75733e7937.jsonl"
)
both = pytest.mark.parametrize(
    ("path", "fmt"), [(CLAUDE, claude_code), (CODEX, codex)], ids=["claude-code", "codex"]
)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _rules_and_text(capsys: pytest.CaptureFixture[str], db: Path, episode: str) -> list[str]:
    """What ``show`` prints of an episode, its rules (``── turn 3 · … ──``) as their titles."""
    assert main(["show", episode, "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    return [line.strip("─ ") if line.startswith("─") else line for line in out]


def _rules(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(("turn ", "compaction"))]


def _after(lines: list[str], rule: str) -> str:
    """The text ``show`` prints between ``rule`` and the next rule."""
    start = lines.index(rule) + 1
    end = next((i for i in range(start, len(lines)) if lines[i] in _rules(lines)), len(lines))
    return "\n".join(lines[start:end])


@needs("claude-code/compaction")
def test_show_marks_a_claude_code_compaction_with_its_summary_after_the_turns_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    db = tmp_path / "traces.db"
    with TraceStore(db) as store:
        episode = only_episode(store, CLAUDE, claude_code)
    lines = _rules_and_text(capsys, db, episode)
    model = "claude-code:claude-sonnet-4-5"
    mark = f"compaction of 17 messages at turn 10 · {model}"  # 18 messages, the last one kept
    assert _rules(lines)[8:11] == [f"turn 9 · {model}", mark, "turn 10 · claude-code:<synthetic>"]
    summary = _after(lines, mark)
    assert "The summary below covers the earlier portion of the conversation.\n\nDone." in summary
    assert "usage: ? in · ? out" in summary  # Claude Code records no usage of it


@needs("codex/compaction")
def test_show_marks_a_codex_compaction_with_its_summary_after_the_turns_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    db = tmp_path / "traces.db"
    with TraceStore(db) as store:
        episode = only_episode(store, CODEX, codex)
    lines = _rules_and_text(capsys, db, episode)
    mark = "compaction at turn 3 · codex:gpt-5"
    assert _rules(lines)[1:4] == ["turn 2 · codex:gpt-5", mark, "turn 3 · codex:gpt-5"]
    summary = _after(lines, mark)
    assert summary.startswith("Done.")
    assert "usage: 10 in · 5 out" in summary  # the token_count after its output


def _compactions(store: TraceStore, episode: str) -> list[dict[str, Any]]:
    return [
        row.payload
        for row in store.iter_events(episode, kinds=["model.request"])
        if row.payload.get("purpose") == "compaction"
    ]


@needs("claude-code/compaction")
def test_a_claude_code_compaction_is_one_call_per_boundary_and_no_record_is_lost(
    tmp_path: Path,
) -> None:
    lines = _lines(CLAUDE)
    boundaries = [x for x in lines if x.get("subtype") == "compact_boundary"]
    conversation = [x for x in lines if x["type"] in ("user", "assistant")]
    messages = {x["message"]["id"] for x in conversation if x["type"] == "assistant"}
    with TraceStore(tmp_path / "traces.db") as store:
        [report] = import_file(store, CLAUDE, claude_code)
        requests = list(store.iter_events(report.episode_id, kinds=["model.request"]))
        usage = {
            row.payload["call_id"]: row.payload
            for row in store.iter_events(report.episode_id, kinds=["usage"])
        }
        compactions = _compactions(store, report.episode_id)
    assert len(requests) == len(messages) + len(boundaries) == len(messages) + len(compactions)
    assert all(usage[c["call_id"]]["input_tokens"] is None for c in compactions)  # not zero
    assert report.kept_raw == len(lines) - len(conversation) - len(boundaries)


@needs("codex/compaction")
def test_a_codex_compaction_is_the_call_its_output_items_say_and_keeps_its_usage(
    tmp_path: Path,
) -> None:
    lines = _lines(CODEX)
    marked = [x for x in lines if (x.get("metadata") or {}).get("compaction_output")]
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, CODEX, codex)
        [compaction] = _compactions(store, episode)
        [usage] = [
            row.payload
            for row in store.iter_events(episode, kinds=["usage"])
            if row.payload["call_id"] == compaction["call_id"]
        ]
        [answer] = [
            store.message(row.payload["message_hash"]).content
            for row in store.iter_events(episode, kinds=["model.response"])
            if row.payload["call_id"] == compaction["call_id"]
        ]
    assert answer == "".join(p["text"] for x in marked for p in x["payload"]["content"])
    assert (usage["input_tokens"], usage["output_tokens"]) == (10, 5)


@needs("codex/compaction")
def test_requests_after_a_codex_compaction_send_its_replacement_history(tmp_path: Path) -> None:
    [compacted] = [x["payload"] for x in _lines(CODEX) if x["type"] == "compacted"]
    replaced = [m for m in compacted["replacement_history"] if m["type"] == "message"]
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, CODEX, codex)
        sent = store.reconstruct_request(episode, 3).messages  # the first turn after it
    said = [m.content for m in sent[1 : 1 + len(replaced)]]  # after the base instructions
    assert said == ["\n".join(p["text"] for p in m["content"]) for m in replaced]
    assert sent[0].role == "system" and len(sent) == len(replaced) + 1


@needs("claude-code/compaction")
def test_requests_after_a_claude_code_compaction_start_from_its_summary(tmp_path: Path) -> None:
    [summary] = [x for x in _lines(CLAUDE) if x.get("isCompactSummary")]
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, CLAUDE, claude_code)
        sent = store.reconstruct_request(episode, 11).messages
    assert sent[0].content == summary["message"]["content"]


@needs("claude-code/compaction")
@needs("codex/compaction")
@both
def test_importing_a_compacted_session_twice_adds_nothing(
    tmp_path: Path, path: Path, fmt: ModuleType
) -> None:
    with TraceStore(tmp_path / "traces.db") as store:
        [first] = import_file(store, path, fmt)
        [second] = import_file(store, path, fmt)
    assert (first.events > 0, second.events, second.created) == (True, 0, False)


def _log(store: TraceStore, episode: str) -> list[tuple[str, int, dict[str, Any]]]:
    """An episode's events but its start, without the import's positions and tools."""
    return [
        (
            row.kind,
            row.turn,
            {k: v for k, v in row.payload.items() if k not in ("src", "tools_hash")},
        )
        for row in store.iter_events(episode)
        if row.kind != "episode.start"
    ]


@needs("claude-code/compaction")
@needs("codex/compaction")
@pytest.mark.parametrize(
    ("path", "fmt", "cut"),
    [(CLAUDE, claude_code, n) for n in (31, 32, 33)] + [(CODEX, codex, n) for n in (21, 23, 24)],
    ids=lambda v: str(v) if isinstance(v, int) else "",
)
def test_a_session_growing_through_its_compaction_ends_as_the_whole_file(
    tmp_path: Path, path: Path, fmt: ModuleType, cut: int
) -> None:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / "growing" / path.name
    growing.parent.mkdir()
    growing.write_text("".join(lines[:cut]), encoding="utf-8")
    with TraceStore(tmp_path / "grown.db") as grown, TraceStore(tmp_path / "whole.db") as whole:
        import_file(grown, growing, fmt, live=True)  # still being written
        shutil.copyfile(path, growing)
        (report,) = import_file(grown, growing, fmt)
        reference = only_episode(whole, path, fmt)
        assert _log(grown, report.episode_id) == _log(whole, reference)
