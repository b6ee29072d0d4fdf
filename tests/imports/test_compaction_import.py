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
def test_requests_after_a_claude_code_compaction_send_its_summary_then_what_it_preserved(
    tmp_path: Path,
) -> None:
    lines = _lines(CLAUDE)
    [summary] = [x for x in lines if x.get("isCompactSummary")]
    [boundary] = [x for x in lines if x.get("subtype") == "compact_boundary"]
    preserved = boundary["compactMetadata"]["preservedMessages"]["uuids"]
    kept = [x["message"] for x in lines if x.get("uuid") in preserved]
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, CLAUDE, claude_code)
        sent = store.reconstruct_request(episode, 11).messages
    assert sent[0].content == summary["message"]["content"]
    assert [(m.role, m.content) for m in sent[1 : 1 + len(kept)]] == [
        (m["role"], "".join(b["text"] for b in m["content"])) for m in kept
    ]


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


def _jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _codex_line(i: int, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": f"2026-01-01T00:00:{i:02d}.000Z", "type": kind, "payload": payload}


def _codex_rollout(tmp_path: Path, compacted: dict[str, Any]) -> Path:
    """A rollout in an older Codex's shape: a turn, then a ``compacted`` record whose call's
    output the rollout does not hold, then a turn."""
    text = [{"type": "input_text", "text": "fix it"}]
    said = [{"type": "output_text", "text": "done"}]
    rows = [
        ("session_meta", {"id": "s1", "cwd": "/w", "cli_version": "0.1"}),
        ("turn_context", {"turn_id": "t1", "model": "gpt-5"}),
        ("response_item", {"type": "message", "role": "user", "content": text}),
        ("response_item", {"type": "message", "role": "assistant", "content": said}),
        ("compacted", compacted),
        ("response_item", {"type": "message", "role": "assistant", "content": said}),
    ]
    name = "rollout-2026-01-01T00-00-00-00000000-0000-0000-0000-000000000001.jsonl"
    return _jsonl(tmp_path / name, [_codex_line(i, *row) for i, row in enumerate(rows)])


def test_a_codex_compacted_record_without_its_calls_output_stands_for_that_call(
    tmp_path: Path,
) -> None:
    path = _codex_rollout(tmp_path, {"message": "the summary"})
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, path, codex)
        [compaction] = _compactions(store, episode)
        call = compaction["call_id"]
        events = [r for r in store.iter_events(episode) if r.payload.get("call_id") == call]
        [answer] = [
            store.message(r.payload["message_hash"]) for r in events if r.kind == "model.response"
        ]
        [usage] = [r.payload for r in events if r.kind == "usage"]
        kept = [r.payload for r in store.iter_events(episode, kinds=["error"])]
    assert (answer.content, usage["input_tokens"], kept) == ("the summary", None, [])


def test_a_codex_replacement_history_with_items_other_than_messages_is_also_kept_raw(
    tmp_path: Path,
) -> None:
    user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]}
    call = {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"}
    path = _codex_rollout(tmp_path, {"message": "s", "replacement_history": [user, call]})
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, path, codex)
        kept = [r.payload["raw"]["type"] for r in store.iter_events(episode, kinds=["error"])]
        last = store.reconstruct_request(episode, 2).messages
    assert kept == ["compacted"]
    assert [m.content for m in last] == ["u"]  # the replacement's message, a chain of its own


def test_a_claude_code_summary_without_a_boundary_is_a_compaction_of_unknown_extent(
    tmp_path: Path,
) -> None:
    session = "00000000-0000-4000-8000-000000000001"

    def line(i: int, kind: str, content: Any, **more: Any) -> dict[str, Any]:
        message = {
            "role": kind,
            "content": content,
            **({"id": f"m{i}"} if kind == "assistant" else {}),
        }
        return {"type": kind, "sessionId": session, "uuid": f"u{i}", "message": message, **more}

    path = _jsonl(
        tmp_path / f"{session}.jsonl",
        [
            line(1, "user", "fix it"),
            line(2, "assistant", [{"type": "text", "text": "done"}]),
            line(3, "user", "the summary", isCompactSummary=True),
            line(4, "user", "go on"),
            line(5, "assistant", [{"type": "text", "text": "ok"}]),
        ],
    )
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, path, claude_code)
        [compaction] = _compactions(store, episode)
        after = store.reconstruct_request(episode, 2).messages
    assert compaction.get("covers") is None
    assert [m.content for m in after] == ["the summary", "go on"]


@needs("claude-code/compaction")
def test_a_compaction_closed_at_the_end_of_a_file_that_grows_goes_on_as_a_compaction(
    tmp_path: Path,
) -> None:
    lines = CLAUDE.read_text(encoding="utf-8").splitlines(keepends=True)
    growing = tmp_path / CLAUDE.name
    growing.write_text("".join(lines[:31]), encoding="utf-8")  # up to its boundary
    with TraceStore(tmp_path / "traces.db") as store:
        import_file(store, growing, claude_code)  # looks finished: the open call is closed
        shutil.copyfile(CLAUDE, growing)
        [report] = import_file(store, growing, claude_code)
        compactions = _compactions(store, report.episode_id)
        requests = list(store.iter_events(report.episode_id, kinds=["model.request"]))
    assert [c["covers"] for c in compactions] == [17, None]  # the answer came later
    assert [r.turn for r in requests].count(10) == 3  # both parts of it, then turn 10


@needs("codex/compaction")
def test_codex_usage_records_give_each_call_its_usage_and_the_rollouts_totals(
    tmp_path: Path,
) -> None:
    lines = _lines(CODEX)
    records = [x["payload"]["usage"] for x in lines if x["type"] == "token_usage_record"]
    [*_, totals] = [
        x["payload"]["info"]["total_token_usage"]
        for x in lines
        if x["payload"].get("type") == "token_count" and x["payload"].get("info")
    ]
    with TraceStore(tmp_path / "traces.db") as store:
        episode = only_episode(store, CODEX, codex)
        usage = [r.payload for r in store.iter_events(episode, kinds=["usage"])]
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [
        (r["input_tokens"], r["output_tokens"]) for r in records
    ]
    assert sum(u["input_tokens"] for u in usage) == totals["input_tokens"]
    assert sum(u["output_tokens"] for u in usage) == totals["output_tokens"]
