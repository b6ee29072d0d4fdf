"""The real OpenCode recorded by ``agentrunner record``, configured the way its users do: a
custom OpenAI-compatible provider in the repository's ``opencode.json`` whose ``baseURL`` is a
loopback upstream streaming scripted Chat Completions answers. The file is left alone; the
upstream is read from it. Then the session is replayed with the upstream stopped."""

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
from sse_replay import Received, Reply, SSEReplayServer, sse

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body

pytestmark = pytest.mark.slow
KEY = "sk-opencode-local-test-0123456789"
COMMAND = "cp notes.txt copy.txt"


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [choice],
        }
    )


def usage() -> str:
    counts = {"prompt_tokens": 300, "completion_tokens": 9, "total_tokens": 309}
    return sse(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
            "usage": counts,
        }
    )


def script() -> list[Reply]:
    call = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "bash",
            "arguments": json.dumps({"command": COMMAND, "description": "copy"}),
        },
    }
    return [
        Reply(
            events=[
                chunk({"role": "assistant", "tool_calls": [call]}),
                chunk({}, "tool_calls"),
                usage(),
                "data: [DONE]",
            ]
        ),
        Reply(
            events=[
                chunk({"role": "assistant", "content": "Copied."}),
                chunk({}, "stop"),
                usage(),
                "data: [DONE]",
            ]
        ),
    ]


def title(request: Received) -> Reply | None:
    """OpenCode asks for a session title on the side (a request with no tools)."""
    body = request.json if request.raw else {}
    if isinstance(body, dict) and "tools" not in body:
        return Reply(
            events=[
                chunk({"role": "assistant", "content": "Copy notes"}),
                chunk({}, "stop"),
                "data: [DONE]",
            ]
        )
    return None


