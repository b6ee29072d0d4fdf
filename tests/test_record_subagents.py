"""Which recorded conversation started a sub-agent, for the three ways clients start one:
the result comes back when the sub-agent ends (Claude Code's ``Agent``, OpenCode's ``task``),
or at once with the sub-agent's id while it works on (Codex's ``spawn_agent``); and the
sub-agent's calls carry the parent's session (Claude Code, Codex) or a session of their own
naming the parent's (OpenCode's ``x-parent-session-id``). A loopback upstream answers by
content, through a real proxy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sse_replay import Received, Reply, SSEReplayServer

from agentrunner import TraceStore
from agentrunner.record.episodes import Origin
from agentrunner.record.journal import Journal
from agentrunner.record.proxy import Proxy, ProxySettings, ProxyThread

PROMPT = "Find every caller of parse()."


def answer(message: dict[str, Any]) -> Reply:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return Reply(
        body={
            "id": "c1",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
    )


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": call_id, "type": "function", "function": function}


@contextmanager
def proxy(db: Path, upstream: SSEReplayServer) -> Iterator[str]:
    journal = Journal(str(db), Origin())
    journal.start()
    server = ProxyThread(Proxy(journal, ProxySettings(upstreams={"openai": upstream.url})))
    port = server.start()
    try:
        yield f"http://127.0.0.1:{port}/openai/v1/chat/completions"
    finally:
        server.stop()
        journal.close()


def post(url: str, messages: list[dict[str, Any]], **headers: str) -> dict[str, Any]:
    body = {"model": "m", "messages": messages}
    auth = {"authorization": "Bearer sk-test-subagents-0123456789"}
    answered = httpx.post(url, json=body, headers={**auth, **headers}, timeout=30)
    answered.raise_for_status()
    return dict(answered.json()["choices"][0]["message"])


def main_agent_upstream(tool: str, arguments: dict[str, Any]) -> SSEReplayServer:
    """Answers a main agent's first request (a lone user message starting with "Main") with a
    ``tool`` call, and every other request with text."""

    def route(request: Received) -> Reply:
        messages = request.json["messages"]
        first = messages[-1]["content"] if len(messages) == 1 else ""
        if isinstance(first, str) and first.startswith("Main"):
            return answer(
                {"role": "assistant", "tool_calls": [tool_call("call_1", tool, arguments)]}
            )
        return answer({"role": "assistant", "content": "Found two callers."})

    return SSEReplayServer(aside=route)


def spawned_by(db: Path) -> dict[str, tuple[str, str] | None]:
    """Each recorded episode, named by its first user message -> its ``spawned_by`` link
    (the spawning episode named the same way, and the tool call)."""
    with TraceStore(db) as store:
        episodes = store.list_episodes()
        first = {
            e.episode_id: next(
                m.content for m in store.reconstruct_request(e.episode_id, 1).messages
            )
            for e in episodes
        }
    return {
        first[e.episode_id]: (first[link["episode_id"]], link["call_id"])
        if (link := e.env.get("spawned_by"))
        else None
        for e in episodes
    }


def sub_agent(url: str, context: str, **headers: str) -> None:
    """A sub-agent's first request: context the client puts first (Codex: its AGENTS.md and
    environment), then the prompt as the last user message."""
    post(
        url, [{"role": "user", "content": context}, {"role": "user", "content": PROMPT}], **headers
    )


def finish(url: str, main: str, output: str, **headers: str) -> None:
    """The main agent's next request, carrying the sub-agent tool's result."""
    asked = {"role": "user", "content": main}
    called = {"role": "assistant", "content": None, "tool_calls": [
        tool_call("call_1", "x", {})]}  # fmt: skip
    result = {"role": "tool", "tool_call_id": "call_1", "content": output}
    post(url, [asked, called, result], **headers)


def test_two_sessions_passing_the_same_prompt_each_link_their_own_sub_agent(
    tmp_path: Path,
) -> None:
    """A shared proxy: two agents on the same task start sub-agents with the same prompt; each
    sub-agent has a session of its own naming its parent's (OpenCode), so each is linked to
    its own parent, whatever order they come in."""
    db = tmp_path / "t.db"
    arguments = {"description": "callers", "prompt": PROMPT, "subagent_type": "general"}
    with main_agent_upstream("task", arguments) as upstream, proxy(db, upstream) as url:
        for name in ("A", "B"):
            asked = [{"role": "user", "content": f"Main {name}"}]
            said = post(url, asked, **{"x-session-id": f"ses_{name}"})
            assert said["tool_calls"][0]["function"]["name"] == "task"
        for name in ("B", "A"):
            headers = {"x-session-id": f"ses_sub{name}", "x-parent-session-id": f"ses_{name}"}
            sub_agent(url, f"Context {name}", **headers)
    assert spawned_by(db) == {
        "Main A": None,
        "Main B": None,
        "Context A": ("Main A", "call_1"),
        "Context B": ("Main B", "call_1"),
    }


def test_a_sub_agent_whose_spawn_call_returned_at_once_is_linked_and_taken_once(
    tmp_path: Path,
) -> None:
    """Codex's ``spawn_agent`` (prompt in ``items``) returns the sub-agent's id before the
    sub-agent's first request; that request, in the same session, is the call's sub-agent.
    A later conversation with the same prompt is not a second sub-agent of that call."""
    db = tmp_path / "t.db"
    arguments = {"items": [{"type": "text", "text": PROMPT}]}
    session = {"session-id": "019ab"}
    with main_agent_upstream("spawn_agent", arguments) as upstream, proxy(db, upstream) as url:
        post(url, [{"role": "user", "content": "Main"}], **session)
        finish(url, "Main", json.dumps({"agent_id": "019cd", "nickname": "Euler"}), **session)
        sub_agent(url, "Context one", **session)
        sub_agent(url, "Context two", **session)
    assert spawned_by(db) == {
        "Main": None,
        "Context one": ("Main", "call_1"),
        "Context two": None,
    }


def test_a_sub_agent_call_that_returned_its_result_starts_no_later_conversation(
    tmp_path: Path,
) -> None:
    """Claude Code's ``Agent`` returns when its sub-agent has ended: a conversation that
    starts with its prompt afterwards is not its sub-agent."""
    db = tmp_path / "t.db"
    arguments = {"description": "callers", "prompt": PROMPT, "subagent_type": "general-purpose"}
    session = {"x-claude-code-session-id": "s1"}
    with main_agent_upstream("Agent", arguments) as upstream, proxy(db, upstream) as url:
        post(url, [{"role": "user", "content": "Main"}], **session)
        finish(url, "Main", "Two callers.", **session)
        sub_agent(url, "Context", **session)
    assert spawned_by(db) == {"Main": None, "Context": None}


def test_a_short_prompt_links_only_a_message_that_is_exactly_it(tmp_path: Path) -> None:
    """ "ok" ends many messages: a sub-agent call passing it links only a conversation whose
    message is "ok" itself, never one that merely ends with it."""
    db = tmp_path / "t.db"
    session = {"x-claude-code-session-id": "s1"}
    with main_agent_upstream("Task", {"prompt": "ok"}) as upstream, proxy(db, upstream) as url:
        post(url, [{"role": "user", "content": "Main"}], **session)
        post(url, [{"role": "user", "content": "Is that ok"}], **session)
        post(url, [{"role": "user", "content": "ok"}], **session)
    assert spawned_by(db) == {"Main": None, "Is that ok": None, "ok": ("Main", "call_1")}
