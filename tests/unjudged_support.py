"""A store for the tests of unjudged episodes: a real Claude Code session and a real Codex
rollout imported from the shared fixtures (no reward: unjudged) and one episode the scripted
demo model runs to reward 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_process import run_cli

TRACES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "foreign-traces"
CLAUDE = TRACES / "claude-code" / "short.jsonl"
CODEX = TRACES / "codex" / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"


def unjudged_store(folder: Path) -> Path:
    """The store, made in ``folder`` (skips when the fixtures are absent)."""
    if not (CLAUDE.is_file() and CODEX.is_file()):
        pytest.skip(f"the shared foreign-trace fixtures are absent ({TRACES})")
    path = folder / "traces.db"
    for trace in (CLAUDE, CODEX):
        done = run_cli("import", "--db", str(path), str(trace))
        assert done.returncode == 0, done.stderr
    ran = run_cli("run", "--db", str(path), "--model", "scripted:demo", "--task", "demo-mean")
    assert ran.returncode == 0, ran.stderr
    return path
