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
from sse_replay import Reply, SSEReplayServer

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
