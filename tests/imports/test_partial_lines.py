"""A session still being written: its half-written last line is not consumed, and nothing is
closed on its account, so that the import of the completed file gives exactly what a whole
import gives (Claude Code and Codex read their lines by one rule: items.jsonl_records)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrunner import TraceStore
from agentrunner.imports import claude_code
from agentrunner.imports.importer import import_file
from tests.imports.conftest import FIXTURES, needs

TOOL_HEAVY = FIXTURES / "claude-code" / "tool_heavy.jsonl"
SESSION = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"  # tool_heavy.jsonl's sessionId


def _log(store: TraceStore, episode_id: str) -> list[tuple[str, Any]]:
    """An episode's events without the import's positions and its file's digest."""
    out = []
    for row in store.iter_events(episode_id):
        payload = {k: v for k, v in row.payload.items() if k not in ("src", "tools_hash")}
        if row.kind == "episode.start":
            payload["env"] = {k: v for k, v in payload["env"].items() if k != "sha256"}
        out.append((row.kind, payload))
    return out


def _continuations(lines: list[str]) -> list[int]:
    """Lines that continue the assistant message of the line before (another block of it)."""
    found, before = [], None
    for i, line in enumerate(lines):
        record = json.loads(line)
        now = record["message"].get("id") if record.get("type") == "assistant" else None
        if now is not None and now == before:
            found.append(i)
        before = now
    return found


@needs("claude-code")
@pytest.mark.parametrize("nth", [0, 1])
def test_a_half_written_line_of_a_call_leaves_the_call_open_until_it_is_complete(
    tmp_path: Path, nth: int
) -> None:
    lines = TOOL_HEAVY.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = _continuations(lines)[nth]
    growing = tmp_path / f"{SESSION}.jsonl"
    growing.write_text("".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2], encoding="utf-8")
    with TraceStore(tmp_path / "grown.db") as grown, TraceStore(tmp_path / "whole.db") as whole:
        (first,) = import_file(grown, growing, claude_code)
        assert first.kept_raw == sum(1 for k, _ in _log(grown, first.episode_id) if k == "error")
        assert not any("not JSON" in str(p) for _, p in _log(grown, first.episode_id))
        growing.write_text("".join(lines), encoding="utf-8")
        (report,) = import_file(grown, growing, claude_code)
        (reference,) = import_file(whole, TOOL_HEAVY, claude_code)
        assert _log(grown, report.episode_id)[1:] == _log(whole, reference.episode_id)[1:]
