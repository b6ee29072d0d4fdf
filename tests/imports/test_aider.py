"""The aider importer, on the LLM history file the real aider writes (``--llm-history-file``,
run offline against a loopback upstream scripted to answer with a SEARCH/REPLACE edit): the
import has the model calls and messages a plain reading of the file counts, its request is the
messages aider sent, usage is unknown (the file has none), it adds nothing the second time, and
the episode shows and exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from real_clients import agent_program, scratch_repo
from sse_replay import Reply, SSEReplayServer
from test_record_python_agents import EDIT, aider_home, chunk, commit_message, environment

from agentrunner import TraceStore
from agentrunner.imports import aider
from tests.imports.conftest import followed_and_whole, kinds, payloads

pytestmark = pytest.mark.slow


def aider_history(tmp_path: Path) -> Path:
    """The LLM history a real aider run that edits greeting.txt writes."""
    aider = agent_program("aider")
    repo = scratch_repo(tmp_path / "repo", {"greeting.txt": "hello\n"})
    aider_home(tmp_path / "home", aider.parent / "python")
    history = tmp_path / "llm-history.txt"
    answer = [chunk({"role": "assistant", "content": ""}), chunk({"content": EDIT}),
              chunk({}, "stop"), "data: [DONE]"]  # fmt: skip
    with SSEReplayServer(Reply(events=answer), aside=commit_message) as upstream:
        env = environment(tmp_path / "home", OPENAI_API_KEY="sk-aider-import-0123456789",
                          OPENAI_API_BASE=f"{upstream.url}/v1")  # fmt: skip
        done = subprocess.run(
            [str(aider), "--model", "openai/gpt-4o", "--yes-always", "--no-check-update",
             "--no-show-release-notes", "--analytics-disable", "--no-pretty",
             "--llm-history-file", str(history), "--message", "say hello to the world",
             "greeting.txt"],
            cwd=repo, capture_output=True, text=True, timeout=600, env=env,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "greeting.txt").read_text() == "hello world\n"
    return history


def exchanges(path: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """The file's blocks: header and messages (role, text), read plainly."""
    blocks: list[tuple[str, list[tuple[str, str]]]] = []
    for part in re.split(r"^(TO LLM|LLM RESPONSE) \S+\n", path.read_text(), flags=re.M)[1:]:
        if part in ("TO LLM", "LLM RESPONSE"):
            blocks.append((part, []))
            continue
        for said in part.split("-------\n"):
            lines = [line.split(" ", 1) for line in said.splitlines()]
            if lines:
                role = lines[0][0].lower()
                blocks[-1][1].append((role, "\n".join(x[1] if len(x) > 1 else "" for x in lines)))
    return blocks


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", *args, "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_real_aider_llm_history_imports_with_the_calls_and_messages_its_file_has(
    tmp_path: Path,
) -> None:
    history = aider_history(tmp_path)
    blocks = exchanges(history)
    sent = [messages for header, messages in blocks if header == "TO LLM"]
    answers = [messages for header, messages in blocks if header == "LLM RESPONSE"]
    db = tmp_path / "t.db"
    first = cli(db, "import", "--json", str(history))
    assert first.returncode == 0, first.stderr
    [[report]] = [f["sessions"] for f in json.loads(first.stdout)]
    episode = report["episode_id"]
    with TraceStore(db) as store:
        counted = kinds(store, episode)
        usage = payloads(store, episode, "usage")
        (request,) = store.iter_events(episode, kinds=["model.request"])
        rebuilt = store.reconstruct_request(episode, request.turn)
        (response,) = payloads(store, episode, "model.response")
        answer = store.message(response["message_hash"]).content
    assert len(sent) == len(answers) == 1
    assert counted["model.request"] == counted["model.response"] == len(answers)
    assert counted["tool.call"] == counted["tool.result"] == 0  # aider edits in its text
    assert [(m.role, m.content) for m in rebuilt.messages] == sent[0]
    assert answer == answers[0][0][1] and EDIT.strip() in answer
    assert [(u["input_tokens"], u["output_tokens"]) for u in usage] == [(None, None)]
    assert report["kept_raw"] == 0

    again = cli(db, "import", "--json", str(history))
    assert again.returncode == 0, again.stderr
    [[second]] = [f["sessions"] for f in json.loads(again.stdout)]
    assert (second["episode_id"], second["events_added"]) == (episode, 0)

    shown = cli(db, "show", episode)
    assert shown.returncode == 0, shown.stderr
    assert ">>>>>>> REPLACE" in shown.stdout
    sft = cli(db, "export", "--format", "sft", episode)
    assert sft.returncode == 0, sft.stderr
    (row,) = [json.loads(line) for line in sft.stdout.splitlines()]
    assert row["messages"][-1]["content"] == answer


def test_an_aider_history_followed_line_by_line_imports_as_the_whole_file_does(
    tmp_path: Path,
) -> None:
    history = aider_history(tmp_path)
    followed, whole = followed_and_whole(tmp_path, history, aider, tmp_path / "growing.txt")
    assert followed == whole and whole["model.request"] == 1
