"""A live import of a file that grows by lines reads only what was appended, with the same
parser, and ends as the whole file imported at once."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from agentrunner import TraceStore
from agentrunner.imports import claude_code, codex
from agentrunner.imports.importer import FileImport, import_file
from agentrunner.imports.items import Format
from tests.imports.conftest import fixture_files

GROWING = [
    *((p, claude_code) for p in fixture_files("claude-code", "*.jsonl")),
    *((p, codex) for p in fixture_files("codex", "*.jsonl")),
]


def log(store: TraceStore, episode: str) -> list[tuple[str, dict[str, Any]]]:
    """Events without the start (it names its file) and the tools inferred so far."""
    return [
        (row.kind, {k: v for k, v in row.payload.items() if k != "tools_hash"})
        for row in store.iter_events(episode)
        if row.kind != "episode.start"
    ]


@pytest.mark.parametrize(("path", "fmt"), GROWING, ids=lambda v: getattr(v, "name", "")[:40])
def test_reading_only_the_appended_lines_gives_the_whole_import(
    tmp_path: Path, path: Path, fmt: ModuleType
) -> None:
    data = path.read_bytes()
    growing = tmp_path / path.name
    growing.write_bytes(b"")
    with TraceStore(tmp_path / "live.db") as live, TraceStore(tmp_path / "whole.db") as whole:
        follow = FileImport(live, growing, cast(Format, fmt))
        step = max(len(data) // 7, 1)
        for end in range(step, len(data) + step, step):  # cuts fall inside lines too
            growing.write_bytes(data[:end])
            follow.appended()
        assert follow.offset == data.rfind(b"\n") + 1  # every whole line, once
        reference = import_file(whole, path, cast(Format, fmt), live=True)
        ours = {w.source.session_id: w.episode_id for w in follow.writers.values()}
        for report in reference:
            assert log(live, ours[report.source.session_id]) == log(whole, report.episode_id)
