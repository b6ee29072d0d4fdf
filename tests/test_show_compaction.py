"""``show`` marks a compaction call (a ``model.request`` whose purpose is ``compaction``) as a
compaction, not as the output of another turn: its rule says ``compaction`` and how many
messages its summary stands for, in the batched transcript and in the live tail alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import run_cli

from agentrunner import TraceStore, __version__
from agentrunner.runtime.recorder import Recorder

ROWS = [
    (
        "model.request",
        {"call_id": "c1", "tip_hash": "t", "tools_hash": "h", "provider": "p", "model": "m"},
    ),
    ("model.chunk", {"call_id": "c1", "channel": "text", "index": 0, "text": "turn one"}),
    (
        "model.response",
        {"call_id": "c1", "message_hash": "x", "latency_s": 0.1, "stop_reason": "end_turn"},
    ),
    (
        "model.request",
        {
            "call_id": "compact-2-1",
            "tip_hash": "t",
            "tools_hash": "h",
            "provider": "p",
            "model": "small",
            "purpose": "compaction",
            "covers": 6,
        },
    ),
    (
        "model.chunk",
        {"call_id": "compact-2-1", "channel": "text", "index": 0, "text": "the summary"},
    ),
    (
        "model.response",
        {
            "call_id": "compact-2-1",
            "message_hash": "y",
            "latency_s": 0.1,
            "stop_reason": "end_turn",
        },
    ),
]


@pytest.fixture
def episode(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "traces.db"
    store = TraceStore(db)
    episode_id = store.create_episode(task_id="t", seed=0, env={"kind": "t"}, model={})
    writer = store.writer(episode_id)
    rec = Recorder(store, writer, secrets={})
    rec.start(task_id="t", seed=0, env={"kind": "t"}, model={}, config={}, version=__version__)
    for i, (kind, payload) in enumerate(ROWS):
        writer.append_json(1 if i < 3 else 2, kind, json.dumps(payload))
    rec.end("done", 1)
    store.close()
    return db, episode_id


@pytest.mark.parametrize("follow", [False, True], ids=["show", "show --follow"])
def test_a_compaction_call_is_marked_as_one(episode: tuple[Path, str], follow: bool) -> None:
    db, episode_id = episode
    proc = run_cli("show", episode_id, "--db", str(db), *(["--follow"] if follow else []))
    assert proc.returncode == 0, proc.stderr
    rules = [line.strip("─ ") for line in proc.stdout.splitlines() if line.startswith("─")]
    assert rules == ["turn 1 · p:m", "compaction of 6 messages at turn 2 · p:small"]
    assert "turn one\n" in proc.stdout and "the summary\n" in proc.stdout
