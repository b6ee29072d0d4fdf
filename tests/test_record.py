"""``agentrunner record``: real SDK clients through the recording proxy to a loopback upstream
replaying real provider streams; what the store then holds, and what the client received."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from record_support import (
    FIXTURES,
    anthropic_text,
    anthropic_tool,
    fixture_request,
    last_json,
    record,
)
from sse_replay import Reply, SSEReplayServer, events_from_file

from agentrunner import TraceStore
from agentrunner.record.bodies import request_body
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

needs_fixtures = pytest.mark.skipif(
    not FIXTURES.is_dir(), reason=f"provider stream fixtures not found at {FIXTURES}"
)
KEY = "sk-ant-api03-Zq7vXw9LmN2pR4tY6uK8hJ0gF3dS5aQ1"  # distinctive, known to no environment


def _two_calls(
    tmp_path: Path, db: Path
) -> tuple[SSEReplayServer, subprocess.CompletedProcess[str]]:
    turns = [
        Reply(
            events=events_from_file(
                FIXTURES / f"anthropic-messages__tool-search-tool-use__turn{i}.sse"
            )
        )
        for i in (1, 2)
    ]
    first = json.dumps(fixture_request("anthropic-messages__tool-search-tool-use__turn1"))
    env = {"TEST_KEY": KEY, "TEST_REQUEST": first}
    with SSEReplayServer(*turns) as upstream:
        done = record("anthropic_two_calls", db=db, anthropic=upstream.url, env=env)
    return upstream, done


@needs_fixtures
def test_an_anthropic_sdk_session_of_two_calls_is_one_episode_with_its_tool_call_and_result(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    _, done = _two_calls(tmp_path, db)
    assert done.returncode == 0, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        kinds = [
            (e.kind, e.payload.get("name"))
            for e in store.events(episode)
            if e.kind != "model.chunk"
        ]
        assert store.episode(episode).status == "completed"
        assert store.episode(episode).env["kind"] == "recorded"
        chunks = store.events(episode, kinds=["model.chunk"])
    requests = [i for i, (kind, _) in enumerate(kinds) if kind == "model.request"]
    call = kinds.index(("tool.call", "get_exchange_rate"))
    result = kinds.index(("tool.result", "get_exchange_rate"))
    assert len(requests) == 2 and requests[0] < call < result < requests[1]
    assert len(chunks) > 10 and kinds[-1][0] == "episode.end"


@needs_fixtures
def test_each_rebuilt_request_equals_the_body_the_upstream_received(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    upstream, done = _two_calls(tmp_path, db)
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        rebuilt = [request_body(store, episode, turn) for turn in (1, 2)]
    assert rebuilt == [r.json for r in upstream.requests] and len(upstream.requests) == 2


@needs_fixtures
def test_no_key_from_a_header_reaches_the_store_file_or_its_wal(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    upstream, done = _two_calls(tmp_path, db)
    sent = upstream.requests[0].headers
    assert done.returncode == 0 and KEY in sent.get("authorization", sent.get("x-api-key", ""))
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("t.db*"))
    forms = [KEY.encode(), base64.b64encode(KEY.encode()), KEY.encode().hex().encode()]
    assert len(stored) > 10_000 and not [f for f in forms if f in stored]


@needs_fixtures
@pytest.mark.parametrize(
    ("name", "family", "path"),
    [
        ("anthropic-messages__thinking-signature", "anthropic", "/v1/messages"),
        ("openai-chat__parallel-tool-calls", "openai", "/chat/completions"),
        ("openai-responses__reasoning-summary-encrypted", "openai", "/responses"),
    ],
)
def test_the_client_receives_exactly_the_upstreams_bytes(
    tmp_path: Path, name: str, family: str, path: str
) -> None:
    events = events_from_file(FIXTURES / f"{name}.sse")
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "m", "stream": True, "messages": [], "input": "hi"}))
    out = str(tmp_path / "got-")
    with SSEReplayServer(Reply(events=events), Reply(events=events)) as upstream:
        proxy = "ANTHROPIC_BASE_URL" if family == "anthropic" else "OPENAI_BASE_URL"
        env = {"TEST_BODY": str(body), "TEST_UPSTREAM": upstream.url, "TEST_PATH": path,
               "TEST_OUT": out, "TEST_PROXY_VAR": proxy}  # fmt: skip
        done = record("raw_post", db=tmp_path / "t.db", env=env, **{family: upstream.url})
    assert done.returncode == 0, done.stderr
    direct, proxied = (Path(out + n).read_bytes() for n in ("direct", "proxied"))
    assert proxied == direct and len(direct) > 1000


@needs_fixtures
def test_an_openai_chat_stream_records_both_parallel_tool_calls_and_the_usage(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    events = events_from_file(FIXTURES / "openai-chat__parallel-tool-calls.sse")
    with SSEReplayServer(Reply(events=events)) as upstream:
        done = record("openai_chat_stream", db=db, openai=upstream.url)
    assert done.returncode == 0, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        calls = [e.payload for e in store.events(episode, kinds=["tool.call"])]
        (usage,) = store.events(episode, kinds=["usage"])
        body = request_body(store, episode, 1)
    assert [(c["name"], c["parsed"]) for c in calls] == [
        ("GetWeatherArgs", {"city": "Edinburgh", "country": "GB", "units": "c"}),
        ("get_stock_price", {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]
    assert usage.payload["input_tokens"] == 149 and usage.payload["output_tokens"] == 60
    assert body == upstream.requests[0].json


@needs_fixtures
def test_a_responses_stream_keeps_encrypted_reasoning_verbatim_and_records_the_call(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    name = "openai-responses__reasoning-encrypted-function-call"
    with SSEReplayServer(Reply(events=events_from_file(FIXTURES / f"{name}.sse"))) as upstream:
        done = record("openai_responses_stream", db=db, openai=upstream.url)
    assert done.returncode == 0, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        (response,) = store.events(episode, kinds=["model.response"])
        (call,) = store.events(episode, kinds=["tool.call"])
        body = request_body(store, episode, 1)
    reasoning = [p for p in response.payload["opaque"] if p["type"] == "reasoning"]
    assert len(reasoning[0]["data"]["encrypted_content"]) == 3896
    assert call.payload["name"] and body == upstream.requests[0].json


COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Hello there."}}],
    "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
}  # fmt: skip


def test_a_non_streamed_completion_is_recorded_as_its_answer(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with SSEReplayServer(Reply(body=COMPLETION)) as upstream:
        done = record("openai_chat_plain", db=db, openai=upstream.url)
    assert done.returncode == 0 and "Hello there." in done.stdout, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        (response,) = store.events(episode, kinds=["model.response"])
        message = store.message(response.payload["message_hash"])
        (usage,) = store.events(episode, kinds=["usage"])
    assert message.content == "Hello there." and response.payload["stop_reason"] == "stop"
    assert usage.payload["input_tokens"] == 9


def test_an_upstream_429_reaches_the_client_and_is_recorded_as_a_retryable_error(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    refusal = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    with SSEReplayServer(Reply(status=429, body=refusal)) as upstream:
        done = record("anthropic_rate_limited", db=db, anthropic=upstream.url)
    assert done.returncode == 3 and "limited 429" in done.stdout, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        (error,) = store.events(episode, kinds=["error"])
    assert error.payload["type"] == "HTTP 429" and error.payload["retryable"] is True
    assert "slow down" in error.payload["message"]


def test_a_client_that_hangs_up_mid_stream_is_recorded_as_a_cancel(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    events = anthropic_text("a long answer") * 40
    with SSEReplayServer(Reply(events=events, delay=0.05, hold=60)) as upstream:
        done = record("hang_up", db=db, anthropic=upstream.url)
    assert done.returncode == 0, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        (cancel,) = store.events(episode, kinds=["cancel"])
        responses = store.events(episode, kinds=["model.response"])
    assert cancel.payload["where"] == "generate" and not responses


def _message(content: list[dict[str, object]], stop: str) -> dict[str, object]:
    return {
        "id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": content, "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 5},
    }  # fmt: skip


def test_a_subagents_calls_are_an_episode_of_their_own_linked_to_the_call_that_started_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    task = {"description": "look", "prompt": "Look in utils.py for the bug."}
    spawn = {"type": "tool_use", "id": "toolu_agent", "name": "Agent", "input": task}
    replies = [
        Reply(body=_message([spawn], "tool_use")),
        Reply(body=_message([{"type": "text", "text": "It is on line 3."}], "end_turn")),
        Reply(body=_message([{"type": "text", "text": "Fixed."}], "end_turn")),
    ]
    with SSEReplayServer(*replies) as upstream:
        done = record("anthropic_subagent", db=db, anthropic=upstream.url)
    assert done.returncode == 0 and "Fixed." in done.stdout, done.stderr
    parent, child = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        assert store.episode(child).env["spawned_by"] == {
            "episode_id": parent,
            "call_id": "toolu_agent",
        }
        assert len(store.events(parent, kinds=["model.request"])) == 2
        (result,) = store.events(parent, kinds=["tool.result"])
    assert result.payload["observation"] == "It is on line 3." and result.payload["name"] == "Agent"


def test_record_exits_with_the_agents_exit_status(tmp_path: Path) -> None:
    done = record("exit_seven", db=tmp_path / "t.db")
    assert done.returncode == 7 and last_json(done.stdout) == {"exit_status": 7, "episodes": []}


def test_resume_refuses_a_recorded_episode_and_says_only_the_agent_can_continue_it(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    with SSEReplayServer(Reply(events=anthropic_tool("toolu_1", "Bash", {"command": "ls"}))) as up:
        done = record("anthropic_tool_stream", db=db, anthropic=up.url)
    (episode,) = last_json(done.stdout)["episodes"]
    resumed = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "resume", episode, "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert resumed.returncode != 0 and "only the agent can continue it" in resumed.stderr


def test_tool_use_through_the_stream_records_the_call_the_sdk_saw(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with SSEReplayServer(Reply(events=anthropic_tool("toolu_1", "Bash", {"command": "ls"}))) as up:
        done = record("anthropic_tool_stream", db=db, anthropic=up.url)
    assert "{'command': 'ls'}" in done.stdout, done.stderr
    (episode,) = last_json(done.stdout)["episodes"]
    with TraceStore(db) as store:
        (call,) = store.events(episode, kinds=["tool.call"])
    assert call.payload["call_id"] == "toolu_1" and call.payload["parsed"] == {"command": "ls"}


def test_proxy_on_an_address_other_machines_reach_refuses_to_start_without_a_token(
    tmp_path: Path,
) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrunner.cli.main", "proxy", "--host", "0.0.0.0",
         "--db", str(tmp_path / "t.db")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "--token" in proc.stderr


def test_a_request_from_a_web_page_is_refused_and_not_recorded(tmp_path: Path) -> None:
    """A page in the user's browser can post to a loopback proxy (no preflight for a
    text/plain body); agents send no Origin, pages always do: refused before anything."""
    db = tmp_path / "t.db"
    with SSEReplayServer(Reply(events=anthropic_text("hi"))) as upstream:
        journal = Journal(str(db), Origin())
        journal.start()
        server = ProxyThread(Proxy(journal, ProxySettings(upstreams={"anthropic": upstream.url})))
        port = server.start()
        try:
            body = {
                "model": "claude-x",
                "max_tokens": 9,
                "messages": [{"role": "user", "content": "x"}],
            }
            answered = httpx.post(
                f"http://127.0.0.1:{port}/anthropic/v1/messages",
                content=json.dumps(body),
                headers={"Origin": "http://evil.example", "Content-Type": "text/plain"},
            )
        finally:
            server.stop()
            journal.close()
        reached = list(upstream.requests)
    assert answered.status_code == 403 and "web page" in answered.text
    assert reached == []
    with TraceStore(db) as store:
        assert store.list_episodes() == []
