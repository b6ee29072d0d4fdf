"""The real Gemini CLI recorded by ``agentrunner record``, configured the way its users do
(API-key auth in ``~/.gemini/settings.json``, the upstream as ``GOOGLE_GEMINI_BASE_URL`` in the
``~/.gemini/.env`` file it loads),
against a loopback upstream streaming scripted Gemini answers; then replayed offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_clients import BIN, client, scratch_repo
from record_support import last_json
from sse_replay import Reply, SSEReplayServer, sse

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body

pytestmark = pytest.mark.slow
KEY = "AIzaSy-gemini-cli-test-0123456789"
MODEL = "gemini-2.5-flash"
COMMAND = "cp notes.txt copy.txt"


def chunk(parts: list[dict[str, Any]], **usage: int) -> str:
    candidate = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
    meta = {"promptTokenCount": 900, **usage}
    return sse({"candidates": [candidate], "usageMetadata": meta, "modelVersion": MODEL})


def script() -> list[Reply]:
    call = {"functionCall": {"name": "run_shell_command", "args": {"command": COMMAND}}}
    return [
        Reply(events=[chunk([call], candidatesTokenCount=12)]),
        Reply(events=[chunk([{"text": "Copied the notes."}], candidatesTokenCount=5)]),
    ]


def gemini_home(home: Path) -> dict[str, str]:
    """A home where Gemini CLI uses API-key auth and sends no usage statistics."""
    (home / ".gemini").mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GOOGLE_", "GEMINI_")) and "KEY" not in k
    }
    return {
        **environ,
        "HOME": str(home),
        "GEMINI_API_KEY": KEY,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }


def record(
    db: Path, repo: Path, env: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    gemini = str(client("gemini"))
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(db), "--json",
         *options, "--", gemini, "-p", "copy the notes", "--approval-mode", "yolo", "-m", MODEL],
        cwd=repo, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip


def test_gemini_cli_is_recorded_call_by_call_with_its_tool_call_and_result(tmp_path: Path) -> None:
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "gemini notes\n"})
    env = gemini_home(tmp_path / "home")
    settings = (tmp_path / "home" / ".gemini" / "settings.json").read_bytes()
    dotenv = tmp_path / "home" / ".gemini" / ".env"
    with SSEReplayServer(*script()) as upstream:
        dotenv.write_text(f"GOOGLE_GEMINI_BASE_URL={upstream.url}\n")
        named = dotenv.read_bytes()
        done = record(tmp_path / "t.db", repo, env)
        posts = [r for r in upstream.requests if r.method == "POST"]
    assert dotenv.read_bytes() == named
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").read_text() == "gemini notes\n"
    assert (tmp_path / "home" / ".gemini" / "settings.json").read_bytes() == settings
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(tmp_path / "t.db") as store:
        requests = store.events(episode, kinds=["model.request"])
        (call,) = store.events(episode, kinds=["tool.call"])
        (result,) = store.events(episode, kinds=["tool.result"])
        rebuilt = [request_body(store, episode, r.turn) for r in requests]
    assert len(requests) == len(posts) == 2
    assert rebuilt == [json.loads(r.raw) for r in posts]
    assert (call.payload["name"], call.payload["parsed"]) == (
        "run_shell_command",
        {"command": COMMAND},
    )
    assert result.payload["call_id"] == call.payload["call_id"]
    for stored in tmp_path.glob("t.db*"):
        assert KEY.encode() not in stored.read_bytes(), stored.name


def test_a_recorded_gemini_cli_session_replays_offline_with_the_same_effect(tmp_path: Path) -> None:
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "gemini notes\n"})
    env = gemini_home(tmp_path / "home")
    with SSEReplayServer(*script()) as upstream:
        first = record(tmp_path / "t.db", repo, {**env, "GOOGLE_GEMINI_BASE_URL": upstream.url})
    assert first.returncode == 0, first.stderr[-3000:]
    (episode,) = last_json(first.stdout)["episodes"]
    (repo / "copy.txt").unlink()
    with SSEReplayServer() as stopped:  # any call reaching it would be a miss
        offline = {**env, "GOOGLE_GEMINI_BASE_URL": stopped.url}
        again = record(tmp_path / "t.db", repo, offline, "--replay", episode)
        reached = list(stopped.requests)
    assert again.returncode == 0, again.stderr[-3000:]
    assert reached == []
    assert (repo / "copy.txt").read_text() == "gemini notes\n"
