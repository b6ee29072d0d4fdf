"""The real Codex CLI recorded by ``agentrunner record``, configured the way its users do: a
custom provider in ``$CODEX_HOME/config.toml`` whose ``base_url`` is a loopback upstream
streaming scripted Responses answers. Nothing in that file changes; the upstream is read
from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from real_clients import client, scratch_repo
from record_support import last_json, responses_call, responses_text
from sse_replay import Received, Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body

pytestmark = pytest.mark.slow
COMMAND = "cat notes.txt > copy.txt"


def _config(home: Path, upstream: str) -> Path:
    config = home / ".codex" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        'model = "gpt-5"\nmodel_provider = "local"\n\n[model_providers.local]\nname = "local"\n'
        f'base_url = "{upstream}/v1"\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
    )
    return config


def test_codex_with_a_custom_provider_is_recorded_call_by_call_without_touching_its_config(
    tmp_path: Path,
) -> None:
    codex = str(client("codex"))
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "codex notes\n"})
    home = tmp_path / "home"
    script = [
        Reply(events=responses_call("call_1", "exec_command", {"cmd": COMMAND})),
        Reply(events=responses_text("Copied.")),
    ]
    with SSEReplayServer(*script) as upstream:
        config = _config(home, upstream.url)
        before = config.read_bytes()
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(tmp_path / "t.db"),
             "--json", "--", codex, "exec", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox", "copy the notes"],
            cwd=repo, capture_output=True, text=True, timeout=600,
            env={**environ, "HOME": str(home), "OPENAI_API_KEY": "sk-test-codex-0123456789"},
        )  # fmt: skip
        posts = [r for r in upstream.requests if r.method == "POST"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "copy.txt").read_text() == "codex notes\n" and config.read_bytes() == before
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(tmp_path / "t.db") as store:
        requests = store.events(episode, kinds=["model.request"])
        (call,) = store.events(episode, kinds=["tool.call"])
        (result,) = store.events(episode, kinds=["tool.result"])
        rebuilt = [request_body(store, episode, r.turn) for r in requests]
    assert len(requests) == len(posts) == 2
    assert rebuilt == [json.loads(r.raw) for r in posts]
    assert call.payload["name"] == "exec_command" and result.payload["call_id"] == "call_1"


def test_codex_with_the_built_in_provider_falls_back_to_http_and_every_call_is_recorded(
    tmp_path: Path,
) -> None:
    codex = str(client("codex"))
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "codex notes\n"})
    home = tmp_path / "home"
    script = [
        Reply(events=responses_call("call_1", "exec_command", {"cmd": COMMAND})),
        Reply(events=responses_text("Copied.")),
    ]
    with SSEReplayServer(*script) as upstream:
        config = home / ".codex" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'model = "gpt-5"\nopenai_base_url = "{upstream.url}/v1"\n')
        before = config.read_bytes()
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(tmp_path / "t.db"),
             "--json", "--", codex, "exec", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox", "copy the notes"],
            cwd=repo, capture_output=True, text=True, timeout=600,
            env={**environ, "HOME": str(home), "OPENAI_API_KEY": "sk-test-codex-0123456789"},
        )  # fmt: skip
        seen, gets = list(upstream.requests), list(upstream.gets)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Falling back from WebSockets" in done.stderr
    assert gets == []  # every upgrade was refused by the proxy, none passed on unrecorded
    assert len(seen) == 2
    assert (repo / "copy.txt").read_text() == "codex notes\n" and config.read_bytes() == before
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(tmp_path / "t.db") as store:
        requests = store.events(episode, kinds=["model.request"])
        rebuilt = [request_body(store, episode, r.turn) for r in requests]
        (result,) = store.events(episode, kinds=["tool.result"])
    assert rebuilt == [json.loads(r.raw) for r in seen]
    assert result.payload["call_id"] == "call_1"


SUB_PROMPT = "Write the word hi into sub.txt."
NAMESPACE = "multi_agent_v1"


def _codex_sub_agents(request: Received) -> Reply | None:
    """A model that starts a sub-agent (``spawn_agent`` in Codex's ``multi_agent_v1``
    namespace), waits for it, then finishes; the sub-agent (its last user message is the
    prompt, in a thread of its own) writes a file and answers."""
    if request.method != "POST":
        return None
    items = request.json.get("input", [])
    calls = [i for i in items if i.get("type") == "function_call"]
    if "spawn_agent" not in {c["name"] for c in calls} and SUB_PROMPT in json.dumps(items):
        if not any(i.get("type") == "function_call_output" for i in items):
            return Reply(
                events=responses_call("call_s1", "exec_command", {"cmd": "echo hi > sub.txt"})
            )
        return Reply(events=responses_text("Wrote sub.txt."))
    if not calls:
        ask = {"message": SUB_PROMPT}
        return Reply(events=responses_call("call_m1", "spawn_agent", ask, namespace=NAMESPACE))
    if calls[-1]["name"] == "spawn_agent":
        output = next(i["output"] for i in items if i.get("call_id") == "call_m1" and "output" in i)
        wait = {"targets": [json.loads(output)["agent_id"]], "timeout_ms": 60000}
        return Reply(events=responses_call("call_m2", "wait_agent", wait, namespace=NAMESPACE))
    return Reply(events=responses_text("All done."))


def test_a_sub_agent_codex_spawns_is_a_child_episode_of_the_spawning_call(
    tmp_path: Path,
) -> None:
    """Codex's ``spawn_agent`` returns the sub-agent's id at once and the sub-agent's first
    request comes after it, in a thread of its own, its prompt after Codex's AGENTS.md and
    environment messages: it is recorded as a child episode linked to that call."""
    codex = str(client("codex"))
    repo = scratch_repo(tmp_path / "repo", {"notes.txt": "codex notes\n"})
    home = tmp_path / "home"
    db = tmp_path / "t.db"
    with SSEReplayServer(aside=_codex_sub_agents) as upstream:
        _config(home, upstream.url)
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "CODEX_"))}
        done = subprocess.run(
            [sys.executable, "-m", "agentrunner.cli.main", "record", "--db", str(db),
             "--json", "--", codex, "exec", "--skip-git-repo-check",
             "--dangerously-bypass-approvals-and-sandbox", "Use a sub-agent to write sub.txt"],
            cwd=repo, capture_output=True, text=True, timeout=600,
            env={**environ, "HOME": str(home), "OPENAI_API_KEY": "sk-test-codex-0123456789"},
        )  # fmt: skip
        threads = {r.headers.get("thread-id") for r in upstream.requests if r.method == "POST"}
    assert done.returncode == 0, done.stderr[-3000:]
    assert (repo / "sub.txt").read_text() == "hi\n" and len(threads) == 2
    episodes = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        links = {e: store.episode(e).env.get("spawned_by") for e in episodes}
        (parent,) = [e for e, link in links.items() if link is None]
        (child,) = [e for e, link in links.items() if link is not None]
        assert links[child] == {"episode_id": parent, "call_id": "call_m1"}
        assert [c.payload["name"] for c in store.events(child, kinds=["tool.call"])] == [
            "exec_command"
        ]
    shown = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "show", parent, "--json", "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert last_json(shown.stdout)["subagents"] == [
        {"episode_id": child, "call_id": "call_m1", "subagents": []}
    ]
