"""The Gemini CLI importer, on the session file the real Gemini CLI writes (run offline against
a loopback upstream scripted to make it run a shell command): the import has the model calls,
tool calls, results and tokens a plain reading of the file counts, adds nothing the second
time, and the episode shows and exports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_clients import client, scratch_repo
from sse_replay import SSEReplayServer
from test_record_gemini_cli import MODEL, gemini_home, script

from agentrunner import TraceStore
from agentrunner.imports import gemini_cli
from tests.imports.conftest import followed_and_whole, kinds, payloads

pytestmark = pytest.mark.slow


def gemini_session(tmp_path: Path) -> Path:
    """The chat file a real Gemini CLI run that copies a file writes."""
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "gemini notes\n"})
    home = tmp_path / "home"
    env = gemini_home(home)
    with SSEReplayServer(*script()) as upstream:
        env["GOOGLE_GEMINI_BASE_URL"] = upstream.url
        done = subprocess.run(
            [str(client("gemini")), "-p", "copy the notes", "--approval-mode", "yolo", "-m", MODEL],
            cwd=repo, capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").exists()
    (session,) = (home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
    return session


def last_versions(path: Path) -> list[dict[str, Any]]:
    """The file's messages (a message written again under its id counts once, as last)."""
    messages: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        for message in record.get("$set", {}).get("messages", [record]):
            if "type" in message:
                messages[message["id"]] = message
    return list(messages.values())


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_real_gemini_cli_session_imports_with_the_calls_and_tokens_its_file_has(
    tmp_path: Path,
) -> None:
    session = gemini_session(tmp_path)
    messages = last_versions(session)
    answers = [m for m in messages if m["type"] == "gemini"]
    calls = [c for m in answers for c in m.get("toolCalls", [])]
    results = [
        p for m in messages if m["type"] == "user" for p in m["content"] if "functionResponse" in p
    ]
    db = tmp_path / "t.db"
    first = cli(db, "import", "--json", str(session))
    assert first.returncode == 0, first.stderr
    [[report]] = [f["sessions"] for f in json.loads(first.stdout)]
    episode = report["episode_id"]
    with TraceStore(db) as store:
        counted = kinds(store, episode)
        usage = payloads(store, episode, "usage")
        tool_calls = payloads(store, episode, "tool.call")
    assert len(answers) == 2 and len(calls) == 1  # the script's two answers, one command
    assert counted["model.request"] == counted["model.response"] == len(answers)
    assert counted["tool.call"] == len(calls) and counted["tool.result"] == len(results) == 1
    assert [c["name"] for c in tool_calls] == [c["name"] for c in calls]
    assert [c["parsed"] for c in tool_calls] == [c["args"] for c in calls]
    assert sum(u["input_tokens"] for u in usage) == sum(m["tokens"]["input"] for m in answers)
    assert sum(u["output_tokens"] for u in usage) == sum(m["tokens"]["output"] for m in answers)
    records = [json.loads(line) for line in session.read_text().splitlines()]
    updates = [r for r in records if "$set" in r and "messages" not in r["$set"]]
    assert report["kept_raw"] == len(updates) > 0  # metadata updates, kept raw

    again = cli(db, "import", "--json", str(session))
    assert again.returncode == 0, again.stderr
    [[second]] = [f["sessions"] for f in json.loads(again.stdout)]
    assert (second["episode_id"], second["events_added"]) == (episode, 0)

    shown = cli(db, "show", episode)
    assert shown.returncode == 0, shown.stderr
    assert "run_shell_command" in shown.stdout and "Copied the notes." in shown.stdout
    sft = cli(db, "export", "--format", "sft", episode)
    assert sft.returncode == 0, sft.stderr
    (row,) = [json.loads(line) for line in sft.stdout.splitlines()]
    assert row["messages"][-1]["content"] == "Copied the notes."


def test_a_gemini_cli_session_followed_line_by_line_imports_as_the_whole_file_does(
    tmp_path: Path,
) -> None:
    session = gemini_session(tmp_path)
    followed, whole = followed_and_whole(
        tmp_path, session, gemini_cli, tmp_path / "growing" / session.name
    )
    assert followed == whole and whole["model.request"] == 2