def project(tmp_path: Path, upstream: str) -> tuple[Path, dict[str, str]]:
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "opencode notes\n"})
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Local",
                "options": {"baseURL": f"{upstream}/v1", "apiKey": KEY},
                "models": {"m": {"name": "m"}},
            }
        },
        "model": "local/m",
    }
    (repo / "opencode.json").write_text(json.dumps(config))
    (tmp_path / "home").mkdir(exist_ok=True)
    environ = {
        k: v
        for k, v in os.environ.items()
        if "KEY" not in k and not k.startswith(("OPENAI_", "OPENCODE_"))
    }
    env = {
        **environ,
        "HOME": str(tmp_path / "home"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
    }
    return repo, env


def record(
    db: Path, repo: Path, env: dict[str, str], *options: str, prompt: str = "copy the notes"
) -> subprocess.CompletedProcess[str]:
    opencode = str(client("opencode"))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "agentrunner.cli.main",
            "record",
            "--db",
            str(db),
            "--json",
            *options,
            "--",
            opencode,
            "run",
            prompt,
            "--model",
            "local/m",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_opencode_with_a_provider_in_its_project_config_is_recorded_and_the_file_left_alone(
    tmp_path: Path,
) -> None:
    with SSEReplayServer(*script(), aside=title) as upstream:
        repo, env = project(tmp_path, upstream.url)
        before = (repo / "opencode.json").read_bytes()
        done = record(tmp_path / "t.db", repo, env)
        posts = [r for r in upstream.requests if r.method == "POST"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").read_text() == "opencode notes\n"
    assert (repo / "opencode.json").read_bytes() == before
    with TraceStore(tmp_path / "t.db") as store:
        calls = [
            (e.episode_id, r.turn)
            for e in store.list_episodes()
            for r in store.events(e.episode_id, kinds=["model.request"])
        ]
        rebuilt = sorted(json.dumps(request_body(store, e, t), sort_keys=True) for e, t in calls)
        episodes = {e for e, _ in calls}
        (tool,) = [c for e in episodes for c in store.events(e, kinds=["tool.call"])]
        (result,) = [c for e in episodes for c in store.events(e, kinds=["tool.result"])]
    assert rebuilt == sorted(json.dumps(json.loads(r.raw), sort_keys=True) for r in posts)
    assert (tool.payload["name"], tool.payload["parsed"]["command"]) == ("bash", COMMAND)
    assert result.payload["call_id"] == "call_1"
    for stored in tmp_path.glob("t.db*"):
        assert KEY.encode() not in stored.read_bytes(), stored.name


def test_a_recorded_opencode_session_replays_offline_with_the_same_effect(tmp_path: Path) -> None:
    with SSEReplayServer(*script(), aside=title) as upstream:
        repo, env = project(tmp_path, upstream.url)
        first = record(tmp_path / "t.db", repo, env)
    assert first.returncode == 0, first.stderr[-3000:]
    main = [e for e in last_json(first.stdout)["episodes"]]
    (repo / "copy.txt").unlink()
    with TraceStore(tmp_path / "t.db") as store:
        (episode,) = [e for e in main if store.events(e, kinds=["tool.call"])]
    with SSEReplayServer() as stopped:  # nothing may reach it: the config still names it
        again = record(tmp_path / "t.db", repo, env, "--replay", episode)
        reached = list(stopped.requests)
    assert again.returncode == 0, again.stderr[-3000:]
    assert reached == []
    assert (repo / "copy.txt").read_text() == "opencode notes\n"


SUB_PROMPT = "Write the word hi into sub.txt."


def _tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    call = {"index": 0, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
    return Reply(events=[chunk({"role": "assistant", "tool_calls": [call]}),
                         chunk({}, "tool_calls"), usage(), "data: [DONE]"])  # fmt: skip


def _text(text: str) -> Reply:
    return Reply(events=[chunk({"role": "assistant", "content": text}), chunk({}, "stop"),
                         usage(), "data: [DONE]"])  # fmt: skip


def _sub_agents(request: Received) -> Reply | None:
    """A model that starts a sub-agent with OpenCode's ``task`` tool; the sub-agent (its own
    session, whose first user message is the prompt) writes a file and answers."""
    if request.method != "POST":
        return None
    named = title(request)
    if named is not None:
        return named
    messages = request.json["messages"]
    done = any(m["role"] == "tool" for m in messages)
    if any(m["role"] == "user" and m["content"] == SUB_PROMPT for m in messages):
        if done:
            return _text("Wrote sub.txt.")
        return _tool_call("call_s1", "bash", {"command": "echo hi > sub.txt", "description": "w"})
    if done:
        return _text("All done.")
    task = {"description": "write sub", "prompt": SUB_PROMPT, "subagent_type": "general"}
    return _tool_call("call_m1", "task", task)


def test_a_sub_agent_opencode_starts_with_its_task_tool_is_a_child_episode(
    tmp_path: Path,
) -> None:
    """OpenCode runs a ``task`` sub-agent in a session of its own that names the parent
    session (``x-parent-session-id``): its calls are a child episode linked to the call."""
    with SSEReplayServer(aside=_sub_agents) as upstream:
        repo, env = project(tmp_path, upstream.url)
        done = record(tmp_path / "t.db", repo, env, prompt="Use a sub-agent to write sub.txt")
        sessions = {r.headers.get("x-session-id") for r in upstream.requests}
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "sub.txt").read_text() == "hi\n" and len(sessions) == 2
    with TraceStore(tmp_path / "t.db") as store:
        episodes = [store.episode(e) for e in last_json(done.stdout)["episodes"]]
        spawners = [e for e in episodes if store.events(e.episode_id, kinds=["tool.call"])]
        parent = next(e for e in spawners if "spawned_by" not in e.env)
        (child,) = [e for e in episodes if "spawned_by" in e.env]
        (called,) = store.events(child.episode_id, kinds=["tool.call"])
    assert child.env["spawned_by"] == {"episode_id": parent.episode_id, "call_id": "call_m1"}
    assert child.env["parent_session_id"] == parent.env["session_id"]
    assert called.payload["name"] == "bash"
